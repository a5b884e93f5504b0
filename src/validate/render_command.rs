//! `gitward render`: one unit's objects as a sync would send them, printed as one YAML stream
//! for review (as `flux build kustomization` or `argocd app manifests` print theirs).
//!
//! The revision is read as a sync reads it — fetched, rendered (plain, kustomize, Helm, SOPS
//! decryption: [`crate::sync::repo::Repo::load`]), its `[sync.substitute]` variables substituted
//! ([`crate::sync::substitute::substitute_loaded`]) — and each object built as the engine builds
//! it ([`crate::sync::desired::build`]): namespace defaulted, the ApplySet `part-of` label and
//! the desired-hash annotation added, as a create sends it (`[[sync.ignore]]` paths included:
//! a rule leaves them to other writers only once the object exists). Helm
//! hooks follow the unit's objects, with their namespace and `gitward.dev/hook-of`, as
//! [`crate::sync::hooks`] sends them.
//!
//! Needs no cluster, with two departures from a sync where the sync asks one:
//! - a kind's scope (namespaced or not) is taken from the built-in kinds and the CRDs of the
//!   revision ([`super::kinds::Catalogue`]); a kind neither knows is shown namespaced, with a
//!   warning, as the sync keys a custom resource whose CRD is not applied yet;
//! - Helm renders for `[render] kube_version` and `api_versions`, as `gitward validate` does.
//!
//! `[sync.substitute] from` objects live in the cluster: a unit that names some is read through
//! the cluster's client, and an error names them when the cluster cannot be reached.
//!
//! Secret values are masked (DESIGN.md decision 10) unless asked for: Secret `data` and
//! `stringData`, every value of an object built from SOPS-decrypted content
//! ([`crate::sync::diff::mask_decrypted`]), and every decrypted or `from` Secret value wherever
//! it landed ([`crate::telemetry::mask`]). A unit whose mirror is not in `state_dir` is fetched
//! into a temporary directory, as `gitward validate` does.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use serde_json::Value;

use super::kinds::{Catalogue, Known};
use crate::config::{ClusterConfig, SyncUnit};
use crate::manifest::{Loaded, Manifest, Origin};
use crate::object::{Atom, ObjectRef};
use crate::source::Revision;
use crate::sync::desired::{Defaults, OWN_METADATA, Resolved, build, hinted, origin};

/// `--help` text of `render`: what it prints, exit codes, an example.
pub const HELP: &str = "\
Prints the unit's objects as a sync would send them: rendered (kustomize, Helm, SOPS decrypted),
[sync.substitute] variables substituted, gitward's ApplySet label and desired-hash annotation
added, as a create sends them ([[sync.ignore]] paths included); Helm hooks last. One YAML stream, documents separated by `---`.

Secret data, and every value of a decrypted object, is masked (***) unless --show-secrets.

Needs no cluster for plain, kustomize and Helm units (Helm renders for [render] kube_version); a
unit with [sync.substitute] from objects reads them from the cluster.

Exit codes: 0 rendered, 2 error (config, source, render, a document that does not parse).

Example:
  gitward render --config config.toml --sync apps --revision v1.4.0 > apps.yaml";

/// Arguments of `gitward render`.
#[derive(Debug, clap::Args)]
pub struct RenderArgs {
    /// The config file.
    #[arg(long, short, env = "GITWARD_CONFIG", default_value = "/etc/gitward/config.toml")]
    pub config: PathBuf,
    /// The sync unit to render, by name.
    #[arg(long = "sync", value_name = "NAME")]
    pub unit: String,
    /// Render this revision (a commit SHA, or a tag or branch) instead of the unit's `ref`; a
    /// git unit only.
    #[arg(long, value_name = "REV")]
    pub revision: Option<String>,
    /// Print Secret values and decrypted values as they are, unmasked.
    #[arg(long)]
    pub show_secrets: bool,
}

