//! Helm hooks as phases of a sync (<https://helm.sh/docs/topics/charts_hooks/>): the hooks a
//! Helm render set apart ([`crate::manifest::Loaded::hooks`]) run before the unit's own objects
//! (`pre-install`, `pre-upgrade`; after the Foundations stage, so a chart's CRDs are served as
//! Helm installs `crds/` before its hooks) and after they are healthy (`post-install`, `post-upgrade`),
//! one at a time in ascending `helm.sh/hook-weight`, then name, each waited for when it is a
//! Job (complete) or a Pod (succeeded), as Helm waits, bounded by the unit's `health_timeout`
//! (5 minutes, Helm's default, when that is 0).
//!
//! - **Install or upgrade**: install when the unit's ApplySet has no live member yet.
//! - **Not members**: a hook carries no `applyset.kubernetes.io/part-of` label, so it is never
//!   recorded nor pruned; it carries [`HOOK_OF`] (the ApplySet id), and only an object that does
//!   (or a member of the unit: a hook an earlier gitward applied as an ordinary object) is
//!   replaced as a previous instance: a same-named object of anyone else fails the hook.
//! - **Delete policies**: `before-hook-creation` (also when none is named) deletes the previous
//!   instance and waits until it is gone before creating the hook again, so a Job whose pod
//!   template changed is re-created, not patched (immutable); `hook-failed` deletes a hook that
//!   failed at once, `hook-succeeded` deletes the hooks of a phase once all of them succeeded,
//!   last first (Helm's `execHook`), so the ServiceAccount hook a Job hook runs as outlives the
//!   Job. Deletes propagate in the background.
//! - **Once per release content**: [`HOOKS_RAN`] on the ApplySet parent (`<revision>
//!   <install|upgrade> <pre|post> <digest>`) records the last phase that ran to its end (the pre
//!   phase at once, the post phase with the sync's result) and the `release_digest` of the
//!   rendered release it ran for. Hooks run again only when that content changed (a new chart
//!   version, other values, another template), as `helm upgrade` runs for a changed release, not
//!   for every commit: in a monorepo a commit that leaves the unit's render as it was runs no
//!   hook. A resync, by this process or a later one, runs neither phase again, and post hooks
//!   held back by an unhealthy rollout run once a later sync of the same content finds it
//!   healthy. A record without a digest (written by an older gitward) matches its revision.
//! - **Failure**: a failed pre hook refuses the revision's objects of the stages after the
//!   Foundations (`skipped`, nothing pruned); a failed post hook makes the result `failed`. Either is retried as a failed sync.

mod phase;

use std::time::Duration;

use phase::HookPhase;

use super::state::ClusterView;
use super::{Report, Result};
use crate::changeset::{Action, ChangeSet};
use crate::health::record::SyncResult;
use crate::manifest::Manifest;
use crate::object::ObjectRef;
use crate::render::HookEvent;
use crate::source::Revision;

/// Annotation on each hook object: the ApplySet id of the unit that made it. Only an object
/// that carries the unit's id is deleted as a previous instance.
pub const HOOK_OF: &str = "gitward.dev/hook-of";
/// Annotation on the ApplySet parent: the revision whose hooks ran, the event, the last
/// phase that ran to its end and the release's `release_digest` (`3f2a… upgrade pre 9c1e…`).
pub const HOOKS_RAN: &str = "gitward.dev/hooks-ran";
/// How long a hook is waited for when the unit's `health_timeout` is 0 (Helm's `--timeout`
/// default).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// Install or upgrade: whether the unit's ApplySet had members when the revision's hooks ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// No member yet: `pre-install`, `post-install`.
    Install,
    /// Members exist: `pre-upgrade`, `post-upgrade`.
    Upgrade,
}

/// Before or after the unit's own objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Before the objects are applied.
    Pre,
    /// After they are healthy.
    Post,
}

impl Release {
    fn event(self, phase: Phase) -> HookEvent {
        match (self, phase) {
            (Release::Install, Phase::Pre) => HookEvent::PreInstall,
            (Release::Install, Phase::Post) => HookEvent::PostInstall,
            (Release::Upgrade, Phase::Pre) => HookEvent::PreUpgrade,
            (Release::Upgrade, Phase::Post) => HookEvent::PostUpgrade,
        }
    }
}

