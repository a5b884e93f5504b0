//! `[render]`: the render tools and their limits, and the chart repositories gitward may
//! fetch from ([`super::allow`]).

use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;

use toml::Spanned;

use super::allow::ChartRepositories;
use super::remote::{RemoteBaseHosts, RemoteBases};
use super::resolve::Resolver;
use super::{Result, SyncUnit};

/// The render tools and their limits (`[render]`, optional), which the render step reads.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderTools {
    /// The `kustomize` binary (v5). Default `None`: `kustomize` found on `PATH` when a unit
    /// renders with it.
    pub kustomize: Option<PathBuf>,
    /// The `helm` binary (v3.19+ or v4). Default `None`: `helm` on `PATH`.
    pub helm: Option<PathBuf>,
    /// The `sops` binary (v3), used for `[sync.decryption]`. Default `None`: `sops` on `PATH`.
    pub sops: Option<PathBuf>,
    /// How long one run of a tool may take before it is killed and the revision refused.
    /// Default 60 s: a real overlay or chart renders in well under a second; a template
    /// looping over a huge range must not hold the unit forever.
    pub timeout: Duration,
    /// The most bytes one render may write to stdout; more kills the tool and refuses the
    /// revision. Default 64 MiB: far above real charts (etcd's 1.5 MiB per object bounds
    /// what is useful), low enough that a runaway template cannot exhaust memory.
    pub max_output_bytes: u64,
    /// The most bytes of files one render may write into its scratch directory (the unit's
    /// path and every file it references, vendored charts included); more refuses the
    /// revision naming the file that crossed it, before any tool runs. Default 32 MiB: the
    /// in-cluster manifests give `/tmp` a 64 MiB memory `emptyDir`, and a tree that filled it
    /// would get the pod evicted instead of a clear error (Argo CD's repo server caps a
    /// directory's manifests at 10 MB the same way).
    pub max_tree_bytes: u64,
    /// The Kubernetes version Helm renders for when no cluster is asked (`gitward validate`):
    /// `helm template --kube-version`, seen by a chart's `kubeVersion` constraint and
    /// `.Capabilities.KubeVersion`. A sync asks the cluster instead. Default
    /// [`RenderTools::DEFAULT_KUBE_VERSION`].
    pub kube_version: String,
    /// API versions (`group/version` or `group/version/Kind`) Helm is told exist besides its
    /// built-in ones when no cluster is asked (`--api-versions`, seen by
    /// `.Capabilities.APIVersions.Has`): the CRDs a chart checks for. Default: none.
    pub api_versions: Vec<String>,
    /// The chart repositories and registries gitward itself may fetch from besides each
    /// unit's own `repo_url` (or OCI artifact repository): `https://`, `http://` and `oci://`
    /// URLs, each allowing its path and below (`chart_repositories`, [`super::allow`]). A
    /// `Chart.yaml` dependency, an `index.yaml` archive URL or a registry token service
    /// outside them is refused before any request. Loopback, link-local and cloud metadata
    /// addresses are reached only when listed here, even as a unit's own repository. Default:
    /// none — a repository's content never chooses where gitward connects.
    pub chart_repositories: ChartRepositories,
    /// The hosts (`host` for port 443, or `host:port`) a unit with `allow_remote_bases` may
    /// fetch kustomize remote bases from, over `https://` only (`remote_base_hosts`,
    /// [`super::remote`]), and the certificates checked on the way (`remote_base_ca_file`). A
    /// base elsewhere, or with another scheme (`file://`, `ssh://`, `http://`), is refused
    /// before kustomize runs. Default: no host — a repository's content never chooses where
    /// gitward connects — and the system's trust store.
    pub remote_bases: RemoteBases,
    /// Whether render tools run in the OS sandbox (`render::sandbox`: Landlock, a seccomp
    /// filter, user, network and PID namespaces where the host allows them, no inherited
    /// descriptors). Default [`SandboxMode::On`]: a kernel that cannot enforce Landlock or the
    /// filter refuses every unit that runs a tool; `"off"` is logged as a warning at each
    /// start.
    pub sandbox: SandboxMode,
    /// The most private writable memory one run of a tool may map (`RLIMIT_DATA`), in bytes.
    /// Default 1 GiB: helm, kustomize and sops render real charts and overlays in under
    /// 200 MiB; a template that grows without end fails instead of starving the daemon.
    pub max_memory: u64,
    /// How old the last good answer of a chart repository's `index.yaml` (the wanted chart's
    /// entries, kept under `<state_dir>/charts/index/`) may be for gitward to use it while the
    /// repository cannot be reached (refused or timed-out connection, a 5xx answer); older, the
    /// fetch fails as the repository did. A 404 or an answer that does not parse is never
    /// covered. Default 24 h: a repository's outage of a working day does not stop syncs of
    /// unchanged charts, and a version yanked upstream is not kept in use for long. `"0s"`
    /// never uses a kept answer.
    pub max_index_age: Duration,
}

