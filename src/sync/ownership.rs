//! The ownership check of a sync: objects about to be created that carry another ApplySet's
//! `part-of` label are refused, naming the owning unit, or adopted when the unit's
//! `adopt_from` names their owner; adopted objects get a note in the change set.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use kube::discovery::ApiResource;

use super::state::ClusterView;
use crate::changeset::{Action, ChangeSet};
use crate::cluster::inventory::PART_OF;
use crate::cluster::owner::{self, Verdict};
use crate::object::{GroupKind, ObjectRef};
use crate::plan::Desired;

impl ClusterView {
    /// Objects about to be created that already carry another ApplySet's `part-of` label: read
    /// from the daemon's shared watch of each kind when it has listed
    /// ([`crate::cluster::cache::MetadataCache::others_part_of`]: no request, so a unit's first
    /// sync does not cost more with every neighbour in its namespace), else one
    /// metadata-only list per group-kind and namespace with creates (per group-kind in all
    /// namespaces when its creates span more than [`NAMESPACE_LISTS`] namespaces, and for
    /// cluster-scoped kinds), selecting `part-of` present and not ours, read a page at a time
    /// ([`owner::list_labelled`]). Of what is listed, the creates are kept; when there are any, their
    /// owners are looked up by id ([`owner::owners`]: two more lists) and judged against
    /// `adopt_from` ([`owner::verdict`]): refused with a message naming the owning unit and its
    /// parent, or adopted. (A list in all namespaces read every other unit's members of the
    /// kind: each of 1,000 units following one repository into 10 namespaces read about 10,000
    /// objects' metadata for its 10 creates.)
    pub(super) async fn foreign_members(
        &self,
        owner: Claimant<'_>,
        desired: &[Desired],
        live: &BTreeMap<ObjectRef, crate::cluster::LiveMeta>,
        changes: &mut ChangeSet,
    ) -> Foreign {
        let mut by_kind: HashMap<&GroupKind, (&Arc<ApiResource>, BTreeSet<Option<&str>>)> = HashMap::new();
        let mut creates = std::collections::HashSet::new();
        for d in desired.iter().filter(|d| !live.contains_key(&d.object)) {
            creates.insert(&d.object);
            let entry = by_kind.entry(&d.object.gk).or_insert_with(|| (&d.resource, BTreeSet::new()));
            entry.1.insert(d.object.namespace.as_deref());
        }
        let mut scopes = Vec::new();
        let mut labelled = Vec::new();
        for (gk, (resource, namespaces)) in by_kind {
            if let Some(found) = self.labelled_in_watch(gk, resource, &creates) {
                labelled.extend(found);
                continue;
            }
            let namespaced = namespaces.iter().any(Option::is_some);
            if namespaced && namespaces.len() <= NAMESPACE_LISTS {
                scopes.extend(namespaces.into_iter().map(|ns| (gk, resource, namespaced, ns)));
            } else {
                scopes.push((gk, resource, namespaced, None));
            }
        }
        let selector = format!("{PART_OF},{PART_OF}!={}", owner.applyset_id);
        // One list per scope, all at once: a cold sync of ten kinds waited for ten lists in a row.
        let lists = futures::future::join_all(scopes.into_iter().map(|(gk, resource, namespaced, namespace)| {
            let selector = &selector;
            async move { (gk, namespaced, owner::list_labelled(self.client(), resource, namespace, selector).await) }
        }))
        .await;
        let mut foreign = Foreign::default();
        for (gk, namespaced, list) in lists {
            let list = match list {
                Ok((pages, list)) => {
                    changes.requests += pages;
                    list
                }
                Err(e) => {
                    changes.requests += 1;
                    // Unverified ownership is not permission: refuse these creates this time.
                    let reason = format!(
                        "could not check whether another ApplySet owns it: {}",
                        crate::cluster::api_message(&e)
                    );
                    for d in desired.iter().filter(|d| &d.object.gk == gk && !live.contains_key(&d.object)) {
                        foreign.refused.insert(d.object.clone(), reason.clone());
                    }
                    continue;
                }
            };
            for meta in list {
                let namespace = if namespaced { meta.namespace } else { None };
                let object = ObjectRef::new(gk.clone(), namespace, meta.name.unwrap_or_default());
                // Other units' members beside the creates: not this check's business, and their
                // owners would be looked up for nothing.
                if !creates.contains(&object) {
                    continue;
                }
                let id = meta.labels.get(PART_OF).cloned().unwrap_or_default();
                labelled.push((object, id));
            }
        }
        if labelled.is_empty() {
            return foreign;
        }
        self.judge_owners(owner, labelled, foreign, changes).await
    }

