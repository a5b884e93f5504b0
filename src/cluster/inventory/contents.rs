//! What the parent records — the group-kinds and namespaces that may hold members, and the
//! refs of the objects the unit applied — and the line format of its members record
//! (`Kind.group/namespace/name`).

use std::collections::BTreeSet;

use crate::object::{GroupKind, ObjectRef};

/// What the parent records: the group-kinds and namespaces that may hold members, and the
/// refs of the objects this unit applied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Contents {
    /// Group-kinds of members.
    pub group_kinds: BTreeSet<GroupKind>,
    /// Namespaces of namespaced members, including the parent's own.
    pub namespaces: BTreeSet<crate::object::Atom>,
    /// Refs of the objects this unit applied (and has not pruned): only these may be pruned.
    pub members: BTreeSet<ObjectRef>,
}

/// One ref as a line of the members record: `Kind.group/namespace/name` (namespace empty for
/// cluster-scoped objects).
pub fn member_line(o: &ObjectRef) -> String {
    format!("{}/{}/{}", o.gk.to_applyset_string(), o.namespace.as_deref().unwrap_or_default(), o.name)
}

/// Parses a line of the members record; `None` for a malformed line.
pub fn parse_member_line(line: &str) -> Option<ObjectRef> {
    let mut parts = line.splitn(3, '/');
    let (gk, ns, name) = (parts.next()?, parts.next()?, parts.next()?);
    if gk.is_empty() || name.is_empty() {
        return None;
    }
    let ns = (!ns.is_empty()).then(|| ns.to_string());
    Some(ObjectRef::new(GroupKind::parse_applyset_string(gk), ns, name))
}

impl Contents {
    /// The contents that hold `objects`.
    pub fn of<'a>(objects: impl IntoIterator<Item = &'a ObjectRef>) -> Self {
        let mut c = Self::default();
        for o in objects {
            c.members.insert(o.clone());
            c.group_kinds.insert(o.gk.clone());
            if let Some(ns) = &o.namespace {
                c.namespaces.insert(ns.clone());
            }
        }
        c
    }

    /// Old ∪ new.
    pub fn union(&self, other: &Contents) -> Contents {
        Contents {
            group_kinds: self.group_kinds.union(&other.group_kinds).cloned().collect(),
            namespaces: self.namespaces.union(&other.namespaces).cloned().collect(),
            members: self.members.union(&other.members).cloned().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contents_union_widens_kinds_and_namespaces() {
        let a = ObjectRef::new(GroupKind::from_api_version("v1", "ConfigMap"), Some("a"), "x");
        let b = ObjectRef::new(GroupKind::from_api_version("apps/v1", "Deployment"), Some("b"), "y");
        let u = Contents::of([&a]).union(&Contents::of([&b]));
        assert_eq!(u.group_kinds.len(), 2);
        assert_eq!(u.namespaces, BTreeSet::from(["a".into(), "b".into()]));
        assert_eq!(u.members, BTreeSet::from([a, b]));
    }

    #[test]
    fn member_lines_round_trip_namespaced_and_cluster_scoped_refs() {
        let a = ObjectRef::new(GroupKind::from_api_version("apps/v1", "Deployment"), Some("shop"), "web");
        let b = ObjectRef::new(GroupKind::from_api_version("v1", "Namespace"), None::<&str>, "shop");
        assert_eq!(member_line(&a), "Deployment.apps/shop/web");
        assert_eq!(member_line(&b), "Namespace//shop");
        assert_eq!(parse_member_line(&member_line(&a)), Some(a));
        assert_eq!(parse_member_line(&member_line(&b)), Some(b));
        assert_eq!(parse_member_line("garbage"), None);
    }
}
