//! `[[sync_set]]`: sync units generated from the directories of a repository, as Argo CD's
//! ApplicationSet git directory generator makes Applications.
//!
//! A set names a repository (`repo`, `ref`), a glob over the directories of its tree
//! (`path_glob = "apps/*"`), optionally `clusters`, and any `[[sync]]` key as a template: a
//! string may hold `{dir}` (the matched directory's last component), `{path}` (its whole
//! path) and `{cluster}`, replaced in one pass. [`Config::expand`] makes one unit per directory
//! (per cluster), each template expanded and the result resolved exactly as a `[[sync]]` table
//! is; `path` defaults to `"{path}"`. What a directory's name may not choose (the identity a
//! unit writes as, its credentials, where it writes) is the `set_identity` module's. The directories come from the tree at the tip (the engine's `set` module);
//! this module only turns a list of them into units and checks the cap and the names.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use toml::{Spanned, Table, Value};

use super::raw::RawSyncUnit;
use super::resolve::{Resolver, line_of};
use super::unit::adopted_by;
use super::{ClusterConfig, Config, DaemonConfig, Error, RenderTools, Result, SyncUnit};

/// `max_units` when a set does not say: a mistyped glob over a big tree (`*/*`) should be an
/// error, not a thousand units started at once, while a real fleet of apps fits.
pub const DEFAULT_MAX_UNITS: usize = 1000;

/// The keys of a `[[sync_set]]` that are the set's own, not templates of its units' keys.
const OWN_KEYS: [&str; 6] =
    ["path_glob", "clusters", "prune_removed", "prune_removed_unguarded", "max_units", "namespaces"];

/// One `[[sync_set]]`, resolved: its own keys, and its template of `[[sync]]` keys.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncSet {
    /// The set's `name` template as written (`apps-{dir}`): names the set in logs and errors.
    pub name: String,
    /// The glob over the directories of the tree: `/`-separated components, each matched
    /// against one directory name, `*` any run of characters and `?` one (neither matches a
    /// leading `.`, as in a shell); no `**`. Required.
    pub path_glob: String,
    /// The clusters each directory is made a unit for (`{cluster}` in templates); empty (the
    /// default): one unit per directory, on the cluster its `cluster` key (or the only one)
    /// names.
    pub clusters: Vec<String>,
    /// Whether the objects of a unit whose directory disappeared are pruned (all of them, by
    /// its ApplySet). Default `false`: they are kept and a warning names the unit, because a
    /// directory renamed or removed by mistake would otherwise delete a whole application.
    pub prune_removed: bool,
    /// Whether that prune may delete all of a removed unit's objects past the unit's
    /// `max_prune_fraction` and the empty-revision guard. Default `false`: the guards hold, so
    /// a removed unit's objects are pruned only when its units say `allow_prune_all = true` (a
    /// retiring unit desires nothing, which the empty-revision guard refuses); otherwise the
    /// prune is refused, logged, and the objects stay.
    pub prune_removed_unguarded: bool,
    /// Glob patterns (`*` any run of characters, `?` one) the namespace of every generated
    /// unit must match (`namespaces = "team-*"`); a unit outside them is an error for that
    /// listing. Default none: any namespace, but then a `namespace` template with `{dir}` or
    /// `{path}` needs a `service_account` (the set's or `[daemon] default_service_account`).
    pub namespaces: Vec<String>,
    /// The most units the set may make; more is an error for that revision (the last good
    /// set stays). Default [`DEFAULT_MAX_UNITS`].
    pub max_units: usize,
    /// A unit standing for the set's repository: its `repo`, `ref`, `[sync.git]` credentials
    /// and `[sync.verify]` keys, named as the set, for fetching and listing the tree.
    pub source: SyncUnit,
    /// Every other key, as written: the template of the units.
    pub(super) template: Table,
    /// The 0-based index of the set in the file, for `sync_set[<index>]` in errors.
    index: usize,
    /// The 1-based line of the set's table, where its errors point.
    line: usize,
    /// How errors name the config file.
    origin: String,
    /// The config file's directory: relative paths in templates are anchored there.
    base_dir: PathBuf,
}

