//! What a sharded replica advertises on its membership Lease, so that replicas running
//! different configs (a rolling update that adds units or changes one) agree on who applies
//! what: the fingerprint of every unit it runs, how many buckets it groups units into, and a
//! per-process nonce.
//!
//! All are annotations of the membership Lease, written by a JSON merge patch of its
//! metadata (RFC 7396) that leaves the spec to the election loop; the loop's renewals are
//! `replace`s carrying the `resourceVersion` they read, so a renewal that raced the patch gets
//! a 409, reads the Lease again and keeps the annotations.

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams};

/// Annotation holding the units a member runs: a JSON object of unit name → fingerprint
/// ([`crate::config::SyncUnit::fingerprint`]).
pub const UNITS_ANNOTATION: &str = "gitward.dev/units";
/// Annotation holding the nonce of the process that holds the membership Lease.
pub const NONCE_ANNOTATION: &str = "gitward.dev/nonce";
/// Annotation holding how many buckets the member groups units into
/// ([`super::assignment::BUCKETS`]). A member without it guards each unit with a Lease of its
/// own (gitward before bucket Leases) and is a candidate for no bucket.
pub const BUCKETS_ANNOTATION: &str = "gitward.dev/buckets";

/// A member's advertisement, as read from or written to its membership Lease.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Advert {
    /// Unit name → fingerprint of every unit the member runs.
    pub units: BTreeMap<String, String>,
    /// A random value chosen once per process: two processes that were given one identity
    /// write different nonces on the same Lease, and each sees the other's.
    pub nonce: String,
    /// How many buckets the member groups units into; `None` for a member that predates them.
    pub buckets: Option<u32>,
}

impl Advert {
    /// The advert on `lease`, if it carries one (a member that has not published yet, or a
    /// gitward older than adverts, carries none and is assigned nothing).
    pub fn read(lease: &Lease) -> Option<Self> {
        let annotations = lease.metadata.annotations.as_ref()?;
        let units = serde_json::from_str(annotations.get(UNITS_ANNOTATION)?).ok()?;
        let nonce = annotations.get(NONCE_ANNOTATION).cloned().unwrap_or_default();
        let buckets = annotations.get(BUCKETS_ANNOTATION).and_then(|b| b.parse().ok());
        Some(Self { units, nonce, buckets })
    }

    /// Writes this advert on the Lease `name` in `namespace` (a merge patch of its annotations).
    ///
    /// Errors: the API's (404 while the election loop has not created the Lease yet); the caller
    /// tries again at its next round.
    pub async fn publish(&self, client: kube::Client, namespace: &str, name: &str) -> Result<(), kube::Error> {
        let api: Api<Lease> = Api::namespaced(client, namespace);
        let units = serde_json::to_string(&self.units).unwrap_or_else(|_| "{}".to_owned());
        let buckets = self.buckets.map(|b| b.to_string());
        let annotations =
            serde_json::json!({UNITS_ANNOTATION: units, NONCE_ANNOTATION: self.nonce, BUCKETS_ANNOTATION: buckets});
        let patch = serde_json::json!({"metadata": {"annotations": annotations}});
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.map(|_| ())
    }
}

/// Annotation holding the nonce of the process that holds a Lease as its `holderIdentity`
/// (written by the election loop, [`crate::lease::election`]): a process re-takes a Lease
/// naming its identity only when the nonce is its own, so two processes given one identity
/// never both hold it.
pub const HOLDER_NONCE_ANNOTATION: &str = "gitward.dev/holder-nonce";

/// A fresh nonce: 16 random hex digits.
pub fn nonce() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// This process's nonce, drawn once ([`nonce`]): what it advertises and writes on the Leases
/// it holds.
pub fn process_nonce() -> &'static str {
    static NONCE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NONCE.get_or_init(nonce)
}

/// The holder nonce on `lease` ([`HOLDER_NONCE_ANNOTATION`]), empty when it carries none.
pub fn holder_nonce(lease: &Lease) -> &str {
    let annotations = lease.metadata.annotations.as_ref();
    annotations.and_then(|a| a.get(HOLDER_NONCE_ANNOTATION)).map_or("", String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    #[test]
    fn adverts_read_back_what_they_write_and_tolerate_leases_without_one() {
        let advert =
            Advert { units: BTreeMap::from([("a".into(), "0011".into())]), nonce: "n1".into(), buckets: Some(64) };
        let annotations = BTreeMap::from([
            (UNITS_ANNOTATION.to_owned(), serde_json::to_string(&advert.units).unwrap()),
            (NONCE_ANNOTATION.to_owned(), "n1".to_owned()),
            (BUCKETS_ANNOTATION.to_owned(), "64".to_owned()),
        ]);
        let lease = Lease { metadata: ObjectMeta { annotations: Some(annotations), ..Default::default() }, spec: None };
        assert_eq!(Advert::read(&lease), Some(advert));
        assert_eq!(Advert::read(&Lease::default()), None);
        assert_ne!(nonce(), nonce());
    }
}
