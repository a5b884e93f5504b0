//! The parent followed between syncs: a metadata watch of it that tells the engine, with no
//! request, whether it exists and at which resourceVersion, and gives the controls and record
//! its annotations hold to the unit's task and to the units that depend on it.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Control, GITWARD_PREFIX, ID, Inventory};
use crate::cluster::feed::{Meta, Sink, Subscription, Watches};

/// What the watch of the parent last saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// Its first list has not completed.
    Unknown,
    /// The parent does not exist (deleted by hand, or not created yet).
    Absent,
    /// The parent exists at this resourceVersion.
    Present(String),
}

/// A metadata watch of the parent: tells the engine, with no request on the sync path, when
/// the parent was deleted or written by someone else, so the parent is re-read (and
/// re-created) instead of trusted from memory. Through the daemon's shared [`Watches`], the
/// parents of one namespace share one watch (selector `applyset.kubernetes.io/id`), fanned
/// out by their id; a parent that loses the label reads as absent, so it is re-read.
pub struct ParentWatch {
    seen: tokio::sync::watch::Receiver<Seen>,
    control: tokio::sync::watch::Receiver<Option<Control>>,
    record: tokio::sync::watch::Receiver<Option<Recorded>>,
    _subscription: Subscription<ParentSink>,
}

/// The parent's `gitward.dev/` annotations (record, attempt and controls), as its watch saw
/// them: what another unit's `depends_on` judges.
pub type Recorded = BTreeMap<String, String>;

impl ParentWatch {
    /// What the watch last saw.
    pub fn seen(&self) -> Seen {
        self.seen.borrow().clone()
    }

    /// The controls on the parent ([`control`](super::control)) as the watch last saw them:
    /// `None` until its first list completed; all off for a parent that does not exist, or when
    /// the parent cannot be watched at all (a permanent error, logged).
    pub fn control(&self) -> tokio::sync::watch::Receiver<Option<Control>> {
        self.control.clone()
    }

    /// The parent's `gitward.dev/` annotations as the watch last saw them: `None` until its
    /// first list completed, empty for a parent that does not exist; a new value only when
    /// they changed.
    pub fn record(&self) -> tokio::sync::watch::Receiver<Option<Recorded>> {
        self.record.clone()
    }
}

/// The parent's side of its watch: the objects of its id named as it is.
struct ParentSink {
    name: String,
    seen: tokio::sync::watch::Sender<Seen>,
    control: tokio::sync::watch::Sender<Option<Control>>,
    record: tokio::sync::watch::Sender<Option<Recorded>>,
}

impl ParentSink {
    fn is_parent(&self, object: &Meta) -> bool {
        object.metadata.name.as_deref() == Some(self.name.as_str())
    }

    fn present(object: &Meta) -> Seen {
        Seen::Present(object.metadata.resource_version.clone().unwrap_or_default())
    }

    fn control_of(object: &Meta) -> Control {
        object.metadata.annotations.as_ref().map(Control::of).unwrap_or_default()
    }

    fn record_of(object: &Meta) -> Recorded {
        let annotations = object.metadata.annotations.iter().flatten();
        annotations.filter(|(k, _)| k.starts_with(GITWARD_PREFIX)).map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// Sends `record` when it differs from what the receivers hold.
    fn send_record(&self, record: Recorded) {
        self.record.send_if_modified(|held| {
            let changed = held.as_ref() != Some(&record);
            *held = Some(record);
            changed
        });
    }

    /// Sends `control` when it differs from what the receivers hold.
    fn send_control(&self, control: Control) {
        self.control.send_if_modified(|held| {
            let changed = held.as_ref() != Some(&control);
            *held = Some(control);
            changed
        });
    }
}

impl Sink for ParentSink {
    type Listing = Option<(Seen, Control, Recorded)>;

    fn list_item(&self, listing: &mut Self::Listing, object: &Meta) {
        if self.is_parent(object) {
            *listing = Some((Self::present(object), Self::control_of(object), Self::record_of(object)));
        }
    }

    fn listed(&self, listing: Self::Listing) {
        let (seen, control, record) = listing.unwrap_or((Seen::Absent, Control::default(), Recorded::new()));
        self.seen.send_replace(seen);
        self.send_control(control);
        self.send_record(record);
    }

    fn applied(&self, object: &Meta) {
        if self.is_parent(object) {
            self.seen.send_replace(Self::present(object));
            self.send_control(Self::control_of(object));
            self.send_record(Self::record_of(object));
        }
    }

    fn deleted(&self, object: &Meta) {
        if self.is_parent(object) {
            self.seen.send_replace(Seen::Absent);
            self.send_control(Control::default());
            self.send_record(Recorded::new());
        }
    }

    fn failed(&self, message: &str, permanent: bool) {
        if permanent && self.control.borrow().is_none() {
            tracing::warn!(parent = %self.name, message, "the ApplySet parent cannot be watched: suspend and reconcile requests are not seen");
            self.send_control(Control::default());
        }
    }
}

impl Inventory {
    /// Starts watching the parent through `watches` (one LIST and one WATCH kept open, shared
    /// with the other parents of its namespace in the daemon).
    pub fn watch(&self, watches: &Watches) -> ParentWatch {
        let (tx, seen) = tokio::sync::watch::channel(Seen::Unknown);
        let (control_tx, control) = tokio::sync::watch::channel(None);
        let (record_tx, record) = tokio::sync::watch::channel(None);
        let name = self.parent.name.to_string();
        let sink = Arc::new(ParentSink { name, seen: tx, control: control_tx, record: record_tx });
        let namespace = self.parent.namespace.as_deref().unwrap_or_default();
        let subscription = watches.subscribe(&self.resource, Some(namespace), ID, &self.id, sink);
        ParentWatch { seen, control, record, _subscription: subscription }
    }
}
