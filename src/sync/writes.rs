//! The one seam for a sync's writes: every request by which a sync changes the cluster — its
//! members applied ([`Writes::apply`]) and pruned ([`Writes::prune`]), the ApplySet parent and
//! its record ([`Writes::parent`]), the namespaces made bare or released
//! ([`Writes::create_namespace`], [`Writes::release_namespace`]), Helm hooks applied and
//! deleted ([`Writes::apply_hook`], [`Writes::delete_hook`]), Kubernetes Events
//! ([`Writes::create_event`], [`Writes::patch_event`]) — goes through [`Writes`].
//!
//! [`Cluster`] sends them (the code paths of [`crate::apply`], [`crate::prune`] and
//! [`crate::cluster::inventory`], through the unit's clients, checked by its Lease fence);
//! [`Recording`] records them in order and answers as an API server that takes every write,
//! so the order of a sync's writes is tested without one ([`super::order`]). Reads (discovery,
//! the metadata cache's lists, the re-check before a delete) stay with their callers.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::Value;

use crate::apply::hook::HookApi;
use crate::apply::{ApplyOptions, Blocked};
use crate::changeset::ChangeSet;
use crate::cluster::cache::MetadataCache;
use crate::cluster::inventory::{Contents, Inventory, Parent};
use crate::object::ObjectRef;
use crate::plan::{Desired, PruneStep, Stage, Step};

/// The writes of a sync. Each verb has the shape, errors and effects on the metadata cache of
/// the code path [`Cluster`] runs; an implementation answers as the API server would for its
/// purpose. Object-safe: the engine holds one as `Arc<dyn Writes>`.
pub trait Writes: Send + Sync {
    /// Applies `steps` of `stage` (indexes into `desired`) as [`crate::apply::apply_stage`]
    /// does: objects `blocked` names are `skipped`, each answer's resourceVersion goes into
    /// `cache`, the Foundations stage waits for its CRDs and Namespaces, and what failed
    /// blocks its dependents in later stages. One entry per step; never fails as a whole.
    fn apply<'a>(
        &'a self,
        stage: Stage,
        steps: &'a [Step],
        desired: &'a [Desired],
        cache: &'a MetadataCache,
        blocked: &'a mut Blocked,
        options: &'a ApplyOptions,
    ) -> BoxFuture<'a, ChangeSet>;

    /// Deletes `steps` (in reverse stage order) as [`crate::prune::prune`] does: each re-checked
    /// and deleted with uid and resourceVersion preconditions, cascades refused, the fence
    /// checked again before each delete. One entry per step; never fails as a whole.
    fn prune<'a>(&'a self, ctx: &'a crate::prune::Context<'a>, steps: &'a [PruneStep]) -> BoxFuture<'a, ChangeSet>;

    /// Writes the ApplySet parent of `inventory` with `contents` and `annotations` (the record),
    /// `previous` as read or last written (its resourceVersion the precondition; `None`: create
    /// it), as [`Inventory::write`] does. Returns the parent as written.
    ///
    /// Errors: those of [`Inventory::write`], among them
    /// [`crate::cluster::Error::InventoryConflict`] when the precondition failed.
    fn parent<'a>(
        &'a self,
        inventory: &'a Inventory,
        contents: &'a Contents,
        previous: Option<&'a Parent>,
        field_manager: &'a str,
        annotations: &'a BTreeMap<String, String>,
    ) -> BoxFuture<'a, crate::cluster::Result<Parent>>;

    /// Makes Namespace `name` bare if missing ([`crate::apply::namespace::create_if_missing`]):
    /// whether it made it.
    ///
    /// Errors: the API server's.
    fn create_namespace<'a>(&'a self, name: &'a str, field_manager: &'a str) -> BoxFuture<'a, kube::Result<bool>>;

    /// Releases the unit's Namespace `name` from ApplySet `applyset_id`
    /// ([`crate::apply::namespace::release`]): its `part-of` label and, `with_hash`, its desired
    /// hash removed by one tested JSON patch.
    ///
    /// Errors: the API server's (a failed test among them).
    fn release_namespace<'a>(
        &'a self,
        name: &'a str,
        applyset_id: &'a str,
        with_hash: bool,
        field_manager: &'a str,
    ) -> BoxFuture<'a, kube::Result<()>>;

    /// Applies the Helm hook `object` as `body` through `api` ([`HookApi::apply`]): the object
    /// as applied.
    ///
    /// Errors: the API server's.
    fn apply_hook<'a>(
        &'a self,
        api: &'a HookApi,
        object: &'a ObjectRef,
        body: &'a Value,
        field_manager: &'a str,
    ) -> BoxFuture<'a, kube::Result<DynamicObject>>;

    /// Deletes the Helm hook `object`, live as `live`, through `api` and waits until it is gone,
    /// at most `timeout` ([`HookApi::delete`]).
    ///
    /// Errors: the message of a failed delete or wait.
    fn delete_hook<'a>(
        &'a self,
        api: &'a HookApi,
        object: &'a ObjectRef,
        live: &'a DynamicObject,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<(), String>>;

    /// Writes `attestations`, the keys to add to the ConfigMap of a unit's attestations
    /// ([`crate::sync::provenance::kept`]), under `field_manager` through gitward's own client:
    /// without a resourceVersion it is created; with one, a JSON merge patch (RFC 7386) adds its
    /// keys and removes `dropped` (from `data` and `binaryData`), the resourceVersion its
    /// precondition. Returns it as written.
    ///
    /// Errors: the API server's (a 409 when another write came first).
    fn keep_attestations<'a>(
        &'a self,
        attestations: &'a ConfigMap,
        dropped: &'a [String],
        field_manager: &'a str,
    ) -> BoxFuture<'a, kube::Result<ConfigMap>>;

    /// Creates `event` through `api` (`events.k8s.io/v1`, the parent's namespace).
    ///
    /// Errors: the API server's.
    fn create_event<'a>(&'a self, api: &'a Api<Event>, event: &'a Event) -> BoxFuture<'a, kube::Result<()>>;

    /// Merge-patches Event `name` through `api` with `patch` (its `series`).
    ///
    /// Errors: the API server's (a 404 when the Event expired).
    fn patch_event<'a>(
        &'a self,
        api: &'a Api<Event>,
        name: &'a str,
        patch: &'a Value,
    ) -> BoxFuture<'a, kube::Result<()>>;
}

