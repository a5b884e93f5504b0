//! Flux's sources: `GitRepository`, `OCIRepository`, `HelmRepository`, `HelmChart` and the
//! `ExternalArtifact`s of an `ArtifactGenerator`, each read once (its warnings said once)
//! into what the units that name it take.

use std::collections::BTreeMap;

use super::super::Object;
use super::super::fields::{Fields, Notes};
use super::super::output::{Interval, Output};

/// `(kind, namespace, name)` of a source.
pub(super) type Key = (String, String, String);

/// What a unit takes from its source.
#[derive(Debug, Clone, Default)]
pub(super) struct Source {
    /// `GitRepository` `spec.url`, or `OCIRepository` `spec.url` with its tag or digest: `repo`.
    pub repo: Option<String>,
    /// `GitRepository` `spec.ref`: `ref`.
    pub reference: Option<String>,
    /// `spec.verify`: a `[sync.verify]` key and the file it names.
    pub verify: Option<(String, String)>,
    /// `HelmRepository` `spec.url`, or an `OCIRepository`'s URL but its last component:
    /// `[sync.helm] repo_url`.
    pub chart_repo: Option<String>,
    /// An `OCIRepository`'s last URL component, or a `HelmChart`'s `spec.chart`: `chart`.
    pub chart: Option<String>,
    /// An `OCIRepository`'s `spec.ref.semver` or tag, or a `HelmChart`'s `spec.version`.
    pub version: Option<String>,
    /// An `ExternalArtifact`'s copies: (path in the artifact, path in the repository).
    pub copies: Vec<(String, String)>,
    /// Why the source cannot be a unit's `repo`, when it cannot.
    pub unusable: Option<String>,
    /// A `HelmChart`'s `spec.valuesFiles`, when its source is a git repository.
    pub values_files: Vec<String>,
}

impl Source {
    /// `path` in the artifact as a repository path: the copy whose target holds it, longest
    /// first; `path` itself with no copies; `None` when no copy holds it.
    pub fn repository_path(&self, path: &str) -> Option<String> {
        if self.copies.is_empty() {
            return Some(path.to_owned());
        }
        let mut copies: Vec<&(String, String)> = self.copies.iter().collect();
        copies.sort_by_key(|(to, _)| std::cmp::Reverse(to.len()));
        copies.into_iter().find_map(|(to, from)| {
            let rest = match (to.is_empty(), path == to.as_str()) {
                (true, _) => path,
                (false, true) => "",
                (false, false) => path.strip_prefix(to.as_str())?.strip_prefix('/')?,
            };
            Some(join(from, rest))
        })
    }
}

/// `a/b` of two relative paths, either of which may be empty.
pub(super) fn join(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_owned(),
        (_, true) => a.to_owned(),
        _ => format!("{a}/{b}"),
    }
}

/// A Flux path (`./apps/staging`, `.`, `/x/`) as a repository path (`apps/staging`, ``).
pub(super) fn clean_path(path: &str) -> String {
    super::super::repo_path(path)
}

/// Every source among `objects` but the artifacts of an `ArtifactGenerator`, by key.
pub(super) fn index(objects: &[Object], out: &mut Output, notes: &mut Notes) -> BTreeMap<Key, Source> {
    let mut sources = BTreeMap::new();
    for object in objects.iter().filter(|o| o.group().starts_with("source.toolkit.fluxcd.io")) {
        let read = match object.kind.as_str() {
            "GitRepository" => git_repository(object, out, notes),
            "OCIRepository" => oci_repository(object, out, notes),
            "HelmRepository" => helm_repository(object, out, notes),
            "HelmChart" => continue,
            _ => {
                notes.warn(&object.id(), "", "no equivalent: gitward's units name their sources themselves");
                continue;
            }
        };
        sources.insert(key(&object.kind, &object.namespace, &object.name), read);
    }
    for object in objects.iter().filter(|o| o.is("source.toolkit.fluxcd.io", "HelmChart")) {
        let read = helm_chart(object, &sources, out, notes);
        sources.insert(key(&object.kind, &object.namespace, &object.name), read);
    }
    sources
}

/// A source's key.
pub(super) fn key(kind: &str, namespace: &str, name: &str) -> Key {
    (kind.to_owned(), namespace.to_owned(), name.to_owned())
}

/// The key a `sourceRef` (`kind`, `name`, `namespace`) names; the namespace defaults to the
/// referring object's. The walk of the reference ends here.
pub(super) fn reference(mut fields: Fields, namespace: &str, notes: &mut Notes) -> Key {
    let kind = fields.string("kind").unwrap_or_default();
    let name = fields.string("name").unwrap_or_default();
    let ns = fields.string("namespace").unwrap_or_else(|| namespace.to_owned());
    fields.warn_if_set("apiVersion", "no equivalent", notes);
    fields.finish(notes);
    (kind, ns, name)
}

/// Notes `spec.interval` as the poll interval, and warns of `spec.suspend` and the fields
/// every source has.
fn common(spec: &mut Fields, out: &mut Output, notes: &mut Notes) {
    if let Some(interval) = spec.string("interval") {
        out.interval(Interval::Poll, &interval, spec.object());
    }
    let credentials = "gitward reads credentials from files, never from Secrets: write the Secret's token, \
                       password or key to a file and name it in [sync.git] (token_file, ssh_key_file, \
                       known_hosts_file) or [sync.helm] (username, password_file, ca_file)";
    spec.warn_if_set("secretRef", credentials, notes);
    spec.warn_if_set("certSecretRef", credentials, notes);
    spec.warn_if_set("suspend", "no equivalent: suspend its units (suspend = true) instead", notes);
}

