//! `gitward validate`: fetch, render and parse each unit's manifests and check, without a
//! cluster, what the API server would check.
//!
//! The render runs as in a sync (kustomize, Helm and SOPS), Helm with the config's
//! `[render] kube_version` and `api_versions`, since there is no cluster to ask. Every document
//! must parse; then each object is checked for what the API server would refuse and can be
//! known without it ([`Problem`], [`Severity::Error`]):
//! - its name, labels and annotations under the API server's rules for its kind
//!   ([`names`]), its namespace as a DNS-1123 label;
//! - its kind: built in (k8s-openapi's `v1_35` types), defined by a CustomResourceDefinition
//!   in the revision of any unit validated, or of a group version `[render] api_versions`
//!   names ([`kinds`]);
//! - an object defined twice in one unit, or declared by two units;
//! - a Secret whose `data` is not base64, a ConfigMap or Secret holding more than the API
//!   server's 1 MiB of data, any object over etcd's default request limit of 1.5 MiB.
//!
//! A kustomization file that a plain unit reads past is a [`Severity::Warning`] of its own
//! (no object): the files beside it, patches included, are applied as objects; the warning
//! says which config builds it ([`crate::sync::repo::plain_kustomization`]), and an object
//! defined twice in such a unit names it as the likely cause.
//!
//! A namespaced object whose namespace no unit creates (as a Namespace object or by
//! `create_namespace`) and that is not one of the cluster's own ([`WELL_KNOWN_NAMESPACES`]) is
//! a [`Severity::Warning`]: the namespace may well exist in the cluster already, which only
//! the cluster knows. An object that names no namespace is in its unit's namespace.
//!
//! All units are read before any is judged, since a CRD, a Namespace or a duplicate may be in
//! another unit (of the same cluster: units of different clusters share none of them). A unit whose mirror is not in `state_dir` yet is fetched into a scratch
//! directory the caller removes: validating writes nothing into `state_dir` but the fetches of
//! mirrors that are there already.
//!
//! `gitward render` ([`render_command`]) reads a unit the same way, offline, and prints its
//! objects as a sync would send them.

pub mod kinds;
pub mod names;
pub mod render_command;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::config::SyncUnit;
use crate::manifest::{Manifest, Origin, Skipped};
use crate::object::{Atom, GroupKind, ObjectRef};
use crate::source::Revision;
use crate::sync::Result;
use crate::sync::desired::{kustomization_hint, origin};
use kinds::{Catalogue, Known};
use names::NameRule;

/// The most bytes of data a ConfigMap or Secret may hold: the API server's `MaxSecretSize`
/// (1 MiB), which its validation applies to a ConfigMap's `data` and `binaryData` (keys and
/// values) and a Secret's decoded `data` and `stringData` values.
pub const MAX_DATA_BYTES: usize = 1 << 20;

/// The most bytes one object's JSON may take: etcd's default `--max-request-bytes` (1.5 MiB),
/// which a larger object cannot be written under.
pub const MAX_OBJECT_BYTES: usize = 3 << 19;

/// The namespaces every cluster has: objects in them get no warning that no unit creates them.
pub const WELL_KNOWN_NAMESPACES: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

/// What was checked in one unit.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The revision checked.
    pub revision: Revision,
    /// Objects found (Helm hooks included).
    pub objects: usize,
    /// What the API server would refuse, in file order; empty when the unit is valid.
    pub problems: Vec<Problem>,
    /// What may fail but need not (a namespace no unit creates), in file order; these do not
    /// make the unit invalid.
    pub warnings: Vec<Problem>,
}

/// How bad a [`Problem`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// The API server would refuse the object: the unit is invalid (exit 2).
    Error,
    /// The object may fail, depending on what the cluster holds: reported, the unit stays valid.
    Warning,
}

impl Severity {
    /// `error` or `warning`, as `-o json` writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::Warning => "warning",
        }
    }
}

/// One object the API server would refuse (or may), and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file and document (`apps/secret.yaml (document 2)`).
    pub origin: String,
    /// The object, `Kind/namespace/name` (`Kind/name` when cluster-scoped); `None` for a
    /// warning about a whole file (a kustomization file a plain unit reads past).
    pub object: Option<String>,
    /// What is wrong and what to do about it.
    pub message: String,
    /// Whether it makes the unit invalid.
    pub severity: Severity,
}

