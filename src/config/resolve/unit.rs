//! One `[[sync]]` table resolved: its name, source (`repo`, `ref`, a chart), path and
//! settings, with the tables it holds — `inventory`, `[sync.git]`, `[sync.helm]` — and the
//! cluster and ServiceAccount it names, checked against the file-wide tables.

use std::ops::Range;

use toml::Spanned;

use super::Resolver;
use super::rules::{
    adopt_source, dns_label, dns_subdomain, field_manager_name, git_ref, non_empty, tree_path, unit_name,
};
use crate::config::raw::{RawGit, RawHelm, RawInventory, RawSyncUnit};
use crate::config::{
    ClusterConfig, DaemonConfig, Decryption, GitCredentials, HelmOptions, InventoryConfig, RenderTools, Result,
    SyncUnit, UnitPath, is_url_or_scp,
};

impl Resolver<'_> {
    /// One `[[sync]]` table with every table of it resolved, the render tools copied in; also
    /// returns the spans of its name and inventory, which the cross-unit checks point at.
    pub(in crate::config) fn whole_unit(
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
            unit.render = crate::config::RenderMode::Helm;
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
}
