//! What every unit's attestor holds alike, held once per process. What an attestation names
//! of the cluster it applied to — the API server CA's fingerprint from the kubeconfig and the
//! `kube-system` Namespace's uid — is read once per cluster: a fleet of 10,000 units reads its
//! kubeconfig and sends that GET once, not once per unit. The signing key (each engine still
//! reads its file or Secret when it starts, so a new key is taken up) and the renderer are
//! interned ([`interned`]): equal values share one copy while any attestor holds it.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, LazyLock, Mutex, Weak};

use super::key::SigningKey;
use super::statement::Renderer;

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

/// The signing keys attestors hold, by key id.
static KEYS: LazyLock<Mutex<HashMap<String, Weak<SigningKey>>>> = LazyLock::new(Default::default);

/// The renderers attestors hold.
static RENDERERS: LazyLock<Mutex<HashMap<Renderer, Weak<Renderer>>>> = LazyLock::new(Default::default);

/// `key` as the one copy every attestor of the same key holds.
pub(super) fn key(key: SigningKey) -> Arc<SigningKey> {
    interned(&KEYS, key.keyid(), key)
}

/// `renderer` as the one copy every attestor of an equal renderer holds.
pub(super) fn renderer(renderer: Renderer) -> Arc<Renderer> {
    interned(&RENDERERS, renderer.clone(), renderer)
}

/// The copy of `value` (named `by`) in `map` while any holder keeps it, else `value`, kept
/// there from now on; entries no one holds any longer are dropped.
fn interned<K: Eq + Hash, V>(map: &Mutex<HashMap<K, Weak<V>>>, by: K, value: V) -> Arc<V> {
    let mut map = map.lock().expect("not poisoned");
    if let Some(shared) = map.get(&by).and_then(Weak::upgrade) {
        return shared;
    }
    map.retain(|_, held| held.strong_count() > 0);
    let shared = Arc::new(value);
    map.insert(by, Arc::downgrade(&shared));
    shared
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_keys_share_one_copy_while_held_and_another_key_its_own() {
        let one = key(SigningKey::ed25519_from_seed(41));
        let again = key(SigningKey::ed25519_from_seed(41));
        assert!(Arc::ptr_eq(&one, &again));
        let other = key(SigningKey::ed25519_from_seed(42));
        assert!(!Arc::ptr_eq(&one, &other));
        let kept = Arc::downgrade(&one);
        drop((one, again));
        assert!(kept.upgrade().is_none(), "no copy outlives its holders");
    }
}
