//! Object identity: [`ObjectRef`] (`group/kind/namespace/name`) and [`GroupKind`].
//!
//! An object ref names one Kubernetes object independently of its API version, as kubectl's
//! ApplySet pruning does (KEP-3659 keys members by group-kind). It prints as `Kind/ns/name`
//! (`Kind/name` for cluster-scoped objects), the form every gitward log line and error uses.

use std::fmt;

/// An API group and kind, e.g. `apps` + `Deployment`; the core group is the empty string.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupKind {
    /// API group (`""` for the core group, `apps`, `networking.k8s.io`, …).
    pub group: String,
    /// Kind, e.g. `Deployment`.
    pub kind: String,
}

impl GroupKind {
    /// Builds a group-kind from an `apiVersion` (`v1`, `apps/v1`) and a kind.
    pub fn from_api_version(api_version: &str, kind: &str) -> Self {
        let group = match api_version.split_once('/') {
            Some((group, _version)) => group,
            None => "",
        };
        Self { group: group.to_string(), kind: kind.to_string() }
    }

    /// The `Kind.group` form used by the ApplySet annotation `applyset.kubernetes.io/contains-group-kinds`
    /// (KEP-3659): `Deployment.apps`, or `ConfigMap` for the core group.
    pub fn to_applyset_string(&self) -> String {
        if self.group.is_empty() { self.kind.clone() } else { format!("{}.{}", self.kind, self.group) }
    }

    /// Parses the `Kind.group` form written by [`GroupKind::to_applyset_string`]; the kind is
    /// everything before the first dot.
    pub fn parse_applyset_string(s: &str) -> Self {
        match s.split_once('.') {
            Some((kind, group)) => Self { group: group.to_string(), kind: kind.to_string() },
            None => Self { group: String::new(), kind: s.to_string() },
        }
    }
}

impl fmt::Display for GroupKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_applyset_string())
    }
}

/// The identity of one object: group, kind, namespace (`None` when cluster-scoped) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    /// API group and kind.
    pub gk: GroupKind,
    /// Namespace; `None` for cluster-scoped objects (and, before scope is known, for objects
    /// whose manifest names none).
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
}

impl ObjectRef {
    /// Builds a ref from its parts.
    pub fn new(gk: GroupKind, namespace: Option<String>, name: impl Into<String>) -> Self {
        Self { gk, namespace, name: name.into() }
    }
}

impl fmt::Display for ObjectRef {
    /// `Kind/ns/name`, or `Kind/name` when cluster-scoped (DESIGN.md, Words).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{}/{}/{}", self.gk.kind, ns, self.name),
            None => write!(f, "{}/{}", self.gk.kind, self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_kind_round_trips_through_applyset_form() {
        let gk = GroupKind::from_api_version("networking.k8s.io/v1", "Ingress");
        assert_eq!(gk.to_applyset_string(), "Ingress.networking.k8s.io");
        assert_eq!(GroupKind::parse_applyset_string("Ingress.networking.k8s.io"), gk);
        let core = GroupKind::from_api_version("v1", "ConfigMap");
        assert_eq!(core.to_applyset_string(), "ConfigMap");
        assert_eq!(GroupKind::parse_applyset_string("ConfigMap"), core);
    }

    #[test]
    fn object_ref_prints_kind_namespace_name() {
        let gk = GroupKind::from_api_version("apps/v1", "Deployment");
        assert_eq!(ObjectRef::new(gk.clone(), Some("shop".into()), "cart").to_string(), "Deployment/shop/cart");
        assert_eq!(ObjectRef::new(gk, None, "cart").to_string(), "Deployment/cart");
    }
}