    /// The creates of `gk` that carry another ApplySet's id, with that id, as the daemon's
    /// shared watch of the kind holds them: no request. `None` when no such watch can answer.
    fn labelled_in_watch(
        &self,
        gk: &GroupKind,
        resource: &ApiResource,
        creates: &std::collections::HashSet<&ObjectRef>,
    ) -> Option<Vec<(ObjectRef, String)>> {
        let of_kind: Vec<&ObjectRef> = creates.iter().copied().filter(|o| &o.gk == gk).collect();
        let names: Vec<(Option<&str>, &str)> =
            of_kind.iter().map(|o| (o.namespace.as_deref(), o.name.as_str())).collect();
        let values = self.cache().others_part_of(resource, &names)?;
        Some(of_kind.into_iter().zip(values).filter_map(|(o, id)| Some((o.clone(), id?))).collect())
    }

    /// Looks up the owners of the `labelled` creates (object, owning ApplySet id) by id and
    /// judges each against `adopt_from` into `foreign`.
    async fn judge_owners(
        &self,
        owner: Claimant<'_>,
        labelled: Vec<(ObjectRef, String)>,
        mut foreign: Foreign,
        changes: &mut ChangeSet,
    ) -> Foreign {
        let ids: BTreeSet<String> = labelled.iter().map(|(_, id)| id.clone()).collect();
        changes.requests += 2;
        let owners = owner::owners(self.client(), &ids).await.map_err(|e| crate::cluster::api_message(&e));
        for (object, id) in labelled {
            let found = owners.as_ref().ok().and_then(|o| o.get(&id));
            match (owner::verdict(&id, found, owner.adopt_from), &owners) {
                (Verdict::Adopt(note), _) => {
                    foreign.adoptable_ids.insert(id);
                    foreign.adopted.insert(object, note);
                }
                (Verdict::Refuse(reason), Ok(_)) => {
                    foreign.refused.insert(object, reason);
                }
                (Verdict::Refuse(_), Err(e)) => {
                    let reason = format!(
                        "belongs to another ApplySet ({id}); not taken over (its owner could not be looked up: {e})"
                    );
                    foreign.refused.insert(object, reason);
                }
            }
        }
        foreign
    }
}

/// Whose creates the ownership check judges: the unit's ApplySet id and its `adopt_from`.
#[derive(Clone, Copy)]
pub(super) struct Claimant<'a> {
    /// The unit's ApplySet id: objects labelled with it are the unit's own.
    pub(super) applyset_id: &'a str,
    /// The units whose objects this one may take over ([`crate::config::SyncUnit::adopt_from`]).
    pub(super) adopt_from: &'a [String],
}

/// Adds the note `adopted from unit …` to the entries of the objects taken over from another
/// ApplySet by this apply (`adoptions`), and reports the Namespaces this sync made bare
/// (`made`) as `created`.
pub(super) fn note_taken(changes: &mut ChangeSet, made: Vec<ObjectRef>, adoptions: HashMap<ObjectRef, String>) {
    for made in made {
        made_bare(changes, &made);
    }
    if !adoptions.is_empty() {
        note_adoptions(changes, adoptions);
    }
}

/// A Namespace this sync made bare: a member's entry (its apply found it existing,
/// `adopted`, but gitward made it) says `created`; one that is no member (`create_namespace`'s)
/// has no entry and goes to `namespaces_created`.
fn made_bare(changes: &mut ChangeSet, made: &ObjectRef) {
    match changes.entries.iter_mut().find(|e| &e.object == made) {
        Some(entry) if entry.action == Action::Adopted => {
            entry.action = Action::Created;
            entry.message = None;
        }
        Some(_) => {}
        None => changes.namespaces_created.push(made.name.to_string()),
    }
}