/// What [`HOOKS_RAN`] records: the last hook phase of a revision that ran to its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HooksRan {
    /// The revision whose hooks ran.
    pub revision: String,
    /// Install or upgrade, as decided before its pre hooks.
    pub release: Release,
    /// The last phase that ran to its end.
    pub phase: Phase,
    /// The `release_digest` of the rendered release the hooks ran for; `None` in a record
    /// an older gitward wrote (then the revision is compared).
    pub digest: Option<String>,
}

impl HooksRan {
    /// The annotation's value: `<revision> <install|upgrade> <pre|post> <digest>`.
    pub fn value(&self) -> String {
        let release = if self.release == Release::Install { "install" } else { "upgrade" };
        let phase = if self.phase == Phase::Pre { "pre" } else { "post" };
        let digest = self.digest.as_ref().map(|d| format!(" {d}")).unwrap_or_default();
        format!("{} {release} {phase}{digest}", self.revision)
    }

    /// Whether the hooks recorded ran for the release rendered as `digest` (of `revision`): the
    /// digests are equal, or, for a record without one, the revisions are.
    pub fn is_for(&self, revision: &str, digest: &str) -> bool {
        match &self.digest {
            Some(d) => d == digest,
            None => self.revision == revision,
        }
    }

    /// Reads the annotation's value; `None` for one gitward did not write.
    pub fn parse(value: &str) -> Option<Self> {
        let mut words = value.split(' ');
        let revision = words.next().filter(|r| !r.is_empty())?.to_string();
        let release = match words.next()? {
            "install" => Release::Install,
            "upgrade" => Release::Upgrade,
            _ => return None,
        };
        let phase = match words.next()? {
            "pre" => Phase::Pre,
            "post" => Phase::Post,
            _ => return None,
        };
        let digest = words.next().map(str::to_owned);
        if digest.as_deref() == Some("") {
            return None;
        }
        words.next().is_none().then_some(Self { revision, release, phase, digest })
    }
}

/// The hooks of the revision an engine synced last, kept for its post phase.
#[derive(Debug, Default)]
pub(super) struct RevisionHooks {
    /// The revision.
    revision: Option<Revision>,
    /// Its rendered release's `release_digest`.
    digest: String,
    /// Its hooks, as rendered.
    hooks: Vec<Manifest>,
    /// The kinds its CRDs define: a hook of one of them may find discovery not serving it yet
    /// right after the CRD was Established, and is asked about again as a pending custom
    /// resource is ([`crate::cluster::discovery::Discovery::resolve_new`]).
    crd_kinds: std::collections::BTreeSet<crate::object::GroupKind>,
}

impl RevisionHooks {
    /// The `hooks` of `revision`, whose release renders to `digest` ([`release_digest`]), with
    /// the kinds the CRDs among `desired` define.
    pub(super) fn new(
        revision: &Revision,
        digest: String,
        hooks: Vec<Manifest>,
        desired: &[crate::plan::Desired],
    ) -> Self {
        // Read only for a revision with hooks: it parses every CRD body of the revision.
        let crd_kinds = if hooks.is_empty() { Default::default() } else { crd_kinds(desired) };
        Self { revision: Some(revision.clone()), digest, hooks, crd_kinds }
    }
}

/// Helm hooks as the engine tracks them: the hooks of the revision synced last, and the last
/// phase that ran ([`HOOKS_RAN`]) as this engine knows it and as the parent records it.
#[derive(Debug, Default)]
pub(super) struct Hooks {
    /// The hooks of the revision synced last, for its post phase.
    revision: RevisionHooks,
    /// The last hook phase that ran: read from the parent, carried by every parent write.
    ran: Option<HooksRan>,
    /// What the parent was last read or written with for [`HOOKS_RAN`].
    recorded: Option<HooksRan>,
}

/// How a pre phase went.
pub(super) enum Pre {
    /// No hook was due: none, or they ran for this content already.
    NotDue,
    /// Every hook of the phase succeeded: the parent must record it ([`Hooks::ran`]).
    Ran,
    /// A hook failed: why the revision's later objects are refused.
    Failed(String),
}