/// Why `gitward render` printed nothing. Not worth retrying without a change, a repository or
/// cluster out of reach aside.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The config file could not be read or is invalid.
    #[error(transparent)]
    Config(#[from] crate::config::Error),
    /// No unit of that name in the config.
    #[error("{config}: no sync unit named {name}")]
    UnknownUnit {
        /// The config file.
        config: String,
        /// The name asked for.
        name: String,
    },
    /// `--revision` for a unit whose revisions are not git commits.
    #[error("unit {unit}: --revision needs a git unit (a chart or OCI artifact unit names its version in the config)")]
    RevisionOfNoGitUnit {
        /// The unit.
        unit: String,
    },
    /// The temporary directory for a mirror not in `state_dir` could not be made.
    #[error("temporary directory: {0}")]
    Scratch(std::io::Error),
    /// The revision could not be fetched, rendered or parsed, or an object is invalid.
    #[error("unit {unit}")]
    Read {
        /// The unit.
        unit: String,
        /// What failed, naming the file and document, or the repository.
        #[source]
        source: crate::sync::Error,
    },
    /// `[sync.substitute] from` objects could not be read from the cluster.
    #[error("unit {unit}: [sync.substitute] from reads {objects} from the cluster")]
    Variables {
        /// The unit.
        unit: String,
        /// The `from` objects, `Kind/namespace/name`, comma-separated.
        objects: String,
        /// Why they could not be read.
        #[source]
        source: crate::sync::Error,
    },
}

/// `Result` alias of this module.
pub type Result<T> = std::result::Result<T, Error>;

/// A unit rendered.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// The revision read.
    pub revision: Revision,
    /// The YAML stream: each object, then each Helm hook, `---` between documents; masked unless
    /// asked otherwise.
    pub yaml: String,
    /// The objects (hooks included) in it.
    pub objects: usize,
    /// What the reader should know: kinds whose scope was assumed, the revision read in part.
    pub warnings: Vec<String>,
    /// For a unit Helm renders, the Kubernetes version it rendered for (`[render]
    /// kube_version`: no cluster is asked).
    pub helm_kube_version: Option<String>,
}

/// `gitward render`: loads the config, renders the unit ([`render`]), prints the stream on
/// stdout and each warning on stderr's log; exit 0.
///
/// Errors: those of [`crate::config::Config::load`] and [`render`]; [`Error::UnknownUnit`]. A set's units
/// are listed at the tip ([`crate::sync::set::load`]).
pub async fn run(args: &RenderArgs) -> Result<ExitCode> {
    let scratch = tempfile::Builder::new().prefix("gitward-render-").tempdir().map_err(Error::Scratch)?;
    // As the other one-shot commands read it: a `[[sync_set]]`'s units are units to render.
    let config = match crate::sync::set::load(&args.config, Some(scratch.path())).await {
        Ok(config) => config,
        Err(crate::sync::Error::Set(e)) => return Err(e.into()),
        Err(source) => return Err(Error::Read { unit: args.unit.clone(), source }),
    };
    let Some(unit) = config.units.iter().find(|u| u.name == args.unit) else {
        return Err(Error::UnknownUnit { config: args.config.display().to_string(), name: args.unit.clone() });
    };
    let mut unit = unit.clone();
    if let Some(revision) = &args.revision {
        if unit.helm.chart.is_some() || unit.repo.starts_with("oci://") {
            return Err(Error::RevisionOfNoGitUnit { unit: unit.name });
        }
        unit.reference.clone_from(revision);
    }
    let dirs = Dirs { state: &config.daemon.state_dir, scratch: scratch.path() };
    let rendered = render(config.cluster_of(&unit), dirs, &unit, args.show_secrets).await?;
    for warning in &rendered.warnings {
        tracing::warn!(unit = %unit.name, warning = %warning, "render");
    }
    if let Some(version) = &rendered.helm_kube_version {
        tracing::info!(unit = %unit.name, kube_version = %version, "helm renders for [render] kube_version, not the cluster's");
    }
    tracing::info!(unit = %unit.name, revision = %rendered.revision.0, objects = rendered.objects, "rendered");
    print!("{}", rendered.yaml);
    Ok(ExitCode::SUCCESS)
}

/// Where a render keeps the unit's mirror: `state`, when the mirror is there already, else
/// `scratch` (removed by the caller).
#[derive(Debug, Clone, Copy)]
pub struct Dirs<'a> {
    /// The config's `state_dir`.
    pub state: &'a Path,
    /// A temporary directory.
    pub scratch: &'a Path,
}