impl std::fmt::Display for Problem {
    /// `apps/secret.yaml (document 2): Secret/shop/creds: data.password is not base64 …`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.object {
            Some(object) => write!(f, "{}: {object}: {}", self.origin, self.message),
            None => write!(f, "{}: {}", self.origin, self.message),
        }
    }
}

/// What the judging step keeps of one object: its identity and where it came from (the body
/// is checked, and dropped, while the unit is read).
struct Object {
    origin: Origin,
    api_version: Atom,
    gk: GroupKind,
    name: Atom,
    namespace: Option<Atom>,
    /// What [`check`] found in the object alone.
    problems: Vec<String>,
}

/// One unit as read: its revision, objects, and the kustomization files its plain read passed
/// over ([`Skipped::is_kustomization`]).
struct Read {
    revision: Revision,
    objects: Vec<Object>,
    kustomizations: Vec<Skipped>,
}

/// What all units read declare, per cluster (`[[sync]] cluster`: units of different clusters
/// share nothing): the kinds their CRDs define, the namespaces they create, and which units
/// declare each object.
#[derive(Default)]
struct Declared {
    /// Cluster → the kinds known there.
    catalogues: BTreeMap<String, Catalogue>,
    /// (cluster, namespace) of each Namespace object and `create_namespace` unit.
    namespaces: BTreeSet<(String, String)>,
    /// (cluster, object) → (unit index, where) for each unit that declares it, first occurrence.
    owners: BTreeMap<(String, ObjectRef), Vec<(usize, Origin)>>,
}

impl Declared {
    /// The kinds known in `unit`'s cluster.
    fn catalogue(&self, unit: &SyncUnit) -> &Catalogue {
        static NONE: std::sync::LazyLock<Catalogue> = std::sync::LazyLock::new(Catalogue::default);
        self.catalogues.get(&unit.cluster).unwrap_or(&NONE)
    }

    /// Whether some unit of `unit`'s cluster creates `namespace`.
    fn creates(&self, unit: &SyncUnit, namespace: &str) -> bool {
        self.namespaces.contains(&(unit.cluster.clone(), namespace.to_owned()))
    }
}

/// Reads every unit of `units` and checks it, in the order given: one result per unit.
///
/// A unit's mirror is opened in `state_dir` when it is there already
/// ([`crate::sync::repo::mirror_exists`]), else in `scratch` (a directory the caller removes
/// afterwards; units of one repository share their mirror in it).
///
/// Errors, per unit: what stops its revision before any object can be checked —
/// [`crate::sync::Error::Source`] (the repository, ref or path), [`crate::sync::Error::Render`]
/// or [`crate::sync::Error::Manifest`], naming the file and document (or the unit, path and
/// tool). Objects that do not pass are [`Summary::problems`], all of them.
pub async fn validate_units(state_dir: &Path, scratch: &Path, units: &[SyncUnit]) -> Vec<Result<Summary>> {
    let mut declared = Declared::default();
    let mut reads = Vec::with_capacity(units.len());
    for unit in units {
        let dir = if crate::sync::repo::mirror_exists(state_dir, unit) { state_dir } else { scratch };
        reads.push(read_unit(dir, unit, &mut declared).await);
    }
    for unit in units {
        let catalogue = declared.catalogues.entry(unit.cluster.clone()).or_default();
        for entry in &unit.render_tools.api_versions {
            catalogue.add_api_version(entry);
        }
        if unit.create_namespace {
            declared.namespaces.insert((unit.cluster.clone(), unit.namespace.clone()));
        }
    }
    for (index, read) in reads.iter().enumerate() {
        let Ok(read) = read else { continue };
        let unit = &units[index];
        let mut seen = BTreeSet::new();
        for object in &read.objects {
            let object_ref = object_ref(declared.catalogue(unit), object, unit);
            if seen.insert(object_ref.clone()) {
                let key = (unit.cluster.clone(), object_ref);
                declared.owners.entry(key).or_default().push((index, object.origin.clone()));
            }
        }
    }
    reads.into_iter().enumerate().map(|(index, read)| read.map(|read| judge(index, read, units, &declared))).collect()
}

