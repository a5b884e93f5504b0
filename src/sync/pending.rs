//! Pending custom resources: objects whose kind a CRD of the same revision defines. They are
//! recorded in the inventory with the rest (in their namespace or the unit's: the scope is not
//! known yet), and resolved and planned once the Foundations stage has applied the CRD and it
//! is Established; a ref that resolves otherwise (a cluster-scoped kind) is recorded then,
//! before the object is applied.

use std::collections::HashSet;

use super::Result;
use super::desired::{self, Defaults};
use super::state::ClusterView;
use crate::apply::Blocked;
use crate::changeset::{Action, ChangeSet};
use crate::cluster::inventory::Contents;
use crate::object::ObjectRef;
use crate::plan::Desired;

/// After the Foundations stage: resolves, through `view`, the custom resources whose CRD was
/// just applied into `desired`; those blocked by a failure and those whose kind is still not
/// served get their entry in `changes`.
///
/// Errors: [`super::Error::Cluster`] when discovery or the first list of a kind fails.
pub(super) async fn resolve_pending(
    view: &mut ClusterView,
    pending: Vec<crate::manifest::Manifest>,
    defaults: &Defaults,
    blocked: &Blocked,
    desired: &mut Vec<Desired>,
    changes: &mut ChangeSet,
) -> Result<()> {
    for m in &pending {
        view.discovery_mut().forget(&m.api_version);
    }
    // Kinds still not served after waiting for discovery: their other objects fail at once.
    let mut unserved: HashSet<(crate::object::Atom, crate::object::Atom)> = HashSet::new();
    for m in pending {
        let guess = ObjectRef::new(m.gk.clone(), m.namespace.clone(), &m.name);
        if let Some(reason) = blocked.reason(&guess) {
            changes.push(guess, Action::Skipped, Some(reason));
            continue;
        }
        let key = (m.api_version.clone(), m.gk.kind.clone());
        let resolved =
            if unserved.contains(&key) { None } else { view.resolve_new(&m.api_version, &m.gk.kind).await? };
        if resolved.is_none() {
            unserved.insert(key);
        }
        match resolved {
            Some(r) => {
                let ns = r.namespaced.then(|| m.namespace.clone().unwrap_or_else(|| defaults.namespace.clone()));
                let object = ObjectRef::new(m.gk.clone(), ns, &m.name);
                if let Some(reason) = blocked.reason(&object) {
                    changes.push(object, Action::Skipped, Some(reason));
                    continue;
                }
                view.ensure(&r.resource, r.namespaced).await?;
                desired.push(desired::build(m, object, r, defaults)?);
            }
            None => {
                let message = format!("{}: kind {} is not served after its CRD was applied", desired::origin(&m), m.gk);
                changes.push(guess, Action::Failed, Some(message));
            }
        }
    }
    Ok(())
}

pub(super) fn pending_contents(pending: &[crate::manifest::Manifest], defaults: &Defaults) -> Contents {
    let refs: Vec<ObjectRef> = pending
        .iter()
        .map(|m| {
            ObjectRef::new(
                m.gk.clone(),
                Some(m.namespace.clone().unwrap_or_else(|| defaults.namespace.clone())),
                &m.name,
            )
        })
        .collect();
    Contents::of(refs.iter())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::Manifest;
    use crate::object::GroupKind;
    use crate::sync::desired::tests::defaults;

    fn widget(name: &str, namespace: Option<&str>) -> Manifest {
        Manifest {
            file: "widgets.yaml".into(),
            index: 0,
            api_version: "example.com/v1".into(),
            gk: GroupKind::new("example.com", "Widget"),
            name: name.into(),
            namespace: namespace.map(Into::into),
            body: serde_json::json!({"kind": "Widget"}).into(),
            hash_key: None,
        }
    }

    #[test]
    fn pending_custom_resources_are_recorded_in_their_namespace_or_the_units() {
        let contents = pending_contents(&[widget("a", None), widget("b", Some("other"))], &defaults());
        let members: Vec<String> = contents.members.iter().map(ToString::to_string).collect();
        assert_eq!(members, ["Widget/other/b", "Widget/shop/a"]);
        assert!(contents.group_kinds.contains(&GroupKind::new("example.com", "Widget")));
        let namespaces: Vec<&str> = contents.namespaces.iter().map(|n| n.as_str()).collect();
        assert_eq!(namespaces, ["other", "shop"]);
    }
}
