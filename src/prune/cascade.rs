//! Cascading prunes: deleting a Namespace deletes every object in it, and deleting a CRD every
//! custom resource of its kind, members or not. Before such a delete, [`Checker::check`] lists
//! (metadata only) what would go with it; anything found refuses the prune of that one object.
//! The refusal counts what it found in three groups ([`Held`]): members of this unit (its
//! `part-of` label), objects of other gitward units (another ApplySet's `part-of` label whose
//! parent names a unit, [`crate::cluster::owner`]; a unit's ApplySet parent and the pieces of
//! its members record count as its objects too), and other objects, some of them named. It
//! offers the remedies in this order: `gitward.dev/prune: disabled` keeps the object, unmanaged;
//! `gitward.dev/prune: cascade` permits the cascade (the caller skips the check), with a
//! warning naming the other units whose objects it would delete.
//!
//! - A **Namespace**: one metadata LIST per namespaced kind the API server serves and can list
//!   (aggregated discovery, two requests, once per prune), in that namespace, `limit=100`,
//!   following `continue` only while nothing has been found. Not counted: objects with a
//!   controller ownerReference (they go with their owner, whose kind is checked too), objects
//!   already being deleted, derived or ephemeral kinds (Events, Endpoints, Leases,
//!   `metrics.k8s.io`), what Kubernetes puts in every namespace (ServiceAccount `default`,
//!   ConfigMap `kube-root-ca.crt`), and the objects the same prune deletes first
//!   ([`Checker::deleted_first`], for `gitward diff`, which deletes nothing). Members of this
//!   unit still in it count as well: they are not being pruned (kept, or still in git).
//! - A **CRD**: one GET of the CRD (group, plural, a served version), then one metadata LIST of
//!   its custom resources across namespaces, `limit=100`: every one not already being deleted
//!   counts.
//!
//! Objects labelled with other ApplySets' ids cost one more pair of LISTs (the parents of those
//! ids); when those fail, the units are named by their ApplySet ids. Anything that cannot be
//! checked (discovery or a LIST fails) refuses the prune too: an unverified cascade is not
//! permission.

use std::collections::{BTreeMap, BTreeSet};

use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{GroupVersionKind, PartialObjectMeta};
use kube::discovery::{ApiResource, Scope, verbs};

use crate::changeset::ChangeSet;
use crate::cluster::api_message;
use crate::cluster::inventory::{ID, MEMBERS_OF, PART_OF, PRUNE, PRUNE_CASCADE, PRUNE_DISABLED};
use crate::object::{GroupKind, ObjectRef};

/// Objects asked for per LIST request.
const PAGE: u32 = 100;
/// At most this many pages per kind before the check gives up (and refuses).
const MAX_PAGES: usize = 20;
/// Other objects named in a refusal message.
const SHOWN: usize = 5;

/// Checks the cascades of one prune (or of the prune a `gitward diff` shows); discovery is
/// done once, at the first Namespace.
pub struct Checker<'a> {
    /// The API server, as the unit's writer: what it may list is what the check sees.
    client: &'a kube::Client,
    /// The unit's ApplySet id: objects labelled with it are this unit's members.
    applyset_id: &'a str,
    /// Objects the same prune deletes before the Namespace or CRD: not counted.
    deleted_first: BTreeSet<ObjectRef>,
    namespaced: Option<Result<Vec<ApiResource>, String>>,
}

/// What a cascade would take, as listed: labelled objects still by ApplySet id.
#[derive(Debug, Default)]
struct Found {
    /// How many members of this unit (its `part-of` label).
    own: usize,
    /// `Kind/ns/name` and ApplySet id of objects labelled `part-of` another ApplySet.
    labelled: Vec<(String, String)>,
    /// `Kind/ns/name` of objects that carry no `part-of` label.
    others: Vec<String>,
    /// More pages were not read: the counts are lower bounds.
    more: bool,
    /// What could not be checked, with the reason.
    unverified: Vec<String>,
}