/// `spec.verify` (`provider`, `secretRef`, `mode`): the file of `[sync.verify]` `key` that
/// the Secret's keys are to be written to, with a warning saying so.
fn verify(spec: &mut Fields, key: &str, extension: &str, notes: &mut Notes) -> Option<(String, String)> {
    let mut verify = spec.child("verify")?;
    let secret = verify.child("secretRef").and_then(|mut s| {
        let name = s.string("name");
        s.finish(notes);
        name
    });
    verify.string("provider");
    verify.warn_if_set("mode", "gitward verifies the commit, or the annotated tag its ref names", notes);
    let object = verify.object().to_owned();
    let path = verify.path("secretRef");
    verify.finish(notes);
    let file = format!("keys/{}.{extension}", secret.as_deref().unwrap_or("verify"));
    let message = format!(
        "[sync.verify] {key} = \"{file}\": gitward reads the keys from a file: write the public keys of the \
         Secret there"
    );
    notes.warn(&object, &path, message);
    Some((key.to_owned(), file))
}

fn git_repository(object: &Object, out: &mut Output, notes: &mut Notes) -> Source {
    let mut spec = Fields::spec(object);
    let mut source = Source { repo: spec.string("url"), ..Source::default() };
    common(&mut spec, out, notes);
    if let Some(mut reference) = spec.child("ref") {
        let (commit, name, semver) = (reference.string("commit"), reference.string("name"), reference.path("semver"));
        let semver_set = reference.take("semver").is_some();
        let (tag, branch) = (reference.string("tag"), reference.string("branch"));
        if semver_set && commit.is_none() && name.is_none() {
            notes.warn(object.id().as_str(), &semver, "no equivalent: gitward follows one branch, tag or commit");
        }
        source.reference = commit.or(name).or(tag).or(branch);
        reference.finish(notes);
    }
    // Flux's default branch.
    source.reference.get_or_insert_with(|| "master".to_owned());
    source.verify = verify(&mut spec, "openpgp_keys_file", "asc", notes);
    spec.finish(notes);
    source
}

fn oci_repository(object: &Object, out: &mut Output, notes: &mut Notes) -> Source {
    let mut spec = Fields::spec(object);
    let url = spec.string("url").unwrap_or_default();
    common(&mut spec, out, notes);
    let mut source = Source::default();
    let (mut tag, mut digest, mut semver) = (None, None, None);
    if let Some(mut reference) = spec.child("ref") {
        (tag, digest, semver) = (reference.string("tag"), reference.string("digest"), reference.string("semver"));
        reference.finish(notes);
    }
    source.repo = match (&digest, &tag) {
        (Some(digest), _) => Some(format!("{url}@{digest}")),
        (None, Some(tag)) => Some(format!("{url}:{tag}")),
        (None, None) => None,
    };
    if source.repo.is_none() {
        source.unusable = Some("an OCIRepository followed by semver: gitward's OCI units name a tag or digest".into());
    }
    if let Some((parent, chart)) = url.rsplit_once('/') {
        (source.chart_repo, source.chart) = (Some(parent.to_owned()), Some(chart.to_owned()));
    }
    // A chart's version: the constraint, else the tag (a digest names no version).
    source.version = semver.or(tag);
    source.verify = verify(&mut spec, "cosign_public_key_file", "pub", notes);
    spec.warn_if_set("layerSelector", "no equivalent: gitward takes the artifact's one layer, or the chart", notes);
    spec.finish(notes);
    source
}

fn helm_repository(object: &Object, out: &mut Output, notes: &mut Notes) -> Source {
    let mut spec = Fields::spec(object);
    let url = spec.string("url");
    let kind = spec.string("type");
    common(&mut spec, out, notes);
    spec.finish(notes);
    let chart_repo = match (url, kind.as_deref()) {
        (Some(url), Some("oci")) if !url.starts_with("oci://") => Some(format!("oci://{url}")),
        (url, _) => url,
    };
    let unusable = Some("a HelmRepository is a chart repository: only a HelmRelease can name it".into());
    Source { chart_repo, unusable, ..Source::default() }
}

fn helm_chart(object: &Object, sources: &BTreeMap<Key, Source>, out: &mut Output, notes: &mut Notes) -> Source {
    let mut spec = Fields::spec(object);
    let chart = spec.string("chart");
    let version = spec.string("version");
    let values_files: Vec<String> =
        spec.take("valuesFiles").and_then(|v| serde_json::from_value(v).ok()).unwrap_or_default();
    let target = spec.child("sourceRef").map(|r| reference(r, &object.namespace, notes));
    common(&mut spec, out, notes);
    spec.warn_if_set("reconcileStrategy", "no equivalent: gitward reads the chart at each revision", notes);
    let verify = verify(&mut spec, "cosign_public_key_file", "pub", notes);
    spec.finish(notes);
    let Some(found) = target.as_ref().and_then(|k| sources.get(k)) else {
        let named = target.map(|(k, ns, n)| format!("{k} {ns}/{n}")).unwrap_or_default();
        notes.warn(&object.id(), "spec.sourceRef", format!("{named} was not among the objects read"));
        return Source::default();
    };
    let mut source = found.clone();
    if source.chart_repo.is_some() && source.repo.is_none() || target.as_ref().is_some_and(|k| k.0 == "HelmRepository")
    {
        (source.chart, source.version) = (chart, version);
        if !values_files.is_empty() {
            let message = "no equivalent: values files inside a chart from a chart repository";
            notes.warn(&object.id(), "spec.valuesFiles", message);
        }
    } else {
        // A chart in a git repository: its path, and values files from the same repository.
        source.chart = chart.map(|c| clean_path(&c));
        source.values_files = values_files.iter().map(|f| clean_path(f)).collect();
        source.chart_repo = None;
    }
    source.verify = verify.or(source.verify);
    source
}
