//! The parts of an [`Engine`](super::Engine), each with one job: the cluster as the engine
//! reads and writes it, the ApplySet parent, the records on it, Helm hooks, the options of
//! apply and prune, and what one sync leaves for the next.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use crate::apply::ApplyOptions;
use crate::cluster::cache::MetadataCache;
use crate::cluster::discovery::Discovery;
use crate::cluster::fence::Fence;
use crate::cluster::inventory::{Inventory, Parent, ParentWatch};
use crate::health::record::{Attempt, Record};
use crate::health::wait::Target;
use crate::object::ObjectRef;
use crate::plan::Desired;
use crate::prune::PruneOptions;
use crate::source::Revision;

/// The cluster as the engine reads and writes it.
pub(super) struct Live {
    /// gitward's own identity: bookkeeping (metadata cache, ApplySet parent, discovery,
    /// ownership check, namespaces a sync makes for its parent).
    pub(super) client: kube::Client,
    /// The unit's writes (applies, deletes, the health wait's reads): `client`, or one
    /// impersonating the unit's ServiceAccount ([`crate::config::SyncUnit::service_account`]).
    pub(super) writer: kube::Client,
    /// The fence of the Lease the unit runs under ([`Fence::unfenced`] without one).
    pub(super) fence: Fence,
    /// The kinds the unit's objects resolve to.
    pub(super) discovery: Discovery,
    /// Metadata of the unit's members, kept by watches.
    pub(super) cache: MetadataCache,
    /// How long a kind's first list may take before the sync fails.
    pub(super) cache_timeout: Duration,
}

impl Live {
    /// The cluster through `client` (reads) and `writer` (the unit's writes), under `fence`.
    pub(super) fn new(client: kube::Client, writer: kube::Client, cache: MetadataCache, fence: Fence) -> Self {
        Self { client, writer, fence, discovery: Discovery::new(), cache, cache_timeout: Duration::from_secs(60) }
    }
}

/// The unit's ApplySet parent as the engine knows it, and the namespaces made for it.
pub(super) struct ParentState {
    /// Where the parent is and its ApplySet id.
    pub(super) inventory: Inventory,
    /// What the parent holds and its resourceVersion, once read or written: later syncs need
    /// not read it; every write carries that resourceVersion as a precondition.
    pub(super) known: Option<Parent>,
    /// Watches the parent, so a parent deleted or written by someone else is read again (and
    /// re-created) rather than trusted from memory; started at the first sync.
    pub(super) watch: Option<ParentWatch>,
    /// With `create_namespace`: the unit's namespace was found or made by this engine
    /// ([`super::namespaces`]); cleared after a sync with failures, so it is checked again.
    pub(super) namespace_checked: bool,
    /// The revision being synced defines the parent's namespace (a Namespace manifest): made
    /// bare before the parent's first write ([`super::namespaces`]).
    pub(super) namespace_defined: bool,
    /// Namespaces this sync made bare (the parent's, `create_namespace`'s): a member's entry
    /// says `created`, not `adopted`; another's is in `namespaces_created`.
    pub(super) made_bare: Vec<ObjectRef>,
}

impl ParentState {
    /// The parent of `inventory`, not read yet.
    pub(super) fn new(inventory: Inventory) -> Self {
        Self {
            inventory,
            known: None,
            watch: None,
            namespace_checked: false,
            namespace_defined: false,
            made_bare: Vec::new(),
        }
    }
}

/// What the ApplySet parent records of the unit's syncs, as last read or written: sent with
/// every parent write, and rewritten only when it changes.
#[derive(Default)]
pub(super) struct Recorder {
    /// The last sync's record (revision, time, result).
    pub(super) recorded: Option<Record>,
    /// The last attempt (revision tried, error, objects not applied).
    pub(super) attempt: Attempt,
    /// The revision the sync in progress attempts, once fetched: what a sync that fails as a
    /// whole records as attempted.
    pub(super) attempting: Option<Revision>,
    /// Members whose health was not `Current` when the last health wait ended: targets of the
    /// next wait too, so a sync that changes nothing still waits for the Deployment an earlier
    /// revision left unhealthy. `None` until a wait of this engine has judged the unit (a fresh
    /// engine reads the unit's members once, `health::survey`, before its first wait).
    pub(super) unhealthy: Option<Vec<Target>>,
    /// Of `unhealthy`, the members whose health was `Failed` when it was judged: the rest are
    /// in progress. With the cache's members it gives the unit's health counts
    /// ([`super::Engine::members_health`]).
    pub(super) unhealthy_failed: HashSet<ObjectRef>,
    /// The sync request ([`crate::cluster::inventory::control::REQUESTED_AT`]) the sync in
    /// progress answers: written as handled with its final record.
    pub(super) handling: Option<String>,
    /// The request the parent says was handled last
    /// ([`crate::cluster::inventory::control::HANDLED_AT`]), carried by every parent write.
    pub(super) handled: Option<String>,
}

/// Helm hooks as the engine tracks them.
#[derive(Default)]
pub(super) struct HookState {
    /// The hooks of the revision synced last, for its post phase ([`super::hooks`]).
    pub(super) revision: super::hooks::RevisionHooks,
    /// The last hook phase that ran ([`super::hooks::HOOKS_RAN`]): read from the parent,
    /// carried by every parent write.
    pub(super) ran: Option<super::hooks::HooksRan>,
    /// What the parent was last read or written with for [`super::hooks::HOOKS_RAN`].
    pub(super) recorded: Option<super::hooks::HooksRan>,
}

/// How the engine applies and prunes.
pub(super) struct Options {
    /// Field manager, force, in-flight bound, takeover managers, the yield signal.
    pub(super) apply: ApplyOptions,
    /// The prune guards.
    pub(super) prune: PruneOptions,
    /// A one-off permission to prune past the guards (`gitward sync --allow-prune`).
    pub(super) allow_prune_once: bool,
    /// The unit's directory left its `[[sync_set]]` (`prune_removed`): every load desires
    /// nothing, so the sync prunes every member ([`super::Engine::retire`]).
    pub(super) retired: bool,
    /// The key desired hashes of objects that took a Secret's value are keyed with
    /// ([`super::substitute::key`]).
    pub(super) substitute_key: crate::manifest::HashKey,
}

/// What one sync leaves for the next and for self-heal.
#[derive(Default)]
pub(super) struct LastSync {
    /// The desired objects and revision of the last sync, for [`super::Engine::heal`].
    pub(super) desired: Option<(Revision, Vec<Desired>)>,
    /// Objects of the plan that another ApplySet owns and `adopt_from` lets this unit take
    /// over, with the change-set note; attached to their entries after the apply.
    pub(super) adoptions: HashMap<ObjectRef, String>,
}