/// Fetches and reads one unit, checks each object alone, and adds what it declares (CRDs,
/// Namespaces) to `declared`.
async fn read_unit(dir: &Path, unit: &SyncUnit, declared: &mut Declared) -> Result<Read> {
    let repo = crate::sync::repo::Repo::open(dir, &Arc::new(unit.clone())).await?;
    let revision = repo.fetch().await?;
    let mut loaded = repo.load(&revision).await?;
    substitute_inline(unit, &mut loaded)?;
    let kustomizations = loaded.skipped.iter().filter(|s| s.is_kustomization()).cloned().collect();
    let mut read = Read { revision, objects: Vec::new(), kustomizations };
    // Helm hooks are checked like the unit's own objects: they are applied too.
    for m in loaded.manifests.iter().chain(&loaded.hooks) {
        match (m.gk.group.as_str(), m.gk.kind.as_str()) {
            ("apiextensions.k8s.io", "CustomResourceDefinition") => {
                declared.catalogues.entry(unit.cluster.clone()).or_default().add_crd(&m.body.to_value());
            }
            ("", "Namespace") => {
                declared.namespaces.insert((unit.cluster.clone(), m.name.to_string()));
            }
            _ => {}
        }
        read.objects.push(Object {
            origin: origin(m),
            api_version: m.api_version.clone(),
            gk: m.gk.clone(),
            name: m.name.clone(),
            namespace: m.namespace.clone(),
            problems: check(m),
        });
    }
    Ok(read)
}

/// The unit's inline `[sync.substitute] vars` (and defaults) substituted into `loaded`, as the
/// sync would: strictly when they are all its variables, and leaving the references it cannot
/// resolve when `from` objects (in a cluster `validate` does not read) define others.
///
/// Errors: [`crate::sync::Error::Manifest`] for an undefined variable of a unit without `from`.
fn substitute_inline(unit: &SyncUnit, loaded: &mut crate::manifest::Loaded) -> Result<()> {
    use crate::manifest::substitute::{Vars, substitute, substitute_known};
    let config = &unit.substitute;
    if !config.is_set() {
        return Ok(());
    }
    let mut vars = Vars::default();
    config.vars.iter().for_each(|(name, value)| vars.set(name.clone(), value.clone(), false));
    for part in [&mut loaded.manifests, &mut loaded.hooks] {
        match config.from.is_empty() {
            true => substitute(part, &vars, &crate::manifest::HashKey::derive(b"validate"))?,
            false => substitute_known(part, &vars)?,
        }
    }
    Ok(())
}

/// The object's identity: namespaced (in its unit's namespace when it names none) unless its
/// kind is known to be cluster-scoped.
fn object_ref(catalogue: &Catalogue, object: &Object, unit: &SyncUnit) -> ObjectRef {
    match catalogue.known(&object.api_version, &object.gk.kind) {
        Some(Known::Kind(false)) => ObjectRef::new(object.gk.clone(), None::<Atom>, &object.name),
        _ => {
            let ns = object.namespace.clone().unwrap_or_else(|| unit.namespace.as_str().into());
            ObjectRef::new(object.gk.clone(), Some(ns), &object.name)
        }
    }
}