/// The values one unit's templates are expanded with.
struct Place<'a> {
    /// The matched directory's last component.
    dir: &'a str,
    /// The matched directory's whole path.
    path: &'a str,
    /// The cluster of this unit.
    cluster: &'a str,
}

impl Place<'_> {
    /// `text` with `{dir}`, `{path}` and `{cluster}` replaced in one pass, left to right: a
    /// value put in is never read again, so a directory named `{path}` stays `{path}`. Other
    /// braces are left as they are (`${var}` of `[sync.substitute]`, Helm values).
    fn expand(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(at) = rest.find('{') {
            out.push_str(&rest[..at]);
            let tail = &rest[at..];
            let values = [("{dir}", self.dir), ("{path}", self.path), ("{cluster}", self.cluster)];
            match values.iter().find(|(placeholder, _)| tail.starts_with(placeholder)) {
                Some((placeholder, value)) => {
                    out.push_str(value);
                    rest = &tail[placeholder.len()..];
                }
                None => {
                    out.push('{');
                    rest = &tail[1..];
                }
            }
        }
        out.push_str(rest);
        out
    }

    fn expand_value(&self, value: &Value) -> Value {
        match value {
            Value::String(text) => Value::String(self.expand(text)),
            Value::Array(items) => Value::Array(items.iter().map(|v| self.expand_value(v)).collect()),
            Value::Table(table) => Value::Table(self.expand_table(table)),
            other => other.clone(),
        }
    }

    fn expand_table(&self, table: &Table) -> Table {
        table.iter().map(|(key, value)| (key.clone(), self.expand_value(value))).collect()
    }
}

impl Config {
    /// The units set `set` (an index into [`Config::sets`]) makes of `dirs`, the matched
    /// directories' paths: one per directory, or per directory and cluster, in that order.
    /// Only the set's own units are checked against one another here; [`Config::with_sets`]
    /// checks them against the rest.
    ///
    /// Errors: [`Error::Invalid`] naming `sync_set[<index>]` and the set's line: more units
    /// than `max_units`; a generated unit that does not resolve (its name not an RFC 1123
    /// label, a bad value), naming the unit and its directory; a unit whose namespace matches
    /// none of the set's `namespaces`; two units of the set with one name or one inventory.
    pub fn expand(&self, set: usize, dirs: &[String]) -> Result<Vec<SyncUnit>> {
        let set = &self.sets[set];
        let per_dir = set.clusters.len().max(1);
        let count = dirs.len().saturating_mul(per_dir);
        if count > set.max_units {
            let message = format!(
                "{} directories match `{}`, making {count} units, more than max_units = {}",
                dirs.len(),
                set.path_glob,
                set.max_units
            );
            return Err(set.invalid("max_units", message));
        }
        let mut units: Vec<SyncUnit> = Vec::with_capacity(count);
        // The directory each unit of `units` was made of.
        let mut made_of: Vec<&str> = Vec::with_capacity(count);
        for path in dirs {
            let dir = path.rsplit('/').next().unwrap_or(path);
            for cluster in set.cluster_names(&self.clusters) {
                let mut unit =
                    set.unit(&Place { dir, path, cluster: &cluster }, &self.clusters, &self.daemon, &self.render)?;
                unit.provenance = self.provenance.clone();
                set.check_namespace(&unit, path)?;
                if let Some(other) = units.iter().position(|u| u.name == unit.name) {
                    let message =
                        format!("directories `{}` and `{path}` both make the unit `{}`", made_of[other], unit.name);
                    return Err(set.invalid("name", message));
                }
                if let Some(other) = units.iter().find(|u| u.inventory == unit.inventory) {
                    let message = format!("units `{}` and `{}` would share one inventory", other.name, unit.name);
                    return Err(set.invalid("inventory", message));
                }
                units.push(unit);
                made_of.push(path);
            }
        }
        Ok(units)
    }

