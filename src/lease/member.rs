//! What a sharded replica advertises on its membership Lease, so that replicas running
//! different configs (a rolling update that adds units or changes one) agree on who applies
//! what: a key for every unit it runs (which unit, which version), how many buckets it groups
//! units into, and a per-process nonce.
//!
//! All are annotations of the membership Lease, written by a JSON merge patch of its
//! metadata (RFC 7396) that leaves the spec to the election loop; the loop's renewals are
//! `replace`s carrying the `resourceVersion` they read, so a renewal that raced the patch gets
//! a 409, reads the Lease again and keeps the annotations.
//!
//! An object's annotations hold at most 256 KiB in all (the API server's
//! `TotalAnnotationSizeLimitB`). Units named with their fingerprints in JSON took about 70 bytes
//! a unit, and an advert of about 3,700 units was refused; [`UnitKey`]s take 13.3 (10 bytes in
//! base64), so about 19,000 units fit.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use base64::Engine as _;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams};

use super::assignment::{key_bucket, name_key, version_key};

/// Annotation holding the units a member runs: a JSON object of unit name → fingerprint
/// ([`crate::config::SyncUnit::fingerprint`]). Read from a gitward before [`UNIT_KEYS_ANNOTATION`];
/// written for it while at most [`UNITS_JSON_LIMIT`] bytes long.
pub const UNITS_ANNOTATION: &str = "gitward.dev/units";
/// Annotation holding the units a member runs as [`UnitKey`]s: base64 (RFC 4648, standard
/// alphabet, padded) of 10 bytes a unit — its name key (6 bytes) and version (4 bytes),
/// big-endian — sorted. Read before [`UNITS_ANNOTATION`].
pub const UNIT_KEYS_ANNOTATION: &str = "gitward.dev/unit-keys";
/// The longest [`UNITS_ANNOTATION`] written beside the unit keys, for replicas of a gitward that
/// reads only it (a rolling update from one); a longer one is left out (such a replica would
/// have been refused its own advert at that size).
pub const UNITS_JSON_LIMIT: usize = 64 * 1024;
/// Annotation holding the nonce of the process that holds the membership Lease.
pub const NONCE_ANNOTATION: &str = "gitward.dev/nonce";
/// Annotation holding how many buckets the member groups units into
/// ([`super::assignment::BUCKETS`]). A member without it guards each unit with a Lease of its
/// own (gitward before bucket Leases) and is a candidate for no bucket.
pub const BUCKETS_ANNOTATION: &str = "gitward.dev/buckets";

/// A unit as an advert names it: 48 bits of the hash of its name ([`name_key`], which gives its
/// bucket too) and 32 of the hash of its fingerprint ([`version_key`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UnitKey {
    /// [`name_key`] of the unit's name.
    pub name: u64,
    /// [`version_key`] of the unit's fingerprint in the member's config.
    pub version: u32,
}

impl UnitKey {
    /// The key of unit `name` whose fingerprint is `fingerprint`.
    pub fn of(name: &str, fingerprint: &str) -> Self {
        Self { name: name_key(name), version: version_key(fingerprint) }
    }

    /// The unit's bucket ([`super::assignment::bucket`]).
    pub fn bucket(&self) -> u32 {
        key_bucket(self.name)
    }
}

/// The keys of `units` (name → fingerprint).
pub fn unit_keys(units: &BTreeMap<String, String>) -> BTreeSet<UnitKey> {
    units.iter().map(|(name, fingerprint)| UnitKey::of(name, fingerprint)).collect()
}

/// `keys` as [`UNIT_KEYS_ANNOTATION`] holds them.
fn encode(keys: &BTreeSet<UnitKey>) -> String {
    let mut bytes = Vec::with_capacity(keys.len() * 10);
    for key in keys {
        bytes.extend_from_slice(&key.name.to_be_bytes()[2..]);
        bytes.extend_from_slice(&key.version.to_be_bytes());
    }
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The keys [`UNIT_KEYS_ANNOTATION`] holds; `None` when it is not such a value.
fn decode(text: &str) -> Option<BTreeSet<UnitKey>> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(text).ok()?;
    if bytes.len() % 10 != 0 {
        return None;
    }
    let keys = bytes.chunks_exact(10).map(|c| {
        let mut name = [0u8; 8];
        name[2..].copy_from_slice(&c[..6]);
        let version = [c[6], c[7], c[8], c[9]];
        UnitKey { name: u64::from_be_bytes(name), version: u32::from_be_bytes(version) }
    });
    Some(keys.collect())
}