/// Renders `unit` at its ref (fetched first) as a sync would send it; see the module doc.
/// `cluster` is the unit's, asked only for `[sync.substitute] from` objects; `show_secrets`
/// leaves every value as it is.
///
/// Errors: [`Error::Read`] — source (repository, ref, path), render, parse (naming the file and
/// document), an object defined twice, a bad `gitward.dev/apply-mode`; [`Error::Variables`].
pub async fn render(cluster: &ClusterConfig, dirs: Dirs<'_>, unit: &SyncUnit, show_secrets: bool) -> Result<Rendered> {
    let read = |source| Error::Read { unit: unit.name.clone(), source };
    let dir = if crate::sync::repo::mirror_exists(dirs.state, unit) { dirs.state } else { dirs.scratch };
    let repo = crate::sync::repo::Repo::open(dir, &Arc::new(unit.clone())).await.map_err(read)?;
    let revision = repo.fetch().await.map_err(read)?;
    let helm_kube_version =
        repo.needs_capabilities(&revision).await.map_err(read)?.then(|| unit.render_tools.kube_version.clone());
    let mut warnings = Vec::new();
    let mut loaded = repo.load(&revision).await.map_err(read)?;
    crate::sync::substitute::substitute_loaded(cluster, dirs.state, unit, &mut loaded).await.map_err(|source| {
        let objects = unit.substitute.from.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
        match source {
            source @ (crate::sync::Error::Cluster(_) | crate::sync::Error::SubstituteKey { .. }) => {
                Error::Variables { unit: unit.name.clone(), objects, source }
            }
            source => read(source),
        }
    })?;
    if !loaded.partial.is_empty() {
        warnings.push(format!("read in part, these paths skipped: {}", loaded.partial.join(", ")));
    }
    let documents = documents(unit, &loaded, &mut warnings).map_err(read)?;
    let objects = documents.len();
    let yaml = stream(documents, show_secrets);
    Ok(Rendered { revision, yaml, objects, warnings, helm_kube_version })
}

/// One object to print: its body as sent, and whether it was built from decrypted content.
struct Document {
    body: Value,
    decrypted: bool,
    /// The labels and annotations gitward wrote on it (`(field, key)`): shown as they are
    /// when the rest is masked, since no decrypted input chose them.
    own: &'static [(&'static str, &'static str)],
}

/// What gitward writes on each object it sends ([`OWN_METADATA`]).
const OBJECT_OWN: &[(&str, &str)] = OWN_METADATA;

/// What gitward writes on each Helm hook it sends: `gitward.dev/hook-of`.
const HOOK_OWN: &[(&str, &str)] = &[("annotations", crate::sync::hooks::HOOK_OF)];

/// The objects of `loaded` built as the engine builds them, then its Helm hooks as they are
/// sent; a kind of unknown scope adds a warning.
///
/// Errors: [`crate::sync::Error::Duplicate`] (with the kustomization hint of a plain unit),
/// [`crate::sync::Error::InvalidAnnotation`].
fn documents(unit: &SyncUnit, loaded: &Loaded, warnings: &mut Vec<String>) -> crate::sync::Result<Vec<Document>> {
    let mut catalogue = Catalogue::default();
    for m in loaded.manifests.iter().chain(&loaded.hooks) {
        if (m.gk.group.as_str(), m.gk.kind.as_str()) == ("apiextensions.k8s.io", "CustomResourceDefinition") {
            catalogue.add_crd(&m.body.to_value());
        }
    }
    let mut scope = |m: &Manifest| match catalogue.known(&m.api_version, &m.gk.kind) {
        Some(Known::Kind(namespaced)) => namespaced,
        _ => {
            warnings.push(format!(
                "{}: kind {} of {} is neither built in nor defined by a CRD of this revision: shown namespaced",
                origin(m),
                m.gk.kind,
                m.api_version
            ));
            true
        }
    };
    let defaults = Defaults::of(unit);
    let mut out = Vec::with_capacity(loaded.manifests.len() + loaded.hooks.len());
    let mut seen: HashMap<ObjectRef, Origin> = HashMap::new();
    for m in &loaded.manifests {
        let namespaced = scope(m);
        let object = object_ref(m, namespaced, &defaults.namespace);
        if let Some(first) = seen.insert(object.clone(), origin(m)) {
            let (object, first, second) = (object.to_string(), first.to_string(), origin(m).to_string());
            let duplicate = crate::sync::Error::Duplicate { object, first, second, hint: String::new() };
            return Err(hinted(duplicate, &loaded.skipped));
        }
        let resource = Arc::new(resource(m));
        let d = build(m.clone(), object, Resolved { resource, namespaced }, &defaults)?;
        out.push(Document { body: d.body().to_value(), decrypted: d.decrypted, own: OBJECT_OWN });
    }
    for m in &loaded.hooks {
        let namespaced = scope(m);
        let mut body = m.body.to_value();
        if namespaced {
            let ns = m.namespace.clone().unwrap_or_else(|| defaults.namespace.clone());
            body["metadata"]["namespace"] = Value::from(ns.as_str());
        }
        body["metadata"]["annotations"][crate::sync::hooks::HOOK_OF] = Value::from(&*defaults.applyset_id);
        out.push(Document { body, decrypted: m.hash_key.is_some(), own: HOOK_OWN });
    }
    Ok(out)
}

