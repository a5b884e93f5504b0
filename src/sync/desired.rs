//! From manifests to desired objects: resolve each kind by discovery, default the namespace of
//! namespaced kinds, reject duplicates and unknown kinds, take the desired hash, and add
//! gitward's label and annotation.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use super::{Error, Result};
use crate::apply::wait::defined_kind;
use crate::cluster::discovery::Discovery;
pub use crate::cluster::discovery::Resolved;
use crate::cluster::inventory::{APPLY_MODE, RECREATE};
use crate::config::ApplyMode;
use crate::manifest::{Body, Manifest, Origin, Skipped, canonical_json, desired_hash};
use crate::object::{Atom, GroupKind, ObjectRef};
use crate::plan::{Desired, ignore, metadata_mut};

/// What the unit adds to every object.
#[derive(Debug, Clone, PartialEq)]
pub struct Defaults {
    /// Namespace for namespaced objects that name none.
    pub namespace: Atom,
    /// The unit's ApplySet id, set as the `part-of` label.
    pub applyset_id: std::sync::Arc<str>,
    /// The unit's `recreate_on_immutable`.
    pub recreate: bool,
    /// The unit's `apply_mode`; an object's annotation `gitward.dev/apply-mode` overrides it.
    pub apply_mode: ApplyMode,
    /// The unit's `[[sync.ignore]]` rules: the fields they select are left out of the object
    /// before it is hashed ([`Desired::ignored`]). Shared by every build of the unit.
    pub ignore: std::sync::Arc<[crate::config::IgnoreRule]>,
}

impl Defaults {
    /// What `unit` adds to every object, read from its config alone: its namespace, the ApplySet
    /// id of its inventory ([`crate::cluster::inventory::Inventory::new`], as the engine takes
    /// it), `recreate_on_immutable`, `apply_mode` and `[[sync.ignore]]` rules.
    pub fn of(unit: &crate::config::SyncUnit) -> Self {
        Self {
            namespace: unit.namespace.as_str().into(),
            applyset_id: crate::cluster::inventory::Inventory::new(&unit.inventory).id.as_str().into(),
            recreate: unit.recreate_on_immutable,
            apply_mode: unit.apply_mode,
            ignore: unit.ignore.clone().into(),
        }
    }
}

/// Desired objects split by whether their kind is known yet.
#[derive(Debug, Default)]
pub struct Resolution {
    /// Ready to plan.
    pub desired: Vec<Desired>,
    /// Custom resources whose CRD is in the same revision: resolved after the Foundations
    /// stage has applied (and Established) it.
    pub pending: Vec<Manifest>,
}

/// Where a manifest came from, for messages: `dir/file.yaml (document 2)`.
pub fn origin(m: &Manifest) -> Origin {
    Origin { file: m.file.clone(), index: m.index }
}

/// Resolves `manifests`. A kind that the server does not serve and that no CRD of the same
/// revision defines is an error for the whole revision ([`Error::UnknownKind`]); two manifests
/// for one object are [`Error::Duplicate`].
///
/// `previous` are the desired objects of the unit's last sync, built with the same `defaults`:
/// a manifest that comes out of the parse or render cache as the very body one of them was built
/// from ([`Desired::source`]), resolved to the same resource and object, is reused as it is,
/// without parsing, hashing or serializing it again; so a revision that changes one file costs
/// a map lookup per unchanged object.
pub async fn resolve(
    client: &kube::Client,
    discovery: &mut Discovery,
    manifests: Vec<Manifest>,
    defaults: &Defaults,
    previous: &[Desired],
) -> Result<Resolution> {
    let built = Built::new(previous);
    let crd_kinds: BTreeSet<GroupKind> = manifests
        .iter()
        .filter(|m| m.gk.group == "apiextensions.k8s.io" && m.gk.kind == "CustomResourceDefinition")
        .filter_map(|m| defined_kind(&m.body))
        .collect();
    // Every object's annotation is checked before anything is applied, pending custom resources
    // included (they are built only after their CRD was applied).
    for m in manifests.iter().filter(|m| !built.has(m)) {
        let value = m.body.pointer(&format!("/metadata/annotations/{}", APPLY_MODE.replace('/', "~1")));
        apply_mode(value.as_ref().and_then(Value::as_str), &origin(m))?;
    }
    let mut out = Resolution::default();
    let mut seen: HashMap<ObjectRef, Origin> = HashMap::new();
    for m in manifests {
        let mut resolved = discovery.resolve(client, &m.api_version, &m.gk.kind).await?;
        if resolved.is_none() && !crd_kinds.contains(&m.gk) && discovery.forget_stale(&m.api_version) {
            // The answer may be from before a CRD was installed outside this unit: ask again.
            resolved = discovery.resolve(client, &m.api_version, &m.gk.kind).await?;
        }
        let object = match &resolved {
            Some(r) if r.namespaced => {
                let ns = m.namespace.clone().unwrap_or_else(|| defaults.namespace.clone());
                ObjectRef::new(m.gk.clone(), Some(ns), &m.name)
            }
            Some(_) => ObjectRef::new(m.gk.clone(), None::<Atom>, &m.name),
            // Scope unknown until its CRD is applied: key it as a namespaced object would be.
            None => ObjectRef::new(
                m.gk.clone(),
                Some(m.namespace.clone().unwrap_or_else(|| defaults.namespace.clone())),
                &m.name,
            ),
        };
        if let Some(first) = seen.insert(object.clone(), origin(&m)) {
            let (first, second) = (first.to_string(), origin(&m).to_string());
            return Err(Error::Duplicate { object: object.to_string(), first, second, hint: String::new() });
        }
        match resolved {
            Some(r) => out.desired.push(built.reuse_or_build(m, object, r, defaults)?),
            None if crd_kinds.contains(&m.gk) => out.pending.push(m),
            None => {
                return Err(Error::UnknownKind {
                    origin: origin(&m).to_string(),
                    api_version: m.api_version.to_string(),
                    kind: m.gk.kind.to_string(),
                });
            }
        }
    }
    Ok(out)
}

