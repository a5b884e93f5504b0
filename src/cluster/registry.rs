//! One `kube::Client` per configured cluster, by name (DESIGN.md, "Several clusters").
//!
//! Building a client reads the kubeconfig but contacts nobody, so a cluster that is down at
//! start does not stop the daemon: only its units fail their syncs and retry with backoff,
//! each unit in its own task. Discovery and metadata watches stay per unit, as before (see
//! ARCHITECTURE.md, "Many clusters").

use std::collections::BTreeMap;

use super::{Result, connect_as};
use crate::config::ClusterConfig;

/// The clients of every configured cluster, keyed by [`ClusterConfig::name`]. Cheap to clone
/// (clients are reference-counted).
#[derive(Clone)]
pub struct Registry {
    /// One client per cluster name.
    clients: BTreeMap<String, kube::Client>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry").field("clusters", &self.clients.keys().collect::<Vec<_>>()).finish()
    }
}

impl Registry {
    /// Builds a client for each of `clusters`, all sending `user_agent` (see
    /// [`super::connect_as`]).
    ///
    /// Errors: the first cluster whose kubeconfig cannot be read or whose client cannot be
    /// built ([`super::Error::Kubeconfig`], [`super::Error::Client`]), prefixed by nothing:
    /// the caller names the cluster.
    pub async fn connect(
        clusters: &[ClusterConfig],
        user_agent: &str,
    ) -> std::result::Result<Self, (String, super::Error)> {
        let mut clients = BTreeMap::new();
        for cluster in clusters {
            let client: Result<kube::Client> = connect_as(cluster, user_agent).await;
            clients.insert(cluster.name.clone(), client.map_err(|e| (cluster.name.clone(), e))?);
        }
        Ok(Self { clients })
    }

    /// The client of the cluster named `name`, if configured.
    pub fn client(&self, name: &str) -> Option<&kube::Client> {
        self.clients.get(name)
    }

    /// The configured cluster names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.clients.keys().map(String::as_str)
    }
}