/// `[render] sandbox`: `"on"` (the default) or `"off"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SandboxMode {
    /// Tools run confined; units that run one are refused where the kernel cannot confine them.
    #[default]
    On,
    /// Tools run with an empty environment, no inherited descriptors and the memory cap only.
    Off,
}

impl RenderTools {
    /// The newest Kubernetes minor the pinned Helm (v3.22.0, `scripts/tools`) knows: it is built
    /// against `k8s.io/client-go` v0.37.0, and Helm's own release builds set this as their
    /// default (`Makefile`: `chartutil.k8sVersionMinor` from client-go's version). A `go install`
    /// build, as `scripts/tools` makes, keeps the source default v1.20.0, which charts asking for
    /// a recent Kubernetes (`kubeVersion: ">= 1.28.0-0"`) refuse.
    pub const DEFAULT_KUBE_VERSION: &'static str = "v1.37.0";
}

impl Default for RenderTools {
    fn default() -> Self {
        Self {
            kustomize: None,
            helm: None,
            sops: None,
            timeout: Duration::from_secs(60),
            max_output_bytes: 64 << 20,
            max_tree_bytes: 32 << 20,
            kube_version: Self::DEFAULT_KUBE_VERSION.to_owned(),
            api_versions: Vec::new(),
            chart_repositories: ChartRepositories::default(),
            remote_bases: RemoteBases::default(),
            sandbox: SandboxMode::On,
            max_memory: 1 << 30,
            max_index_age: Duration::from_secs(24 * 3600),
        }
    }
}

impl Resolver<'_> {
    /// `[render] chart_repositories` ([`super::allow`]); none when absent.
    pub(super) fn chart_repositories(&self, raw: Option<Vec<Spanned<String>>>) -> Result<ChartRepositories> {
        let Some(list) = raw else { return Ok(ChartRepositories::default()) };
        let span = list.first().map(Spanned::span);
        ChartRepositories::parse(list.iter().map(|u| u.get_ref().as_str()))
            .map_err(|m| self.invalid(span, "render.chart_repositories", m))
    }

    /// `[render] remote_base_hosts` and `remote_base_ca_file` ([`super::remote`]); no host
    /// and the system's trust store when absent.
    pub(super) fn remote_bases(
        &self,
        hosts: Option<Vec<Spanned<String>>>,
        ca_file: Option<Spanned<String>>,
    ) -> Result<RemoteBases> {
        let ca_file = ca_file.map(|p| self.file(p, "render.remote_base_ca_file")).transpose()?;
        let Some(list) = hosts else { return Ok(RemoteBases { hosts: RemoteBaseHosts::default(), ca_file }) };
        let span = list.first().map(Spanned::span);
        let hosts = RemoteBaseHosts::parse(list.iter().map(|h| h.get_ref().as_str()))
            .map_err(|m| self.invalid(span, "render.remote_base_hosts", m))?;
        Ok(RemoteBases { hosts, ca_file })
    }

    /// Refuses a unit whose own chart repository (`[sync.helm] repo_url`) or OCI artifact
    /// (`repo = "oci://…"`) is a loopback, link-local or metadata address that
    /// `[render] chart_repositories` does not list ([`super::allow`]).
    pub(super) fn own_repository_allowed(
        &self,
        index: usize,
        unit: &SyncUnit,
        render: &RenderTools,
        span: Range<usize>,
    ) -> Result<()> {
        let (key, url) = match (&unit.helm.chart, unit.repo.starts_with("oci://")) {
            (Some(chart), _) => ("helm.repo_url", chart.repo_url.clone()),
            (None, true) => ("repo", super::allow::artifact_repository(&unit.repo)),
            (None, false) => return Ok(()),
        };
        let checked = render.chart_repositories.allows(Some(&url), &url);
        checked.map_err(|m| self.invalid(Some(span), &format!("sync[{index}].{key}"), m))
    }
}

#[cfg(test)]
mod tests {
    use super::super::resolve::kube_version;

    #[test]
    fn kube_versions_are_what_helm_takes() {
        for ok in ["v1.34.2", "1.34", "v1.35.0-rc.1", "1.37.0"] {
            assert!(kube_version(ok).is_ok(), "{ok}");
        }
        for bad in ["latest", "v1", "1.x", "", "v1.34.2.1"] {
            assert!(kube_version(bad).is_err(), "{bad}");
        }
    }
}