/// `error` with a hint when it is [`Error::Duplicate`] and the unit read a kustomization file as
/// plain manifests ([`kustomization_hint`]): a patch read as an object is the usual cause of an
/// object defined twice there. Other errors are returned as they are.
pub fn hinted(error: Error, skipped: &[Skipped]) -> Error {
    match error {
        Error::Duplicate { object, first, second, hint } if hint.is_empty() => {
            let hint = kustomization_hint(skipped, [&first, &second]).map(|h| format!("; {h}")).unwrap_or_default();
            Error::Duplicate { object, first, second, hint }
        }
        error => error,
    }
}

/// The kustomization file among `skipped` (those a plain unit passed over,
/// [`Skipped::is_kustomization`]) nearest to the documents `origins` (`file (document n)`) of
/// an object defined twice — the deepest whose directory holds one of them, else the first —
/// as `<file> is a kustomization: <reason>` (the reason says which config builds it,
/// [`super::repo::plain_kustomization`]); `None` when the unit read none.
pub fn kustomization_hint(skipped: &[Skipped], origins: [&str; 2]) -> Option<String> {
    let mut best: Option<(bool, usize, &Skipped)> = None;
    for s in skipped.iter().filter(|s| s.is_kustomization()) {
        let dir = s.file.rsplit_once('/').map_or("", |(dir, _)| dir);
        let holds = origins.iter().any(|o| dir.is_empty() || o.starts_with(&format!("{dir}/")));
        // Depth counts only among those that hold a document; otherwise the first stays.
        let depth = if holds { dir.len() } else { 0 };
        if best.is_none_or(|(h, d, _)| (holds, depth) > (h, d)) {
            best = Some((holds, depth, s));
        }
    }
    best.map(|(_, _, s)| format!("{} is a kustomization: {}", s.file, s.reason))
}

/// The desired objects of a unit's last sync, by the manifest body each was built from
/// ([`Desired::source`]), so that an object whose manifest came out of the parse or render cache
/// unchanged is not built again. Borrowed for one sync; holds nothing of its own but the index.
pub struct Built<'a>(HashMap<usize, &'a Desired>);

impl<'a> Built<'a> {
    /// Indexes `previous` (the last sync's desired objects, built with the same [`Defaults`]).
    pub fn new(previous: &'a [Desired]) -> Self {
        Self(previous.iter().map(|d| (d.source.key(), d)).collect())
    }

    /// Whether `m` is the very manifest body one of the previous objects was built from.
    pub fn has(&self, m: &Manifest) -> bool {
        self.0.get(&m.body.key()).is_some_and(|d| Body::same(&d.source, &m.body))
    }

