//! One `kube::Client` per configured cluster, by name (DESIGN.md, "Several clusters").
//!
//! Building a client reads the kubeconfig but contacts nobody, so a cluster that is down at
//! start does not stop the daemon: only its units fail their syncs and retry with backoff,
//! each unit in its own task. Metadata watches are one per kind per cluster ([`Watches`]) and
//! discovery's answers one set per cluster ([`Answers`]), shared by its units.

use std::collections::BTreeMap;

use super::discovery::Answers;
use super::feed::Watches;
use super::fence::Fence;
use super::{Transport, prepare};
use crate::config::ClusterConfig;

/// The clients of every configured cluster, keyed by [`ClusterConfig::name`]. Cheap to clone
/// (clients are reference-counted).
#[derive(Clone)]
pub struct Registry {
    /// One client per cluster name (unfenced: bookkeeping, Leases, the one-shot commands).
    clients: BTreeMap<String, kube::Client>,
    /// The transport of each cluster (its one connection pool), shared by its client and
    /// the units' fenced clients.
    transports: BTreeMap<String, Transport>,
    /// The metadata watches of each cluster, shared by its units (reads: unfenced).
    watches: BTreeMap<String, Watches>,
    /// The discovery answers of each cluster, shared by its units.
    answers: BTreeMap<String, Answers>,
    /// The User-Agent every client sends.
    user_agent: String,
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
        let mut transports = BTreeMap::new();
        let mut watches = BTreeMap::new();
        let mut answers = BTreeMap::new();
        for cluster in clusters {
            let named = |e| (cluster.name.clone(), e);
            let config: kube::Config = prepare(cluster, user_agent, None).await.map_err(named)?;
            let transport = Transport::new(config, super::Origin::of(cluster)).map_err(named)?;
            let client = transport.client(&Fence::unfenced());
            watches.insert(cluster.name.clone(), Watches::shared(client.clone()));
            answers.insert(cluster.name.clone(), Answers::default());
            clients.insert(cluster.name.clone(), client);
            transports.insert(cluster.name.clone(), transport);
        }
        Ok(Self { clients, transports, watches, answers, user_agent: user_agent.to_owned() })
    }

    /// The User-Agent every client of this registry sends (give it to clients built beside it,
    /// such as the impersonating ones, [`super::connect_impersonating`]).
    pub fn user_agent(&self) -> &str {
        &self.user_agent
    }

    /// The client of the cluster named `name`, if configured.
    pub fn client(&self, name: &str) -> Option<&kube::Client> {
        self.clients.get(name)
    }

    /// The metadata watches of the cluster named `name`, shared by its units, if configured.
    pub fn watches(&self, name: &str) -> Option<&Watches> {
        self.watches.get(name)
    }

    /// The discovery answers of the cluster named `name`, shared by its units, if configured.
    pub fn answers(&self, name: &str) -> Option<&Answers> {
        self.answers.get(name)
    }

    /// A client of the cluster named `name` for one unit's writes, checked by `fence`
    /// ([`super::fence`]): the fence and retry layers of its own over the cluster's one
    /// transport (its connections are the cluster client's), or the cluster's client when
    /// `fence` is unfenced. `None` when `name` is not configured.
    pub fn fenced_client(&self, name: &str, fence: &Fence) -> Option<kube::Client> {
        if fence.is_unfenced() {
            return self.clients.get(name).cloned();
        }
        self.transports.get(name).map(|transport| transport.client(fence))
    }

    /// The configured cluster names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.clients.keys().map(String::as_str)
    }
}
