//! The engine's prune step: its guards from the unit's options, then the prune over its parts
//! ([`crate::sync::prune_step::prune_and_narrow`]).

use super::Engine;
use crate::changeset::ChangeSet;
use crate::cluster::inventory::Contents;
use crate::prune::PruneOptions;
use crate::sync::Result;
use crate::sync::prune_step::{self, Guards, Parts, PruneInputs, deferral};

impl Engine {
    /// Prunes what git no longer holds and narrows the parent ([`prune_step::prune_and_narrow`]),
    /// past the fraction and empty-revision rules when the unit says `allow_prune_all` or
    /// [`Engine::allow_prune_once`] was called.
    ///
    /// Errors: [`crate::sync::Error::Cluster`] when the parent cannot be narrowed.
    pub(super) async fn prune_and_narrow(
        &mut self,
        inputs: PruneInputs<'_>,
        widened: &Contents,
        changes: &mut ChangeSet,
    ) -> Result<()> {
        let options = PruneOptions {
            allow_all: self.options.prune.allow_all || self.options.allow_prune_once,
            ..self.options.prune.clone()
        };
        let guards = Guards { options, deferred: self.prune_deferred() };
        let parts = Parts { view: &mut self.view, parent: &mut self.parent, hooks: &self.hooks };
        prune_step::prune_and_narrow(parts, &guards, inputs, widened, changes).await
    }

    /// Why this unit prunes nothing now, if so: another unit of the config names it in
    /// `adopt_from` ([`crate::config::SyncUnit::adopted_by`]), so what left this unit's revision
    /// may be moving there, and must not be deleted before that unit takes it over, whichever
    /// syncs first.
    pub fn prune_deferred(&self) -> Option<String> {
        deferral(&self.unit.name, &self.unit.adopted_by)
    }
}