    /// The previous object built from `m`'s very body, when it resolved to the same `object`
    /// and `resource` (its origin updated: the file may have moved documents); otherwise
    /// [`build`].
    ///
    /// Errors: as [`build`].
    pub fn reuse_or_build(
        &self,
        m: Manifest,
        object: ObjectRef,
        kind: Resolved,
        defaults: &Defaults,
    ) -> Result<Desired> {
        match self.0.get(&m.body.key()) {
            Some(d) if Body::same(&d.source, &m.body) && d.object == object && d.resource == kind.resource => {
                let mut d = (*d).clone();
                d.origin = origin(&m);
                Ok(d)
            }
            _ => build(m, object, kind, defaults),
        }
    }
}

/// The labels and annotations (`(field, key)`) gitward writes on every object it sends
/// ([`Desired::body`]): the ApplySet `part-of` label and the desired-hash annotation. No input
/// chooses their values.
pub const OWN_METADATA: &[(&str, &str)] =
    &[("labels", crate::cluster::inventory::PART_OF), ("annotations", crate::cluster::inventory::DESIRED_HASH)];

/// Builds the object to send: namespace defaulted (or removed for cluster-scoped kinds), the
/// unit's ignore rules that select it found, the desired hash taken, then gitward's
/// `part-of` label and desired-hash annotation added; the apply mode is the unit's unless the
/// annotation `gitward.dev/apply-mode` names another.
///
/// Errors: [`Error::InvalidAnnotation`] when `gitward.dev/apply-mode` is neither `update` nor
/// `server-side-apply`.
pub fn build(m: Manifest, object: ObjectRef, kind: Resolved, defaults: &Defaults) -> Result<Desired> {
    let Resolved { resource, namespaced } = kind;
    let origin = origin(&m);
    let source = m.body;
    let mut body = source.to_value();
    let namespace = object.namespace.as_deref().filter(|_| namespaced);
    // The ignored fields stay in the body and its hash: a rule decides what is sent to an
    // existing object (`Desired::body_given`), not what git declares.
    let ignored = ignore::select(&defaults.ignore, &object, &body);
    let splice = crate::plan::splice::Splice::find(source.as_str(), &body, namespace);
    let meta = metadata_mut(&mut body);
    if namespaced {
        meta.insert("namespace".into(), Value::String(object.namespace.as_deref().unwrap_or_default().to_owned()));
    } else {
        meta.remove("namespace");
    }
    let hash = match &m.hash_key {
        Some(key) => Atom::from(key.hash(canonical_json(&body).as_bytes())),
        None => Atom::from(desired_hash(&body)),
    };
    let meta = metadata_mut(&mut body);
    let annotation = |key: &str| meta.get("annotations").and_then(|a| a.get(key)).and_then(Value::as_str);
    let recreate = defaults.recreate || annotation(RECREATE) == Some("enabled");
    let mode = apply_mode(annotation(APPLY_MODE), &origin)?.unwrap_or(defaults.apply_mode);
    let part_of = defaults.applyset_id.clone();
    let decrypted = m.hash_key.is_some();
    Ok(Desired { object, resource, source, part_of, hash, origin, recreate, mode, decrypted, splice, ignored })
}

