//! A unit's state read from the cluster: one metadata GET of its ApplySet parent (record,
//! attempt, suspension), then one list per recorded group-kind of the members it selects —
//! metadata only, or full objects judged for health — and the recorded members missing live.

use std::collections::{BTreeMap, BTreeSet};

use kube::api::{Api, DynamicObject, ListParams};
use kube::core::PartialObjectMeta;

use super::{Error, LastAttempt, LiveMembers, MemberHealth, Result, Suspended, Unhealthy, UnitState};
use crate::cluster::discovery::Discovery;
use crate::cluster::inventory::{Inventory, PART_OF};
use crate::config::SyncUnit;
use crate::health::record::{Attempt, Record};
use crate::health::{self, Counts, Health, survey};
use crate::object::{GroupKind, ObjectRef};

/// Reads the state of `unit` from the cluster.
///
/// Errors: [`Error::Cluster`] when the parent or discovery fails, [`Error::ListFailed`] when
/// a member kind cannot be listed.
pub async fn unit_state(client: &kube::Client, unit: &SyncUnit) -> Result<UnitState> {
    let inventory = Inventory::new(&unit.inventory);
    let mut state = UnitState {
        unit: unit.name.clone(),
        parent: inventory.parent.to_string(),
        applyset_id: inventory.id.clone(),
        selector: None,
        last: None,
        attempt: LastAttempt::default(),
        members: LiveMembers::default(),
        suspended: unit.suspend.then(|| Suspended { by: "config".into(), at: None }),
        dependencies: Vec::new(),
    };
    if let Some(control) = inventory.control(client).await?.filter(|c| c.suspended) {
        let by = control.suspended_by.unwrap_or_default();
        state.suspended = Some(Suspended { by, at: control.suspended_at });
    }
    let Some(parent) = inventory.read(client).await? else { return Ok(state) };
    state.last = Record::from_annotations(&parent.annotations);
    let attempt = Attempt::from_annotations(&parent.annotations);
    state.attempt = LastAttempt {
        last_attempted_revision: attempt.revision,
        last_attempted_ref: attempt.reference,
        last_error: attempt.error,
        failed: attempt.failed,
        retry_at: attempt.retry_at,
    };
    let contents = parent.contents;
    let selector = format!("{PART_OF}={}", inventory.id);
    let mut discovery = Discovery::new();
    let mut healths = Vec::new();
    let mut present: BTreeSet<ObjectRef> = BTreeSet::new();
    let mut resources = Vec::new();
    let mut unserved = BTreeSet::new();
    for gk in &contents.group_kinds {
        let Some(resolved) = discovery.resolve_group_kind(client, gk).await? else {
            resources.push(format!("{}{}", gk.kind.to_lowercase(), dotted(&gk.group)));
            unserved.insert(gk.clone());
            continue;
        };
        resources.push(format!("{}{}", resolved.resource.plural, dotted(&gk.group)));
        let kind = survey::Kind { gk: gk.clone(), resource: resolved.resource, namespaced: resolved.namespaced };
        let n = if health::bears_health(gk) {
            survey::each_judged(client, &kind, &selector, |object, s| {
                healths.push(s.health);
                if s.health != Health::Current {
                    state.members.unhealthy.push(Unhealthy {
                        object: object.to_string(),
                        health: MemberHealth::Is(s.health),
                        reason: s.reason,
                        message: s.message,
                    });
                }
                present.insert(object);
            })
            .await?
        } else {
            let listed = list_metadata(client, &kind, &selector).await?;
            healths.extend(std::iter::repeat_n(Health::Current, listed.len()));
            let n = listed.len();
            present.extend(listed);
            n
        };
        add(&mut state.members.objects, gk, n);
    }
    note_missing(&mut state, contents.members.iter().filter(|m| !present.contains(*m)), &unserved);
    resources.sort();
    if !resources.is_empty() {
        state.selector = Some(format!("kubectl get {} -A -l {selector}", resources.join(",")));
    }
    state.members.health = Counts::of(&healths);
    state.members.unhealthy.sort_by(|a, b| a.object.cmp(&b.object));
    Ok(state)
}

/// Adds to `state` the recorded members that are `missing` live: not created (their last
/// failure, from the recorded attempt), of a kind no longer served, or deleted by hand.
fn note_missing<'a>(
    state: &mut UnitState,
    missing: impl Iterator<Item = &'a ObjectRef>,
    unserved: &BTreeSet<GroupKind>,
) {
    for member in missing {
        let object = member.to_string();
        if let Some(failure) = state.attempt.failed.iter().find(|f| f.object == object) {
            state.members.unhealthy.push(Unhealthy {
                object,
                health: MemberHealth::NotCreated,
                reason: String::new(),
                message: failure.reason.clone(),
            });
            state.members.missing += 1;
            continue;
        }
        let message = if unserved.contains(&member.gk) {
            "recorded as a member of the ApplySet, but the API server no longer serves its kind"
        } else {
            "recorded as a member of the ApplySet but not in the cluster (not created, or deleted since); the next sync creates it"
        };
        state.members.unhealthy.push(Unhealthy {
            object,
            health: MemberHealth::Missing,
            reason: "NotFound".into(),
            message: message.into(),
        });
        state.members.missing += 1;
    }
}

/// `.group` for a named API group, nothing for the core group (`kubectl get` resource names).
fn dotted(group: &str) -> String {
    if group.is_empty() { String::new() } else { format!(".{group}") }
}

/// The refs of every object of `kind` that `selector` selects (metadata only, all namespaces).
async fn list_metadata(client: &kube::Client, kind: &survey::Kind, selector: &str) -> Result<Vec<ObjectRef>> {
    let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client.clone(), kind.resource.as_ref());
    let mut params = ListParams::default().labels(selector).limit(survey::PAGE);
    let mut refs = Vec::new();
    loop {
        let page = api
            .list_metadata(&params)
            .await
            .map_err(|source| Error::ListFailed { group_kind: kind.gk.to_string(), source })?;
        for item in page.items {
            let namespace = if kind.namespaced { item.metadata.namespace } else { None };
            refs.push(ObjectRef::new(kind.gk.clone(), namespace, item.metadata.name.unwrap_or_default()));
        }
        match page.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(refs),
        }
    }
}

fn add(objects: &mut BTreeMap<String, usize>, gk: &GroupKind, n: usize) {
    if n > 0 {
        *objects.entry(gk.kind.to_string()).or_default() += n;
    }
}