/// What a phase of hooks runs with: the cluster, and the unit's ApplySet id, field manager,
/// namespace and `health_timeout`.
pub(super) struct Unit<'a> {
    /// The cluster: discovery for the hooks' kinds, the unit's client, the writes.
    view: &'a mut ClusterView,
    /// The unit's ApplySet id ([`HOOK_OF`]).
    applyset_id: &'a str,
    /// The unit's field manager.
    field_manager: &'a str,
    /// The unit's namespace, for hooks that name none.
    namespace: &'a str,
    /// The unit's `health_timeout` (0: [`DEFAULT_TIMEOUT`]).
    health_timeout: Duration,
}

impl<'a> Unit<'a> {
    /// The hooks of `unit`, whose ApplySet id is `applyset_id`, through `view`.
    pub(super) fn new(
        view: &'a mut ClusterView,
        applyset_id: &'a str,
        field_manager: &'a str,
        unit: &'a crate::config::SyncUnit,
    ) -> Self {
        Self { view, applyset_id, field_manager, namespace: &unit.namespace, health_timeout: unit.health_timeout }
    }
}

impl Hooks {
    /// Whether the pre hooks of `revision`'s release rendered as `digest` are due: they did
    /// not run for that content.
    pub(super) fn due(&self, revision: &Revision, digest: &str) -> bool {
        self.ran.as_ref().is_none_or(|r| !r.is_for(&revision.to_string(), digest))
    }

    /// The last phase that ran, which every parent write carries.
    pub(super) fn ran(&self) -> Option<&HooksRan> {
        self.ran.as_ref()
    }

    /// Whether the parent records the last phase that ran.
    pub(super) fn recorded(&self) -> bool {
        self.recorded == self.ran
    }

    /// The parent was read with `annotations`: the phase it records ran last.
    pub(super) fn read(&mut self, annotations: &std::collections::BTreeMap<String, String>) {
        self.ran = annotations.get(HOOKS_RAN).and_then(|v| HooksRan::parse(v));
        self.recorded = self.ran.clone();
    }

    /// The parent was written with `annotations`; `None`: it held what a write would send.
    pub(super) fn written(&mut self, annotations: Option<&std::collections::BTreeMap<String, String>>) {
        self.recorded = match annotations {
            Some(a) => a.get(HOOKS_RAN).and_then(|v| HooksRan::parse(v)),
            None => self.ran.clone(),
        };
    }

    /// The pre phase of the `rendered` revision's hooks (kept for its post phase): unless [`HOOKS_RAN`] says they ran for that content,
    /// decides install or upgrade (`members`: the unit's live
    /// members before the apply) and runs the pre hooks of that event in order, each entry in
    /// `changes`. Returns why the revision's other objects are refused when one failed.
    ///
    /// Errors: [`super::Error::Cluster`] when discovery fails.
    pub(super) async fn pre(
        &mut self,
        unit: Unit<'_>,
        rendered: RevisionHooks,
        members: usize,
        changes: &mut ChangeSet,
    ) -> Result<Pre> {
        let rev = rendered.revision.as_ref().map(ToString::to_string).unwrap_or_default();
        let ran = self.ran.as_ref().is_some_and(|r| r.is_for(&rev, &rendered.digest));
        self.revision = rendered;
        if self.revision.hooks.is_empty() || ran {
            return Ok(Pre::NotDue);
        }
        let release = if members == 0 { Release::Install } else { Release::Upgrade };
        let mut phase = HookPhase::new(unit, &self.revision.crd_kinds);
        let outcome = phase.run(&self.revision.hooks, release.event(Phase::Pre), changes).await;
        if let Some(refused) = outcome? {
            return Ok(Pre::Failed(refused));
        }
        let digest = Some(self.revision.digest.clone());
        self.ran = Some(HooksRan { revision: rev, release, phase: Phase::Pre, digest });
        Ok(Pre::Ran)
    }

