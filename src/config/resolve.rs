//! Raw → resolved: defaults applied, values checked, relative paths anchored.
//!
//! Each check that can fail after parsing names the key (`sync[1].path`, 0-based index) and the
//! line its value is on, from the [`Spanned`] fields of the raw structs.

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use toml::Spanned;

use super::raw::{
    HumanDuration, RawCluster, RawClusters, RawConfig, RawDaemon, RawGit, RawHelm, RawInventory, RawLeaderElection,
    RawRender, RawSyncUnit,
};
use super::{
    ClusterConfig, Config, DaemonConfig, Decryption, Error, GitCredentials, HelmOptions, InventoryConfig,
    LeaderElection, RenderTools, Result, SyncUnit, UnitPath, is_url_or_scp, unit::adopted_by,
};

/// Turns a parsed [`RawConfig`] into a [`Config`]; holds what every error needs.
pub(super) struct Resolver<'a> {
    /// The file's text, to turn byte spans into line numbers.
    pub text: &'a str,
    /// How errors name the file.
    pub origin: &'a str,
    /// Where relative paths are anchored: the config file's directory.
    pub base_dir: &'a Path,
}

/// A unit's inventory parent, for the "two units share one inventory" check.
type InventoryId = (super::InventoryKind, String, String);

impl Resolver<'_> {
    /// Resolves the whole file; the first invalid value found is the error.
    pub fn config(&self, raw: RawConfig) -> Result<Config> {
        let clusters = self.clusters(raw.cluster)?;
        let daemon = self.daemon(raw.daemon, &clusters)?;
        let render = self.render(raw.render)?;
        if raw.sync.is_empty() && raw.sync_set.is_empty() {
            return Err(self.invalid(None, "sync", "at least one [[sync]] unit (or [[sync_set]]) is required"));
        }
        let mut names: HashMap<String, usize> = HashMap::new();
        let mut inventories: HashMap<InventoryId, usize> = HashMap::new();
        let (mut units, mut depends) = (Vec::with_capacity(raw.sync.len()), Vec::new());
        for (index, raw_unit) in raw.sync.into_iter().enumerate() {
            let mut raw_unit = raw_unit.into_inner();
            depends.extend(raw_unit.depends_on.take().map(|d| (index, d)));
            let (unit, name_span, inventory_span) = self.whole_unit(index, raw_unit, &clusters, &daemon, &render)?;
            if let Some(first) = names.insert(unit.name.clone(), index) {
                let message = format!("duplicate unit name `{}` (also sync[{first}])", unit.name);
                return Err(self.invalid(Some(name_span), &format!("sync[{index}].name"), message));
            }
            let inventory = &unit.inventory;
            let id = (inventory.kind, inventory.namespace.clone(), inventory.name.clone());
            if let Some(first) = inventories.insert(id, index) {
                let message = format!(
                    "{}/{}/{} is already the inventory of sync[{first}]; each unit needs its own",
                    inventory.kind, inventory.namespace, inventory.name
                );
                return Err(self.invalid(Some(inventory_span), &format!("sync[{index}].inventory"), message));
            }
            units.push(unit);
        }
        adopted_by(&mut units);
        let sets = self.sync_sets(raw.sync_set, &clusters, &daemon, &render)?;
        let generated_dependencies = self.depends_on(depends, &mut units, &sets)?;
        let notify = self.notify(raw.notify, &units, &sets)?;
        Ok(Config { clusters, daemon, units, render, sets, notify, generated_dependencies })
    }

    /// One `[[sync]]` table with every table of it resolved, the render tools copied in; also
    /// returns the spans of its name and inventory, which the cross-unit checks point at.
    pub(super) fn whole_unit(
        &self,
        index: usize,
        mut raw: RawSyncUnit,
        clusters: &[ClusterConfig],
        daemon: &DaemonConfig,
        render: &RenderTools,
    ) -> Result<(SyncUnit, Range<usize>, Range<usize>)> {
        let raw_cluster = raw.cluster.take();
        let raw_service_account = raw.service_account.take();
        let raw_ignore = std::mem::take(&mut raw.ignore);
        let (mut unit, name_span, inventory_span) = self.unit(index, raw)?;
        unit.ignore = self.ignore(index, &unit, raw_ignore)?;
        unit.cluster = self.unit_cluster(index, raw_cluster, name_span.clone(), clusters)?;
        unit.service_account = self.unit_service_account(index, raw_service_account, daemon)?;
        self.own_repository_allowed(index, &unit, render, name_span.clone())?;
        Ok((SyncUnit { render_tools: render.clone(), ..unit }, name_span, inventory_span))
    }

    /// The cluster a unit names, which must be declared; without `cluster`, the only one.
    fn unit_cluster(
        &self,
        index: usize,
        raw: Option<Spanned<String>>,
        name_span: Range<usize>,
        clusters: &[ClusterConfig],
    ) -> Result<String> {
        let key = format!("sync[{index}].cluster");
        let names = || clusters.iter().map(|c| format!("`{}`", c.name)).collect::<Vec<_>>().join(", ");
        match raw {
            Some(name) if clusters.iter().any(|c| c.name == *name.get_ref()) => Ok(name.into_inner()),
            Some(name) => {
                let message = format!("no cluster named `{}` (declared: {})", name.get_ref(), names());
                Err(self.invalid(Some(name.span()), &key, message))
            }
            None if clusters.len() == 1 => Ok(clusters[0].name.clone()),
            None => {
                let message = format!("required: the file declares {} clusters ({})", clusters.len(), names());
                Err(self.invalid(Some(name_span), &key, message))
            }
        }
    }

    /// `[cluster]` (the cluster `default` unless named), `[[cluster]]` (named, unique), or
    /// neither (the cluster `default` with every default).
    fn clusters(&self, raw: RawClusters) -> Result<Vec<ClusterConfig>> {
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

    fn render(&self, raw: RawRender) -> Result<RenderTools> {
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

    fn helm(&self, index: usize, raw: RawHelm) -> Result<HelmOptions> {
        let key = |field: &str| format!("sync[{index}].helm.{field}");
        let mut values_files = Vec::with_capacity(raw.values_files.len());
        for file in raw.values_files {
            let span = file.span();
            let path =
                tree_path(file.get_ref()).map_err(|m| self.invalid(Some(span.clone()), &key("values_files"), m))?;
            if path.is_empty() {
                return Err(self.invalid(Some(span), &key("values_files"), "must name a file"));
            }
            values_files.push(path);
        }
        let values = match raw.values {
            Some(table) => match serde_json::to_value(table) {
                Ok(serde_json::Value::Object(map)) => map,
                _ => return Err(self.invalid(None, &key("values"), "must be a table of values")),
            },
            None => serde_json::Map::new(),
        };
        Ok(HelmOptions {
            release: raw.release.map(|r| self.check(r, &key("release"), dns_label)).transpose()?,
            values_files,
            values,
            chart: None,
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

    fn daemon(&self, raw: RawDaemon, clusters: &[ClusterConfig]) -> Result<DaemonConfig> {
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

    /// Resolves one unit; also returns the spans the cross-unit checks point at.
    fn unit(&self, index: usize, mut raw: RawSyncUnit) -> Result<(SyncUnit, Range<usize>, Range<usize>)> {
        let key = |field: &str| format!("sync[{index}].{field}");
        let name_span = raw.name.span();
        let name = self.check(raw.name.clone(), &key("name"), unit_name)?;
        let chart = self.chart_source(index, &mut raw.helm)?;
        let repo = match (raw.repo.take(), &chart) {
            (Some(repo), None) => self.repo(repo, &key("repo"))?,
            (None, Some(_)) => match raw.helm.values_files.first() {
                Some(file) => {
                    let message = "needs a git repository (`repo`) to read values files from";
                    return Err(self.invalid(Some(file.span()), &key("helm.values_files"), message));
                }
                None => String::new(),
            },
            (Some(repo), Some(_)) => self.repo(repo, &key("repo"))?,
            (None, None) => {
                let message = "is required (or [sync.helm] repo_url, for a chart from a chart repository)";
                return Err(self.invalid(Some(name_span), &key("repo"), message));
            }
        };
        self.refuse_unread(index, &raw, chart.is_some(), &repo)?;
        let mut unit = SyncUnit { suspend: raw.suspend.unwrap_or(false), ..SyncUnit::new(name, repo) };
        if let Some(reference) = raw.reference {
            if unit.repo.starts_with("oci://") {
                let message = "does not apply to an OCI artifact: name its tag or digest in `repo`";
                return Err(self.invalid(Some(reference.span()), &key("ref"), message));
            }
            unit.reference = self.check(reference, &key("ref"), git_ref)?;
        }
        if let Some(path) = raw.path {
            let span = path.span();
            unit.path = UnitPath::parse(path.get_ref()).map_err(|m| self.invalid(Some(span), &key("path"), m))?;
        }
        if let Some(namespace) = raw.namespace {
            unit.namespace = self.check(namespace, &key("namespace"), dns_label)?;
        }
        if let Some(field_manager) = raw.field_manager {
            unit.field_manager = self.check(field_manager, &key("field_manager"), field_manager_name)?;
        }
        if let Some(managers) = raw.takeover_managers {
            let key = key("takeover_managers");
            unit.takeover_managers =
                managers.into_iter().map(|m| self.check(m, &key, field_manager_name)).collect::<Result<_>>()?;
        }
        if let Some(fraction) = raw.max_prune_fraction {
            let value = *fraction.get_ref();
            if !(0.0..=1.0).contains(&value) {
                let message = format!("{value} is out of range: must be between 0.0 and 1.0");
                return Err(self.invalid(Some(fraction.span()), &key("max_prune_fraction"), message));
            }
            unit.max_prune_fraction = value;
        }
        unit.apply_mode = raw.apply_mode.unwrap_or(unit.apply_mode);
        unit.prune = raw.prune.unwrap_or(unit.prune);
        unit.force_conflicts = raw.force_conflicts.unwrap_or(unit.force_conflicts);
        unit.recreate_on_immutable = raw.recreate_on_immutable.unwrap_or(unit.recreate_on_immutable);
        unit.allow_prune_all = raw.allow_prune_all.unwrap_or(unit.allow_prune_all);
        unit.max_file_bytes = raw.max_file_bytes.map_or(unit.max_file_bytes, |size| size.0);
        unit.health_timeout = raw.health_timeout.map_or(unit.health_timeout, |d| d.0);
        let inventory_span = raw.inventory.as_ref().map_or(name_span.clone(), Spanned::span);
        unit.inventory = self.inventory(index, raw.inventory.map(Spanned::into_inner), &unit)?;
        unit.git = self.git(index, raw.git)?;
        unit.render = raw.render.unwrap_or(unit.render);
        unit.allow_remote_bases = raw.allow_remote_bases.unwrap_or(unit.allow_remote_bases);
        unit.create_namespace = raw.create_namespace.unwrap_or(unit.create_namespace);
        if let Some(sources) = raw.adopt_from {
            let key = key("adopt_from");
            unit.adopt_from = sources.into_iter().map(|s| self.check(s, &key, adopt_source)).collect::<Result<_>>()?;
        }
        unit.helm = HelmOptions { chart, ..self.helm(index, raw.helm)? };
        unit.verify = self.verify(index, raw.verify, &unit)?;
        if unit.helm.chart.is_some() {
            unit.render = super::RenderMode::Helm;
        }
        unit.substitute = self.substitute(index, raw.substitute)?;
        let age_key_file = raw.decryption.map(|d| self.file(d.age_key_file, &key("decryption.age_key_file")));
        unit.decryption = age_key_file.transpose()?.map(|age_key_file| Decryption { age_key_file });
        Ok((unit, name_span, inventory_span))
    }

    fn inventory(&self, index: usize, raw: Option<RawInventory>, unit: &SyncUnit) -> Result<InventoryConfig> {
        let mut inventory = InventoryConfig { namespace: unit.namespace.clone(), ..unit.inventory.clone() };
        let Some(raw) = raw else { return Ok(inventory) };
        let key = |field: &str| format!("sync[{index}].inventory.{field}");
        inventory.kind = raw.kind.unwrap_or(inventory.kind);
        if let Some(namespace) = raw.namespace {
            inventory.namespace = self.check(namespace, &key("namespace"), dns_label)?;
        }
        if let Some(name) = raw.name {
            inventory.name = self.check(name, &key("name"), dns_subdomain)?;
        }
        if let Some(size) = raw.record_chunk_bytes {
            let bytes = InventoryConfig::chunk_bytes(size.get_ref().0);
            inventory.record_chunk_bytes =
                bytes.map_err(|m| self.invalid(Some(size.span()), &key("record_chunk_bytes"), m))?;
        }
        Ok(inventory)
    }

    fn git(&self, index: usize, raw: RawGit) -> Result<GitCredentials> {
        let key = |field: &str| format!("sync[{index}].git.{field}");
        Ok(GitCredentials {
            ssh_key_file: raw.ssh_key_file.map(|p| self.file(p, &key("ssh_key_file"))).transpose()?,
            known_hosts_file: raw.known_hosts_file.map(|p| self.file(p, &key("known_hosts_file"))).transpose()?,
            token_file: raw.token_file.map(|p| self.file(p, &key("token_file"))).transpose()?,
            username: raw.username.map(|u| self.check(u, &key("username"), non_empty)).transpose()?,
        })
    }

    /// A URL or scp-like address is kept as written; anything else is a local path, anchored.
    fn repo(&self, raw: Spanned<String>, key: &str) -> Result<String> {
        let span = raw.span();
        let repo = self.check(raw, key, non_empty)?;
        if is_url_or_scp(&repo) {
            return Ok(repo);
        }
        let path = self.file(Spanned::new(span.clone(), repo), key)?;
        path.into_os_string()
            .into_string()
            .map_err(|_| self.invalid(Some(span), key, "the resolved path is not valid UTF-8"))
    }

    /// A host file path: relative paths are joined to the config file's directory.
    pub(super) fn file(&self, raw: Spanned<String>, key: &str) -> Result<PathBuf> {
        let path = self.check(raw, key, host_path)?;
        Ok(self.base_dir.join(path))
    }

    pub(super) fn duration(
        &self,
        raw: Option<Spanned<HumanDuration>>,
        key: &str,
    ) -> Result<Option<std::time::Duration>> {
        match raw {
            Some(value) if value.get_ref().0.is_zero() => {
                Err(self.invalid(Some(value.span()), key, "must be longer than zero"))
            }
            other => Ok(other.map(|value| value.into_inner().0)),
        }
    }

    /// Runs `rule` on a string value; its message becomes an [`Error::Invalid`] at the value.
    pub(super) fn check(
        &self,
        raw: Spanned<String>,
        key: &str,
        rule: fn(&str) -> std::result::Result<(), String>,
    ) -> Result<String> {
        match rule(raw.get_ref()) {
            Ok(()) => Ok(raw.into_inner()),
            Err(message) => Err(self.invalid(Some(raw.span()), key, message)),
        }
    }

    pub(super) fn invalid(&self, span: Option<Range<usize>>, key: &str, message: impl Into<String>) -> Error {
        Error::Invalid {
            origin: self.origin.to_owned(),
            line: span.map(|span| line_of(self.text, span.start)),
            key: key.to_owned(),
            message: message.into(),
        }
    }
}

/// The 1-based line of byte `offset` in `text`.
pub(super) fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end].iter().filter(|&&b| b == b'\n').count() + 1
}

type Rule = std::result::Result<(), String>;

fn non_empty(value: &str) -> Rule {
    if value.trim().is_empty() { Err("must not be empty".to_owned()) } else { Ok(()) }
}

/// Unit names become directory names under `state_dir`, inventory names and label values, so
/// they follow the strictest of those: an RFC 1123 label.
pub(super) fn unit_name(value: &str) -> Rule {
    dns_label(value).map_err(|m| format!("{m} (a unit name is used in paths and labels)"))
}

/// An `adopt_from` entry: a unit name, or an ApplySet id as KEP-3659 forms it
/// (`applyset-<43 base64url characters>-v1`).
fn adopt_source(value: &str) -> Rule {
    if let Some(hash) = value.strip_prefix("applyset-").and_then(|rest| rest.strip_suffix("-v1")) {
        let base64url = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
        return if hash.len() == 43 && hash.chars().all(base64url) {
            Ok(())
        } else {
            Err(format!("`{value}` is not an ApplySet id (`applyset-` + 43 base64url characters + `-v1`)"))
        };
    }
    dns_label(value).map_err(|m| format!("{m} (a unit name, or an ApplySet id `applyset-…-v1`)"))
}

/// An RFC 1123 label, as Kubernetes requires of namespace names: 1–63 characters of `a-z`,
/// `0-9` and `-`, starting and ending with a letter or digit.
pub(super) fn dns_label(value: &str) -> Rule {
    if value.len() > 63 {
        return Err(format!("`{value}` is longer than 63 characters"));
    }
    label_chars(value)
}

/// An RFC 1123 subdomain, as Kubernetes requires of most object names: at most 253 characters,
/// dot-separated labels.
pub(super) fn dns_subdomain(value: &str) -> Rule {
    if value.len() > 253 {
        return Err(format!("`{value}` is longer than 253 characters"));
    }
    value.split('.').try_for_each(label_chars).map_err(|_| {
        format!("`{value}` is not a valid object name: lowercase letters, digits, `-` and `.`, starting and ending with a letter or digit")
    })
}

fn label_chars(value: &str) -> Rule {
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    let edge = |c: Option<char>| c.is_some_and(|c| c != '-');
    if value.chars().all(allowed) && edge(value.chars().next()) && edge(value.chars().last()) {
        Ok(())
    } else {
        Err(format!("`{value}` must be lowercase letters, digits and `-`, starting and ending with a letter or digit"))
    }
}

/// Only what git never accepts in a ref is refused here; whether the ref exists is known at
/// fetch time.
fn git_ref(value: &str) -> Rule {
    non_empty(value)?;
    if value.starts_with('-') || value.contains("..") || value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("`{value}` is not a valid git ref"));
    }
    Ok(())
}

/// A Kubernetes version as Helm's `--kube-version` takes it: `v1.34.2`, `1.34`, `v1.35.0-rc.1`.
pub(crate) fn kube_version(value: &str) -> Rule {
    let core = value.strip_prefix('v').unwrap_or(value);
    let core = core.split(['-', '+']).next().unwrap_or("");
    let parts: Vec<&str> = core.split('.').collect();
    if (2..=3).contains(&parts.len()) && parts.iter().all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit())) {
        Ok(())
    } else {
        Err(format!("`{value}` is not a Kubernetes version: write it as `v1.34.0` (or `1.34`)"))
    }
}

