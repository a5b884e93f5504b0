//! `kustomize build` of a unit's path (sigs.k8s.io/kustomize v5, run as a child process).
//!
//! Before a build, the kustomization files are read straight from git to learn which
//! directories kustomize will read: the unit's path, and every directory its `resources`,
//! `bases`, `components`, `generators`, `transformers` and `validators` name, followed
//! recursively (`../base` or `../../org/labels` may lie outside the unit's path). Only those directories are materialized, and their git tree ids key the render
//! cache, so a commit elsewhere in the repository renders nothing. kustomize's default load
//! restrictor (`LoadRestrictionsRootOnly`) keeps every other file a kustomization reads
//! (patches, generator inputs) inside one of these directories.
//!
//! Remote resources (`https://…`, `git@…`, `github.com/org/repo//path?ref=…`) are refused
//! unless the unit sets `allow_remote_bases` (Flux's `--no-remote-bases` is the default), and
//! then each must pass [`super::remote::check`] (`https://` on a host of `[render]
//! remote_base_hosts`, a plain ref) before kustomize runs; and
//! so is a URL in any field kustomize loads a file from ([`URL_FIELDS`]: generator `files`
//! and `envs`, patch and replacement paths, `openapi.path`, `crds`, `configurations`,
//! `transformers`, `generators`, `validators`, `helmCharts` repositories): kustomize fetches
//! those over HTTP(S). These scans give clear errors early; what holds is the sandbox
//! ([`super::sandbox`]): without `allow_remote_bases` kustomize runs with no network at all,
//! whatever a kustomization names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use super::process::{self, Limits};
use super::tree::{Scratch, join, resolve};
use super::{Error, Result, Tool};
use crate::config::{Origin, RemoteBaseHosts};
use crate::source::Tree;

/// The names kustomize looks for, in its order.
pub(super) const KUSTOMIZATION_FILES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// The fields of a kustomization that name other kustomization roots or resources. A
/// `generators`, `transformers` or `validators` entry names a directory whose build yields
/// plugin configs (kustomize reads it as a kustomization root, so it may lie outside the
/// unit's path, as a base may), a file inside the root, a remote target, or is an inline
/// config (YAML text: not a reference, left out).
const REFERENCE_FIELDS: [&str; 6] = ["resources", "bases", "components", "generators", "transformers", "validators"];

/// What a build of `path` reads ([`input_dirs`]).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Inputs {
    /// The directories of the repository, outermost first, none inside another; the unit's own
    /// path is always one.
    pub dirs: Vec<String>,
    /// Whether a kustomization names something kustomize fetches over the network (a remote
    /// resource, a URL in a file-loading field); only with `allow_remote`. Such a render
    /// depends on more than the revision and is never served from the render cache.
    pub remote: bool,
    /// The `host:port` (lowercase) of every remote base the kustomizations name, each with
    /// how `[render] remote_base_hosts` allows it ([`super::remote::check`]; a URL in a
    /// file-loading field is no base and names none): the only targets the remote-bases proxy
    /// tunnels to ([`super::proxy`]). Empty without `allow_remote`.
    pub hosts: BTreeMap<String, Origin>,
}

