//! Pending custom resources: objects whose kind a CRD of the same revision defines. They are
//! recorded in the inventory with the rest (in their namespace or the unit's: the scope is not
//! known yet), and resolved and planned once the Foundations stage has applied the CRD and it
//! is Established; a ref that resolves otherwise (a cluster-scoped kind) is recorded then,
//! before the object is applied.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use kube::discovery::ApiResource;

use super::desired::{self, Defaults};
use super::{Engine, Result};
use crate::apply::Blocked;
use crate::changeset::{Action, ChangeSet};
use crate::cluster::inventory::Contents;
use crate::object::{GroupKind, ObjectRef};
use crate::plan::Desired;

impl Engine {
    /// After [`Engine::resolve_pending`]: the kinds of the `resolved` custom resources join
    /// `resources` (watched now, so prune and narrow see them as served), and the refs they
    /// resolved to that `widened` lacks — a cluster-scoped kind, recorded under a namespace
    /// before its CRD was served — are recorded by widening the ApplySet parent again, before
    /// they are applied (DESIGN.md decision 6). Without it such an object is never recorded,
    /// so never pruned: a later sync sees it as "not recorded … (a copy?)". The guessed ref is
    /// dropped by the narrow after a clean prune (served, not live, not wanted).
    ///
    /// Errors: [`super::Error::Cluster`] when the parent cannot be written.
    pub(super) async fn widen_resolved(
        &mut self,
        resolved: &[Desired],
        widened: &mut Contents,
        resources: &mut HashMap<GroupKind, (Arc<ApiResource>, bool)>,
    ) -> Result<()> {
        for d in resolved {
            resources.entry(d.object.gk.clone()).or_insert_with(|| (d.resource.clone(), d.object.namespace.is_some()));
        }
        let wanted = widened.union(&Contents::of(resolved.iter().map(|d| &d.object)));
        if &wanted != widened {
            *widened = self.widen_inventory(&wanted).await?;
        }
        Ok(())
    }

    /// After the Foundations stage: resolves custom resources whose CRD was just applied.
    pub(super) async fn resolve_pending(
        &mut self,
        pending: Vec<crate::manifest::Manifest>,
        defaults: &Defaults,
        blocked: &Blocked,
        desired: &mut Vec<Desired>,
        changes: &mut ChangeSet,
    ) -> Result<()> {
        for m in &pending {
            self.live.discovery.forget(&m.api_version);
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
            let resolved = if unserved.contains(&key) {
                None
            } else {
                self.live.discovery.resolve_new(&self.live.client, &m.api_version, &m.gk.kind).await?
            };
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
                    self.live.cache.ensure(&r.resource, r.namespaced, self.live.cache_timeout).await?;
                    desired.push(desired::build(m, object, r, defaults)?);
                }
                None => {
                    let message =
                        format!("{}: kind {} is not served after its CRD was applied", desired::origin(&m), m.gk);
                    changes.push(guess, Action::Failed, Some(message));
                }
            }
        }
        Ok(())
    }
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