/// An API version as Helm's `--api-versions` takes it: `group/version`, `v1`, or with a kind,
/// `monitoring.coreos.com/v1/ServiceMonitor`.
fn api_version(value: &str) -> Rule {
    let ok = !value.is_empty()
        && value.split('/').count() <= 3
        && value
            .split('/')
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{value}` is not an API version: write `group/version` or `group/version/Kind`, such as `monitoring.coreos.com/v1/ServiceMonitor`"
        ))
    }
}

/// The server caps field manager names at 128 characters.
fn field_manager_name(value: &str) -> Rule {
    non_empty(value)?;
    if value.chars().count() > 128 || value.chars().any(char::is_control) {
        return Err("must be at most 128 printable characters".to_owned());
    }
    Ok(())
}

/// A path on this host. `~` is refused rather than silently taken as a directory name.
fn host_path(value: &str) -> Rule {
    non_empty(value)?;
    if value.starts_with('~') {
        return Err(format!("`{value}`: `~` is not expanded; write the path out in full"));
    }
    Ok(())
}

/// A `/`-separated path inside the repository tree, normalised as [`UnitPath::parse`] does.
/// Refuses `..` (it could leave the tree) and a leading `/` (tree paths are relative).
pub(super) fn tree_path(value: &str) -> std::result::Result<String, String> {
    UnitPath::parse(value).map(|p| p.as_str().to_owned())
}

#[cfg(test)]
mod tests {
    use super::{dns_label, dns_subdomain, line_of, tree_path};

    #[test]
    fn tree_paths_are_normalized() {
        assert_eq!(tree_path("").unwrap(), "");
        assert_eq!(tree_path("./deploy//prod/").unwrap(), "deploy/prod");
        assert!(tree_path("/deploy").is_err());
        assert!(tree_path("deploy/../secrets").is_err());
    }

    #[test]
    fn names_follow_rfc_1123() {
        assert!(dns_label("shop-2").is_ok());
        assert!(dns_label("-shop").is_err());
        assert!(dns_label("Shop").is_err());
        assert!(dns_label(&"a".repeat(64)).is_err());
        assert!(dns_subdomain("gitward-shop.v1").is_ok());
        assert!(dns_subdomain("gitward..shop").is_err());
    }

    #[test]
    fn lines_are_counted_from_one() {
        assert_eq!(line_of("a\nb\nc", 0), 1);
        assert_eq!(line_of("a\nb\nc", 2), 2);
        assert_eq!(line_of("a\nb\nc", 99), 3);
    }
}
