//! The render cache: a unit's last render, keyed by the content of everything it read.
//!
//! Argo CD keys rendered manifests by commit, so any commit re-renders every application;
//! Flux rebuilds on every reconcile. gitward keys a render by the git tree ids of the
//! directories given to the renderer, the blob ids of the values files, the tool (its path,
//! version line and which file it is: device, inode, size, times — a binary replaced in place
//! renders again), and the unit's render options (release, namespace, inline values, cluster
//! capabilities, remote-base permission, decryption key id). A commit that touches none of
//! these costs no render at all. A render that fetched a remote kustomize base is not cached:
//! its content is not in the key.

use sha2::{Digest, Sha256};

use crate::manifest::Loaded;

/// Builds a [`RenderKey`] from labelled parts, in order.
#[derive(Default)]
pub(super) struct KeyBuilder {
    hasher: Sha256,
}

impl KeyBuilder {
    /// Adds one `label=value` part; the separators keep parts from running into each other.
    pub fn part(&mut self, label: &str, value: &str) -> &mut Self {
        self.hasher.update(label.as_bytes());
        self.hasher.update(b"=");
        self.hasher.update((value.len() as u64).to_be_bytes());
        self.hasher.update(value.as_bytes());
        self.hasher.update(b"\n");
        self
    }

    /// The key: hex sha256 of the parts.
    pub fn finish(&self) -> RenderKey {
        RenderKey(hex::encode(self.hasher.clone().finalize()))
    }
}

/// What one render read, hashed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RenderKey(pub String);

/// The last render of one unit and how many renders ran. Keep one per unit.
#[derive(Debug, Default)]
pub struct RenderCache {
    last: Option<(RenderKey, Loaded)>,
    renders: usize,
}

impl RenderCache {
    /// The manifests of the last render if its key is `key`.
    pub(super) fn get(&self, key: &RenderKey) -> Option<Loaded> {
        self.last.as_ref().filter(|(k, _)| k == key).map(|(_, loaded)| loaded.clone())
    }

    /// Counts a render (successful or not).
    pub(super) fn count(&mut self) {
        self.renders += 1;
    }

    /// Forgets the last render (one that must not be served again: it read a remote base).
    pub(super) fn clear(&mut self) {
        self.last = None;
    }

    /// Keeps `loaded` as the render of `key`.
    pub(super) fn store(&mut self, key: RenderKey, loaded: Loaded) {
        self.last = Some((key, loaded));
    }

    /// How many times a renderer ran (cache misses) since the cache was made.
    pub fn renders(&self) -> usize {
        self.renders
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_delimited_so_shifting_text_between_them_changes_the_key() {
        let a = KeyBuilder::default().part("a", "bc").part("d", "").finish();
        let b = KeyBuilder::default().part("a", "b").part("d", "c").finish();
        assert_ne!(a, b);
        assert_eq!(a, KeyBuilder::default().part("a", "bc").part("d", "").finish());
    }

    #[test]
    fn only_the_last_key_hits() {
        let mut cache = RenderCache::default();
        let (one, two) = (RenderKey("1".into()), RenderKey("2".into()));
        cache.store(one.clone(), Loaded::default());
        assert!(cache.get(&one).is_some());
        assert!(cache.get(&two).is_none());
    }
}