/// The writes sent to the API server: members, hooks and namespaces through the unit's writer
/// (the client impersonating its ServiceAccount, if any), the parent and the namespaces' reads
/// through gitward's own client; both checked by the unit's Lease fence.
pub struct Cluster {
    /// gitward's own identity: the ApplySet parent, the namespaces' reads.
    client: kube::Client,
    /// The unit's writes.
    writer: kube::Client,
}

impl Cluster {
    /// Writes through `client` (gitward's bookkeeping) and `writer` (the unit's objects).
    pub fn new(client: kube::Client, writer: kube::Client) -> Self {
        Self { client, writer }
    }
}

impl Writes for Cluster {
    fn apply<'a>(
        &'a self,
        stage: Stage,
        steps: &'a [Step],
        desired: &'a [Desired],
        cache: &'a MetadataCache,
        blocked: &'a mut Blocked,
        options: &'a ApplyOptions,
    ) -> BoxFuture<'a, ChangeSet> {
        Box::pin(crate::apply::apply_stage(&self.writer, stage, steps, desired, cache, blocked, options))
    }

    fn prune<'a>(&'a self, ctx: &'a crate::prune::Context<'a>, steps: &'a [PruneStep]) -> BoxFuture<'a, ChangeSet> {
        Box::pin(crate::prune::prune(ctx, steps))
    }

    fn parent<'a>(
        &'a self,
        inventory: &'a Inventory,
        contents: &'a Contents,
        previous: Option<&'a Parent>,
        field_manager: &'a str,
        annotations: &'a BTreeMap<String, String>,
    ) -> BoxFuture<'a, crate::cluster::Result<Parent>> {
        Box::pin(inventory.write(&self.client, contents, previous, field_manager, annotations))
    }

    fn create_namespace<'a>(&'a self, name: &'a str, field_manager: &'a str) -> BoxFuture<'a, kube::Result<bool>> {
        Box::pin(crate::apply::namespace::create_if_missing(&self.client, &self.writer, name, field_manager))
    }

    fn release_namespace<'a>(
        &'a self,
        name: &'a str,
        applyset_id: &'a str,
        with_hash: bool,
        field_manager: &'a str,
    ) -> BoxFuture<'a, kube::Result<()>> {
        Box::pin(crate::apply::namespace::release(&self.client, name, applyset_id, with_hash, field_manager))
    }

    fn apply_hook<'a>(
        &'a self,
        api: &'a HookApi,
        object: &'a ObjectRef,
        body: &'a Value,
        field_manager: &'a str,
    ) -> BoxFuture<'a, kube::Result<DynamicObject>> {
        Box::pin(api.apply(&object.name, body, field_manager))
    }

    fn delete_hook<'a>(
        &'a self,
        api: &'a HookApi,
        _object: &'a ObjectRef,
        live: &'a DynamicObject,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(api.delete(live, timeout))
    }

    fn keep_attestations<'a>(
        &'a self,
        attestations: &'a ConfigMap,
        dropped: &'a [String],
        field_manager: &'a str,
    ) -> BoxFuture<'a, kube::Result<ConfigMap>> {
        Box::pin(async move {
            let namespace = attestations.metadata.namespace.as_deref().unwrap_or_default();
            let name = attestations.metadata.name.as_deref().unwrap_or_default();
            let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
            if attestations.metadata.resource_version.is_none() {
                let params = PostParams { field_manager: Some(field_manager.to_owned()), ..Default::default() };
                return api.create(&params, attestations).await;
            }
            let mut patch = serde_json::to_value(attestations).map_err(kube::Error::SerdeError)?;
            for key in dropped {
                patch["data"][key] = Value::Null;
                patch["binaryData"][key] = Value::Null;
            }
            let params = PatchParams { field_manager: Some(field_manager.to_owned()), ..Default::default() };
            api.patch(name, &params, &Patch::Merge(&patch)).await
        })
    }

    fn create_event<'a>(&'a self, api: &'a Api<Event>, event: &'a Event) -> BoxFuture<'a, kube::Result<()>> {
        Box::pin(async move { api.create(&PostParams::default(), event).await.map(drop) })
    }

    fn patch_event<'a>(
        &'a self,
        api: &'a Api<Event>,
        name: &'a str,
        patch: &'a Value,
    ) -> BoxFuture<'a, kube::Result<()>> {
        Box::pin(async move { api.patch(name, &PatchParams::default(), &Patch::Merge(patch)).await.map(drop) })
    }
}