/// A member's advertisement, as read from or written to its membership Lease.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Advert {
    /// The key of every unit the member runs (shared: the sharding loop compares its own with
    /// the one it last wrote every round).
    pub units: Arc<BTreeSet<UnitKey>>,
    /// A random value chosen once per process: two processes that were given one identity
    /// write different nonces on the same Lease, and each sees the other's.
    pub nonce: String,
    /// How many buckets the member groups units into; `None` for a member that predates them.
    pub buckets: Option<u32>,
}

impl Advert {
    /// The advert on `lease`, if it carries one (a member that has not published yet, or a
    /// gitward older than adverts, carries none and is assigned nothing): its unit keys, or the
    /// keys of the units JSON of a gitward before them.
    pub fn read(lease: &Lease) -> Option<Self> {
        let annotations = lease.metadata.annotations.as_ref()?;
        let units = Arc::new(match annotations.get(UNIT_KEYS_ANNOTATION) {
            Some(keys) => decode(keys)?,
            None => unit_keys(&serde_json::from_str(annotations.get(UNITS_ANNOTATION)?).ok()?),
        });
        let nonce = annotations.get(NONCE_ANNOTATION).cloned().unwrap_or_default();
        let buckets = annotations.get(BUCKETS_ANNOTATION).and_then(|b| b.parse().ok());
        Some(Self { units, nonce, buckets })
    }

    /// Writes this advert on the Lease `name` in `namespace` (a merge patch of its annotations);
    /// `named` (the units by name, whose keys this advert holds) goes beside it as
    /// [`UNITS_ANNOTATION`] while at most [`UNITS_JSON_LIMIT`] long, else that annotation is
    /// removed.
    ///
    /// Errors: the API's (404 while the election loop has not created the Lease yet; 422 when
    /// the annotations pass 256 KiB); the caller tries again at its next round.
    pub async fn publish(
        &self,
        client: kube::Client,
        namespace: &str,
        name: &str,
        named: &BTreeMap<String, String>,
    ) -> Result<(), kube::Error> {
        let api: Api<Lease> = Api::namespaced(client, namespace);
        let json = serde_json::to_string(named).ok().filter(|j| j.len() <= UNITS_JSON_LIMIT);
        let buckets = self.buckets.map(|b| b.to_string());
        let annotations = serde_json::json!({
            UNIT_KEYS_ANNOTATION: encode(&self.units),
            UNITS_ANNOTATION: json,
            NONCE_ANNOTATION: self.nonce,
            BUCKETS_ANNOTATION: buckets,
        });
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

    fn lease(annotations: &[(&str, String)]) -> Lease {
        let annotations = annotations.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect();
        Lease { metadata: ObjectMeta { annotations: Some(annotations), ..Default::default() }, spec: None }
    }

    #[test]
    fn adverts_read_back_what_they_write_and_tolerate_leases_without_one() {
        let named = BTreeMap::from([("a".to_owned(), "0011".to_owned()), ("b".to_owned(), "0022".to_owned())]);
        let advert = Advert { units: Arc::new(unit_keys(&named)), nonce: "n1".into(), buckets: Some(64) };
        let keys = lease(&[
            (UNIT_KEYS_ANNOTATION, encode(&advert.units)),
            (NONCE_ANNOTATION, "n1".to_owned()),
            (BUCKETS_ANNOTATION, "64".to_owned()),
        ]);
        assert_eq!(Advert::read(&keys), Some(advert.clone()));
        // A gitward before unit keys writes the units by name: the same advert.
        let json = lease(&[
            (UNITS_ANNOTATION, serde_json::to_string(&named).unwrap()),
            (NONCE_ANNOTATION, "n1".to_owned()),
            (BUCKETS_ANNOTATION, "64".to_owned()),
        ]);
        assert_eq!(Advert::read(&json), Some(advert));
        assert_eq!(Advert::read(&Lease::default()), None);
        assert_eq!(Advert::read(&lease(&[(UNIT_KEYS_ANNOTATION, "AAAA".to_owned())])), None, "not 10 bytes a unit");
        assert_ne!(nonce(), nonce());
    }

    #[test]
    fn unit_keys_round_trip_and_name_the_units_bucket() {
        let named: BTreeMap<String, String> =
            (0..2_000).map(|i| (format!("unit-{i}"), format!("{:016x}", i * 7919))).collect();
        let keys = unit_keys(&named);
        assert_eq!(keys.len(), named.len(), "no two of these units share a key");
        assert_eq!(decode(&encode(&keys)), Some(keys.clone()));
        for (name, fingerprint) in &named {
            let key = UnitKey::of(name, fingerprint);
            assert_eq!(key.bucket(), super::super::assignment::bucket(name));
            assert_ne!(key, UnitKey::of(name, "another version"));
        }
        // About 13.3 bytes a unit: 19,000 units in the 256 KiB of a Lease's annotations.
        assert_eq!(encode(&keys).len(), 2_000 * 10 / 3 * 4 + 4);
    }
}
