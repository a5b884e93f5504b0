//! `helm template` of the chart at a unit's path (Helm v3.19+ or v4, run as a child process).
//!
//! The chart is rendered as `helm install` would render it against this cluster: gitward
//! passes `--kube-version` and `--api-versions` from discovery ([`Capabilities`], read by the
//! cluster module), so a chart
//! that checks `kubeVersion` or `.Capabilities.APIVersions.Has` takes the branch it would take
//! there (a bare `helm template` assumes Kubernetes v1.20 and only built-in versions). Without
//! a cluster (`gitward validate`) it passes `[render] kube_version` (default the newest
//! Kubernetes the pinned Helm knows) and `api_versions`.
//! `--include-crds` renders the chart's `crds/`. Dependencies are vendored in `charts/`, or
//! fetched from their https/http/oci repository and added there (`source::chart::deps`).
//! Objects annotated `helm.sh/hook: test…` are skipped; other hooks (`pre-install`,
//! `post-upgrade`, …) are moved to [`Loaded::hooks`] with their annotations read ([`Hook`]):
//! the sync runs them as phases around the unit's own objects, as `helm upgrade` does
//! (<https://helm.sh/docs/topics/charts_hooks/>).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::Tool;
use super::process::{self, Limits};
use super::tree::Scratch;
use crate::config::HelmOptions;
use crate::manifest::{Loaded, Manifest, Skipped};

/// What the cluster serves, as Helm's `.Capabilities` sees it: read from discovery by the engine,
/// or from `[render]` without a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Capabilities {
    /// The API server's `gitVersion` (`v1.35.4`), for `--kube-version`.
    pub kube_version: String,
    /// Every served `group/version` and `group/version/Kind` (`v1`, `v1/Pod`, `apps/v1`,
    /// `apps/v1/Deployment`), sorted, for `--api-versions`.
    pub api_versions: Vec<String>,
}

/// Runs `helm template` on the chart at `chart`: a directory materialized in the scratch
/// directory, or a chart archive (`.tgz`) from a chart repository.
///
/// `values_files` are scratch paths, in order; `inline` (the unit's `[sync.helm.values]`)
/// goes last so it wins. `capabilities` are the cluster's, or without a cluster (`gitward
/// validate`) the config's `[render] kube_version` and `api_versions`.
#[allow(clippy::too_many_arguments)]
pub(super) fn template(
    tool: &Tool,
    scratch: &Scratch,
    chart: &Path,
    release: &str,
    namespace: &str,
    options: &HelmOptions,
    capabilities: &Capabilities,
    limits: Limits,
) -> std::result::Result<Vec<u8>, process::RunError> {
    let (home, tmp) = (scratch.home(), scratch.tmp());
    let (cache, config, data) = (home.join("cache"), home.join("config"), home.join("data"));
    let env: Vec<(&str, &Path)> = vec![
        ("HOME", &home),
        ("TMPDIR", &tmp),
        ("HELM_CACHE_HOME", &cache),
        ("HELM_CONFIG_HOME", &config),
        ("HELM_DATA_HOME", &data),
    ];
    let mut cmd = process::command(&tool.path, scratch.path(), &env);
    cmd.args(["template", release]).arg(chart);
    cmd.args(["--namespace", namespace, "--include-crds"]);
    for file in &options.values_files {
        cmd.arg("--values").arg(scratch.repo_path(file));
    }
    if !options.values.is_empty() {
        let inline: PathBuf = scratch.tmp().join("inline-values.json");
        let text = serde_json::to_vec(&Value::Object(options.values.clone())).unwrap_or_default();
        std::fs::write(&inline, text).map_err(process::RunError::Spawn)?;
        cmd.arg("--values").arg(inline);
    }
    cmd.args(["--kube-version", &capabilities.kube_version]);
    if !capabilities.api_versions.is_empty() {
        cmd.arg("--api-versions").arg(capabilities.api_versions.join(","));
    }
    let mut grants = process::Grants::scratch(scratch.path(), &tool.path);
    if !chart.starts_with(scratch.path()) {
        // A fetched chart archive, read where the download cache keeps it.
        grants.read.push(chart.to_owned());
    }
    process::run(cmd, limits, &grants)
}

/// The chart dependencies Helm found missing from `charts/` (`mylib, common`), from its message
/// `… found in Chart.yaml, but missing in charts/ directory: mylib, common`; `None` for any other
/// failure.
pub(super) fn missing_dependencies(message: &str) -> Option<String> {
    let (_, names) = message.split_once("missing in charts/ directory: ")?;
    Some(names.lines().next().unwrap_or("").trim().to_owned())
}

/// The `helm.sh/hook` annotation.
const HOOK: &str = "helm.sh/hook";

