//! The file-wide tables every unit reads: `[cluster]` or `[[cluster]]` (named, unique),
//! `[daemon]` with `[daemon.leader_election]`, and `[render]` (the tools, their limits and
//! what Helm is told of the cluster).

use toml::Spanned;

use super::Resolver;
use super::rules::{api_version, dns_label, kube_version, non_empty};
use crate::config::raw::{RawCluster, RawClusters, RawDaemon, RawLeaderElection, RawRender};
use crate::config::{ClusterConfig, DaemonConfig, LeaderElection, RenderTools, Result};

impl Resolver<'_> {
    /// `[cluster]` (the cluster `default` unless named), `[[cluster]]` (named, unique), or
    /// neither (the cluster `default` with every default).
    pub(super) fn clusters(&self, raw: RawClusters) -> Result<Vec<ClusterConfig>> {
        let list = match raw {
            RawClusters::Absent => return Ok(vec![ClusterConfig::default()]),
            RawClusters::One(cluster) => return Ok(vec![self.cluster(cluster, "cluster")?]),
            RawClusters::Many(list) => list,
        };
        if list.is_empty() {
            return Err(self.invalid(None, "cluster", "at least one [[cluster]] table is required"));
        }
        let mut clusters: Vec<ClusterConfig> = Vec::with_capacity(list.len());
        for (index, raw) in list.into_iter().enumerate() {
            let key = format!("cluster[{index}]");
            let span = raw.span();
            let raw = raw.into_inner();
            let Some(name_span) = raw.name.as_ref().map(Spanned::span) else {
                return Err(self.invalid(Some(span), &format!("{key}.name"), "required in [[cluster]]"));
            };
            let cluster = self.cluster(raw, &key)?;
            if let Some(first) = clusters.iter().position(|c| c.name == cluster.name) {
                let message = format!("duplicate cluster name `{}` (also cluster[{first}])", cluster.name);
                return Err(self.invalid(Some(name_span), &format!("{key}.name"), message));
            }
            clusters.push(cluster);
        }
        Ok(clusters)
    }

    pub(super) fn render(&self, raw: RawRender) -> Result<RenderTools> {
        let default = RenderTools::default();
        Ok(RenderTools {
            kustomize: raw.kustomize.map(|p| self.file(p, "render.kustomize")).transpose()?,
            helm: raw.helm.map(|p| self.file(p, "render.helm")).transpose()?,
            sops: raw.sops.map(|p| self.file(p, "render.sops")).transpose()?,
            timeout: self.duration(raw.timeout, "render.timeout")?.unwrap_or(default.timeout),
            max_output_bytes: raw.max_output_bytes.map_or(default.max_output_bytes, |size| size.0),
            max_tree_bytes: raw.max_tree_bytes.map_or(default.max_tree_bytes, |size| size.0),
            kube_version: match raw.kube_version {
                Some(version) => self.check(version, "render.kube_version", kube_version)?,
                None => default.kube_version,
            },
            api_versions: match raw.api_versions {
                Some(list) => list
                    .into_iter()
                    .map(|v| self.check(v, "render.api_versions", api_version))
                    .collect::<Result<_>>()?,
                None => default.api_versions,
            },
            chart_repositories: self.chart_repositories(raw.chart_repositories)?,
            remote_bases: self.remote_bases(raw.remote_base_hosts, raw.remote_base_ca_file)?,
            sandbox: raw.sandbox.unwrap_or(default.sandbox),
            max_memory: raw.max_memory.map_or(default.max_memory, |size| size.0),
            // Zero is allowed here: it turns the kept index answers off.
            max_index_age: raw.max_index_age.map_or(default.max_index_age, |age| age.into_inner().0),
        })
    }

    /// One cluster table; `key` is `cluster` or `cluster[<index>]`.
    fn cluster(&self, raw: RawCluster, key: &str) -> Result<ClusterConfig> {
        let default = ClusterConfig::default();
        let field = |name: &str| format!("{key}.{name}");
        let max_in_flight = match raw.max_in_flight {
            Some(value) if *value.get_ref() == 0 => {
                return Err(self.invalid(Some(value.span()), &field("max_in_flight"), "must be at least 1"));
            }
            Some(value) => value.into_inner(),
            None => default.max_in_flight,
        };
        Ok(ClusterConfig {
            name: match raw.name {
                Some(name) => self.check(name, &field("name"), dns_label)?,
                None => default.name,
            },
            kubeconfig: raw.kubeconfig.map(|p| self.file(p, &field("kubeconfig"))).transpose()?,
            context: raw.context.map(|c| self.check(c, &field("context"), non_empty)).transpose()?,
            max_in_flight,
        })
    }

    pub(super) fn daemon(&self, raw: RawDaemon, clusters: &[ClusterConfig]) -> Result<DaemonConfig> {
        let default = DaemonConfig::default();
        let max_concurrent_syncs = self.at_least_one(raw.max_concurrent_syncs, "daemon.max_concurrent_syncs")?;
        let fetching = self.fetching(raw.max_fetches_per_host, raw.fetch_connect_timeout, raw.fetch_idle_timeout)?;
        Ok(DaemonConfig {
            state_dir: match raw.state_dir {
                Some(dir) => self.file(dir, "daemon.state_dir")?,
                None => default.state_dir,
            },
            interval: self.duration(raw.interval, "daemon.interval")?.unwrap_or(default.interval),
            resync_interval: self
                .duration(raw.resync_interval, "daemon.resync_interval")?
                .unwrap_or(default.resync_interval),
            listen: raw.listen,
            webhook_secret_file: raw
                .webhook_secret_file
                .map(|p| self.file(p, "daemon.webhook_secret_file"))
                .transpose()?,
            self_heal: raw.self_heal.unwrap_or(default.self_heal),
            leader_election: match raw.leader_election {
                Some(le) if le.enabled.unwrap_or(true) => Some(self.leader_election(le)?),
                _ => None,
            },
            max_concurrent_syncs: max_concurrent_syncs.unwrap_or(default.max_concurrent_syncs),
            fetching,
            sharding: None,
            default_service_account: self.default_service_account(raw.default_service_account)?,
            ui: self.ui(raw.ui, raw.listen)?,
        })
        .and_then(|daemon| match raw.sharding {
            Some(sharding) if daemon.leader_election.is_some() => {
                let message = "cannot be combined with [daemon.leader_election]: sharding elects an owner per unit";
                Err(self.invalid(Some(sharding.span()), "daemon.sharding", message))
            }
            Some(sharding) => Ok(DaemonConfig { sharding: Some(self.sharding(sharding, clusters)?), ..daemon }),
            None => Ok(daemon),
        })
    }

    fn leader_election(&self, raw: RawLeaderElection) -> Result<LeaderElection> {
        let default = LeaderElection::default();
        let le = LeaderElection {
            namespace: raw.namespace.unwrap_or(default.namespace),
            name: raw.name.unwrap_or(default.name),
            lease_duration: self
                .duration(raw.lease_duration, "daemon.leader_election.lease_duration")?
                .unwrap_or(default.lease_duration),
            renew_every: self
                .duration(raw.renew_every, "daemon.leader_election.renew_every")?
                .unwrap_or(default.renew_every),
        };
        if le.renew_every >= le.lease_duration {
            let message = "must be shorter than lease_duration".to_string();
            return Err(self.invalid(None, "daemon.leader_election.renew_every", message));
        }
        Ok(le)
    }
}