    /// This config with each set's units (`generated[i]` of `sets[i]`, as [`Config::expand`]
    /// made them) added after the `[[sync]]` units; `adopted_by` is computed again over all.
    ///
    /// The `depends_on` entries and `[[notify]] units` that name generated units are resolved
    /// against them ([`Config::resolve_generated`]).
    ///
    /// Errors: [`Error::Invalid`] when a generated unit takes the name or the inventory of
    /// another unit (a `[[sync]]` unit or one of another set), naming both; when a name in
    /// `depends_on` or `[[notify]] units` is made by no unit though each set that could make it
    /// is among `generated` and made units.
    pub fn with_sets(&self, generated: &[Vec<SyncUnit>]) -> Result<Config> {
        let mut config = self.clone();
        let mut owner: HashMap<String, String> =
            self.units.iter().map(|u| (u.name.clone(), "a [[sync]] unit".into())).collect();
        for (set, units) in self.sets.iter().zip(generated) {
            for unit in units {
                let of_set = format!("a unit of sync_set[{}]", set.index);
                if let Some(other) = owner.insert(unit.name.clone(), of_set) {
                    return Err(set.invalid("name", format!("the unit `{}` is also {other}", unit.name)));
                }
                if let Some(other) = config.units.iter().find(|u| u.inventory == unit.inventory) {
                    let message = format!("the unit `{}` would share its inventory with `{}`", unit.name, other.name);
                    return Err(set.invalid("inventory", message));
                }
                config.units.push(unit.clone());
            }
        }
        config.resolve_generated(generated.len())?;
        adopted_by(&mut config.units);
        Ok(config)
    }
}

impl SyncSet {
    /// How errors name the config file the set is in.
    pub(super) fn origin(&self) -> &str {
        &self.origin
    }

    /// The cluster each directory is made a unit for: `clusters`, or the one its `cluster`
    /// key names (the only cluster when it names none).
    fn cluster_names(&self, clusters: &[ClusterConfig]) -> Vec<String> {
        if !self.clusters.is_empty() {
            return self.clusters.clone();
        }
        match self.template.get("cluster") {
            Some(Value::String(name)) => vec![name.clone()],
            _ => vec![clusters.first().map(|c| c.name.clone()).unwrap_or_default()],
        }
    }

    /// The unit of one directory (and cluster): the template expanded, then resolved as a
    /// `[[sync]]` table.
    fn unit(
        &self,
        place: &Place<'_>,
        clusters: &[ClusterConfig],
        daemon: &DaemonConfig,
        render: &RenderTools,
    ) -> Result<SyncUnit> {
        let mut table = place.expand_table(&self.template);
        table.entry("path").or_insert_with(|| Value::String(place.path.to_owned()));
        if !self.clusters.is_empty() {
            table.insert("cluster".to_owned(), Value::String(place.cluster.to_owned()));
        }
        let name = table.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
        let context = format!(" (unit `{name}` of directory `{}`)", place.path);
        let text = toml::to_string(&table).map_err(|e| self.invalid("name", format!("{e}{context}")))?;
        let raw: RawSyncUnit = toml::from_str(&text).map_err(|e| {
            let message = format!("{}{context}", e.message().trim_end());
            self.invalid("", message)
        })?;
        let resolver = Resolver { text: &text, origin: &self.origin, base_dir: &self.base_dir };
        let resolved = resolver.whole_unit(0, raw, clusters, daemon, render);
        resolved.map(|(unit, _, _)| unit).map_err(|error| self.located(error, &context))
    }

    /// An error of a generated unit's `[[sync]]` resolution, pointed at the set: its key
    /// `sync[0].x` becomes `sync_set[<index>].x`, its line the set's, `context` added.
    fn located(&self, error: Error, context: &str) -> Error {
        match error {
            Error::Invalid { key, message, .. } => {
                let field = key.strip_prefix("sync[0]").unwrap_or(&key).trim_start_matches('.');
                self.invalid(field, format!("{message}{context}"))
            }
            other => other,
        }
    }