    /// The post phase of `report`'s revision, once its sync is judged: when `result` is
    /// `healthy` (or `applied`: no wait ran, as `helm upgrade` without `--wait`), the
    /// revision's pre phase ran and its post phase did not, runs the post hooks of the
    /// recorded event in order. Returns `None` when nothing was due; else their entries, and
    /// `failed` as the result when one failed (`result` otherwise).
    pub(super) async fn post(
        &mut self,
        unit: Unit<'_>,
        parent: &ObjectRef,
        report: &Report,
        result: SyncResult,
    ) -> Option<(ChangeSet, SyncResult)> {
        if report.heal || !matches!(result, SyncResult::Healthy | SyncResult::Applied) {
            return None;
        }
        let rev = report.revision.to_string();
        if self.revision.revision.as_ref() != Some(&report.revision) {
            return None;
        }
        let digest = &self.revision.digest;
        let ran = self.ran.clone().filter(|r| r.is_for(&rev, digest) && r.phase == Phase::Pre)?;
        let mut changes = ChangeSet::default();
        let mut phase = HookPhase::new(unit, &self.revision.crd_kinds);
        let outcome = phase.run(&self.revision.hooks, ran.release.event(Phase::Post), &mut changes).await;
        match outcome {
            Ok(None) => {
                self.ran = Some(HooksRan { phase: Phase::Post, ..ran });
                Some((changes, result))
            }
            Ok(Some(_)) => Some((changes, SyncResult::Failed)),
            Err(e) => {
                let message = format!("post hooks: {}", crate::telemetry::error_chain(&e));
                changes.push(parent.clone(), Action::Failed, Some(message));
                Some((changes, SyncResult::Failed))
            }
        }
    }
}

/// The digest of a rendered release, what decides whether its hooks run again: sha256 (lowercase
/// hex) over each member's and hook's identity and body text in render order. The body of an
/// object made from SOPS-decrypted input enters as its keyed hash ([`crate::manifest::HashKey`]),
/// so the digest on the parent cannot be used to guess a secret's value.
pub(super) fn release_digest(members: &[Manifest], hooks: &[Manifest]) -> String {
    use sha2::Digest as _;
    let mut digest = sha2::Sha256::new();
    for (part, list) in [("member", members), ("hook", hooks)] {
        for m in list {
            let namespace = m.namespace.as_deref().unwrap_or("");
            digest.update(format!("{part} {} {} {namespace} {}\n", m.api_version, m.gk.kind, m.name).as_bytes());
            match &m.hash_key {
                Some(key) => digest.update(key.hash(m.body.as_str().as_bytes()).as_bytes()),
                None => digest.update(m.body.as_str().as_bytes()),
            }
            digest.update(b"\n");
        }
    }
    hex::encode(digest.finalize())
}

/// The kinds that the CRDs among `desired` define.
fn crd_kinds(desired: &[crate::plan::Desired]) -> std::collections::BTreeSet<crate::object::GroupKind> {
    desired
        .iter()
        .filter(|d| d.object.gk.group == "apiextensions.k8s.io" && d.object.gk.kind == "CustomResourceDefinition")
        .filter_map(|d| crate::apply::wait::defined_kind(&d.source))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_of_a_phase_reads_back() {
        let ran = HooksRan { revision: "3f2a".into(), release: Release::Upgrade, phase: Phase::Post, digest: None };
        assert_eq!(ran.value(), "3f2a upgrade post");
        assert_eq!(HooksRan::parse(&ran.value()), Some(ran.clone()));
        let with_digest = HooksRan { digest: Some("9c1e".into()), ..ran };
        assert_eq!(with_digest.value(), "3f2a upgrade post 9c1e");
        assert_eq!(HooksRan::parse(&with_digest.value()), Some(with_digest));
        for bad in [
            "",
            "3f2a",
            "3f2a upgrade",
            "3f2a upgrade later",
            "3f2a upgrade pre x y",
            " install pre",
            "3f2a install pre ",
        ] {
            assert_eq!(HooksRan::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_record_is_for_the_same_content_whatever_the_revision_and_an_old_one_for_its_revision() {
        let ran = |digest: Option<&str>| HooksRan {
            revision: "3f2a".into(),
            release: Release::Upgrade,
            phase: Phase::Pre,
            digest: digest.map(str::to_owned),
        };
        assert!(ran(Some("9c1e")).is_for("77b0", "9c1e"), "another commit, same content");
        assert!(!ran(Some("9c1e")).is_for("3f2a", "0d4f"), "same commit, other content (values, capabilities)");
        assert!(ran(None).is_for("3f2a", "0d4f") && !ran(None).is_for("77b0", "9c1e"));
    }
}