impl Found {
    /// How many objects were found.
    fn count(&self) -> usize {
        self.own + self.labelled.len() + self.others.len()
    }

    fn is_empty(&self) -> bool {
        self.own == 0 && self.labelled.is_empty() && self.others.is_empty() && self.unverified.is_empty()
    }
}

/// What deleting a Namespace or a CRD would take with it, grouped for the refusal message
/// ([`Held::refusal`]).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Held {
    /// A Namespace holds the objects; a CRD defines them.
    pub namespace: bool,
    /// How many members of this unit (labelled with its ApplySet id).
    pub own: usize,
    /// Objects of other gitward units: unit name (or ApplySet id when its parent could not
    /// be looked up) → how many.
    pub units: BTreeMap<String, usize>,
    /// `Kind/ns/name` of every other object: no `part-of` label, or that of an ApplySet no
    /// gitward unit owns.
    pub others: Vec<String>,
    /// The listing stopped early: every count is a lower bound.
    pub more: bool,
    /// What could not be checked, with the reason.
    pub unverified: Vec<String>,
}

impl Held {
    /// The one-line refusal: `not deleted: it holds 3 members of this unit, 4 objects of units
    /// api, web, and 1 other object (ConfigMap/ns/x); annotate it gitward.dev/prune: disabled
    /// to keep it, unmanaged, or gitward.dev/prune: cascade to delete it with all it holds
    /// (that deletes the objects of units api, web too)`. At most [`SHOWN`] other objects are
    /// named. Pure.
    pub fn refusal(&self) -> String {
        let plural = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let mut groups = Vec::new();
        if self.own > 0 {
            groups.push(plural(self.own, "member of this unit", "members of this unit"));
        }
        if !self.units.is_empty() {
            let n = self.units.values().sum();
            let names = self.unit_names();
            let of = if self.units.len() == 1 { "unit" } else { "units" };
            groups.push(format!("{} of {of} {names}", plural(n, "object", "objects")));
        }
        if !self.others.is_empty() {
            let shown: Vec<&str> = self.others.iter().take(SHOWN).map(String::as_str).collect();
            let ellipsis = if self.others.len() > SHOWN || self.more { ", …" } else { "" };
            let n = plural(self.others.len(), "other object", "other objects");
            groups.push(format!("{n} ({}{ellipsis})", shown.join(", ")));
        }
        let mut parts = Vec::new();
        if !groups.is_empty() {
            let verb = if self.namespace { "it holds" } else { "it defines" };
            let least = if self.more { " at least" } else { "" };
            parts.push(format!("{verb}{least} {}", join_and(&groups)));
        }
        if !self.unverified.is_empty() {
            parts.push(format!("could not check what deleting it would delete: {}", self.unverified.join("; ")));
        }
        let all = if self.namespace { "all it holds" } else { "all custom resources of its kind" };
        let warning = match self.units.is_empty() {
            true => String::new(),
            false => {
                format!(" (that deletes the objects of {} {} too)", unit_word(self.units.len()), self.unit_names())
            }
        };
        format!(
            "not deleted: {}; annotate it {PRUNE}: {PRUNE_DISABLED} to keep it, unmanaged, or {PRUNE}: {PRUNE_CASCADE} \
             to delete it with {all}{warning}",
            parts.join("; ")
        )
    }

    fn unit_names(&self) -> String {
        self.units.keys().map(String::as_str).collect::<Vec<_>>().join(", ")
    }
}

fn unit_word(n: usize) -> &'static str {
    if n == 1 { "unit" } else { "units" }
}

/// `a`, `a and b`, `a, b, and c`.
fn join_and(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [a, b] => format!("{a} and {b}"),
        [rest @ .., last] => format!("{}, and {last}", rest.join(", ")),
    }
}

impl<'a> Checker<'a> {
    /// A checker for one prune by `client` of the unit whose ApplySet id is `applyset_id`.
    pub fn new(client: &'a kube::Client, applyset_id: &'a str) -> Self {
        Self { client, applyset_id, deleted_first: BTreeSet::new(), namespaced: None }
    }