/// Moves objects whose `helm.sh/hook` names a test hook (`test`, `test-success`,
/// `test-failure`) from the manifests to the skipped list.
fn skip_test_hooks(loaded: &mut Loaded) {
    let (tests, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut loaded.manifests).into_iter().partition(|m| {
        m.body
            .pointer("/metadata/annotations")
            .as_ref()
            .and_then(|a| a.get(HOOK))
            .and_then(Value::as_str)
            .is_some_and(|hooks| hooks.split(',').any(|h| h.trim().starts_with("test")))
    });
    loaded.manifests = keep;
    for m in tests {
        loaded.skipped.push(Skipped {
            file: m.file.to_string(),
            index: Some(m.index),
            reason: format!("{} {}: Helm test hook, not applied", m.gk.kind, m.name),
        });
    }
}

/// `helm.sh/hook-weight`: hooks of one event run in ascending weight, then name.
const HOOK_WEIGHT: &str = "helm.sh/hook-weight";
/// `helm.sh/hook-delete-policy`: when a hook's object is deleted.
const HOOK_DELETE_POLICY: &str = "helm.sh/hook-delete-policy";

/// When a hook runs: the `helm.sh/hook` events gitward can meet. Only the install and
/// upgrade ones run; gitward has no delete or rollback of a release to hook into, so a hook
/// naming only those never runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HookEvent {
    /// `pre-install`: before the objects of the unit's first sync.
    PreInstall,
    /// `post-install`: after the objects of the unit's first sync are healthy.
    PostInstall,
    /// `pre-upgrade`: before the objects of a new revision, once the unit has members.
    PreUpgrade,
    /// `post-upgrade`: after the objects of a new revision are healthy.
    PostUpgrade,
    /// `pre-delete`, `post-delete`, `pre-rollback`, `post-rollback`: never run.
    Other,
}

impl HookEvent {
    /// Helm's name for it; `other` for the events gitward never runs.
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::PreInstall => "pre-install",
            HookEvent::PostInstall => "post-install",
            HookEvent::PreUpgrade => "pre-upgrade",
            HookEvent::PostUpgrade => "post-upgrade",
            HookEvent::Other => "other",
        }
    }
}

impl std::fmt::Display for HookEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A Helm hook's annotations, read (<https://helm.sh/docs/topics/charts_hooks/>).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    /// The events of `helm.sh/hook` (comma-separated).
    pub events: Vec<HookEvent>,
    /// `helm.sh/hook-weight`, an integer in a string; default 0.
    pub weight: i64,
    /// `helm.sh/hook-delete-policy` has `before-hook-creation`, or names no policy (Helm's
    /// default): the previous instance is deleted before the hook is created again.
    pub before_hook_creation: bool,
    /// `hook-succeeded`: deleted once it succeeded.
    pub delete_succeeded: bool,
    /// `hook-failed`: deleted once it failed.
    pub delete_failed: bool,
}

