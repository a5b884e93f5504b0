//! The controls a user sets on a unit's ApplySet parent, beside the record the daemon writes
//! there: `gitward suspend` / `gitward resume` ([`SUSPENDED`], who and when), and `gitward
//! reconcile` ([`REQUESTED_AT`], answered by the daemon's [`HANDLED_AT`]), as Flux's
//! `spec.suspend` and `reconcile.fluxcd.io/requestedAt` / `status.lastHandledReconcileAt`.
//!
//! The commands write them by JSON merge patch under their own field manager
//! ([`CONTROL_MANAGER`]); the daemon's server-side applies of the parent never declare them,
//! so they never remove them, and every replica sees them through the parent's metadata watch
//! ([`super::ParentWatch::control`]) within the watch's latency.

use std::collections::BTreeMap;

use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::Inventory;
use crate::cluster::{Error, Result, api_message, is_status};

/// Annotation on the parent: `"true"` while the unit is suspended (`gitward suspend`).
pub const SUSPENDED: &str = "gitward.dev/suspended";
/// Annotation on the parent: who suspended the unit (`user@host`).
pub const SUSPENDED_BY: &str = "gitward.dev/suspended-by";
/// Annotation on the parent: when the unit was suspended (RFC 3339, UTC).
pub const SUSPENDED_AT: &str = "gitward.dev/suspended-at";
/// Annotation on the parent: a request to sync now (`gitward reconcile`), an opaque token
/// (the RFC 3339 time of the request); a new value is a new request.
pub const REQUESTED_AT: &str = "gitward.dev/requested-at";
/// Annotation on the parent: the [`REQUESTED_AT`] value of the last request whose sync the
/// daemon recorded, written with that sync's record (Flux's `lastHandledReconcileAt`).
pub const HANDLED_AT: &str = "gitward.dev/handled-at";
/// Annotation on the parent: the [`REQUESTED_AT`] value of a request the daemon took while a
/// health wait of the unit runs, and runs once that wait ends (written by the daemon; read by
/// `gitward reconcile` to say why the request is not handled yet).
pub const QUEUED_AT: &str = "gitward.dev/request-queued";
/// The field manager of the commands' writes of the controls.
pub const CONTROL_MANAGER: &str = "gitward-control";

/// Whether `key` is a control a command writes (never part of the daemon's record, which
/// must not carry it: a daemon write would then claim it, and put back a control removed).
pub fn is_control(key: &str) -> bool {
    [SUSPENDED, SUSPENDED_BY, SUSPENDED_AT, REQUESTED_AT, QUEUED_AT].contains(&key)
}

/// What the controls on a parent say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Control {
    /// [`SUSPENDED`] is `"true"`.
    pub suspended: bool,
    /// [`SUSPENDED_BY`] and [`SUSPENDED_AT`], for `gitward status`.
    pub suspended_by: Option<String>,
    /// [`SUSPENDED_AT`].
    pub suspended_at: Option<String>,
    /// [`REQUESTED_AT`].
    pub requested_at: Option<String>,
    /// [`HANDLED_AT`].
    pub handled_at: Option<String>,
    /// [`QUEUED_AT`].
    pub queued_at: Option<String>,
}

impl Control {
    /// The controls in a parent's `annotations` (none: all off).
    pub fn of(annotations: &BTreeMap<String, String>) -> Self {
        let get = |k: &str| annotations.get(k).cloned();
        Self {
            suspended: annotations.get(SUSPENDED).is_some_and(|v| v == "true"),
            suspended_by: get(SUSPENDED_BY),
            suspended_at: get(SUSPENDED_AT),
            requested_at: get(REQUESTED_AT),
            handled_at: get(HANDLED_AT),
            queued_at: get(QUEUED_AT),
        }
    }

    /// The request not handled yet: [`REQUESTED_AT`] when it differs from [`HANDLED_AT`].
    pub fn pending_request(&self) -> Option<&str> {
        self.requested_at.as_deref().filter(|r| self.handled_at.as_deref() != Some(*r))
    }
}

impl Inventory {
    /// The controls on the parent (one metadata GET); `None` when it does not exist.
    ///
    /// Errors: [`Error::InventoryFailed`] when it cannot be read.
    pub async fn control(&self, client: &kube::Client) -> Result<Option<Control>> {
        match self.api(client).get_metadata_opt(&self.parent.name).await {
            Ok(meta) => Ok(meta.map(|m| m.metadata.annotations.as_ref().map(Control::of).unwrap_or_default())),
            Err(e) => Err(Error::InventoryFailed {
                parent: self.parent.to_string(),
                message: format!("read: {}", api_message(&e)),
            }),
        }
    }

