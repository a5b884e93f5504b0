//! What a push changed, told to every unit of a shared mirror without reading the mirror.
//!
//! The thread that fetches a mirror records, for each branch the fetch moved, the paths of the
//! files the move changed ([`super::moves::Moved`]). A unit's [`PushProbe`] waits for that
//! fetch on a channel, then answers from memory whether a changed file lies under the unit's
//! path ([`Touch`]): at 1,000 units of one repository, the one unit a push changed then takes
//! the push lane alone (ARCHITECTURE.md, "push lane").

use std::sync::Arc;
use std::time::Instant;

use super::shared::Shared;
use super::{Revision, SourceSpec};

/// What a unit needs to learn, without reading the mirror, whether a push touched its path
/// ([`PushProbe::touched`]).
#[derive(Clone)]
pub struct PushProbe {
    mirror: Arc<Shared>,
    /// Shared with the unit's [`super::Source`]: a probe is made for every resting unit at
    /// every push.
    spec: Arc<SourceSpec>,
}

impl PushProbe {
    /// The probe of `spec`'s unit on `mirror`.
    pub(super) fn new(mirror: Arc<Shared>, spec: Arc<SourceSpec>) -> Self {
        Self { mirror, spec }
    }

    /// Waits for a fetch that started at or after `not_before` (the push seen; one fetch for
    /// all the units of the mirror, see [`super::shared`]), then answers from what that fetch recorded:
    /// `touched: false` when the unit's branch moved from `from` (or already points at
    /// `from`) and no file under the unit's path changed, `touched: true` when one did, with
    /// the commit it points to now; `None` when it cannot be told so (the
    /// reference is a tag or a commit — a short name is a tag first, as in `git rev-parse` —,
    /// the branch did not move from `from`, the fetch failed:
    /// the caller fetches and reads the diff itself, and meets the error there).
    ///
    /// Only a hint for ordering work: the sync that follows resolves and verifies the
    /// revision as always. A rendered unit that reads files outside its path (a kustomize
    /// `../base`) is told `Some(false)` for a change there, which is right for what it is
    /// used for: such a change has no early apply ([`super::tree::path_unchanged`]).
    pub async fn touched(&self, from: &Revision, not_before: Instant) -> Option<Touch> {
        let branch = match self.spec.reference.strip_prefix("refs/heads/") {
            Some(_) => self.spec.reference.clone(),
            None if self.spec.reference.starts_with("refs/") => return None,
            None => format!("refs/heads/{}", self.spec.reference),
        };
        let from = git2::Oid::from_str(&from.0).ok()?;
        self.mirror.fetched_since(&self.spec, not_before).await.ok()?;
        if !self.spec.reference.starts_with("refs/") && self.shadowed() {
            return None;
        }
        let moved = self.mirror.moved(&branch)?;
        let to = Revision(moved.to.to_string());
        if moved.to == from {
            return Some(Touch { touched: false, to });
        }
        (moved.from == from).then(|| Touch { touched: moved.touches(self.spec.path.as_str()), to })
    }
}

impl PushProbe {
    /// Whether the short reference names a ref that `git rev-parse` takes before the branch
    /// (`refs/<name>`, `refs/tags/<name>`; module `resolve`), or the mirror cannot be read:
    /// then the branch's move says nothing of the unit's revision.
    /// Read once per fetch for every unit of the mirror ([`Shared::shadowed`]).
    fn shadowed(&self) -> bool {
        let name = &self.spec.reference;
        self.mirror.shadowed(name, || {
            let Ok(repo) = self.mirror.handle(&self.spec.unit) else { return true };
            [format!("refs/{name}"), format!("refs/tags/{name}")].iter().any(|r| repo.find_reference(r).is_ok())
        })
    }
}

/// What [`PushProbe::touched`] tells of a push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Touch {
    /// A file under the unit's path changed.
    pub touched: bool,
    /// The commit the branch points to after the push (not verified: [`super::Source::fetch_since`]
    /// does that).
    pub to: Revision,
}