/// The directories a build of `path` reads, and whether it reads anything remote ([`Inputs`]).
///
/// `allow_remote` is the unit's `[render] remote_base_hosts` when it sets `allow_remote_bases`.
///
/// Errors: [`Error::RemoteResource`] for a remote resource and [`Error::RemoteFile`] for a URL in a
/// file-loading field when `allow_remote` is `None`; [`Error::RemoteBaseRefused`] for a remote
/// base [`super::remote::check`] refuses;
/// [`Error::LeavesRepository`] for a local reference above the repository root. A
/// kustomization that does not parse, or a reference to nothing, is left for kustomize to
/// report in its own words.
pub(super) fn input_dirs(
    tree: &Tree<'_>,
    path: &str,
    unit: &str,
    allow_remote: Option<&RemoteBaseHosts>,
) -> Result<Inputs> {
    let mut seen = BTreeSet::new();
    let mut queue = vec![path.to_owned()];
    let mut remote = false;
    let mut hosts = BTreeMap::new();
    while let Some(dir) = queue.pop() {
        if !seen.insert(dir.clone()) {
            continue;
        }
        let Some((file, references, urls)) = references(tree, &dir) else { continue };
        if let Some((field, value)) = urls.into_iter().next() {
            if allow_remote.is_none() {
                let file = join(&dir, file);
                return Err(Error::RemoteFile { unit: unit.to_owned(), file, field, value });
            }
            remote = true;
        }
        for reference in references {
            let file = join(&dir, file);
            match resolve(&dir, &reference) {
                _ if is_remote(tree, &dir, &reference) => {
                    let Some(allowed) = allow_remote else {
                        return Err(Error::RemoteResource { unit: unit.to_owned(), file, resource: reference });
                    };
                    let base = super::remote::check(&reference, allowed).map_err(|reason| {
                        Error::RemoteBaseRefused { unit: unit.to_owned(), file, base: reference.clone(), reason }
                    })?;
                    remote = true;
                    hosts.insert(base.target, base.origin);
                }
                None => return Err(Error::LeavesRepository { unit: unit.to_owned(), file, reference }),
                Some(target) if tree.dir(&target).is_some() => queue.push(target),
                Some(_) => {}
            }
        }
    }
    Ok(Inputs { dirs: outermost(seen), remote, hosts })
}

