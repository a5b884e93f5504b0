//! The ConfigMap that keeps a unit's last attestations in the cluster, beside its ApplySet
//! parent: `<parent name>-attestations` in the parent's namespace. Each envelope is one JSON
//! line under a key of its own, `attestation-<n>.json` (`n` counting up from 1, ten digits),
//! and the `binaryData` key [`MEMBERS`] holds the members record of the newest
//! ([`super::members`]), gzipped. Never a member
//! and never the parent's own annotations, so neither a prune nor a parent write touches it;
//! written by gitward's own client through the sync's seam
//! ([`crate::sync::writes::Writes::keep_attestations`]): created once, then merge-patched with
//! its resourceVersion as the precondition, each write adding the newest envelope and dropping
//! the oldest past `keep`. So the attestor holds no envelope between syncs, only their numbers
//! and sizes and the newest's digest.

use std::collections::{BTreeMap, VecDeque};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta};

use crate::cluster::inventory::Inventory;

/// The `binaryData` key of the members record of the newest attestation, gzipped.
pub const MEMBERS: &str = "members.tsv.gz";

/// The bytes a gzipped members record may have to be kept: with the envelopes, under the
/// 1 MiB an object may have in etcd. A larger record (some 15,000 members and more) is not
/// kept; the Statement still binds its digest.
pub const MAX_RECORD: usize = 640 << 10;

/// What an envelope's key starts with; its number and `.json` follow.
const PREFIX: &str = "attestation-";

/// The bytes of envelopes a ConfigMap keeps at most, whatever `keep` says: with the members
/// record, under the 1 MiB an object may have in etcd.
pub const MAX_BYTES: usize = 256 << 10;

/// The name of the ConfigMap of `inventory`'s attestations.
pub fn name(inventory: &Inventory) -> String {
    format!("{}-attestations", inventory.parent.name)
}

/// The namespace it is in: the parent's.
pub fn namespace(inventory: &Inventory) -> String {
    inventory.parent.namespace.as_ref().map(|n| n.as_str().to_owned()).unwrap_or_default()
}

/// The key of envelope `n`.
pub fn key(n: u64) -> String {
    format!("{PREFIX}{n:010}.json")
}

/// The envelopes of `object`, each a JSON line, oldest first, with their numbers.
pub fn envelopes(object: &ConfigMap) -> Vec<(u64, &str)> {
    let data = object.data.as_ref();
    let mut out: Vec<(u64, &str)> = data
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            let n = k.strip_prefix(PREFIX)?.strip_suffix(".json")?.parse().ok()?;
            Some((n, v.trim()))
        })
        .collect();
    out.sort_unstable_by_key(|(n, _)| *n);
    out
}

/// The members record of `object`'s newest attestation; `None` when it holds none.
///
/// Errors: the record is not gzipped UTF-8 text.
pub fn members(object: &ConfigMap) -> std::io::Result<Option<String>> {
    let Some(gzipped) = object.binary_data.as_ref().and_then(|d| d.get(MEMBERS)) else { return Ok(None) };
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(gzipped.0.as_slice()), &mut text)?;
    Ok(Some(text))
}

/// `record` gzipped; `None` past [`MAX_RECORD`].
pub fn gzip(record: &str) -> Option<Vec<u8>> {
    use std::io::Write as _;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(record.as_bytes()).expect("writing to memory");
    let gzipped = encoder.finish().expect("writing to memory");
    (gzipped.len() <= MAX_RECORD).then_some(gzipped)
}

/// What the attestor holds of the ConfigMap between syncs.
#[derive(Debug, Clone, Default)]
pub struct Kept {
    /// Each envelope kept, oldest first: its number and its bytes.
    pub held: VecDeque<(u64, usize)>,
    /// The digest of the newest ([`super::dsse::digest`]), the next one's `previous`.
    pub last: Option<String>,
    /// Its resourceVersion, the precondition of the next write (`None`: it does not exist).
    pub resource_version: Option<String>,
}