    /// Leaves `objects` out of what is counted: the prune deletes them before any Namespace
    /// or CRD (a prune runs in reverse stage order). `gitward diff` needs it, as it deletes
    /// nothing; a sync's prune has already deleted them when it checks.
    pub fn deleted_first(mut self, objects: impl IntoIterator<Item = ObjectRef>) -> Self {
        self.deleted_first.extend(objects);
        self
    }

    /// `Ok` when deleting `object` takes nothing but itself (or it is neither a Namespace nor
    /// a CRD); otherwise the refusal message ([`Held::refusal`]), which counts what would go
    /// with it.
    pub async fn check(&mut self, object: &ObjectRef, changes: &mut ChangeSet) -> Result<(), String> {
        let (found, namespace) = match (object.gk.group.as_str(), object.gk.kind.as_str()) {
            ("", "Namespace") => (self.namespace(&object.name, changes).await, true),
            ("apiextensions.k8s.io", "CustomResourceDefinition") => (self.crd(&object.name, changes).await, false),
            _ => return Ok(()),
        };
        if found.is_empty() {
            return Ok(());
        }
        Err(self.group(found, namespace, changes).await.refusal())
    }

    /// Groups what was found: labelled objects by the gitward unit that owns their ApplySet,
    /// or among the others when no unit does.
    async fn group(&self, found: Found, namespace: bool, changes: &mut ChangeSet) -> Held {
        let Found { own, labelled, mut others, more, unverified } = found;
        let mut held = Held { namespace, own, more, unverified, ..Held::default() };
        if labelled.is_empty() {
            held.others = others;
            return held;
        }
        let ids: BTreeSet<String> = labelled.iter().map(|(_, id)| id.clone()).collect();
        changes.requests += 2;
        let owners = crate::cluster::owner::owners(self.client, &ids).await;
        for (object, id) in labelled {
            match &owners {
                Ok(owners) => match owners.get(&id).and_then(|o| o.unit.clone()) {
                    Some(unit) => *held.units.entry(unit).or_default() += 1,
                    None => others.push(object),
                },
                Err(_) => *held.units.entry(id).or_default() += 1,
            }
        }
        held.others = others;
        held
    }

    async fn namespaced_resources(&mut self, changes: &mut ChangeSet) -> Result<Vec<ApiResource>, String> {
        if self.namespaced.is_none() {
            changes.requests += 2;
            let discovered = kube::Discovery::new(self.client.clone()).run_aggregated().await;
            self.namespaced = Some(match discovered {
                Ok(d) => Ok(d
                    .groups()
                    .flat_map(|g| g.recommended_resources())
                    .filter(|(ar, caps)| {
                        caps.scope == Scope::Namespaced && caps.supports_operation(verbs::LIST) && !ignored_kind(ar)
                    })
                    .map(|(ar, _)| ar)
                    .collect()),
                Err(e) => Err(format!("discovery: {}", api_message(&e))),
            });
        }
        self.namespaced.clone().expect("set above")
    }

    async fn namespace(&mut self, ns: &str, changes: &mut ChangeSet) -> Found {
        let mut found = Found::default();
        let resources = match self.namespaced_resources(changes).await {
            Ok(r) => r,
            Err(e) => {
                found.unverified.push(e);
                return found;
            }
        };
        for ar in resources {
            let api: Api<PartialObjectMeta<DynamicObject>> = Api::namespaced_with(self.client.clone(), ns, &ar);
            let mut params = ListParams::default().limit(PAGE);
            if let Some(name) = furniture(&ar) {
                params = params.fields(&format!("metadata.name!={name}"));
            }
            self.list(&api, params, &ar, true, &mut found, changes).await;
        }
        found
    }

