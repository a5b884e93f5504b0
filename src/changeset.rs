//! The result of one sync: a [`ChangeSet`] with one [`Entry`] per object and its [`Action`].
//!
//! The engine (its apply and prune steps) returns data and never logs; the caller (the
//! CLI or the daemon) logs it, once per object that is not `unchanged` plus one summary event.
//! Modelled on fluxcd/pkg `ssa` `ChangeSet`.

use std::fmt;

use crate::object::ObjectRef;

/// What a sync did to one object (DESIGN.md, Words: change set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    /// The object did not exist and was created.
    Created,
    /// The plan said `create` (no object of that name carried the unit's ApplySet label), but
    /// the object already existed, made by someone else: gitward applied git's version over it
    /// and took it into the unit's ApplySet. Told by the API server's answer — `200 OK`, not
    /// `201 Created`, to a server-side apply; `409 AlreadyExists` to `update` mode's `POST`.
    Adopted,
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
    /// The API server answered 409 Conflict to a write that carried a resourceVersion
    /// (`update` mode, field-manager takeover): someone changed the object after gitward read
    /// it, so gitward acted on stale data. Not retried in place (DESIGN.md decision 5); it counts
    /// as a failure, so the sync does not prune and the daemon retries the unit with backoff.
    /// The entry's message names both resourceVersions.
    Conflict,
}

impl Action {
    /// The lowercase name used in logs and metrics labels: `created`, `drift-corrected`, ….
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Created => "created",
            Action::Adopted => "adopted",
            Action::Configured => "configured",
            Action::Unchanged => "unchanged",
            Action::DriftCorrected => "drift-corrected",
            Action::Pruned => "pruned",
            Action::Skipped => "skipped",
            Action::Failed => "failed",
            Action::Conflict => "conflict",
        }
    }
}

impl Action {
    /// True for the actions that changed the live object to what git says (`created`,
    /// `adopted`, `configured`, `drift-corrected`): what a push waits for and the health wait
    /// watches.
    pub fn applied_change(self) -> bool {
        matches!(self, Action::Created | Action::Adopted | Action::Configured | Action::DriftCorrected)
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
    /// Why, for `skipped`, `failed` and `conflict` (the API server's message, the dependency
    /// that failed, the resourceVersions); a note for some others (`re-created`, fields taken
    /// over from other managers); `None` otherwise.
    pub message: Option<String>,
    /// The requests the apply engine sent for this object, in order (e.g. `[get, update]` for a
    /// `configure` in `update` mode). Empty for entries it did not write: prunes, skips,
    /// refusals. The audit log records verbs but not patch types; this records both.
    pub sent: Vec<Request>,
}

/// One request the apply engine sent for an object: the HTTP verb and, for `PATCH`, the patch
/// type (Kubernetes API conventions; the content type is what selects the patch semantics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Request {
    /// Server-side apply: `PATCH` with `application/apply-patch+yaml` (KEP-555).
    Apply,
    /// `POST`: create.
    Create,
    /// `GET` of the whole object (`update` mode's read before a replace).
    Get,
    /// `GET` of the object's metadata only (after a conflict, to learn the live resourceVersion).
    GetMetadata,
    /// `PUT`: replace the whole object, with a resourceVersion precondition.
    Update,
    /// `PATCH` with `application/merge-patch+json` (RFC 7396).
    MergePatch,
    /// `PATCH` with `application/strategic-merge-patch+json` (built-in kinds only).
    StrategicMergePatch,
    /// `PATCH` with `application/json-patch+json` (RFC 6902).
    JsonPatch,
    /// `DELETE` (before a re-create).
    Delete,
}

impl Request {
    /// The verb as the apiserver's audit log records it: `patch`, `create`, `get`, `update`,
    /// `delete`.
    pub fn audit_verb(self) -> &'static str {
        match self {
            Request::Apply | Request::MergePatch | Request::StrategicMergePatch | Request::JsonPatch => "patch",
            Request::Create => "create",
            Request::Get | Request::GetMetadata => "get",
            Request::Update => "update",
            Request::Delete => "delete",
        }
    }

    /// The request's `Content-Type` for patches, `None` for other verbs.
    pub fn patch_type(self) -> Option<&'static str> {
        match self {
            Request::Apply => Some("application/apply-patch+yaml"),
            Request::MergePatch => Some("application/merge-patch+json"),
            Request::StrategicMergePatch => Some("application/strategic-merge-patch+json"),
            Request::JsonPatch => Some("application/json-patch+json"),
            _ => None,
        }
    }
}

