//! The unit's ApplySet parent as one part of the engine: what the parent holds and its
//! resourceVersion, the record of syncs and attempts it carries, and the namespaces a sync
//! makes for it. Every read and write of the parent is a verb here, sent through the cluster
//! view's seam ([`super::writes::Writes::parent`]); no other part touches these fields.
//!
//! Files: `inventory` (the parent widened before the apply and narrowed after a clean prune,
//! DESIGN.md decision 6), `record` (the result and attempt written on it), `namespaces`
//! (`create_namespace`, the parent's own namespace).

mod inventory;
pub(crate) mod namespaces;
mod record;

use std::sync::Arc;

use crate::cluster::inventory::{Inventory, Parent, ParentWatch};
use crate::config::SyncUnit;
use crate::health::record::{Attempt, Record};
use crate::object::ObjectRef;
use crate::source::Revision;

/// The unit's ApplySet parent as the engine knows it: its contents and resourceVersion once
/// read or written, the record it carries, and the namespaces made for it.
pub(in crate::sync) struct ApplySetParent {
    /// The unit: its name (written on the parent), field manager, namespace options, and what
    /// it follows (named by an attempt that resolved no revision).
    unit: Arc<SyncUnit>,
    /// Where the parent is and its ApplySet id.
    inventory: Inventory,
    /// What the parent holds and its resourceVersion, once read or written: later syncs need
    /// not read it; every write carries that resourceVersion as a precondition.
    known: Option<Parent>,
    /// Watches the parent, so a parent deleted or written by someone else is read again (and
    /// re-created) rather than trusted from memory; started at the first sync.
    watch: Option<ParentWatch>,
    /// The namespaces found or made for the unit and the parent.
    namespaces: Namespaces,
    /// The last sync's record (revision, time, result), as last read or written.
    recorded: Option<Record>,
    /// The last attempt (revision tried, error, objects not applied), as last read or written.
    attempt: Attempt,
    /// The revision the sync in progress attempts, once fetched: what a sync that fails as a
    /// whole records as attempted.
    attempting: Option<Revision>,
    /// The sync request ([`crate::cluster::inventory::control::REQUESTED_AT`]) the sync in
    /// progress answers: written as handled with its final record.
    handling: Option<String>,
    /// The request the parent says was handled last
    /// ([`crate::cluster::inventory::control::HANDLED_AT`]), carried by every parent write.
    handled: Option<String>,
}

/// The namespaces a sync finds or makes before the parent's first write ([`namespaces`]).
#[derive(Default)]
struct Namespaces {
    /// With `create_namespace`: the unit's namespace was found or made by this engine; cleared
    /// after a sync with failures, so it is checked again.
    checked: bool,
    /// The revision being synced defines the parent's namespace (a Namespace manifest): made
    /// bare before the parent's first write.
    defined: bool,
    /// Namespaces this sync made bare (the parent's, `create_namespace`'s): a member's entry
    /// says `created`, not `adopted`; another's is in `namespaces_created`.
    made_bare: Vec<ObjectRef>,
}

impl ApplySetParent {
    /// The parent of `unit`'s inventory, not read yet.
    pub(in crate::sync) fn new(unit: Arc<SyncUnit>) -> Self {
        let inventory = Inventory::new(&unit.inventory);
        Self {
            unit,
            inventory,
            known: None,
            watch: None,
            namespaces: Namespaces::default(),
            recorded: None,
            attempt: Attempt::default(),
            attempting: None,
            handling: None,
            handled: None,
        }
    }

    /// Where the parent is and its ApplySet id.
    pub(in crate::sync) fn inventory(&self) -> &Inventory {
        &self.inventory
    }

    /// The record the parent carries, as last read or written.
    pub(in crate::sync) fn recorded(&self) -> Option<&Record> {
        self.recorded.as_ref()
    }

    /// Forgets what the parent holds, so the next write reads it first; stops watching it when
    /// `unwatch` (a one-shot command, or watches shared by the daemon).
    pub(in crate::sync) fn forget(&mut self, unwatch: bool) {
        self.known = None;
        if unwatch {
            self.watch = None;
        }
    }

    /// A sync begins: until it resolves a revision, a failure attempted none.
    pub(in crate::sync) fn begin_attempt(&mut self, revision: Option<&Revision>) {
        self.attempting = revision.cloned();
    }

    /// The revision the sync in progress (or the last one) attempts, once its fetch resolved one.
    pub(in crate::sync) fn attempted(&self) -> Option<&Revision> {
        self.attempting.as_ref()
    }

    /// Marks the sync about to run as the answer to the sync request `token`.
    pub(in crate::sync) fn answer_request(&mut self, token: String) {
        self.handling = Some(token);
    }

    /// The sync had failures: `create_namespace`'s namespace is checked again by the next.
    pub(in crate::sync) fn recheck_namespace(&mut self) {
        self.namespaces.checked = false;
    }

    /// The namespaces this sync made bare, taken for its change set's entries.
    pub(in crate::sync) fn take_made_bare(&mut self) -> Vec<ObjectRef> {
        std::mem::take(&mut self.namespaces.made_bare)
    }

    /// How many members the parent records, as last read or written; `None` before then.
    pub(in crate::sync) fn recorded_members(&self) -> Option<usize> {
        self.known.as_ref().map(|p| p.contents.members.len())
    }
}