    async fn crd(&mut self, name: &str, changes: &mut ChangeSet) -> Found {
        let mut found = Found::default();
        let crds = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        );
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &crds);
        changes.requests += 1;
        let crd = match api.get(name).await {
            Ok(crd) => crd,
            Err(e) => {
                found.unverified.push(format!("read the CRD: {}", api_message(&e)));
                return found;
            }
        };
        let Some(resource) = served_resource(&crd.data["spec"]) else {
            found.unverified.push("the CRD serves no version to list its custom resources with".into());
            return found;
        };
        let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(self.client.clone(), &resource);
        self.list(&api, ListParams::default().limit(PAGE), &resource, false, &mut found, changes).await;
        found
    }

    /// Pages through one LIST until something is found; adds what counts to `found`.
    async fn list(
        &self,
        api: &Api<PartialObjectMeta<DynamicObject>>,
        mut params: ListParams,
        ar: &ApiResource,
        skip_controlled: bool,
        found: &mut Found,
        changes: &mut ChangeSet,
    ) {
        let (kind, gk) = (&ar.kind, GroupKind::new(ar.group.as_str(), ar.kind.as_str()));
        for page in 0..MAX_PAGES {
            changes.requests += 1;
            let list = match api.list_metadata(&params).await {
                Ok(list) => list,
                // Listed by discovery but not listable after all (aggregated API quirks).
                Err(e) if crate::cluster::is_status(&e, 404) || crate::cluster::is_status(&e, 405) => return,
                Err(e) => {
                    found.unverified.push(format!("list {kind}: {}", api_message(&e)));
                    return;
                }
            };
            let before = found.count();
            for item in list.items {
                let meta = item.metadata;
                let live = crate::cluster::live_meta(&meta);
                if live.deleting || (skip_controlled && live.controlled) {
                    continue;
                }
                let object = ObjectRef::new(gk.clone(), meta.namespace.clone(), meta.name.clone().unwrap_or_default());
                if self.deleted_first.contains(&object) {
                    continue;
                }
                match meta.labels.as_ref().and_then(applyset_of) {
                    Some(id) if id == self.applyset_id => found.own += 1,
                    Some(id) => found.labelled.push((object.to_string(), id.clone())),
                    None => found.others.push(object.to_string()),
                }
            }
            let next = list.metadata.continue_.filter(|c| !c.is_empty());
            match next {
                None => return,
                Some(_) if found.count() > before => {
                    found.more = true;
                    return;
                }
                Some(token) if page + 1 < MAX_PAGES => params.continue_token = Some(token),
                Some(_) => {
                    found.unverified.push(format!("list {kind}: more than {} objects", PAGE as usize * MAX_PAGES));
                }
            }
        }
    }
}

/// The ApplySet an object belongs to, by its labels: a member's `part-of`, a parent's `id`, or
/// the `members-of` of a piece of a parent's members record (those go with their unit too).
fn applyset_of(labels: &BTreeMap<String, String>) -> Option<&String> {
    labels.get(PART_OF).or_else(|| labels.get(ID)).or_else(|| labels.get(MEMBERS_OF))
}

/// Kinds whose objects are derived or ephemeral: they never block a Namespace's prune.
fn ignored_kind(ar: &ApiResource) -> bool {
    matches!(
        (ar.group.as_str(), ar.kind.as_str()),
        ("", "Event") | ("events.k8s.io", "Event") | ("", "Endpoints") | ("coordination.k8s.io", "Lease")
    ) || ar.group == "metrics.k8s.io"
}

/// The object Kubernetes itself puts in every namespace, for the kinds that have one.
fn furniture(ar: &ApiResource) -> Option<&'static str> {
    match (ar.group.as_str(), ar.kind.as_str()) {
        ("", "ServiceAccount") => Some("default"),
        ("", "ConfigMap") => Some("kube-root-ca.crt"),
        _ => None,
    }
}

