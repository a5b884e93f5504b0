//! What an attestation names of the cluster it applied to — the API server CA's fingerprint
//! from the kubeconfig and the `kube-system` Namespace's uid — read once per process for each
//! cluster and shared by every unit's attestor: a fleet of 10,000 units reads its kubeconfig
//! and sends that GET once, not once per unit.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;

use super::statement::ClusterId;
use crate::config::ClusterConfig;

/// One cluster's facts.
pub(super) struct Facts {
    /// sha256 hex of the API server CA's DER, from the kubeconfig; empty when it names none.
    ca_sha256: String,
    /// Its identity, once the kube-system Namespace was read.
    id: tokio::sync::OnceCell<ClusterId>,
}

/// The facts of each cluster, by its config (name, kubeconfig, context): a cluster whose
/// config a reload changed is read again.
static FACTS: LazyLock<Mutex<HashMap<String, Arc<Facts>>>> = LazyLock::new(Default::default);

/// The facts of `cluster`, its kubeconfig read the first time it is asked for.
///
/// Errors: the kubeconfig cannot be read.
pub(super) async fn facts(cluster: &ClusterConfig) -> crate::sync::Result<Arc<Facts>> {
    let key = format!("{}\0{:?}\0{:?}", cluster.name, cluster.kubeconfig, cluster.context);
    if let Some(facts) = FACTS.lock().expect("not poisoned").get(&key) {
        return Ok(facts.clone());
    }
    let config = crate::cluster::prepare(cluster, "gitward", None).await?;
    let ca = config.root_cert.as_ref().and_then(|certs| certs.first());
    let ca_sha256 = ca.map(|der| hex::encode(<sha2::Sha256 as sha2::Digest>::digest(der))).unwrap_or_default();
    let facts = Arc::new(Facts { ca_sha256, id: tokio::sync::OnceCell::new() });
    Ok(FACTS.lock().expect("not poisoned").entry(key).or_insert(facts).clone())
}

impl Facts {
    /// The cluster's identity: the kube-system Namespace's uid, read through `client` the
    /// first time any unit asks (one GET in flight however many ask), and the CA's fingerprint.
    ///
    /// Errors: the Namespace cannot be read (the next call tries again).
    pub(super) async fn id(&self, client: &kube::Client) -> crate::sync::Result<ClusterId> {
        let read = || async {
            let api: Api<Namespace> = Api::all(client.clone());
            let namespace = api.get("kube-system").await.map_err(|e| {
                let message = crate::cluster::api_message(&e);
                crate::sync::Error::Provenance(format!("read Namespace kube-system: {message}"))
            })?;
            let uid = namespace.metadata.uid.unwrap_or_default();
            Ok::<_, crate::sync::Error>(ClusterId { kube_system_uid: uid, ca_sha256: self.ca_sha256.clone() })
        };
        self.id.get_or_try_init(read).await.cloned()
    }
}