impl Hook {
    /// Reads the hook annotations of `m`; `None` when it has no `helm.sh/hook`.
    ///
    /// Errors: [`Error::HookAnnotation`](super::Error::HookAnnotation) naming the file,
    /// document and annotation, for an event, weight or delete policy Helm does not know.
    pub fn of(m: &Manifest) -> Result<Option<Hook>, super::Error> {
        let annotations = m.body.pointer("/metadata/annotations");
        let get = |key: &str| annotations.as_ref().and_then(|a| a.get(key)).and_then(Value::as_str).map(str::to_owned);
        let Some(events) = get(HOOK) else { return Ok(None) };
        let bad = |annotation: &'static str, message: String| super::Error::HookAnnotation {
            origin: crate::manifest::Origin { file: m.file.clone(), index: m.index }.to_string(),
            annotation,
            message,
        };
        let events = items(&events)
            .map(|e| match e {
                "pre-install" => Ok(HookEvent::PreInstall),
                "post-install" => Ok(HookEvent::PostInstall),
                "pre-upgrade" => Ok(HookEvent::PreUpgrade),
                "post-upgrade" => Ok(HookEvent::PostUpgrade),
                "pre-delete" | "post-delete" | "pre-rollback" | "post-rollback" => Ok(HookEvent::Other),
                other => Err(bad(
                    HOOK,
                    format!(
                        "unknown hook event {other:?}; Helm knows pre-install, post-install, pre-upgrade, post-upgrade, \
                         pre-delete, post-delete, pre-rollback, post-rollback, test"
                    ),
                )),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let weight = match get(HOOK_WEIGHT) {
            None => 0,
            Some(w) => w.trim().parse().map_err(|_| bad(HOOK_WEIGHT, format!("{w:?} is not an integer")))?,
        };
        let mut hook =
            Hook { events, weight, before_hook_creation: false, delete_succeeded: false, delete_failed: false };
        let policies = get(HOOK_DELETE_POLICY).unwrap_or_default();
        for policy in items(&policies) {
            match policy {
                "before-hook-creation" => hook.before_hook_creation = true,
                "hook-succeeded" => hook.delete_succeeded = true,
                "hook-failed" => hook.delete_failed = true,
                other => {
                    return Err(bad(
                        HOOK_DELETE_POLICY,
                        format!(
                            "unknown delete policy {other:?}; Helm knows before-hook-creation, hook-succeeded, hook-failed"
                        ),
                    ));
                }
            }
        }
        if items(&policies).next().is_none() {
            hook.before_hook_creation = true;
        }
        Ok(Some(hook))
    }
}

/// The non-empty, trimmed items of a comma-separated annotation.
fn items(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').map(str::trim).filter(|s| !s.is_empty())
}

/// Moves the hooks that are not tests from the manifests to [`Loaded::hooks`], checking their
/// annotations ([`Hook::of`]); run after [`skip_test_hooks`].
///
/// Errors: as [`Hook::of`].
fn split_hooks(loaded: &mut Loaded) -> Result<(), super::Error> {
    let mut keep = Vec::with_capacity(loaded.manifests.len());
    for m in std::mem::take(&mut loaded.manifests) {
        match Hook::of(&m)? {
            Some(_) => loaded.hooks.push(m),
            None => keep.push(m),
        }
    }
    loaded.manifests = keep;
    Ok(())
}

/// Sorts the objects of one `helm template` output as Helm's install sorts a release, for
/// every chart source alike (a chart in git, an archive from an HTTP chart repository or an
/// OCI registry, and the dependencies an umbrella chart renders with it): test hooks skipped
/// ([`skip_test_hooks`]), other hooks moved to [`Loaded::hooks`] ([`split_hooks`]), the rest
/// left as the release's members.
///
/// Errors: as [`Hook::of`].
pub(super) fn sort_release(loaded: &mut Loaded) -> Result<(), super::Error> {
    skip_test_hooks(loaded);
    split_hooks(loaded)
}

/// The release name: `[sync.helm] release`, else the unit's name.
pub(super) fn release<'a>(options: &'a HelmOptions, unit: &'a str) -> &'a str {
    options.release.as_deref().unwrap_or(unit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::parse_file;

    #[test]
    fn missing_dependencies_are_read_from_helms_message() {
        let message = "Error: An error occurred while checking for chart dependencies. You may need to run `helm \
                       dependency build` to fetch missing dependencies: found in Chart.yaml, but missing in charts/ \
                       directory: mylib, common\n";
        assert_eq!(missing_dependencies(message).as_deref(), Some("mylib, common"));
        assert_eq!(missing_dependencies("Error: parse error at (x/templates/a.yaml:3)"), None);
    }

    #[test]
    fn test_hooks_are_skipped_and_other_hooks_kept() {
        let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: t, annotations: {helm.sh/hook: test}}\n---\n\
                    apiVersion: batch/v1\nkind: Job\nmetadata: {name: j, annotations: {helm.sh/hook: \"pre-install,post-upgrade\"}}\n---\n\
                    apiVersion: v1\nkind: Pod\nmetadata: {name: s, annotations: {helm.sh/hook: \"test-success\"}}\n";
        let mut loaded = parse_file("chart (helm template)", text.as_bytes()).unwrap();
        skip_test_hooks(&mut loaded);
        let kept: Vec<_> = loaded.manifests.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(kept, ["j"]);
        assert_eq!(loaded.skipped.len(), 2);
    }

    #[test]
    fn hooks_are_moved_out_of_the_manifests_with_their_annotations_read() {
        let text = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j, annotations: {helm.sh/hook: \"pre-install, post-upgrade\", \
                    helm.sh/hook-weight: \"-5\", helm.sh/hook-delete-policy: hook-succeeded}}\n---\n\
                    apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, annotations: {helm.sh/hook: pre-delete}}\n---\n\
                    apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain}\n";
        let mut loaded = parse_file("chart (helm template)", text.as_bytes()).unwrap();
        split_hooks(&mut loaded).unwrap();
        assert_eq!(loaded.manifests.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(), ["plain"]);
        let job = Hook::of(&loaded.hooks[0]).unwrap().unwrap();
        assert_eq!(job.events, [HookEvent::PreInstall, HookEvent::PostUpgrade]);
        assert_eq!((job.weight, job.before_hook_creation, job.delete_succeeded), (-5, false, true));
        let other = Hook::of(&loaded.hooks[1]).unwrap().unwrap();
        assert_eq!(
            (other.events.as_slice(), other.weight, other.before_hook_creation),
            ([HookEvent::Other].as_slice(), 0, true)
        );
    }

    #[test]
    fn a_hook_annotation_helm_does_not_know_names_the_document() {
        for (annotations, expected) in [
            ("{helm.sh/hook: pre-instal}", "annotation helm.sh/hook: unknown hook event \"pre-instal\""),
            (
                "{helm.sh/hook: pre-install, helm.sh/hook-weight: high}",
                "helm.sh/hook-weight: \"high\" is not an integer",
            ),
            ("{helm.sh/hook: pre-install, helm.sh/hook-delete-policy: always}", "unknown delete policy \"always\""),
        ] {
            let text = format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c, annotations: {annotations}}}\n");
            let mut loaded = parse_file("chart (helm template)", text.as_bytes()).unwrap();
            let e = split_hooks(&mut loaded).unwrap_err().to_string();
            assert!(e.starts_with("chart (helm template) (document 1): "), "{e}");
            assert!(e.contains(expected), "{e}");
        }
    }
}