pub use recording::{Recording, Write, WriteKind};

/// The recording implementation, for tests of a sync's order.
mod recording {
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::Mutex;
    use std::time::Duration;

    use futures::future::BoxFuture;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::api::events::v1::Event;
    use kube::api::{Api, DynamicObject};
    use serde_json::Value;

    use super::Writes;
    use crate::apply::hook::HookApi;
    use crate::apply::{ApplyOptions, Blocked};
    use crate::changeset::{Action, ChangeSet};
    use crate::cluster::cache::MetadataCache;
    use crate::cluster::inventory::{Contents, Inventory, Parent};
    use crate::object::{GroupKind, ObjectRef};
    use crate::plan::{Desired, Op, PruneStep, Stage, Step};

    /// What a write did.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum WriteKind {
        /// A member applied (created, configured, or sent unchanged).
        Apply,
        /// A member deleted by the prune.
        Prune,
        /// The ApplySet parent written (widened, narrowed, its record).
        Parent,
        /// A Namespace made bare, or released from the ApplySet.
        Namespace,
        /// A Helm hook applied.
        Hook,
        /// A Helm hook deleted.
        HookDelete,
        /// A Kubernetes Event created or its series patched.
        Event,
        /// The ConfigMap of the unit's attestations written.
        Attestations,
    }

    /// One write as [`Recording`] keeps it.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Write {
        /// What it did.
        pub kind: WriteKind,
        /// The object written.
        pub object: ObjectRef,
        /// The stage of a member applied or pruned; `None` for the others.
        pub stage: Option<Stage>,
    }

    /// Records every write in order and answers as an API server that takes them: an apply
    /// `created`, `configured` or `unchanged` by its step (`failed` for the objects
    /// [`Recording::failing`] names, blocking their dependents as a failed apply does), a
    /// delete `pruned`, a parent write the parent with a resourceVersion one higher.
    #[derive(Debug, Default)]
    pub struct Recording {
        writes: Mutex<Vec<Write>>,
        failing: BTreeSet<ObjectRef>,
    }

    impl Recording {
        /// A recording whose applies of `objects` fail (the API server refused them).
        pub fn failing(objects: impl IntoIterator<Item = ObjectRef>) -> Self {
            Self { writes: Mutex::default(), failing: objects.into_iter().collect() }
        }

        /// The writes so far, in order.
        pub fn writes(&self) -> Vec<Write> {
            self.writes.lock().map(|w| w.clone()).unwrap_or_default()
        }

        fn note(&self, kind: WriteKind, object: &ObjectRef, stage: Option<Stage>) {
            if let Ok(mut writes) = self.writes.lock() {
                writes.push(Write { kind, object: object.clone(), stage });
            }
        }
    }

    impl Writes for Recording {
        fn apply<'a>(
            &'a self,
            stage: Stage,
            steps: &'a [Step],
            desired: &'a [Desired],
            _cache: &'a MetadataCache,
            blocked: &'a mut Blocked,
            _options: &'a ApplyOptions,
        ) -> BoxFuture<'a, ChangeSet> {
            let mut changes = ChangeSet::default();
            for step in steps {
                let object = &desired[step.index].object;
                if let Some(reason) = blocked.reason(object) {
                    changes.push(object.clone(), Action::Skipped, Some(reason));
                    continue;
                }
                self.note(WriteKind::Apply, object, Some(stage));
                changes.requests += 1;
                let action = match step.op {
                    _ if self.failing.contains(object) => Action::Failed,
                    Op::Create => Action::Created,
                    Op::Configure => Action::Configured,
                    Op::Unchanged => Action::Unchanged,
                };
                if action == Action::Failed {
                    if object.gk == GroupKind::from_api_version("v1", "Namespace") {
                        blocked.namespaces.insert(object.name.clone());
                    }
                    blocked.kinds.extend(crate::apply::wait::crd_group_kind(desired, object));
                }
                changes.push(object.clone(), action, None);
            }
            Box::pin(std::future::ready(changes))
        }

        fn prune<'a>(
            &'a self,
            _ctx: &'a crate::prune::Context<'a>,
            steps: &'a [PruneStep],
        ) -> BoxFuture<'a, ChangeSet> {
            let mut changes = ChangeSet::default();
            for step in steps {
                self.note(WriteKind::Prune, &step.object, Some(step.stage));
                changes.push(step.object.clone(), Action::Pruned, None);
            }
            Box::pin(std::future::ready(changes))
        }

        fn parent<'a>(
            &'a self,
            inventory: &'a Inventory,
            contents: &'a Contents,
            previous: Option<&'a Parent>,
            _field_manager: &'a str,
            annotations: &'a BTreeMap<String, String>,
        ) -> BoxFuture<'a, crate::cluster::Result<Parent>> {
            self.note(WriteKind::Parent, &inventory.parent, None);
            let version = previous.and_then(|p| p.resource_version.parse::<u64>().ok()).unwrap_or(0) + 1;
            Box::pin(std::future::ready(Ok(Parent {
                contents: contents.clone(),
                resource_version: version.to_string(),
                annotations: annotations.clone(),
                chunks: Vec::new(),
                uid: Some("parent-uid".into()),
                generation: previous.map_or(0, |p| p.generation),
            })))
        }

        fn create_namespace<'a>(&'a self, name: &'a str, _field_manager: &'a str) -> BoxFuture<'a, kube::Result<bool>> {
            self.note(WriteKind::Namespace, &crate::sync::namespaces::namespace_ref(name), None);
            Box::pin(std::future::ready(Ok(true)))
        }

        fn release_namespace<'a>(
            &'a self,
            name: &'a str,
            _applyset_id: &'a str,
            _with_hash: bool,
            _field_manager: &'a str,
        ) -> BoxFuture<'a, kube::Result<()>> {
            self.note(WriteKind::Namespace, &crate::sync::namespaces::namespace_ref(name), None);
            Box::pin(std::future::ready(Ok(())))
        }

        fn apply_hook<'a>(
            &'a self,
            _api: &'a HookApi,
            object: &'a ObjectRef,
            body: &'a Value,
            _field_manager: &'a str,
        ) -> BoxFuture<'a, kube::Result<DynamicObject>> {
            self.note(WriteKind::Hook, object, None);
            let applied = serde_json::from_value(body.clone()).map_err(kube::Error::SerdeError);
            Box::pin(std::future::ready(applied))
        }

        fn delete_hook<'a>(
            &'a self,
            _api: &'a HookApi,
            object: &'a ObjectRef,
            _live: &'a DynamicObject,
            _timeout: Duration,
        ) -> BoxFuture<'a, Result<(), String>> {
            self.note(WriteKind::HookDelete, object, None);
            Box::pin(std::future::ready(Ok(())))
        }

        fn keep_attestations<'a>(
            &'a self,
            attestations: &'a ConfigMap,
            _dropped: &'a [String],
            _field_manager: &'a str,
        ) -> BoxFuture<'a, kube::Result<ConfigMap>> {
            let meta = &attestations.metadata;
            let object = ObjectRef::new(
                GroupKind::from_api_version("v1", "ConfigMap"),
                meta.namespace.clone(),
                meta.name.as_deref().unwrap_or_default(),
            );
            self.note(WriteKind::Attestations, &object, None);
            let version = meta.resource_version.as_deref().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) + 1;
            let mut written = attestations.clone();
            written.metadata.resource_version = Some(version.to_string());
            Box::pin(std::future::ready(Ok(written)))
        }

        fn create_event<'a>(&'a self, _api: &'a Api<Event>, event: &'a Event) -> BoxFuture<'a, kube::Result<()>> {
            let name = event.metadata.name.as_deref().unwrap_or_default();
            let object =
                ObjectRef::new(GroupKind::new("events.k8s.io", "Event"), event.metadata.namespace.clone(), name);
            self.note(WriteKind::Event, &object, None);
            Box::pin(std::future::ready(Ok(())))
        }

        fn patch_event<'a>(
            &'a self,
            api: &'a Api<Event>,
            name: &'a str,
            _patch: &'a Value,
        ) -> BoxFuture<'a, kube::Result<()>> {
            let object = ObjectRef::new(GroupKind::new("events.k8s.io", "Event"), api.namespace(), name);
            self.note(WriteKind::Event, &object, None);
            Box::pin(std::future::ready(Ok(())))
        }
    }
}