impl Kept {
    /// What `object` holds.
    pub fn of(object: &ConfigMap) -> Self {
        let envelopes = envelopes(object);
        let last = envelopes
            .last()
            .and_then(|(_, line)| serde_json::from_str::<super::dsse::Envelope>(line).ok())
            .map(|e| super::dsse::digest(&e));
        Self {
            held: envelopes.iter().map(|(n, line)| (*n, line.len())).collect(),
            last,
            resource_version: object.metadata.resource_version.clone(),
        }
    }

    /// Adds an envelope of `bytes`, then drops the oldest until `keep` remain within
    /// [`MAX_BYTES`] (the newest always stays). Returns the new envelope's number and the keys
    /// dropped.
    pub fn add(&mut self, bytes: usize, keep: usize) -> (u64, Vec<String>) {
        let n = self.held.back().map_or(1, |(n, _)| n + 1);
        self.held.push_back((n, bytes));
        let mut total: usize = self.held.iter().map(|(_, b)| b).sum();
        let mut dropped = Vec::new();
        while self.held.len() > 1 && (self.held.len() > keep.max(1) || total > MAX_BYTES) {
            let (old, b) = self.held.pop_front().expect("more than one held");
            total -= b;
            dropped.push(key(old));
        }
        (n, dropped)
    }
}

/// The write of envelope `n` (`line`) and its gzipped members `record` ([`gzip`]; `None`:
/// too large to keep) to the ConfigMap of `inventory`'s attestations, `resource_version` its
/// precondition (`None`: it is created), annotated with the unit it belongs to.
pub fn body(
    inventory: &Inventory,
    unit: &str,
    (n, line): (u64, &str),
    record: Option<Vec<u8>>,
    resource_version: Option<String>,
) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name(inventory)),
            namespace: Some(namespace(inventory)),
            resource_version,
            annotations: Some(BTreeMap::from([(crate::cluster::owner::UNIT.to_owned(), unit.to_owned())])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(key(n), line.to_owned())])),
        binary_data: record.map(|r| BTreeMap::from([(MEMBERS.to_owned(), k8s_openapi::ByteString(r))])),
        ..Default::default()
    }
}

/// Reads the ConfigMap of `inventory`'s attestations (one GET); `None` when it does not exist.
///
/// Errors: the API server's.
pub async fn read(client: &kube::Client, inventory: &Inventory) -> kube::Result<Option<ConfigMap>> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace(inventory));
    api.get_opt(&name(inventory)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_keep_stay_and_the_newest_always() {
        let mut kept = Kept::default();
        assert_eq!(kept.add(10, 2), (1, vec![]));
        assert_eq!(kept.add(10, 2), (2, vec![]));
        assert_eq!(kept.add(10, 2), (3, vec![key(1)]));
        assert_eq!(kept.held, [(2, 10), (3, 10)]);
        assert_eq!(kept.add(MAX_BYTES, 20), (4, vec![key(2), key(3)]), "the bytes bound drops the oldest first");
        assert_eq!(kept.add(MAX_BYTES + 1, 20), (5, vec![key(4)]), "the newest stays even alone past the bound");
        assert_eq!(kept.held, [(5, MAX_BYTES + 1)]);
    }

    #[test]
    fn envelopes_read_back_in_their_numbers_order_past_other_keys() {
        let data = [(key(10), "b"), (key(9), "a"), ("other".to_owned(), "x")];
        let record = gzip("m\n").unwrap();
        let object = ConfigMap {
            data: Some(data.into_iter().map(|(k, v)| (k, v.to_owned())).collect()),
            binary_data: Some(BTreeMap::from([(MEMBERS.to_owned(), k8s_openapi::ByteString(record))])),
            ..Default::default()
        };
        assert_eq!(envelopes(&object), [(9, "a"), (10, "b")]);
        assert_eq!(members(&object).unwrap().as_deref(), Some("m\n"));
        assert_eq!(members(&ConfigMap::default()).unwrap(), None);
        let kept = Kept::of(&object);
        assert_eq!(kept.held, [(9, 1), (10, 1)]);
        assert_eq!(kept.last, None, "b is not an envelope");
    }
}
