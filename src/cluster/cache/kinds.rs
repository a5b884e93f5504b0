//! The watch of each group-kind a unit's members have: started through the cache's
//! [`Watches`](crate::cluster::feed::Watches), waited for until its first list is in the
//! store, restarted when an error may have hidden changes, and dropped with a kind the API
//! server no longer serves.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kube::discovery::ApiResource;
use tokio::sync::watch;

use super::MetadataCache;
use super::events::{Members, Sync};
use crate::cluster::feed::Subscription;
use crate::cluster::{Error, Result};
use crate::object::GroupKind;

pub(super) struct KindWatch {
    state: watch::Receiver<Sync>,
    /// The unit's place in the kind's watch ([`Watches`](crate::cluster::feed::Watches));
    /// dropping it stops the deliveries.
    _subscription: Subscription<Members>,
    /// Set on any watch error, cleared when a full list completes: while set, the store may
    /// miss changes, so no prune may trust it ([`MetadataCache::relist_stale`]).
    errored: Arc<AtomicBool>,
    /// Discovery's one copy of the kind.
    resource: Arc<ApiResource>,
    namespaced: bool,
}

impl MetadataCache {
    /// Starts watching `resource` if not yet watched, and waits (at most `timeout`) until its
    /// first list is in the store.
    ///
    /// Errors: [`Error::CacheFailed`] when the first list fails or times out (retry later).
    pub async fn ensure(&mut self, resource: &Arc<ApiResource>, namespaced: bool, timeout: Duration) -> Result<()> {
        let mut ready = self.ensure_all(&[(resource.clone(), namespaced)], timeout).await;
        ready.pop().map_or(Ok(()), |(_, ready)| ready)
    }

    async fn start(
        &mut self,
        gk: GroupKind,
        resource: &Arc<ApiResource>,
        namespaced: bool,
        timeout: Duration,
    ) -> Result<()> {
        let rx = self.spawn(gk.clone(), resource, namespaced);
        wait_ready(&gk, rx, timeout).await
    }

    /// [`MetadataCache::ensure`] for many kinds at once: starts every watch not yet running,
    /// then waits for all their first lists together (at most `timeout`), so n new kinds cost
    /// about one list's round trip, not n in a row. One result per kind, in the order given.
    pub async fn ensure_all(
        &mut self,
        kinds: &[(Arc<ApiResource>, bool)],
        timeout: Duration,
    ) -> Vec<(GroupKind, Result<()>)> {
        let mut waits = Vec::with_capacity(kinds.len());
        for (resource, namespaced) in kinds {
            let gk = GroupKind::new(&resource.group, &resource.kind);
            let rx = match self.kinds.get(&gk) {
                Some(existing) if !matches!(*existing.state.borrow(), Sync::Failed(_)) => existing.state.clone(),
                _ => self.spawn(gk.clone(), resource, *namespaced),
            };
            waits.push((gk, rx));
        }
        futures::future::join_all(waits.into_iter().map(|(gk, rx)| async move {
            let ready = wait_ready(&gk, rx, timeout).await;
            (gk, ready)
        }))
        .await
    }

    /// Subscribes to the watch of `gk` (replacing any earlier subscription) and returns its
    /// state. The first list after a subscription that had listed
    /// ([`MetadataCache::relist_stale`]) is a relist: its differences from the store are drift.
    fn spawn(&mut self, gk: GroupKind, resource: &Arc<ApiResource>, namespaced: bool) -> watch::Receiver<Sync> {
        let listed = self.kinds.get(&gk).is_some_and(|k| *k.state.borrow() == Sync::Ready);
        // The old subscription goes first: the new one's list must not race its deliveries.
        self.kinds.remove(&gk);
        let (tx, rx) = watch::channel(Sync::Pending);
        let errored = Arc::new(AtomicBool::new(false));
        let sink = Arc::new(Members {
            gk: gk.clone(),
            namespaced,
            store: self.store.clone(),
            state: tx,
            drift: self.drift.clone(),
            touched: self.follow.is_some_and(|follow| follow(&gk)).then(|| self.touched.clone()),
            errored: errored.clone(),
            field_manager: self.field_manager.clone(),
            listed: AtomicBool::new(listed),
            client: self.watches.client().clone(),
            resource: resource.clone(),
        });
        let subscription = self.watches.subscribe(resource, None, crate::cluster::inventory::PART_OF, &self.id, sink);
        let kind = KindWatch {
            state: rx.clone(),
            _subscription: subscription,
            errored,
            resource: resource.clone(),
            namespaced,
        };
        self.kinds.insert(gk, kind);
        rx
    }

    /// Group-kinds whose watch has had an error since its last complete list: the store may
    /// miss changes of them (a kind stays "ready" while its watch fails, e.g. list RBAC
    /// revoked).
    pub fn stale_kinds(&self) -> Vec<GroupKind> {
        self.kinds.iter().filter(|(_, k)| k.errored.load(Ordering::SeqCst)).map(|(gk, _)| gk.clone()).collect()
    }

    /// Restarts the watch of every [stale kind](MetadataCache::stale_kinds) and waits (at most
    /// `timeout` each) for its fresh complete list, so a prune can trust the store again.
    ///
    /// Errors: [`Error::CacheFailed`] when a fresh list fails or times out: do not prune.
    pub async fn relist_stale(&mut self, timeout: Duration) -> Result<()> {
        for gk in self.stale_kinds() {
            let (resource, namespaced) = {
                let k = &self.kinds[&gk];
                (k.resource.clone(), k.namespaced)
            };
            self.start(gk, &resource, namespaced, timeout).await?;
        }
        Ok(())
    }

    /// Stops watching the group-kinds `keep` rejects and drops their entries: a kind the API
    /// server no longer serves (its group missing from discovery, its version gone) has no
    /// trustworthy members to prune; they stay recorded in the inventory instead.
    pub fn retain_kinds(&mut self, keep: impl Fn(&GroupKind) -> bool) {
        let dropped: Vec<GroupKind> = self.kinds.keys().filter(|gk| !keep(gk)).cloned().collect();
        for gk in &dropped {
            self.kinds.remove(gk);
        }
        if !dropped.is_empty() {
            self.store.lock().expect("cache lock").retain(|k, _| !dropped.contains(&k.gk));
        }
    }

    /// Group-kinds being watched.
    pub fn kinds(&self) -> Vec<GroupKind> {
        self.kinds.keys().cloned().collect()
    }
}

async fn wait_ready(gk: &GroupKind, mut rx: watch::Receiver<Sync>, timeout: Duration) -> Result<()> {
    let failed = |message: String| Error::CacheFailed { group_kind: gk.to_string(), message };
    let last = rx.clone();
    let outcome = tokio::time::timeout(timeout, rx.wait_for(|s| matches!(s, Sync::Ready | Sync::Failed(_)))).await;
    match outcome {
        Err(_) => Err(failed(match &*last.borrow() {
            Sync::Retrying(last) => format!("first list not complete within {timeout:?}; last error: {last}"),
            _ => format!("first list not complete within {timeout:?}"),
        })),
        Ok(Err(_)) => Err(failed("watch task ended".into())),
        Ok(Ok(state)) => match &*state {
            Sync::Failed(message) => Err(failed(message.clone())),
            _ => Ok(()),
        },
    }
}