/// The apply mode an object's `gitward.dev/apply-mode` annotation names, `None` without one.
///
/// Errors: [`Error::InvalidAnnotation`] for any other value.
fn apply_mode(value: Option<&str>, origin: &dyn std::fmt::Display) -> Result<Option<ApplyMode>> {
    match value {
        None => Ok(None),
        Some("update") => Ok(Some(ApplyMode::Update)),
        Some("server-side-apply") => Ok(Some(ApplyMode::ServerSideApply)),
        Some(other) => Err(Error::InvalidAnnotation {
            origin: origin.to_string(),
            annotation: APPLY_MODE.into(),
            message: format!("`{other}` is not an apply mode; use `update` or `server-side-apply`"),
        }),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::cluster::inventory::{DESIRED_HASH, PART_OF};
    use serde_json::json;

    fn manifest(body: Value) -> Manifest {
        Manifest {
            file: "app.yaml".into(),
            index: 0,
            api_version: "v1".into(),
            gk: GroupKind::from_api_version("v1", "ConfigMap"),
            name: "conf".into(),
            namespace: None,
            body: body.into(),
            hash_key: None,
        }
    }

    #[test]
    fn a_duplicate_names_the_kustomization_nearest_to_its_documents() {
        let kustomization = |file: &str| Skipped { file: file.into(), index: None, reason: "build it".into() };
        let document = Skipped { file: "x.yaml".into(), index: Some(0), reason: "a Kustomization object".into() };
        let skipped = [document, kustomization("base/kustomization.yaml"), kustomization("app/web/Kustomization")];
        let hint = |origins| kustomization_hint(&skipped, origins);
        let web = ["app/web/cm.yaml (document 1)", "app/web/patch.yaml (document 1)"];
        assert_eq!(hint(web).as_deref(), Some("app/web/Kustomization is a kustomization: build it"));
        let elsewhere = ["other/a.yaml (document 1)", "other/b.yaml (document 2)"];
        assert_eq!(
            hint(elsewhere).as_deref(),
            Some("base/kustomization.yaml is a kustomization: build it"),
            "the first"
        );
        assert_eq!(kustomization_hint(&skipped[..1], web), None, "a kustomize document is no kustomization file");
        let duplicate = Error::Duplicate {
            object: "ConfigMap/shop/web".into(),
            first: web[0].into(),
            second: web[1].into(),
            hint: String::new(),
        };
        assert_eq!(
            hinted(duplicate, &skipped).to_string(),
            "ConfigMap/shop/web: defined twice, in app/web/cm.yaml (document 1) and in app/web/patch.yaml (document 1); \
             app/web/Kustomization is a kustomization: build it"
        );
    }

    /// The ConfigMap `name` of namespace `shop`, built as the engine builds it; for the tests of
    /// the sync's steps.
    pub(in crate::sync) fn configmap(name: &str) -> Desired {
        let mut m = manifest(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}));
        m.name = name.into();
        let object = ObjectRef::new(m.gk.clone(), Some("shop"), name);
        let ar = std::sync::Arc::new(kube::discovery::ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()));
        build(m, object, Resolved { resource: ar, namespaced: true }, &defaults()).unwrap()
    }

    /// The defaults of a unit with namespace `shop`, server-side apply (shared with
    /// `super::early`'s tests).
    pub(in crate::sync) fn defaults() -> Defaults {
        Defaults {
            namespace: "shop".into(),
            applyset_id: "applyset-x-v1".into(),
            recreate: false,
            apply_mode: ApplyMode::ServerSideApply,
            ignore: std::sync::Arc::new([]),
        }
    }

    #[test]
    fn namespaced_object_gets_unit_namespace_label_and_hash() {
        let m = manifest(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "conf"}, "data": {"a": "1"}}),
        );
        let object = ObjectRef::new(m.gk.clone(), Some("shop"), "conf");
        let ar = std::sync::Arc::new(kube::discovery::ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()));
        let d = build(m, object, Resolved { resource: ar, namespaced: true }, &defaults()).unwrap();
        let body = d.body().to_value();
        assert_eq!(body["metadata"]["namespace"], "shop");
        assert_eq!(body["metadata"]["labels"][PART_OF], "applyset-x-v1");
        assert_eq!(body["metadata"]["annotations"][DESIRED_HASH], d.hash.as_str());
        assert_eq!(d.hash.len(), 64);
    }

    #[test]
    fn desired_hash_ignores_gitwards_own_label_and_annotation() {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "conf"}});
        let ar = std::sync::Arc::new(kube::discovery::ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()));
        let a = build(
            manifest(body.clone()),
            ObjectRef::new(GroupKind::from_api_version("v1", "ConfigMap"), Some("shop"), "conf"),
            Resolved { resource: ar.clone(), namespaced: true },
            &defaults(),
        )
        .unwrap();
        let other = Defaults { applyset_id: "applyset-y-v1".into(), ..defaults() };
        let b = build(
            manifest(body),
            ObjectRef::new(GroupKind::from_api_version("v1", "ConfigMap"), Some("shop"), "conf"),
            Resolved { resource: ar, namespaced: true },
            &other,
        )
        .unwrap();
        assert_eq!(a.hash, b.hash);
    }

    #[test]
    fn ignored_fields_stay_in_the_hash_and_the_body_so_a_rule_is_no_change() {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "conf"}, "data": {"a": "1", "b": "2"}});
        let ar = std::sync::Arc::new(kube::discovery::ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()));
        let object = ObjectRef::new(GroupKind::from_api_version("v1", "ConfigMap"), Some("shop"), "conf");
        let kind = || Resolved { resource: ar.clone(), namespaced: true };
        let rule = crate::config::IgnoreRule {
            kind: "ConfigMap".into(),
            group: Some(String::new()),
            name: None,
            namespace: Some("shop".into()),
            label_selector: None,
            paths: vec!["/data/b".into(), "/metadata/labels".into()],
            managers: Vec::new(),
        };
        let ignoring = Defaults { ignore: vec![rule].into(), ..defaults() };
        let d = build(manifest(body.clone()), object.clone(), kind(), &ignoring).unwrap();
        let plain = build(manifest(body.clone()), object.clone(), kind(), &defaults()).unwrap();
        assert_eq!(d.hash, plain.hash, "adding a rule changes no hash");
        assert_eq!(d.body().to_value(), plain.body().to_value(), "a create sends git's values");
        assert_eq!(d.body().to_value()["data"]["b"], "2");
        assert_eq!(d.ignored.as_ref().unwrap().paths, ["/data/b", "/metadata/labels"]);
        let elsewhere = ObjectRef::new(GroupKind::from_api_version("v1", "ConfigMap"), Some("other"), "conf");
        let d = build(manifest(body), elsewhere, kind(), &ignoring).unwrap();
        assert_eq!(d.ignored, None, "not selected");
    }

    #[test]
    fn recreate_annotation_enables_recreate_for_one_object() {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "conf", "annotations": {RECREATE: "enabled"}}});
        let ar = std::sync::Arc::new(kube::discovery::ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()));
        let d = build(
            manifest(body),
            ObjectRef::new(GroupKind::from_api_version("v1", "ConfigMap"), Some("shop"), "conf"),
            Resolved { resource: ar, namespaced: true },
            &defaults(),
        )
        .unwrap();
        assert!(d.recreate);
    }

    #[test]
    fn apply_mode_annotation_overrides_the_units_mode_and_a_bad_value_is_refused() {
        let ar = std::sync::Arc::new(kube::discovery::ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()));
        let object = ObjectRef::new(GroupKind::from_api_version("v1", "ConfigMap"), Some("shop"), "conf");
        let with = |mode: &str| {
            manifest(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "conf", "annotations": {APPLY_MODE: mode}}}),
            )
        };
        let plain = manifest(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "conf"}}));
        let update_unit = Defaults { apply_mode: ApplyMode::Update, ..defaults() };
        let d =
            build(plain, object.clone(), Resolved { resource: ar.clone(), namespaced: true }, &update_unit).unwrap();
        assert_eq!(d.mode, ApplyMode::Update);
        let d = build(with("update"), object.clone(), Resolved { resource: ar.clone(), namespaced: true }, &defaults())
            .unwrap();
        assert_eq!(d.mode, ApplyMode::Update);
        let d = build(
            with("server-side-apply"),
            object.clone(),
            Resolved { resource: ar.clone(), namespaced: true },
            &update_unit,
        )
        .unwrap();
        assert_eq!(d.mode, ApplyMode::ServerSideApply);
        let err = build(with("replace"), object, Resolved { resource: ar, namespaced: true }, &defaults())
            .unwrap_err()
            .to_string();
        assert!(err.contains("app.yaml (document 1)") && err.contains("`replace`"), "{err}");
    }

    #[test]
    fn an_object_whose_manifest_came_out_of_the_cache_unchanged_is_reused_not_rebuilt() {
        let m = manifest(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "conf"}}));
        let object = ObjectRef::new(m.gk.clone(), Some("shop"), "conf");
        let ar = std::sync::Arc::new(kube::discovery::ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()));
        let first =
            build(m.clone(), object.clone(), Resolved { resource: ar.clone(), namespaced: true }, &defaults()).unwrap();
        let previous = vec![first.clone()];
        let built = Built::new(&previous);
        assert!(built.has(&m));
        let reused = built
            .reuse_or_build(m.clone(), object.clone(), Resolved { resource: ar.clone(), namespaced: true }, &defaults())
            .unwrap();
        assert_eq!((reused.body(), &reused.hash), (first.body(), &first.hash));
        // Equal text parsed again (a changed blob that reads the same) is a new body: built.
        let reparsed = Manifest { body: Body::from_value(&m.body.to_value()), ..m.clone() };
        assert!(!built.has(&reparsed));
        let rebuilt = built
            .reuse_or_build(reparsed, object.clone(), Resolved { resource: ar.clone(), namespaced: true }, &defaults())
            .unwrap();
        assert_eq!(rebuilt.hash, first.hash);
        // The same body resolved to another object (the unit's namespace changed) is built.
        let elsewhere = ObjectRef::new(m.gk.clone(), Some("other"), "conf");
        let moved = built
            .reuse_or_build(m, elsewhere.clone(), Resolved { resource: ar, namespaced: true }, &defaults())
            .unwrap();
        assert_eq!(moved.object, elsewhere);
        assert_eq!(moved.body().to_value()["metadata"]["namespace"], "other");
    }
}
