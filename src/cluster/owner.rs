//! Who owns an ApplySet id: the parent that carries it, and the gitward unit that parent
//! names.
//!
//! A member carries only its ApplySet's id (`applyset.kubernetes.io/part-of`, a hash: KEP-3659).
//! The parent carries the same id as its label `applyset.kubernetes.io/id`, so one
//! label-selected, metadata-only LIST of Secrets and one of ConfigMaps in all namespaces find
//! the parents of any set of ids (the parent kinds gitward and kubectl write). gitward writes
//! the annotation [`UNIT`] on its parents, naming the unit; a parent gitward wrote before that
//! annotation existed is `gitward-<unit>` by default, so its name stands in.
//!
//! Used only off the steady-state path: when an object about to be created is found carrying
//! another ApplySet's label (the ownership check, `gitward diff`).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DynamicObject, ListParams};
use kube::discovery::ApiResource;

use super::inventory::{ID, TOOLING};

/// Annotation on an ApplySet parent gitward writes: the name of the unit it belongs to.
pub const UNIT: &str = "gitward.dev/unit";

/// The parent of one ApplySet id, as found in the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// The parent, `Kind/namespace/name`.
    pub parent: String,
    /// The gitward unit it belongs to: its [`UNIT`] annotation, else, for a parent gitward
    /// wrote before that annotation existed, its name without the `gitward-` prefix. `None`
    /// for another tool's ApplySet.
    pub unit: Option<String>,
    /// Its `applyset.kubernetes.io/tooling` annotation (`gitward/0.1.0`, `kubectl/v1.34.1`).
    pub tooling: Option<String>,
}

/// What an ownership check concludes about an object that carries another ApplySet's label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// `adopt_from` names its owner: take it over. The note for the change set.
    Adopt(String),
    /// Not taken over: why, and how to move it.
    Refuse(String),
}

/// Judges an object labelled with ApplySet `id`, whose parent is `owner` (`None`: not found),
/// for a unit whose `adopt_from` is `adopt_from`: adopted when `adopt_from` names the id, or
/// the gitward unit of its parent. Pure.
pub fn verdict(id: &str, owner: Option<&Owner>, adopt_from: &[String]) -> Verdict {
    let unit = owner.and_then(|o| o.unit.as_deref());
    let named = adopt_from.iter().any(|a| a == id || Some(a.as_str()) == unit);
    let whose = describe(id, owner);
    if named {
        return Verdict::Adopt(format!("adopted from {whose}"));
    }
    let key = unit.unwrap_or(id);
    Verdict::Refuse(format!(
        "belongs to {whose}; not taken over: to move it to this unit, \
         add adopt_from = [\"{key}\"] to this unit's [[sync]]"
    ))
}

/// `unit `shop` (ApplySet parent Secret/shop/gitward-shop)`, `ApplySet <id> (parent
/// ConfigMap/a/b, managed by kubectl/v1.34.1)` or `ApplySet <id>, whose parent was not found`.
pub fn describe(id: &str, owner: Option<&Owner>) -> String {
    match owner {
        Some(Owner { parent, unit: Some(unit), .. }) => format!("unit `{unit}` (ApplySet parent {parent})"),
        Some(Owner { parent, tooling, .. }) => {
            let tool = tooling.as_deref().map(|t| format!(", managed by {t}")).unwrap_or_default();
            format!("ApplySet {id} (parent {parent}{tool})")
        }
        None => format!("ApplySet {id}, whose parent was not found"),
    }
}

/// The parents of `ids`: one metadata-only LIST of Secrets and one of ConfigMaps in all
/// namespaces, selected by `applyset.kubernetes.io/id in (…)`. Ids with no parent are absent
/// from the map.
///
/// Errors: the first failed LIST's (RBAC forbidding a cluster-wide list of Secrets, for one).
pub async fn owners(client: &kube::Client, ids: &BTreeSet<String>) -> Result<BTreeMap<String, Owner>, kube::Error> {
    let mut found = BTreeMap::new();
    if ids.is_empty() {
        return Ok(found);
    }
    let selector = format!("{ID} in ({})", ids.iter().map(String::as_str).collect::<Vec<_>>().join(","));
    let params = ListParams::default().labels(&selector);
    let secrets = Api::<Secret>::all(client.clone()).list_metadata(&params).await?;
    let configmaps = Api::<ConfigMap>::all(client.clone()).list_metadata(&params).await?;
    let metas = secrets.items.into_iter().map(|o| ("Secret", o.metadata));
    for (kind, meta) in metas.chain(configmaps.items.into_iter().map(|o| ("ConfigMap", o.metadata))) {
        let Some(id) = meta.labels.as_ref().and_then(|l| l.get(ID)).cloned() else { continue };
        let annotations = meta.annotations.unwrap_or_default();
        let name = meta.name.unwrap_or_default();
        let tooling = annotations.get(TOOLING).cloned();
        let gitward = tooling.as_deref().is_some_and(|t| t.starts_with("gitward/"));
        let unit = annotations.get(UNIT).cloned().or_else(|| {
            let legacy = name.strip_prefix("gitward-").filter(|_| gitward);
            legacy.map(String::from)
        });
        let parent = format!("{kind}/{}/{name}", meta.namespace.unwrap_or_default());
        found.entry(id).or_insert(Owner { parent, unit, tooling });
    }
    Ok(found)
}