/// The resource of a CRD's custom resources at a served version (the storage version if
/// served), from the CRD's `spec`; `None` when it serves none.
pub fn served_resource(spec: &serde_json::Value) -> Option<ApiResource> {
    let group = spec["group"].as_str()?;
    let kind = spec["names"]["kind"].as_str()?;
    let plural = spec["names"]["plural"].as_str()?;
    let versions = spec["versions"].as_array()?;
    let served: Vec<&serde_json::Value> = versions.iter().filter(|v| v["served"] == true).collect();
    let version = served.iter().find(|v| v["storage"] == true).or(served.first())?["name"].as_str()?;
    Some(ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_crd_is_listed_at_its_served_storage_version() {
        let spec = json!({"group": "x.dev", "names": {"kind": "Gadget", "plural": "gadgets"}, "versions": [
            {"name": "v1", "served": false, "storage": false},
            {"name": "v2", "served": true, "storage": false},
            {"name": "v3", "served": true, "storage": true},
        ]});
        let r = served_resource(&spec).unwrap();
        assert_eq!((r.api_version.as_str(), r.plural.as_str()), ("x.dev/v3", "gadgets"));
        let none = json!({"group": "x.dev", "names": {"kind": "G", "plural": "gs"}, "versions": [{"name": "v1", "served": false}]});
        assert!(served_resource(&none).is_none());
    }

    #[test]
    fn a_namespace_refusal_counts_this_units_members_other_units_objects_and_the_rest_apart() {
        let held = Held {
            namespace: true,
            own: 3,
            units: [("api".to_string(), 1), ("web".to_string(), 3)].into(),
            others: vec!["ConfigMap/ns/x".into()],
            ..Held::default()
        };
        assert_eq!(
            held.refusal(),
            "not deleted: it holds 3 members of this unit, 4 objects of units api, web, and 1 other object \
             (ConfigMap/ns/x); annotate it gitward.dev/prune: disabled to keep it, unmanaged, or \
             gitward.dev/prune: cascade to delete it with all it holds (that deletes the objects of units api, web \
             too)"
        );
    }

    #[test]
    fn a_refusal_names_only_the_groups_found_in_the_singular_where_one() {
        let mut held = Held { namespace: true, own: 1, ..Held::default() };
        assert_eq!(
            held.refusal(),
            "not deleted: it holds 1 member of this unit; annotate it gitward.dev/prune: disabled to keep it, \
             unmanaged, or gitward.dev/prune: cascade to delete it with all it holds"
        );
        held.units.insert("web".into(), 1);
        assert!(held.refusal().starts_with("not deleted: it holds 1 member of this unit and 1 object of unit web;"));
        assert!(held.refusal().ends_with("(that deletes the objects of unit web too)"), "{}", held.refusal());
    }

    #[test]
    fn a_crd_refusal_past_the_first_page_names_five_objects_and_says_at_least() {
        let others: Vec<String> = (0..7).map(|i| format!("Gadget/ns/g{i}")).collect();
        let held = Held { others, more: true, unverified: vec!["list Gadget: forbidden".into()], ..Held::default() };
        let msg = held.refusal();
        assert!(
            msg.starts_with(
                "not deleted: it defines at least 7 other objects (Gadget/ns/g0, Gadget/ns/g1, Gadget/ns/g2, \
                 Gadget/ns/g3, Gadget/ns/g4, …); could not check what deleting it would delete: list Gadget: forbidden;"
            ),
            "{msg}"
        );
        assert!(msg.ends_with("to delete it with all custom resources of its kind"), "{msg}");
        assert!(!msg.contains('\n'), "one line: {msg}");
    }

    #[test]
    fn events_and_endpoints_never_block_a_namespace_prune_but_pvcs_do() {
        let ar = |g: &str, k: &str| ApiResource::from_gvk(&GroupVersionKind::gvk(g, "v1", k));
        assert!(ignored_kind(&ar("", "Event")));
        assert!(ignored_kind(&ar("", "Endpoints")));
        assert!(!ignored_kind(&ar("", "PersistentVolumeClaim")));
        assert_eq!(furniture(&ar("", "ConfigMap")), Some("kube-root-ca.crt"));
    }
}
