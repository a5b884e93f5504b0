//! The ConfigMap that keeps a unit's last attestations in the cluster, beside its ApplySet
//! parent: `<parent name>-attestations` in the parent's namespace, its key
//! [`KEY`] the envelopes as JSON lines, oldest first. Never a member and never the parent's own
//! annotations, so neither a prune nor a parent write touches it; written by gitward's own
//! client through the sync's seam ([`crate::sync::writes::Writes::keep_attestations`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta};

use crate::cluster::inventory::Inventory;

/// The ConfigMap's key holding the envelopes, one JSON line each.
pub const KEY: &str = "attestations.jsonl";

/// The bytes of envelopes a ConfigMap keeps at most, whatever `keep` says: under the 1 MiB an
/// object may have in etcd, with room for its metadata.
pub const MAX_BYTES: usize = 900 << 10;

/// The name of the ConfigMap of `inventory`'s attestations.
pub fn name(inventory: &Inventory) -> String {
    format!("{}-attestations", inventory.parent.name)
}

/// The namespace it is in: the parent's.
pub fn namespace(inventory: &Inventory) -> String {
    inventory.parent.namespace.as_ref().map(|n| n.as_str().to_owned()).unwrap_or_default()
}

/// What the ConfigMap holds as read: its lines and resourceVersion (`None`: it does not exist).
#[derive(Debug, Clone, Default)]
pub struct Kept {
    /// The envelopes, one JSON line each, oldest first.
    pub lines: Vec<String>,
    /// Its resourceVersion, the precondition of the next write.
    pub resource_version: Option<String>,
}

impl Kept {
    /// What `object` holds.
    pub fn of(object: &ConfigMap) -> Self {
        let text = object.data.as_ref().and_then(|d| d.get(KEY)).map(String::as_str).unwrap_or_default();
        Self {
            lines: text.lines().filter(|l| !l.trim().is_empty()).map(String::from).collect(),
            resource_version: object.metadata.resource_version.clone(),
        }
    }

    /// `line` added, then the oldest dropped until `keep` remain within [`MAX_BYTES`] (the
    /// newest always stays).
    pub fn with(&self, line: String, keep: usize) -> Vec<String> {
        let mut lines = self.lines.clone();
        lines.push(line);
        let mut first = lines.len().saturating_sub(keep.max(1));
        let mut bytes: usize = lines[first..].iter().map(|l| l.len() + 1).sum();
        while first + 1 < lines.len() && bytes > MAX_BYTES {
            bytes -= lines[first].len() + 1;
            first += 1;
        }
        lines.drain(..first);
        lines
    }
}

/// The ConfigMap of `inventory`'s attestations holding `lines`, `resource_version` its
/// precondition (`None`: it is made), annotated with the unit it belongs to.
pub fn body(inventory: &Inventory, unit: &str, lines: &[String], resource_version: Option<String>) -> ConfigMap {
    let mut text = lines.join("\n");
    text.push('\n');
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name(inventory)),
            namespace: Some(namespace(inventory)),
            resource_version,
            annotations: Some(BTreeMap::from([(crate::cluster::owner::UNIT.to_owned(), unit.to_owned())])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(KEY.to_owned(), text)])),
        ..Default::default()
    }
}

/// Reads the ConfigMap of `inventory`'s attestations (one GET); empty when it does not exist.
///
/// Errors: the API server's.
pub async fn read(client: &kube::Client, inventory: &Inventory) -> kube::Result<Kept> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace(inventory));
    Ok(api.get_opt(&name(inventory)).await?.as_ref().map(Kept::of).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_keep_lines_stay_and_the_newest_always() {
        let kept = Kept { lines: vec!["a".into(), "b".into(), "c".into()], resource_version: None };
        assert_eq!(kept.with("d".into(), 2), ["c", "d"]);
        assert_eq!(kept.with("d".into(), 20), ["a", "b", "c", "d"]);
        let big = "x".repeat(MAX_BYTES);
        let kept = Kept { lines: vec!["a".into(), big.clone()], resource_version: None };
        assert_eq!(kept.with("d".into(), 20), ["d"], "the bytes bound drops the oldest first");
        assert_eq!(Kept::default().with(big.clone(), 20), [big], "the newest stays even alone past the bound");
    }
}
