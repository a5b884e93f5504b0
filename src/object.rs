//! Object identity: [`ObjectRef`] (`group/kind/namespace/name`) and [`GroupKind`], made of
//! interned strings ([`Atom`]).
//!
//! An object ref names one Kubernetes object independently of its API version, as kubectl's
//! ApplySet pruning does (KEP-3659 keys members by group-kind). It prints as `Kind/ns/name`
//! (`Kind/name` for cluster-scoped objects), the form every gitward log line and error uses.
//!
//! A daemon holds each member's ref in several places at once — the parse cache, the last
//! sync's desired objects, the metadata cache and the inventory's member record — and every
//! kind and namespace in thousands of refs. Interned, each distinct string is stored once and a
//! ref is four pointers (32 bytes) wherever it is held.

use std::fmt;
use std::ops::Deref;

use internment::ArcIntern;

/// An interned, immutable string: one shared, reference-counted copy per distinct value,
/// process-wide (the `internment` crate's `ArcIntern`), freed when the last copy is dropped.
///
/// Eight bytes; cloning, equality and hashing compare the pointer (equal strings are the same
/// copy), ordering compares the text, so sorted maps keep the order `String` keys had. Making
/// one takes a lock and a hash lookup (on the order of 100 ns): make refs once and clone them.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Atom(ArcIntern<String>);

impl Ord for Atom {
    /// By text; the same copy is equal without reading it (refs in sorted maps mostly share
    /// their group, kind and namespace: comparing their bytes, `memcmp` alone was 7% of a
    /// warm resync's CPU at 10,000 objects under perf).
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        if self == other { std::cmp::Ordering::Equal } else { self.as_str().cmp(other.as_str()) }
    }
}

impl PartialOrd for Atom {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Atom {
    /// The interned copy of `s`.
    pub fn new(s: &str) -> Self {
        Self(ArcIntern::from_ref(s))
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

impl Default for Atom {
    /// The empty string (the core API group).
    fn default() -> Self {
        Self::new("")
    }
}

impl Deref for Atom {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Atom {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for Atom {
    fn from(s: &str) -> Self {
        Self::new(s)
    }
}

impl From<String> for Atom {
    fn from(s: String) -> Self {
        Self(ArcIntern::new(s))
    }
}

impl From<&String> for Atom {
    fn from(s: &String) -> Self {
        Self::new(s)
    }
}

impl From<&Atom> for Atom {
    fn from(s: &Atom) -> Self {
        s.clone()
    }
}

impl PartialEq<str> for Atom {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Atom {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Atom {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl serde::Serialize for Atom {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl fmt::Display for Atom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Atom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// An API group and kind, e.g. `apps` + `Deployment`; the core group is the empty string.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupKind {
    /// API group (`""` for the core group, `apps`, `networking.k8s.io`, …).
    pub group: Atom,
    /// Kind, e.g. `Deployment`.
    pub kind: Atom,
}

impl GroupKind {
    /// Builds a group-kind from an `apiVersion` (`v1`, `apps/v1`) and a kind.
    pub fn from_api_version(api_version: &str, kind: &str) -> Self {
        let group = match api_version.split_once('/') {
            Some((group, _version)) => group,
            None => "",
        };
        Self { group: Atom::new(group), kind: Atom::new(kind) }
    }

    /// Builds a group-kind from its group (`""` for the core group) and kind.
    pub fn new(group: impl Into<Atom>, kind: impl Into<Atom>) -> Self {
        Self { group: group.into(), kind: kind.into() }
    }

    /// The `Kind.group` form used by the ApplySet annotation `applyset.kubernetes.io/contains-group-kinds`
    /// (KEP-3659): `Deployment.apps`, or `ConfigMap` for the core group.
    pub fn to_applyset_string(&self) -> String {
        if self.group.is_empty() { self.kind.to_string() } else { format!("{}.{}", self.kind, self.group) }
    }

    /// Parses the `Kind.group` form written by [`GroupKind::to_applyset_string`]; the kind is
    /// everything before the first dot.
    pub fn parse_applyset_string(s: &str) -> Self {
        match s.split_once('.') {
            Some((kind, group)) => Self::new(group, kind),
            None => Self::new("", s),
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
    pub namespace: Option<Atom>,
    /// `metadata.name`.
    pub name: Atom,
}

impl ObjectRef {
    /// Builds a ref from its parts (interned: see [`Atom`]).
    pub fn new<N: Into<Atom>>(gk: GroupKind, namespace: Option<N>, name: impl Into<Atom>) -> Self {
        Self { gk, namespace: namespace.map(Into::into), name: name.into() }
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
    fn atoms_are_one_copy_per_value_and_sort_by_text() {
        let a = Atom::new("shop");
        let b = Atom::from(String::from("shop"));
        assert_eq!(a, b);
        assert!(std::ptr::eq(a.as_str(), b.as_str()), "one copy of equal strings");
        assert_eq!(a, "shop");
        assert!(Atom::new("b") > Atom::new("a") && Atom::new("a") > Atom::new(""));
        assert_eq!(std::mem::size_of::<ObjectRef>(), 32);
    }

    #[test]
    fn object_ref_prints_kind_namespace_name() {
        let gk = GroupKind::from_api_version("apps/v1", "Deployment");
        assert_eq!(ObjectRef::new(gk.clone(), Some("shop"), "cart").to_string(), "Deployment/shop/cart");
        assert_eq!(ObjectRef::new(gk, None::<&str>, "cart").to_string(), "Deployment/cart");
    }
}