    /// The parent's `gitward.dev/` annotations — the record, the attempt and the controls —
    /// by one metadata GET; `None` when it does not exist. What `gitward status` and `gitward
    /// sync` judge another unit's `depends_on` by.
    ///
    /// Errors: [`Error::InventoryFailed`] when it cannot be read.
    pub async fn recorded(&self, client: &kube::Client) -> Result<Option<super::Recorded>> {
        match self.api(client).get_metadata_opt(&self.parent.name).await {
            Ok(meta) => Ok(meta.map(|m| {
                let annotations = m.metadata.annotations.unwrap_or_default();
                annotations.into_iter().filter(|(k, _)| k.starts_with(super::GITWARD_PREFIX)).collect()
            })),
            Err(e) => Err(Error::InventoryFailed {
                parent: self.parent.to_string(),
                message: format!("read: {}", api_message(&e)),
            }),
        }
    }

    /// Suspends the unit: sets [`SUSPENDED`], [`SUSPENDED_BY`] `by` and [`SUSPENDED_AT`] now.
    ///
    /// Errors: [`Error::InventoryFailed`] when the parent does not exist (the unit never
    /// synced) or cannot be written.
    pub async fn suspend(&self, client: &kube::Client, by: &str) -> Result<()> {
        let at = jiff::Timestamp::now().round(jiff::Unit::Second).unwrap_or_else(|_| jiff::Timestamp::now());
        self.patch_controls(client, json!({ SUSPENDED: "true", SUSPENDED_BY: by, SUSPENDED_AT: at.to_string() })).await
    }

    /// Resumes the unit: removes [`SUSPENDED`], [`SUSPENDED_BY`] and [`SUSPENDED_AT`].
    ///
    /// Errors: as [`Inventory::suspend`].
    pub async fn resume(&self, client: &kube::Client) -> Result<()> {
        self.patch_controls(client, json!({ SUSPENDED: null, SUSPENDED_BY: null, SUSPENDED_AT: null })).await
    }

    /// Asks the daemon to sync the unit now: sets [`REQUESTED_AT`] to `token`.
    ///
    /// Errors: as [`Inventory::suspend`].
    pub async fn request_sync(&self, client: &kube::Client, token: &str) -> Result<()> {
        self.patch_controls(client, json!({ REQUESTED_AT: token })).await
    }

    /// Notes that the request `token` waits for the end of a running health wait: sets
    /// [`QUEUED_AT`] to it.
    ///
    /// Errors: as [`Inventory::suspend`].
    pub async fn note_queued(&self, client: &kube::Client, token: &str) -> Result<()> {
        self.patch_controls(client, json!({ QUEUED_AT: token })).await
    }

    /// One merge patch of the parent's annotations (`null` removes one).
    async fn patch_controls(&self, client: &kube::Client, annotations: serde_json::Value) -> Result<()> {
        let body = json!({ "metadata": { "annotations": annotations } });
        let params = PatchParams { field_manager: Some(CONTROL_MANAGER.to_owned()), ..PatchParams::default() };
        match self.api(client).patch(&self.parent.name, &params, &Patch::Merge(&body)).await {
            Ok(_) => Ok(()),
            Err(e) if is_status(&e, 404) => Err(Error::InventoryFailed {
                parent: self.parent.to_string(),
                message:
                    "not found: the unit has not synced yet (`suspend = true` in its config suspends it from the start)"
                        .to_owned(),
            }),
            Err(e) => Err(Error::InventoryFailed {
                parent: self.parent.to_string(),
                message: format!("write: {}", api_message(&e)),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_pending_until_its_value_is_handled() {
        let mut a = BTreeMap::new();
        assert_eq!(Control::of(&a).pending_request(), None);
        a.insert(REQUESTED_AT.to_owned(), "t1".to_owned());
        assert_eq!(Control::of(&a).pending_request(), Some("t1"));
        a.insert(HANDLED_AT.to_owned(), "t1".to_owned());
        assert_eq!(Control::of(&a).pending_request(), None);
        a.insert(REQUESTED_AT.to_owned(), "t2".to_owned());
        assert_eq!(Control::of(&a).pending_request(), Some("t2"));
    }

    #[test]
    fn only_true_suspends_and_the_controls_are_not_the_record() {
        let a = BTreeMap::from([(SUSPENDED.to_owned(), "false".to_owned())]);
        assert!(!Control::of(&a).suspended);
        assert!(is_control(SUSPENDED) && is_control(REQUESTED_AT) && is_control(QUEUED_AT) && !is_control(HANDLED_AT));
    }
}