/// The object `m` names: in its namespace, or the unit's, when its kind is namespaced.
fn object_ref(m: &Manifest, namespaced: bool, unit_namespace: &Atom) -> ObjectRef {
    match namespaced {
        true => {
            ObjectRef::new(m.gk.clone(), Some(m.namespace.clone().unwrap_or_else(|| unit_namespace.clone())), &m.name)
        }
        false => ObjectRef::new(m.gk.clone(), None::<Atom>, &m.name),
    }
}

/// The resource `m` would be sent to, its plural guessed from the kind: the build needs one,
/// nothing here sends a request to it.
fn resource(m: &Manifest) -> kube::discovery::ApiResource {
    let (group, version) = m.api_version.split_once('/').unwrap_or(("", m.api_version.as_str()));
    kube::discovery::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(group, version, &m.gk.kind))
}

/// The YAML stream of `documents`, `---` between them; masked ([`masked`] and the registered
/// values, [`crate::telemetry::mask::mask`]) unless `show_secrets`.
fn stream(documents: Vec<Document>, show_secrets: bool) -> String {
    let texts: Vec<String> = documents
        .into_iter()
        .map(|d| if show_secrets { d.body } else { masked(d.body, d.decrypted, d.own) })
        .map(|body| {
            serde_saphyr::to_string(&body).unwrap_or_else(|_| serde_json::to_string_pretty(&body).unwrap_or_default())
        })
        .map(|text| if text.ends_with('\n') { text } else { text + "\n" })
        .collect();
    let yaml = texts.join("---\n");
    match show_secrets {
        true => yaml,
        false => crate::telemetry::mask::mask(&yaml).into_owned(),
    }
}

/// `body` with its secret values as `***`: a v1 Secret's `data` and `stringData` values, and,
/// for an object built from decrypted content, every value but its identity — label and
/// annotation values included ([`crate::sync::diff::mask_decrypted`], as `gitward diff` shows
/// it) — except the labels and annotations gitward wrote itself, `own` (`(field, key)`).
pub fn masked(body: Value, decrypted: bool, own: &[(&str, &str)]) -> Value {
    let mut body = match decrypted {
        true => {
            let kept: Vec<(&str, &str, Value)> = own
                .iter()
                .filter_map(|&(field, key)| Some((field, key, body["metadata"].get(field)?.get(key)?.clone())))
                .collect();
            let mut body = crate::sync::diff::mask_decrypted(body, None);
            for (field, key, value) in kept {
                body["metadata"][field][key] = value;
            }
            body
        }
        false => body,
    };
    let is_secret = body.get("kind").and_then(Value::as_str) == Some("Secret")
        && body.get("apiVersion").and_then(Value::as_str) == Some("v1");
    if is_secret {
        for field in ["data", "stringData"] {
            for value in body.get_mut(field).and_then(Value::as_object_mut).into_iter().flat_map(|m| m.values_mut()) {
                *value = Value::String("***".into());
            }
        }
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::inventory::{DESIRED_HASH, PART_OF};
    use serde_json::json;

    #[test]
    fn secret_values_are_masked_and_other_objects_left_alone() {
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "labels": {"a": "b"}},
            "data": {"k": "aHVudGVy"}, "stringData": {"p": "hunter"}});
        let out = masked(secret, false, OBJECT_OWN);
        assert_eq!((&out["data"]["k"], &out["stringData"]["p"]), (&json!("***"), &json!("***")));
        assert_eq!(out["metadata"]["labels"]["a"], "b");
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}});
        assert_eq!(masked(cm.clone(), false, OBJECT_OWN), cm);
        assert_eq!(masked(cm, true, OBJECT_OWN)["data"]["k"], "***", "a decrypted object's values");
    }

    #[test]
    fn a_decrypted_objects_labels_and_annotations_are_masked_but_gitwards_own() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labels": {"tier": "gold-4f1c9", PART_OF: "applyset-x-v1"},
                "annotations": {"note": "hunter-4f1c9", DESIRED_HASH: "abc"}},
            "data": {"k": "v"}});
        let out = masked(cm, true, OBJECT_OWN);
        assert_eq!(out["metadata"]["labels"], json!({"tier": "***", PART_OF: "applyset-x-v1"}));
        assert_eq!(out["metadata"]["annotations"], json!({"note": "***", DESIRED_HASH: "abc"}));
        assert_eq!(out["metadata"]["name"], "c");
    }
}