/// Counts of entries by action, the fields of the `sync complete` event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Entries with [`Action::Created`].
    pub created: usize,
    /// Entries with [`Action::Adopted`].
    pub adopted: usize,
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
    /// Entries with [`Action::Conflict`].
    pub conflict: usize,
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
    /// Objects that carry the unit's `part-of` label and left git (or never were in it) but are
    /// not members, so they were not pruned, with the reason (a copy, a controller's child):
    /// reported, not counted as skipped.
    pub not_members: Vec<(ObjectRef, String)>,
    /// When the last object that git changed (created, adopted, configured, drift-corrected) was
    /// applied: what a push is waiting for, while unchanged objects are still being re-sent.
    pub changes_applied_at: Option<std::time::Instant>,
    /// Namespaces this sync made for `create_namespace`: not members (they get no entry, and are
    /// never pruned), so logged (`namespace created`) and counted (`namespaces_created` of
    /// `sync complete`) apart.
    pub namespaces_created: Vec<String>,
    /// What a self-heal changed of its drifted objects, each as `gitward diff` shows it (a
    /// unified diff of YAML, live before → as applied, Secret data and decrypted values
    /// masked); the first [`DRIFT_DIFFS`] objects. Empty for a sync.
    pub drift_diffs: Vec<(ObjectRef, String)>,
}

/// Drifted objects whose diff a self-heal keeps ([`ChangeSet::drift_diffs`]): 10. Each costs
/// two requests (a GET and a dry-run apply) before the heal's apply; a field fight is backed
/// off per object, so these are rare.
pub const DRIFT_DIFFS: usize = 10;

/// `message` with the decrypted values masked: an API server's message may quote the value it
/// refused (`Invalid value: "…"`).
fn masked(message: String) -> String {
    match crate::telemetry::mask::mask(&message) {
        std::borrow::Cow::Borrowed(_) => message,
        std::borrow::Cow::Owned(m) => m,
    }
}

impl ChangeSet {
    /// Appends an entry for an object the apply engine sent nothing for; its message masked
    /// ([`crate::telemetry::mask`]).
    pub fn push(&mut self, object: ObjectRef, action: Action, message: Option<String>) {
        self.entries.push(Entry { object, action, message: message.map(masked), sent: Vec::new() });
    }

    /// Appends an entry with the requests sent for it, and counts them in [`ChangeSet::requests`];
    /// its message masked ([`crate::telemetry::mask`]).
    pub fn push_sent(&mut self, object: ObjectRef, action: Action, message: Option<String>, sent: Vec<Request>) {
        self.requests += sent.len();
        self.entries.push(Entry { object, action, message: message.map(masked), sent });
    }

    /// Counts entries by action.
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for e in &self.entries {
            let slot = match e.action {
                Action::Created => &mut c.created,
                Action::Adopted => &mut c.adopted,
                Action::Configured => &mut c.configured,
                Action::Unchanged => &mut c.unchanged,
                Action::DriftCorrected => &mut c.drift_corrected,
                Action::Pruned => &mut c.pruned,
                Action::Skipped => &mut c.skipped,
                Action::Failed => &mut c.failed,
                Action::Conflict => &mut c.conflict,
            };
            *slot += 1;
        }
        c
    }

    /// True when any object failed, was skipped or met a conflict: such a sync does not prune,
    /// exits 1, and the daemon retries the unit with backoff.
    pub fn has_failures(&self) -> bool {
        self.entries.iter().any(|e| matches!(e.action, Action::Failed | Action::Skipped | Action::Conflict))
    }

    /// The entry for `object`, if any.
    pub fn get(&self, object: &ObjectRef) -> Option<&Entry> {
        self.entries.iter().find(|e| &e.object == object)
    }

    /// Notes that an object git changed was applied at `at` (keeps the latest).
    pub fn note_change_applied(&mut self, at: std::time::Instant) {
        self.changes_applied_at = Some(self.changes_applied_at.map_or(at, |t| t.max(at)));
    }

    /// Appends all entries and requests of `other`.
    pub fn extend(&mut self, other: ChangeSet) {
        self.entries.extend(other.entries);
        self.requests += other.requests;
        if other.prune_refused.is_some() {
            self.prune_refused = other.prune_refused;
        }
        self.not_members.extend(other.not_members);
        self.namespaces_created.extend(other.namespaces_created);
        self.drift_diffs.extend(other.drift_diffs);
        if let Some(at) = other.changes_applied_at {
            self.note_change_applied(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::GroupKind;

    #[test]
    fn a_conflict_is_counted_and_is_a_failure() {
        let object = ObjectRef::new(GroupKind::from_api_version("v1", "ConfigMap"), Some("a"), "x");
        let mut changes = ChangeSet::default();
        changes.push_sent(object.clone(), Action::Unchanged, None, vec![Request::MergePatch]);
        assert!(!changes.has_failures());
        changes.push_sent(
            object,
            Action::Conflict,
            Some("stale".into()),
            vec![Request::MergePatch, Request::GetMetadata],
        );
        assert!(changes.has_failures());
        assert_eq!(changes.counts().conflict, 1);
        assert_eq!(changes.requests, 3);
        assert_eq!(Action::Conflict.as_str(), "conflict");
    }
}