    /// An [`Error::Invalid`] at the set's line; `field` empty for the set itself.
    pub(super) fn invalid(&self, field: &str, message: impl Into<String>) -> Error {
        let key = match field {
            "" => format!("sync_set[{}]", self.index),
            field => format!("sync_set[{}].{field}", self.index),
        };
        Error::Invalid { origin: self.origin.clone(), line: Some(self.line), key, message: message.into() }
    }
}

/// Checks `path_glob`: a tree path (no `..`, not absolute, not empty) whose components are
/// names or globs of `*` and `?`, never `**`.
fn check_glob(glob: &str) -> std::result::Result<String, String> {
    let normal = super::UnitPath::parse(glob)?.as_str().to_owned();
    if normal.is_empty() {
        return Err("must name directories (`apps/*`), not the repository root".to_owned());
    }
    if normal.split('/').any(|c| c.contains("**")) {
        return Err(format!("`{glob}`: `**` is not supported; write one `*` per directory level"));
    }
    Ok(normal)
}

/// `namespaces` as written: one pattern or a list of them, each non-empty and made of what a
/// namespace name holds (lowercase letters, digits, `-`) and the wildcards `*` and `?`.
fn namespace_patterns(value: &Value) -> std::result::Result<Vec<String>, String> {
    let patterns: Option<Vec<String>> = match value {
        Value::String(one) => Some(vec![one.clone()]),
        Value::Array(items) => items.iter().map(|v| v.as_str().map(str::to_owned)).collect(),
        _ => None,
    };
    let patterns = patterns.ok_or("must be a pattern (\"team-*\") or a list of patterns")?;
    if patterns.is_empty() {
        return Err("must hold at least one pattern (or be left out)".to_owned());
    }
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '*' | '?');
    if let Some(bad) = patterns.iter().find(|p| p.is_empty() || !p.chars().all(allowed)) {
        return Err(format!("`{bad}`: a pattern holds lowercase letters, digits, `-`, `*` and `?`"));
    }
    Ok(patterns)
}

/// A directory path that matches `glob` as the sample of load-time checks: each wildcard
/// replaced by `x`.
fn sample_path(glob: &str) -> String {
    glob.replace(['*', '?'], "x")
}