/// Checks what needs every unit read — the kind, the namespace, duplicates in the unit and
/// across units — after what each object alone showed; in file order.
fn judge(index: usize, read: Read, units: &[SyncUnit], declared: &Declared) -> Summary {
    let unit = &units[index];
    let catalogue = declared.catalogue(unit);
    let Read { revision, objects, kustomizations } = read;
    let (mut problems, mut warnings) = (Vec::new(), Vec::new());
    for k in &kustomizations {
        let (origin, message) = (k.file.clone(), k.reason.clone());
        warnings.push(Problem { origin, object: None, message, severity: Severity::Warning });
    }
    let mut seen: HashMap<ObjectRef, &Origin> = HashMap::new();
    let mut warned = BTreeSet::new();
    for object in &objects {
        let known = catalogue.known(&object.api_version, &object.gk.kind);
        let object_ref = object_ref(catalogue, object, unit);
        let mut problem = |message: String, severity: Severity| {
            let (origin, object) = (object.origin.to_string(), Some(object_ref.to_string()));
            let problem = Problem { origin, object, message, severity };
            match severity {
                Severity::Error => problems.push(problem),
                Severity::Warning => warnings.push(problem),
            }
        };
        for message in &object.problems {
            problem(message.clone(), Severity::Error);
        }
        if known.is_none() {
            problem(unknown_kind(catalogue, object), Severity::Error);
        }
        if let (Some(_), Some(explicit)) = (&object_ref.namespace, &object.namespace) {
            for message in names::check_namespace(explicit) {
                problem(message, Severity::Error);
            }
        }
        if let Some(first) = seen.insert(object_ref.clone(), &object.origin) {
            let origins = [first.to_string(), object.origin.to_string()];
            let hint = kustomization_hint(&kustomizations, [&origins[0], &origins[1]]);
            let hint = hint.map(|h| format!("; {h}")).unwrap_or_default();
            problem(format!("defined twice, first in {first}: keep one of them{hint}"), Severity::Error);
        } else {
            let key = (unit.cluster.clone(), object_ref.clone());
            let others = declared.owners.get(&key).into_iter().flatten().filter(|(other, _)| *other != index);
            for (other, origin) in others {
                let message = format!(
                    "also declared by unit {} in {origin}: each unit would apply it over the other's and prune it when it \
                     leaves; keep it in one unit",
                    units[*other].name
                );
                problem(message, Severity::Error);
            }
        }
        if let Some(ns) = &object_ref.namespace
            && !declared.creates(unit, ns)
            && !WELL_KNOWN_NAMESPACES.contains(&ns.as_str())
            && warned.insert(ns.clone())
        {
            let message = format!(
                "namespace {ns} is created by no unit: declare it as a Namespace object, set create_namespace, or \
                 make sure it exists in the cluster"
            );
            problem(message, Severity::Warning);
        }
    }
    Summary { revision, objects: objects.len(), problems, warnings }
}

/// "unknown kind X in V; install its CRD first or add it to the repository", with the
/// versions the kind is known in when there are any.
fn unknown_kind(catalogue: &Catalogue, object: &Object) -> String {
    let (api_version, kind) = (&object.api_version, &object.gk.kind);
    let mut message =
        format!("unknown kind {kind} in {api_version}; install its CRD first or add it to the repository");
    let versions = catalogue.versions_of(&object.gk.group, kind);
    if !versions.is_empty() {
        let group = &object.gk.group;
        let served: Vec<String> =
            versions.iter().map(|v| if group.is_empty() { v.clone() } else { format!("{group}/{v}") }).collect();
        message.push_str(&format!(" (known as {})", served.join(", ")));
    }
    message
}

/// `gitward validate -o json`: `{"units": [...]}`, one entry per unit of `units` in order —
/// `unit`, `valid`, then `revision`, `objects`, `problems` and `warnings` (each `origin`,
/// `object` — `null` for a warning about a whole file —, `message`, `severity`) when the unit could be read, else `error` (the message
/// given, as logged).
pub fn render_json(units: &[(&str, std::result::Result<&Summary, String>)]) -> String {
    let problem = |p: &Problem| json!({"origin": p.origin, "object": p.object, "message": p.message, "severity": p.severity.as_str()});
    let entries: Vec<Value> = units
        .iter()
        .map(|(unit, result)| match result {
            Ok(s) => json!({
                "unit": unit,
                "valid": s.problems.is_empty(),
                "revision": s.revision.0,
                "objects": s.objects,
                "problems": s.problems.iter().map(problem).collect::<Vec<_>>(),
                "warnings": s.warnings.iter().map(problem).collect::<Vec<_>>(),
            }),
            Err(error) => json!({"unit": unit, "valid": false, "error": error}),
        })
        .collect();
    serde_json::to_string_pretty(&json!({ "units": entries })).unwrap_or_default()
}