/// Puts each note of `adoptions` (object → `adopted from unit …`) before the message of that
/// object's entry, when the apply created, adopted, configured or drift-corrected it; an object
/// whose apply failed or was skipped gets none. An `adopted` entry's own message only says it
/// existed, so the note, which says from whom, replaces it.
fn note_adoptions(changes: &mut ChangeSet, mut adoptions: HashMap<ObjectRef, String>) {
    for entry in &mut changes.entries {
        let applied =
            matches!(entry.action, Action::Created | Action::Adopted | Action::Configured | Action::DriftCorrected);
        if let Some(note) = adoptions.remove(&entry.object).filter(|_| applied) {
            entry.message = Some(match entry.message.take().filter(|_| entry.action != Action::Adopted) {
                Some(message) => format!("{note}; {message}"),
                None => note,
            });
        }
    }
}

/// What the ownership check found among the objects about to be created
/// ([`Engine::foreign_members`]).
#[derive(Debug, Default)]
pub(super) struct Foreign {
    /// Objects not to send, with the reason.
    pub(super) refused: HashMap<ObjectRef, String>,
    /// Objects another ApplySet owns that `adopt_from` lets this unit take over, with the note.
    pub(super) adopted: HashMap<ObjectRef, String>,
    /// The ApplySet ids of the adopted objects.
    pub(super) adoptable_ids: BTreeSet<String>,
}

/// Namespaces of one kind's creates up to which the ownership check lists each namespace on
/// its own; beyond, one list in all namespaces costs fewer requests.
const NAMESPACE_LISTS: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(name: &str) -> ObjectRef {
        ObjectRef::new(GroupKind::new("", "ConfigMap"), Some("shop"), name)
    }

    #[test]
    fn adoption_notes_go_to_applied_objects_only_before_their_own_message() {
        let mut changes = ChangeSet::default();
        changes.push(cm("a"), Action::Created, None);
        changes.push(cm("b"), Action::Configured, Some("fields taken over".into()));
        changes.push(cm("c"), Action::Failed, Some("denied".into()));
        let note = |n: &str| (cm(n), format!("adopted from unit `old` ({n})"));
        note_adoptions(&mut changes, HashMap::from([note("a"), note("b"), note("c")]));
        let messages: Vec<Option<&str>> = changes.entries.iter().map(|e| e.message.as_deref()).collect();
        assert_eq!(
            messages,
            [
                Some("adopted from unit `old` (a)"),
                Some("adopted from unit `old` (b); fields taken over"),
                Some("denied")
            ]
        );
    }

    #[test]
    fn an_adopted_entry_gets_the_note_in_place_of_its_own_message() {
        let mut changes = ChangeSet::default();
        changes.push(cm("a"), Action::Adopted, Some("existed already".into()));
        note_adoptions(&mut changes, HashMap::from([(cm("a"), "adopted from unit `old`".to_string())]));
        assert_eq!(changes.entries[0].message.as_deref(), Some("adopted from unit `old`"));
    }

    #[test]
    fn the_namespace_a_sync_made_bare_is_created_not_adopted() {
        let shop = ObjectRef::new(GroupKind::new("", "Namespace"), None::<&str>, "shop");
        let mut changes = ChangeSet::default();
        changes.push(shop.clone(), Action::Adopted, Some("existed already".into()));
        changes.push(cm("a"), Action::Adopted, Some("existed already".into()));
        made_bare(&mut changes, &shop);
        let actions: Vec<(Action, Option<&str>)> =
            changes.entries.iter().map(|e| (e.action, e.message.as_deref())).collect();
        assert_eq!(actions, [(Action::Created, None), (Action::Adopted, Some("existed already"))]);
        assert!(changes.namespaces_created.is_empty(), "a member is counted by its entry");
        made_bare(&mut changes, &ObjectRef::new(GroupKind::new("", "Namespace"), None::<&str>, "made"));
        assert_eq!(changes.namespaces_created, ["made"], "create_namespace's is no member");
    }
}