impl Resolver<'_> {
    /// Every `[[sync_set]]`, in file order ([`Resolver::sync_set`]).
    pub(super) fn sync_sets(
        &self,
        raw: Vec<Spanned<Table>>,
        clusters: &[ClusterConfig],
        daemon: &DaemonConfig,
        render: &RenderTools,
    ) -> Result<Vec<SyncSet>> {
        raw.into_iter().enumerate().map(|(index, raw)| self.sync_set(index, raw, clusters, daemon, render)).collect()
    }

    /// One `[[sync_set]]`: its own keys taken out and checked, then its template checked by
    /// expanding it for a sample directory, so a misspelt key or a bad value is refused at
    /// load, not at the first revision.
    pub(super) fn sync_set(
        &self,
        index: usize,
        raw: Spanned<Table>,
        clusters: &[ClusterConfig],
        daemon: &DaemonConfig,
        render: &RenderTools,
    ) -> Result<SyncSet> {
        let line = line_of(self.text, raw.span().start);
        let mut template = raw.into_inner();
        let own: BTreeMap<&str, Value> = OWN_KEYS.iter().filter_map(|k| template.remove(*k).map(|v| (*k, v))).collect();
        let mut set = SyncSet {
            name: template.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
            path_glob: String::new(),
            clusters: Vec::new(),
            prune_removed: false,
            prune_removed_unguarded: false,
            namespaces: Vec::new(),
            max_units: DEFAULT_MAX_UNITS,
            source: SyncUnit::new("", ""),
            template,
            index,
            line,
            origin: self.origin.to_owned(),
            base_dir: self.base_dir.to_owned(),
        };
        self.set_own_keys(&mut set, own, clusters)?;
        for key in ["name", "repo"] {
            if !matches!(set.template.get(key), Some(Value::String(_))) {
                return Err(set.invalid(key, "is required, a string"));
            }
        }
        for key in ["repo", "ref"] {
            if let Some(Value::String(value)) = set.template.get(key)
                && ["{dir}", "{path}", "{cluster}"].iter().any(|p| value.contains(p))
            {
                return Err(set.invalid(
                    key,
                    "is the one repository the set lists: it cannot hold `{dir}`, `{path}` or `{cluster}`",
                ));
            }
        }
        set.check_identity_keys()?;
        if !set.clusters.is_empty() && set.template.contains_key("cluster") {
            return Err(set.invalid(
                "cluster",
                "cannot be combined with `clusters`: write `cluster = \"{cluster}\"` or leave it out",
            ));
        }
        let path = sample_path(&set.path_glob);
        let dir = path.rsplit('/').next().unwrap_or(&path).to_owned();
        let cluster = set.cluster_names(clusters).swap_remove(0);
        let sample = set.unit(&Place { dir: &dir, path: &path, cluster: &cluster }, clusters, daemon, render)?;
        if !sample.is_git() {
            return Err(set.invalid("repo", "must be a git repository: a set lists the directories of its tree"));
        }
        set.check_namespace_template(&sample)?;
        set.source = SyncUnit { name: set.name.clone(), path: super::UnitPath::default(), ..sample };
        Ok(set)
    }

    /// `path_glob`, `clusters`, `prune_removed`, `prune_removed_unguarded`, `max_units`,
    /// `namespaces`, with their types checked.
    fn set_own_keys(
        &self,
        set: &mut SyncSet,
        mut own: BTreeMap<&str, Value>,
        clusters: &[ClusterConfig],
    ) -> Result<()> {
        match own.remove("path_glob") {
            Some(Value::String(glob)) => set.path_glob = check_glob(&glob).map_err(|m| set.invalid("path_glob", m))?,
            Some(_) => return Err(set.invalid("path_glob", "must be a string, such as \"apps/*\"")),
            None => return Err(set.invalid("path_glob", "is required: the directories to make units of (\"apps/*\")")),
        }
        if let Some(value) = own.remove("clusters") {
            let names: Option<Vec<String>> =
                value.as_array().and_then(|a| a.iter().map(|v| v.as_str().map(str::to_owned)).collect());
            let names = names.ok_or_else(|| set.invalid("clusters", "must be a list of cluster names"))?;
            if names.is_empty() {
                return Err(set.invalid("clusters", "must name at least one cluster (or be left out)"));
            }
            if let Some(unknown) = names.iter().find(|n| !clusters.iter().any(|c| &c.name == *n)) {
                return Err(set.invalid("clusters", format!("no cluster named `{unknown}`")));
            }
            set.clusters = names;
        }
        match own.remove("prune_removed") {
            Some(Value::Boolean(value)) => set.prune_removed = value,
            Some(_) => return Err(set.invalid("prune_removed", "must be true or false")),
            None => {}
        }
        match own.remove("prune_removed_unguarded") {
            Some(Value::Boolean(value)) => set.prune_removed_unguarded = value,
            Some(_) => return Err(set.invalid("prune_removed_unguarded", "must be true or false")),
            None => {}
        }
        if let Some(value) = own.remove("namespaces") {
            set.namespaces = namespace_patterns(&value).map_err(|m| set.invalid("namespaces", m))?;
        }
        match own.remove("max_units") {
            Some(Value::Integer(n)) if n >= 1 => set.max_units = usize::try_from(n).unwrap_or(usize::MAX),
            Some(_) => return Err(set.invalid("max_units", "must be a whole number, at least 1")),
            None => {}
        }
        Ok(())
    }
}