/// The kustomization file of `dir`, the references it lists and the URLs its file-loading
/// fields name ([`urls`]); `None` when `dir` has none or it does not parse (or cannot be read:
/// the materializer then reports why).
type Read = (&'static str, Vec<String>, Vec<(String, String)>);

/// See [`Read`].
fn references(tree: &Tree<'_>, dir: &str) -> Option<Read> {
    for name in KUSTOMIZATION_FILES {
        let file = join(dir, name);
        let Some(id) = tree.blob(&file) else { continue };
        let content = tree.read(&file, id).ok()?;
        let doc: Value = serde_saphyr::from_slice(&content).ok()?;
        let list = REFERENCE_FIELDS
            .iter()
            .filter_map(|field| doc.get(field)?.as_array())
            .flatten()
            .filter_map(|v| v.as_str().filter(|text| !is_inline(text)).map(str::to_owned))
            .collect();
        return Some((name, list, urls(&doc)));
    }
    None
}

/// Whether a list entry is an inline plugin config (YAML text, several lines or a flow
/// mapping) rather than a path or URL.
fn is_inline(text: &str) -> bool {
    text.contains('\n') || text.trim_start().starts_with('{')
}

/// The fields of a kustomization kustomize loads a file from, as paths into the document:
/// `*` is every item of a list, and a `files` entry may be `key=path`. Each may name a URL,
/// which kustomize fetches over HTTP(S) (its `loader.FileLoader`).
pub(super) const URL_FIELDS: [&[&str]; 17] = [
    &["configMapGenerator", "*", "files", "*"],
    &["configMapGenerator", "*", "envs", "*"],
    &["configMapGenerator", "*", "env"],
    &["secretGenerator", "*", "files", "*"],
    &["secretGenerator", "*", "envs", "*"],
    &["secretGenerator", "*", "env"],
    &["patches", "*", "path"],
    &["patchesJson6902", "*", "path"],
    &["patchesStrategicMerge", "*"],
    &["replacements", "*", "path"],
    &["openapi", "path"],
    &["crds", "*"],
    &["configurations", "*"],
    &["transformers", "*"],
    &["generators", "*"],
    &["validators", "*"],
    &["helmCharts", "*", "repo"],
];

/// The file-loading fields of `doc` ([`URL_FIELDS`]) whose value names a URL (`scheme://`,
/// after a `key=` of a generator's `files`), each as (field path with indexes, value).
fn urls(doc: &Value) -> Vec<(String, String)> {
    fn walk(value: &Value, rest: &[&str], at: String, out: &mut Vec<(String, String)>) {
        match rest.split_first() {
            None => {
                if let Some(text) = value.as_str() {
                    let path = text.split_once('=').filter(|(key, _)| !key.contains('/')).map_or(text, |(_, p)| p);
                    // Inline patches and generators are YAML, not a path: only a single line can be one.
                    if !text.contains('\n') && path.trim().contains("://") {
                        out.push((at, text.to_owned()));
                    }
                }
            }
            Some((&"*", rest)) => {
                for (i, item) in value.as_array().into_iter().flatten().enumerate() {
                    walk(item, rest, format!("{at}[{i}]"), out);
                }
            }
            Some((field, rest)) => {
                if let Some(next) = value.get(field) {
                    let at = if at.is_empty() { (*field).to_owned() } else { format!("{at}.{field}") };
                    walk(next, rest, at, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    for path in URL_FIELDS {
        walk(doc, path, String::new(), &mut out);
    }
    out
}

/// Whether kustomize would fetch `reference` over the network: a URL, an scp-like git address,
/// a `?ref=` or `//` repository path, or a first segment that looks like a host name
/// (`github.com/…`) and is not a directory of the repository.
fn is_remote(tree: &Tree<'_>, dir: &str, reference: &str) -> bool {
    if reference.contains("://") || reference.starts_with("git@") || reference.contains("?ref=") {
        return true;
    }
    if reference.contains("//") {
        return true;
    }
    let first = reference.split('/').next().unwrap_or_default();
    first.contains('.')
        && first != "."
        && first != ".."
        && reference.contains('/')
        && resolve(dir, reference).is_none_or(|p| !tree.contains(&p))
}

/// Keeps only directories not inside another of the set.
fn outermost(dirs: BTreeSet<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for dir in dirs {
        let inside = out.iter().any(|o| o.is_empty() || dir == *o || dir.starts_with(&format!("{o}/")));
        if !inside {
            out.push(dir);
        }
    }
    out
}

/// What a build that fetches remote bases is given.
#[derive(Debug, Clone, Copy)]
pub(super) struct Remote<'a> {
    /// The proxy's targets ([`Inputs::hosts`]).
    pub targets: &'a BTreeMap<String, Origin>,
    /// `[render] remote_base_ca_file`: git's trust store instead of the system's.
    pub ca_file: Option<&'a Path>,
}

/// Runs `kustomize build` on the materialized `path`; returns the YAML stream. With
/// `remote` (the unit allows remote bases), kustomize and the `git` it runs reach the targets
/// through the remote-bases proxy and nothing else ([`process::Grants::proxy`]).
pub(super) fn build(
    tool: &Tool,
    scratch: &Scratch,
    path: &str,
    remote: Option<Remote<'_>>,
    limits: Limits,
) -> std::result::Result<Vec<u8>, process::RunError> {
    let (home, tmp) = (scratch.home(), scratch.tmp());
    let mut env: Vec<(&str, &Path)> = vec![("HOME", &home), ("TMPDIR", &tmp)];
    let mut grants = process::Grants::scratch(scratch.path(), &tool.path);
    if let Some(remote) = remote {
        env.extend(GIT_ENV.iter().map(|(k, v)| (*k, Path::new(v))));
        if let Some(ca) = remote.ca_file {
            env.push(("GIT_SSL_CAINFO", ca));
            grants.read.push(ca.to_owned());
        }
        grants.proxy = Some(remote.targets.clone());
    }
    let mut cmd = process::command(&tool.path, scratch.path(), &env);
    cmd.arg("build").arg(scratch.repo_path(path));
    process::run(cmd, limits, &grants)
}

/// The environment of a kustomize that fetches remote bases, for the `git` it runs: `git` on
/// `PATH`, no system config (`/etc/gitconfig` is not readable in the sandbox), `https` the only
/// transport git may use for anything (a submodule's `file://`, `ext::` or `ssh://` URL is
/// refused by git itself, `GIT_ALLOW_PROTOCOL`), no prompt for credentials, and an identity for
/// the reflog so that git does not look the user up.
const GIT_ENV: [(&str, &str); 6] = [
    ("PATH", "/usr/local/bin:/usr/bin:/bin"),
    ("GIT_CONFIG_NOSYSTEM", "1"),
    ("GIT_ALLOW_PROTOCOL", "https"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("GIT_COMMITTER_NAME", "gitward"),
    ("GIT_COMMITTER_EMAIL", "gitward@localhost"),
];

/// Whether `path` holds a kustomization file.
pub(super) fn is_kustomization_dir(tree: &Tree<'_>, path: &str) -> bool {
    KUSTOMIZATION_FILES.iter().any(|name| tree.blob(&join(path, name)).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::source::{Source, SourceSpec};

    /// The input directories of `path` in a repository whose one commit holds `files` (path,
    /// content), committed with the git CLI and read through a mirror, as a sync reads it.
    fn inputs(files: &[(&str, &str)], path: &str, allow_remote: bool) -> Result<Inputs> {
        let hosts = RemoteBaseHosts::parse(["example.com", "github.com", "git.example.org:8443"]).unwrap();
        let (repo, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        for (file, content) in files {
            let full = repo.path().join(file);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(full, content).unwrap();
        }
        let git = |args: &[&str]| {
            let status = std::process::Command::new("git").arg("-C").arg(repo.path()).args(args).status().unwrap();
            assert!(status.success(), "git {args:?}");
        };
        git(&["init", "-q", "-b", "main"]);
        git(&["add", "."]);
        git(&["-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "files"]);
        let spec = SourceSpec {
            unit: "u".into(),
            repo: repo.path().display().to_string(),
            reference: "main".into(),
            path: Default::default(),
            credentials: Default::default(),
            max_file_bytes: 1 << 20,
            verify: None,
        };
        let mut source = Source::open(state.path(), spec).unwrap();
        let revision = source.fetch().unwrap();
        input_dirs(&source.tree(&revision).unwrap(), path, "u", allow_remote.then_some(&hosts))
    }

    /// The input directories of `path` (see [`inputs`]).
    fn dirs(files: &[(&str, &str)], path: &str, allow_remote: bool) -> Result<Vec<String>> {
        inputs(files, path, allow_remote).map(|i| i.dirs)
    }

    #[test]
    fn bases_and_components_outside_the_path_are_followed() {
        let files = [
            ("apps/prod/kustomization.yaml", "resources: [../base, cm.yaml]\ncomponents: [../../components/x]\n"),
            ("apps/prod/cm.yaml", "kind: ConfigMap\n"),
            ("apps/base/kustomization.yaml", "resources: [nested]\n"),
            ("apps/base/nested/kustomization.yaml", "resources: []\n"),
            ("components/x/kustomization.yaml", "kind: Component\n"),
            ("elsewhere/a.yaml", "kind: ConfigMap\n"),
        ];
        let read = inputs(&files, "apps/prod", true).unwrap();
        assert_eq!(read.dirs, ["apps/base", "apps/prod", "components/x"]);
        assert!(!read.remote, "nothing remote");
    }

    #[test]
    fn generators_transformers_and_validators_outside_the_path_are_followed_and_inline_ones_skipped() {
        let prod = "resources: [cm.yaml]\ngenerators: [../../org/gen]\ntransformers:\n- ../../org/labels\n- |\n  \
                    apiVersion: builtin\n  kind: LabelTransformer\n  metadata: {name: x, annotations: {a: \"https://x\"}}\n\
                    validators: [../../org/check]\n";
        let files = [
            ("apps/prod/kustomization.yaml", prod),
            ("org/gen/kustomization.yaml", "resources: [gen.yaml]\n"),
            ("org/labels/kustomization.yaml", "resources: [labels.yaml]\n"),
            ("org/check/kustomization.yaml", "resources: []\n"),
        ];
        let read = inputs(&files, "apps/prod", false).unwrap();
        assert_eq!(
            read,
            Inputs {
                dirs: ["apps/prod", "org/check", "org/gen", "org/labels"].map(String::from).into(),
                remote: false,
                hosts: BTreeMap::new(),
            }
        );
        let remote = [("app/kustomization.yaml", "transformers: [github.com/org/repo//labels?ref=v1]\n")];
        let err = dirs(&remote, "app", false).unwrap_err();
        assert!(matches!(&err, Error::RemoteResource { resource, .. } if resource.starts_with("github.com/")), "{err}");
        let err = dirs(&[("app/kustomization.yaml", "generators: [../../../up]\n")], "app", false).unwrap_err();
        assert!(matches!(err, Error::LeavesRepository { .. }), "{err}");
    }

    #[test]
    fn remote_resources_are_refused_unless_allowed_and_name_the_hosts_the_proxy_reaches() {
        let cases = [
            ("https://example.com/base.yaml", Some("example.com:443")),
            ("https://github.com/org/repo//base?ref=v1", Some("github.com:443")),
            ("git@github.com:o/r.git", None),
            ("git::https://Git.Example.org:8443/o/r//b?ref=x", Some("git.example.org:8443")),
            ("file:///srv/state/mirrors/m//app?ref=main", None),
            ("https://github.com/o/r//b?ref=--upload-pack=sh", None),
        ];
        for (remote, host) in cases {
            let files = [("app/kustomization.yaml", format!("resources: [\"{remote}\"]\n"))];
            let files: Vec<(&str, &str)> = files.iter().map(|(p, c)| (*p, c.as_str())).collect();
            let err = dirs(&files, "app", false).unwrap_err();
            assert!(matches!(&err, Error::RemoteResource { resource, .. } if resource == remote), "{err}");
            match host {
                Some(host) => {
                    let hosts = BTreeMap::from([(host.to_owned(), Origin::Ordinary)]);
                    let read = inputs(&files, "app", true).unwrap();
                    assert_eq!(read, Inputs { dirs: vec!["app".into()], remote: true, hosts });
                }
                None => {
                    let err = inputs(&files, "app", true).unwrap_err();
                    assert!(matches!(&err, Error::RemoteBaseRefused { base, .. } if base == remote), "{err}");
                }
            }
        }
    }

    #[test]
    fn a_url_in_a_field_kustomize_loads_files_from_is_refused_unless_allowed() {
        let text = "configMapGenerator:\n- name: c\n  literals: [url=https://example.com]\n  files: [a.txt, c=http://127.0.0.1:8080/creds]\n\
                    patches:\n- path: https://example.com/p.yaml\n";
        let err = dirs(&[("app/kustomization.yaml", text)], "app", false).unwrap_err();
        let Error::RemoteFile { file, field, value, .. } = &err else { panic!("{err}") };
        assert_eq!((file.as_str(), field.as_str()), ("app/kustomization.yaml", "configMapGenerator[0].files[1]"));
        assert_eq!(value, "c=http://127.0.0.1:8080/creds");
        let allowed = inputs(&[("app/kustomization.yaml", text)], "app", true).unwrap();
        assert_eq!(allowed, Inputs { dirs: vec!["app".into()], remote: true, hosts: BTreeMap::new() });
        let doc: Value = serde_saphyr::from_str(text).unwrap();
        let fields: Vec<String> = urls(&doc).into_iter().map(|(f, _)| f).collect();
        assert_eq!(fields, ["configMapGenerator[0].files[1]", "patches[0].path"], "a literal is not a file");
    }

    #[test]
    fn a_reference_above_the_repository_root_is_refused() {
        let err = dirs(&[("app/kustomization.yaml", "resources: [../../outside]\n")], "app", false).unwrap_err();
        assert!(matches!(err, Error::LeavesRepository { .. }), "{err}");
    }

    #[test]
    fn nested_directories_collapse_into_the_outermost() {
        let dirs: BTreeSet<String> = ["apps/base", "apps/base/x", "apps/prod", "components/a"].map(String::from).into();
        assert_eq!(outermost(dirs), ["apps/base", "apps/prod", "components/a"]);
        let with_root: BTreeSet<String> = ["", "a"].map(String::from).into();
        assert_eq!(outermost(with_root), [""]);
    }
}