/// Objects per page of an ownership-check list.
const FOREIGN_PAGE: u32 = 500;

/// The metadata an ownership check reads of a listed object; serde skips the rest of it
/// (`managedFields` above all) without building it.
#[derive(Clone, serde::Deserialize)]
pub(crate) struct LabelledMeta {
    /// `metadata.name`.
    pub(crate) name: Option<String>,
    /// `metadata.namespace`.
    pub(crate) namespace: Option<String>,
    /// `metadata.labels`.
    #[serde(default)]
    pub(crate) labels: BTreeMap<String, String>,
}

/// A list item of [`list_labelled`]: its metadata alone.
#[derive(Clone, serde::Deserialize)]
struct Labelled {
    metadata: LabelledMeta,
}

/// Every object of `resource` in `namespace` (`None`: in all namespaces, or cluster-scoped)
/// that `selector` selects, as metadata-only
/// pages of [`FOREIGN_PAGE`] (`limit` and `continue`, API concepts "Retrieving large results
/// sets in chunks"), each reduced to name, namespace and labels as it is read. With the whole
/// list in one response, a unit's cold sync beside other units' tens of thousands of members
/// held every one of them, `managedFields` and all, at once. Returns the pages read and the
/// objects.
///
/// Errors: the first failed request's.
pub(crate) async fn list_labelled(
    client: &kube::Client,
    resource: &ApiResource,
    namespace: Option<&str>,
    selector: &str,
) -> std::result::Result<(usize, Vec<LabelledMeta>), kube::Error> {
    use kube::core::{ObjectList, Resource};
    let request = kube::core::Request::new(DynamicObject::url_path(resource, namespace));
    let mut params = ListParams::default().labels(selector).limit(FOREIGN_PAGE);
    let (mut pages, mut found) = (0, Vec::new());
    loop {
        let http = request.list_metadata(&params).map_err(kube::Error::BuildRequest)?;
        let page: ObjectList<Labelled> = client.request(http).await?;
        pages += 1;
        found.extend(page.items.into_iter().map(|item| item.metadata));
        match page.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok((pages, found)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shop() -> Owner {
        Owner {
            parent: "Secret/shop/gitward-shop".into(),
            unit: Some("shop".into()),
            tooling: Some("gitward/0.1.0".into()),
        }
    }

    #[test]
    fn a_conflict_names_the_owning_unit_its_parent_and_the_key_that_moves_it() {
        let Verdict::Refuse(reason) = verdict("applyset-x-v1", Some(&shop()), &[]) else { panic!("refused") };
        assert_eq!(
            reason,
            "belongs to unit `shop` (ApplySet parent Secret/shop/gitward-shop); not taken over: \
             to move it to this unit, add adopt_from = [\"shop\"] to this unit's [[sync]]"
        );
    }

    #[test]
    fn adopt_from_takes_over_by_unit_name_or_by_id() {
        let by_name = verdict("applyset-x-v1", Some(&shop()), &["shop".into()]);
        assert_eq!(
            by_name,
            Verdict::Adopt("adopted from unit `shop` (ApplySet parent Secret/shop/gitward-shop)".into())
        );
        assert!(matches!(verdict("applyset-x-v1", None, &["applyset-x-v1".into()]), Verdict::Adopt(_)));
        assert!(matches!(verdict("applyset-x-v1", Some(&shop()), &["other".into()]), Verdict::Refuse(_)));
    }

    #[test]
    fn another_tools_applyset_or_a_missing_parent_is_named_by_its_id() {
        let kubectl = Owner { parent: "ConfigMap/a/set".into(), unit: None, tooling: Some("kubectl/v1.34.1".into()) };
        let Verdict::Refuse(reason) = verdict("applyset-k-v1", Some(&kubectl), &[]) else { panic!("refused") };
        assert!(
            reason
                .starts_with("belongs to ApplySet applyset-k-v1 (parent ConfigMap/a/set, managed by kubectl/v1.34.1)")
        );
        assert!(reason.ends_with("add adopt_from = [\"applyset-k-v1\"] to this unit's [[sync]]"), "{reason}");
        let Verdict::Refuse(reason) = verdict("applyset-k-v1", None, &[]) else { panic!("refused") };
        assert!(reason.starts_with("belongs to ApplySet applyset-k-v1, whose parent was not found"), "{reason}");
    }
}
