//! The early apply as the engine runs it: a push's changed objects, chosen by
//! [`crate::sync::early::select`], sent before the revision is loaded whole.

use super::Engine;
use crate::apply::Blocked;
use crate::source::Revision;
use crate::sync::desired::Defaults;
use crate::sync::early::{Early, EarlyApply, MAX_FILES, select};

impl Engine {
    /// Begins a sync of `revision`: lowers [`Engine::yield_signal`] and sends a push's changed
    /// objects ([`Engine::apply_early`]). [`Engine::sync_rest`] finishes it. Never fails: what
    /// could not go early goes with the rest.
    pub async fn early(&mut self, revision: &Revision) -> EarlyApply {
        let started = std::time::Instant::now();
        self.options.apply.yield_to.clear();
        self.parent.begin_attempt(Some(revision));
        let defaults = self.defaults();
        let early = self.apply_early(revision, &defaults).await;
        EarlyApply { early, revision: revision.clone(), started, early_at: started.elapsed() }
    }

    /// The signal that makes a sync in its apply stop sending ([`crate::apply::Yield`]); the
    /// daemon raises it when a push brings a newer revision. Lowered when a sync or self-heal
    /// begins.
    pub fn yield_signal(&self) -> crate::apply::Yield {
        self.options.apply.yield_to.clone()
    }

    /// What every desired object of this unit is built with.
    pub(super) fn defaults(&self) -> Defaults {
        Defaults::of(&self.unit)
    }

    /// Sends a push's changed objects before the revision is loaded whole (see the module doc): the
    /// objects of the files changed since the last synced revision that exist live, as members,
    /// with another desired hash. What was applied (created, configured or drift-corrected) is
    /// returned with its hash, for the whole sync to leave out; a failed request is not: the
    /// whole sync sends it again and reports it. Nothing is sent before the first sync, for a
    /// revision already synced, or where [`early::select`] says no.
    pub(super) async fn apply_early(&mut self, revision: &Revision, defaults: &Defaults) -> Early {
        let Some((from, previous)) = self.last.desired.as_ref() else { return Early::default() };
        if from == revision {
            return Early::default();
        }
        // Sent early as the whole sync would send them; a variable that cannot be read or is
        // undefined is the whole sync's to report.
        let Some(changed) = self.loader.changed(self.view.client(), from, revision, MAX_FILES).await else {
            return Early::default();
        };
        let view = &self.view;
        let known = |m: &crate::manifest::Manifest| view.known(&m.api_version, &m.gk.kind);
        let Some(selection) = select(changed, previous, known, |o| view.cache().get(o), defaults) else {
            tracing::debug!(unit = %self.unit.name, %revision, "no early apply: the whole sync decides");
            return Early::default();
        };
        let mut early = Early::default();
        let mut blocked = Blocked::default();
        for (stage, steps) in &selection.stages {
            let applied = self.view.apply(*stage, steps, &selection.desired, &mut blocked, &self.options.apply).await;
            early.changes.requests += applied.requests;
            if let Some(at) = applied.changes_applied_at {
                early.changes.note_change_applied(at);
            }
            for entry in applied.entries {
                if entry.action.applied_change() {
                    let hash = selection.desired.iter().find(|d| d.object == entry.object).map(|d| d.hash.clone());
                    early.sent.insert(entry.object.clone(), hash.unwrap_or_default());
                    early.changes.entries.push(entry);
                }
            }
        }
        early
    }
}
