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
//! fetched from their https/http/oci repository and added there (`source::chart::deps`). Objects annotated `helm.sh/hook: test…` are skipped; other hooks
//! (`pre-install`, `post-upgrade`, …) are applied as ordinary objects, since gitward has no
//! release lifecycle to hook into.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::Tool;
use super::process::{self, Limits};
use super::tree::Scratch;
use crate::config::HelmOptions;
use crate::manifest::{Loaded, Skipped};

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
    process::run(cmd, limits)
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
pub(super) fn skip_test_hooks(loaded: &mut Loaded) {
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
}
