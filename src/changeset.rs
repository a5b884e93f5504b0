//! The result of one sync: a [`ChangeSet`] with one [`Entry`] per object and its [`Action`].
//!
//! The engine ([`crate::apply`], [`crate::prune`]) returns data and never logs; the caller (the
//! CLI or the daemon) logs it, once per object that is not `unchanged` plus one summary event.
//! Modelled on fluxcd/pkg `ssa` `ChangeSet`.

use std::fmt;

use crate::object::ObjectRef;

/// What a sync did to one object (DESIGN.md, Words: change set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    /// The object did not exist and was created.
    Created,
    /// git changed the object (desired hash differs) and it was applied.
    Configured,
    /// git did not change the object; it was still sent and the server wrote nothing.
    Unchanged,
    /// git did not change the object, but someone else had: the apply restored it (the
    /// returned resourceVersion differed from the cached one).
    DriftCorrected,
    /// The object left git and was deleted from the cluster.
    Pruned,
    /// Not sent, because something it depends on failed (its Namespace or CRD), or a prune
    /// was refused; the entry's message says which.
    Skipped,
    /// The request failed or was refused (API server rejection, another ApplySet's object,
    /// immutable field without recreate); the entry's message says why.
    Failed,
}

impl Action {
    /// The lowercase name used in logs and metrics labels: `created`, `drift-corrected`, ….
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Created => "created",
            Action::Configured => "configured",
            Action::Unchanged => "unchanged",
            Action::DriftCorrected => "drift-corrected",
            Action::Pruned => "pruned",
            Action::Skipped => "skipped",
            Action::Failed => "failed",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One object's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The object.
    pub object: ObjectRef,
    /// What happened to it.
    pub action: Action,
    /// Why, for `skipped` and `failed` (the API server's message, the dependency that failed);
    /// `None` otherwise.
    pub message: Option<String>,
}

/// Counts of entries by action, the fields of the `sync complete` event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Entries with [`Action::Created`].
    pub created: usize,
    /// Entries with [`Action::Configured`].
    pub configured: usize,
    /// Entries with [`Action::Unchanged`].
    pub unchanged: usize,
    /// Entries with [`Action::DriftCorrected`].
    pub drift_corrected: usize,
    /// Entries with [`Action::Pruned`].
    pub pruned: usize,
    /// Entries with [`Action::Skipped`].
    pub skipped: usize,
    /// Entries with [`Action::Failed`].
    pub failed: usize,
}

/// The result of one sync of one unit.
#[derive(Debug, Clone, Default)]
pub struct ChangeSet {
    /// One entry per object, in the order the requests completed within each stage.
    pub entries: Vec<Entry>,
    /// Requests sent to the API server for objects (applies, deletes, metadata look-ups).
    pub requests: usize,
    /// Why the prune was refused (desired set empty, over the configured fraction), if it was.
    pub prune_refused: Option<String>,
}

impl ChangeSet {
    /// Appends an entry.
    pub fn push(&mut self, object: ObjectRef, action: Action, message: Option<String>) {
        self.entries.push(Entry { object, action, message });
    }

    /// Counts entries by action.
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for e in &self.entries {
            let slot = match e.action {
                Action::Created => &mut c.created,
                Action::Configured => &mut c.configured,
                Action::Unchanged => &mut c.unchanged,
                Action::DriftCorrected => &mut c.drift_corrected,
                Action::Pruned => &mut c.pruned,
                Action::Skipped => &mut c.skipped,
                Action::Failed => &mut c.failed,
            };
            *slot += 1;
        }
        c
    }

    /// True when any object failed or was skipped: such a sync does not prune and exits 1.
    pub fn has_failures(&self) -> bool {
        self.entries.iter().any(|e| matches!(e.action, Action::Failed | Action::Skipped))
    }

    /// The entry for `object`, if any.
    pub fn get(&self, object: &ObjectRef) -> Option<&Entry> {
        self.entries.iter().find(|e| &e.object == object)
    }

    /// Appends all entries and requests of `other`.
    pub fn extend(&mut self, other: ChangeSet) {
        self.entries.extend(other.entries);
        self.requests += other.requests;
        if other.prune_refused.is_some() {
            self.prune_refused = other.prune_refused;
        }
    }
}
