//! The requests of a Helm hook, which is applied outside the ApplySet: read its previous
//! instance, apply it, wait until it ends, delete it and wait until it is gone. What a hook is
//! and when it runs is the sync's; this module only talks to the API
//! server, through the unit's writer.

use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions, PropagationPolicy};
use kube::discovery::ApiResource;
use kube::runtime::wait::{await_condition, conditions};

/// One hook object's API: its kind's resource, in its namespace (`None`: cluster-scoped).
#[derive(Clone)]
pub struct HookApi(Api<DynamicObject>);

impl HookApi {
    /// The API of `resource` in `namespace` through `client` (the unit's writer).
    pub fn new(client: &kube::Client, namespace: Option<&str>, resource: &ApiResource) -> Self {
        Self(match namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
            None => Api::all_with(client.clone(), resource),
        })
    }

    /// The live object `name`, `None` when there is none (one GET).
    ///
    /// Errors: the API server's.
    pub async fn get(&self, name: &str) -> kube::Result<Option<DynamicObject>> {
        self.0.get_opt(name).await
    }

    /// Applies `body` as `name` by server-side apply under `field_manager`, forced (a hook is
    /// the unit's alone). Returns the object as applied.
    ///
    /// Errors: the API server's.
    pub async fn apply(
        &self,
        name: &str,
        body: &serde_json::Value,
        field_manager: &str,
    ) -> kube::Result<DynamicObject> {
        self.0.patch(name, &PatchParams::apply(field_manager).force(), &Patch::Apply(body)).await
    }

    /// Deletes `live` (its uid as a precondition, dependents in the background) and waits until
    /// it is gone, at most `timeout`; one already gone is success.
    ///
    /// Errors: the message of a failed delete or watch, or `still there after Ns`.
    pub async fn delete(&self, live: &DynamicObject, timeout: Duration) -> Result<(), String> {
        let name = live.metadata.name.clone().unwrap_or_default();
        let uid = live.metadata.uid.clone();
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            preconditions: uid.clone().map(|uid| Preconditions { uid: Some(uid), resource_version: None }),
            ..Default::default()
        };
        match self.0.delete(&name, &params).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
            Err(e) => return Err(crate::telemetry::error_chain(&e)),
        }
        let uid = uid.unwrap_or_default();
        let gone = await_condition(self.0.clone(), &name, conditions::is_deleted(&uid));
        match tokio::time::timeout(timeout, gone).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(crate::telemetry::error_chain(&e)),
            Err(_) => Err(format!("still there after {}s", timeout.as_secs())),
        }
    }

    /// Watches `name` until `done` holds of it, at most `timeout`: the object then.
    ///
    /// Errors: `deleted before it ended`, a watch error's message, or `did not end within Ns
    /// (health_timeout)`.
    pub async fn wait_until(
        &self,
        name: &str,
        timeout: Duration,
        done: impl Fn(&DynamicObject) -> bool,
    ) -> Result<DynamicObject, String> {
        let condition = move |o: Option<&DynamicObject>| o.is_some_and(&done);
        match tokio::time::timeout(timeout, await_condition(self.0.clone(), name, condition)).await {
            Ok(Ok(Some(o))) => Ok(o),
            Ok(Ok(None)) => Err("deleted before it ended".into()),
            Ok(Err(e)) => Err(crate::telemetry::error_chain(&e)),
            Err(_) => Err(format!("did not end within {}s (health_timeout)", timeout.as_secs())),
        }
    }
}