/// What the API server would refuse in `m` alone, each as a sentence: its name, labels and
/// annotations ([`names::check_metadata`] under its kind's [`NameRule`]), Secret data that is
/// not base64, data over [`MAX_DATA_BYTES`], an object over [`MAX_OBJECT_BYTES`].
pub fn check(m: &Manifest) -> Vec<String> {
    // Parsed once for every check: a revision may hold 100,000 objects.
    let body = m.body.to_value();
    let none = Value::Null;
    let mut problems =
        names::check_metadata(body.get("metadata").unwrap_or(&none), NameRule::of(&m.gk.group, &m.gk.kind));
    let size = m.body.as_str().len();
    if size > MAX_OBJECT_BYTES {
        problems.push(format!(
            "{size} bytes, over the {MAX_OBJECT_BYTES} bytes (1.5 MiB) etcd takes in one request: split it into \
             several objects"
        ));
    }
    let data_bytes = match (m.gk.group.as_str(), m.gk.kind.as_str()) {
        ("", "Secret") => secret_data(&body, &mut problems),
        ("", "ConfigMap") => configmap_data(&body),
        _ => 0,
    };
    if data_bytes > MAX_DATA_BYTES {
        problems.push(format!(
            "{data_bytes} bytes of data, over the {MAX_DATA_BYTES} bytes (1 MiB) a {} may hold: split it into \
             several, or mount the data from a volume",
            m.gk.kind
        ));
    }
    problems
}

/// The decoded bytes of a Secret's `data` and `stringData` values; a `data` value that is not
/// standard base64 (RFC 4648 §4, padded, as the API server decodes it) is a problem.
fn secret_data(body: &Value, problems: &mut Vec<String>) -> usize {
    let mut bytes = 0;
    for (key, value) in entries(body, "data") {
        match value.as_str().map(|text| base64::engine::general_purpose::STANDARD.decode(text)) {
            Some(Ok(decoded)) => bytes += decoded.len(),
            // The decoder's message names the offending character: not for a Secret's log line.
            Some(Err(_)) => problems.push(format!(
                "data.{key} is not base64: encode the value (`base64 -w0`), or move it to stringData as plain text"
            )),
            None => problems.push(format!("data.{key} is not a string: give a base64 string")),
        }
    }
    bytes + entries(body, "stringData").map(|(_, v)| v.as_str().map_or(0, str::len)).sum::<usize>()
}

/// The bytes of a ConfigMap's `data` and decoded `binaryData`, keys included, as the API server
/// counts them.
fn configmap_data(body: &Value) -> usize {
    let text: usize = entries(body, "data").map(|(k, v)| k.len() + v.as_str().map_or(0, str::len)).sum();
    let binary: usize = entries(body, "binaryData")
        .map(|(k, v)| {
            let decoded = v.as_str().and_then(|t| base64::engine::general_purpose::STANDARD.decode(t).ok());
            k.len() + decoded.map_or(0, |d| d.len())
        })
        .sum();
    text + binary
}

/// The entries of the map at top-level `field`, none when it is absent or not a map.
fn entries<'a>(body: &'a Value, field: &str) -> impl Iterator<Item = (&'a String, &'a Value)> {
    body.get(field).and_then(Value::as_object).into_iter().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::parse_file;

    fn problems(yaml: &str) -> Vec<String> {
        parse_file("app/x.yaml", yaml.as_bytes()).unwrap().manifests.iter().flat_map(check).collect()
    }

    #[test]
    fn secret_data_must_be_base64() {
        let ok = "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {a: aHVudGVyMg==}\nstringData: {b: plain}\n";
        assert!(problems(ok).is_empty());
        let bad = "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {password: hunter2!}\n";
        let found = problems(bad);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("data.password is not base64"), "{found:?}");
        assert!(!found[0].contains("hunter2"), "the value must not be quoted: {found:?}");
    }

    #[test]
    fn data_over_one_mebibyte_is_refused_and_at_it_accepted() {
        let cm = |n: usize| {
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c}}\ndata:\n  k: \"{}\"\n", "x".repeat(n))
        };
        assert!(problems(&cm(MAX_DATA_BYTES - 1)).is_empty());
        let found = problems(&cm(MAX_DATA_BYTES));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("over the 1048576 bytes (1 MiB) a ConfigMap may hold"), "{found:?}");
    }

    #[test]
    fn any_object_over_the_etcd_request_limit_is_refused() {
        let crd = format!(
            "apiVersion: example.com/v1\nkind: Big\nmetadata: {{name: b}}\nspec:\n  blob: \"{}\"\n",
            "x".repeat(MAX_OBJECT_BYTES)
        );
        let found = problems(&crd);
        assert!(found.len() == 1 && found[0].contains("1.5 MiB"), "{found:?}");
        let under = crd.replace(&"x".repeat(MAX_OBJECT_BYTES), &"x".repeat(MAX_DATA_BYTES + 10));
        assert!(problems(&under).is_empty(), "a 1 MiB custom resource is fine");
    }
}
