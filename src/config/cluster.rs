//! `[cluster]` / `[[cluster]]`: how to reach a cluster.

use std::path::PathBuf;

/// How to reach one cluster (`[cluster]`, optional, or one of several `[[cluster]]` tables).
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterConfig {
    /// The cluster's name, an RFC 1123 label, unique in the file; units name it in `cluster`,
    /// logs and metrics carry it as `cluster`. Required in `[[cluster]]`; default `"default"`
    /// for a single `[cluster]` table, so existing configs keep working.
    pub name: String,
    /// The kubeconfig file. Default `None`: kube's inference order (`kube::Config::infer`) —
    /// in-cluster service account, else `$KUBECONFIG`, else `~/.kube/config` — so one config
    /// works both as a systemd service and as a Deployment.
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context. Default `None`: the kubeconfig's current context, as kubectl.
    pub context: Option<String>,
    /// At most this many object requests in flight per sync unit, at least 1. Default 32: enough
    /// to hide round-trip latency over thousands of objects, and far below the apiserver's
    /// default `--max-requests-inflight` of 400, so one unit cannot starve other clients.
    pub max_in_flight: usize,
}

impl ClusterConfig {
    /// The name of the cluster of a single `[cluster]` table (or of none): `default`.
    pub const DEFAULT_NAME: &'static str = "default";
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self { name: ClusterConfig::DEFAULT_NAME.to_owned(), kubeconfig: None, context: None, max_in_flight: 32 }
    }
}
