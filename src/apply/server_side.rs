//! Server-side apply of one object (KEP-555; `PATCH` with `application/apply-patch+yaml`).
//!
//! Exactly one request per object in the common case, whatever the plan says: a no-op apply
//! writes nothing to etcd and keeps the resourceVersion, so an `unchanged` object costs one
//! round trip. A moved resourceVersion alone does not make it `drift-corrected`: a controller's
//! status write moves it too. The object is `drift-corrected` when gitward's own `managedFields`
//! entry moved as well against the cache's copy ([`crate::cluster::live::own_apply`]: the
//! API server rewrites that entry only when gitward's apply changes the object or another
//! writer takes fields from gitward); `unchanged` when only others' entries moved.
//! The response is requested as metadata only (`PartialObjectMetadata`): gitward never needs
//! the object's spec or status back. Its `managedFields` tell, at no extra cost, whether
//! fields of another manager must be taken over ([`super::takeover`]).

use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PropagationPolicy};
use kube::core::PartialObjectMeta;
use kube::runtime::wait::{await_condition, conditions};

use super::{Written, takeover};
use crate::changeset::{Action, Request};
use crate::cluster::LiveMeta;
use crate::cluster::{api_message, is_status, live_meta, live_meta_of};
use crate::plan::{Desired, Op, Step};

/// The dynamic API of a desired object (namespaced or cluster-wide).
pub fn api_for(client: &kube::Client, d: &Desired) -> Api<DynamicObject> {
    match &d.object.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, d.resource.as_ref()),
        None => Api::all_with(client.clone(), d.resource.as_ref()),
    }
}

/// The live object of `d`, whole, as JSON; `None` when there is none (one GET, for `gitward
/// diff`).
///
/// Errors: the API server's.
pub async fn read(client: &kube::Client, d: &Desired) -> kube::Result<Option<serde_json::Value>> {
    let live = api_for(client, d).get_opt(&d.object.name).await?;
    Ok(live.map(|o| serde_json::to_value(o).unwrap_or_default()))
}

/// What a server-side apply of `d` under `field_manager` (forced when `force`) would leave,
/// without writing it: a dry run (`dryRun=All`, one PATCH; a `GET` before it when a
/// `[[sync.ignore]]` rule selects it, [`body_to_send`]: the body a sync would send), for
/// `gitward diff`.
///
/// Errors: the API server's (its admission, validation and conflicts, as an apply would meet
/// them).
pub async fn dry_run(
    client: &kube::Client,
    d: &Desired,
    field_manager: &str,
    force: bool,
) -> kube::Result<serde_json::Value> {
    let mut params = PatchParams::apply(field_manager).dry_run();
    params.force = force;
    let api = api_for(client, d);
    let (body, _) = body_to_send(&api, d, field_manager).await?;
    let merged = api.patch(&d.object.name, &params, &Patch::Apply(&body)).await?;
    Ok(serde_json::to_value(merged).unwrap_or_default())
}

/// True when the API server rejected a change to immutable fields only: a 422 Invalid whose
/// `status.details.causes` are all `FieldValueInvalid`/`FieldValueForbidden` causes saying the
/// field is immutable (apimachinery's `ValidateImmutableField`, as for a Job's pod template; a
/// PVC's `spec is immutable after creation`). Another cause among them means re-creating
/// would not help. Read from the structured causes, not the top-level message.
pub fn is_immutable_rejection(err: &kube::Error) -> bool {
    let kube::Error::Api(status) = err else { return false };
    let causes = status.details.as_ref().map(|d| d.causes.as_slice()).unwrap_or_default();
    status.code == 422
        && !causes.is_empty()
        && causes.iter().all(|c| {
            matches!(c.reason.as_str(), "FieldValueInvalid" | "FieldValueForbidden") && c.message.contains("immutable")
        })
}

/// True when `d` may be deleted and re-created on an immutable-field rejection: recreate is
/// on for it, and it is not a PersistentVolumeClaim (deleting a claim can delete its volume
/// and the data on it, with a `Delete` reclaim policy): those are never re-created.
pub fn may_recreate(d: &Desired) -> bool {
    d.recreate && !(d.object.gk.group.is_empty() && d.object.gk.kind == "PersistentVolumeClaim")
}

/// Applies `d` as planned by `step`. When the response shows fields of managers gitward takes
/// over ([`takeover::plan`]), merges them into gitward's entry and applies again, so that what
/// git no longer declares goes in this very sync (3 requests, once per object). `cached`: the
/// cache's entry of the object when the request is sent ([`super::apply_one`]), which the
/// response of an `unchanged` object is compared with ([`corrected`]).
pub async fn apply_one(w: super::Write<'_>) -> Written {
    let super::Write { client, d, step, cached, opts } = w;
    let api = api_for(client, d);
    let mut params = PatchParams::apply(&opts.field_manager);
    params.force = opts.force;
    let outcome = |action, message, live, sent| Written { object: d.object.clone(), action, message, live, sent };
    // A create sends git's values, ignored fields included; an existing object the body its
    // ignore rules leave given the live object.
    let (body, read) = match step.op {
        Op::Create => (d.body(), Vec::new()),
        _ => match body_to_send(&api, d, &opts.field_manager).await {
            Ok(sent) => sent,
            Err(e) => {
                let message = format!("{}: read the live object for [[sync.ignore]]: {}", d.origin, api_message(&e));
                return outcome(Action::Failed, Some(message), None, vec![Request::GetMetadata]);
            }
        },
    };
    let applied = match step.op {
        Op::Create => apply_telling_creation(client, d, &params).await,
        _ => api.patch_metadata(&d.object.name, &params, &Patch::Apply(&body)).await.map(|r| (r, false)),
    };
    let outcome =
        |action, message, live, sent: Vec<Request>| outcome(action, message, live, [read.clone(), sent].concat());
    match applied {
        Ok((returned, created)) => {
            let live = live_meta_of(&returned.metadata, &opts.field_manager);
            let action = match step.op {
                Op::Create if created => Action::Created,
                Op::Create => Action::Adopted,
                Op::Configure => Action::Configured,
                Op::Unchanged if corrected(step, cached.as_ref(), &live) => Action::DriftCorrected,
                Op::Unchanged => Action::Unchanged,
            };
            let Some(plan) = takeover::plan(&returned.metadata, &opts.field_manager, &opts.takeover_managers, &body)
            else {
                return outcome(action, None, Some(live), vec![Request::Apply]);
            };
            let mut sent = vec![Request::Apply];
            match takeover::run(&api, d, &body, &params, &plan, &mut sent).await {
                Ok(taken) => outcome(action, Some(plan.note()), Some(taken), sent),
                Err((action, message)) => outcome(action, Some(message), Some(live), sent),
            }
        }
        Err(e) if is_immutable_rejection(&e) && may_recreate(d) => match recreate(&api, d, &params).await {
            Ok(live) => outcome(
                Action::Configured,
                Some("re-created: immutable field changed".into()),
                Some(live),
                vec![Request::Apply, Request::Delete, Request::Apply],
            ),
            Err(message) => {
                outcome(Action::Failed, Some(message), None, vec![Request::Apply, Request::Delete, Request::Apply])
            }
        },
        Err(e) if is_immutable_rejection(&e) => {
            outcome(Action::Failed, Some(immutable_message(d, &e)), None, vec![Request::Apply])
        }
        Err(e) => {
            outcome(Action::Failed, Some(format!("{}: {}", d.origin, api_message(&e))), None, vec![Request::Apply])
        }
    }
}

/// The body to apply for `d`, an object the plan takes to exist, and the requests that made
/// it: with no `[[sync.ignore]]` rule selecting it, [`Desired::body`] and none; with one, a
/// `GET` of the live object (whole when a rule names `paths`, whose live values may be sent;
/// else its metadata, for the `managedFields` the metadata cache drops) and
/// [`Desired::body_given`] against it. Only the objects such a rule selects pay that read.
///
/// Errors: the read's. A 404 (the object went since the cache saw it) gives git's body, as a
/// create sends.
async fn body_to_send(
    api: &Api<DynamicObject>,
    d: &Desired,
    own: &str,
) -> kube::Result<(crate::manifest::Body, Vec<Request>)> {
    if !d.reads_live() {
        return Ok((d.body(), Vec::new()));
    }
    if !d.reads_live_values() {
        let live = api.get_metadata_opt(&d.object.name).await?;
        let Some(live) = live else { return Ok((d.body(), vec![Request::GetMetadata])) };
        let entries = live.metadata.managed_fields.unwrap_or_default();
        return Ok((d.body_given(&entries, own, None), vec![Request::GetMetadata]));
    }
    let Some(live) = api.get_opt(&d.object.name).await? else { return Ok((d.body(), vec![Request::Get])) };
    let entries = live.metadata.managed_fields.clone().unwrap_or_default();
    let value = serde_json::to_value(&live).unwrap_or_default();
    Ok((d.body_given(&entries, own, Some(&value)), vec![Request::Get]))
}

/// True when the apply of an `unchanged` object changed it (`drift-corrected`): its
/// resourceVersion moved from the cache's (the plan's when the cache holds none) and, where the
/// cache knows gitward's own `managedFields` entry, that entry shows gitward's apply changed
/// the object: its time moved ([`crate::cluster::live::applied_at`]: the API server stamps it
/// only then), or its field set grew ([`crate::cluster::live::owned_count`]: gitward took back
/// fields another writer had taken, which it does only by setting git's value over theirs;
/// within the second of gitward's previous change the time alone cannot tell). A status write
/// or another manager's fields moving the resourceVersion leave both; so does another manager
/// taking a field of gitward's after the cache last saw the object, which shrinks gitward's
/// field set at the same time. Pure.
///
/// A hand edit corrected within the same second as gitward's previous change to the object,
/// with the cache not yet showing the edit, reads as `unchanged`.
pub fn corrected(step: &Step, cached: Option<&LiveMeta>, returned: &LiveMeta) -> bool {
    use crate::cluster::live::{applied_at, owned_count};
    let before = cached.map(|c| c.resource_version.as_str()).or(step.cached_resource_version.as_deref());
    if before == Some(returned.resource_version.as_str()) {
        return false;
    }
    match (cached.and_then(|c| c.own_apply), returned.own_apply) {
        (Some(before), Some(after)) => {
            applied_at(before) != applied_at(after) || owned_count(after) > owned_count(before)
        }
        _ => true,
    }
}

/// A server-side apply of `d` (metadata-only response, as [`Api::patch_metadata`]) that also
/// tells whether it created the object: the API server answers `201 Created` when the apply
/// made it and `200 OK` when it existed already (apiserver `endpoints/handlers/patch.go`). A
/// planned create whose object existed — unlabelled, made by someone else — is adopted, not
/// created. kube's typed calls drop the status code, so the request is built and sent here;
/// an error answer becomes [`kube::Error::Api`] as kube makes it.
///
/// Errors: as [`Api::patch_metadata`].
async fn apply_telling_creation(
    client: &kube::Client,
    d: &Desired,
    params: &PatchParams,
) -> Result<(PartialObjectMeta<DynamicObject>, bool), kube::Error> {
    use kube::Resource;
    let url = DynamicObject::url_path(d.resource.as_ref(), d.object.namespace.as_deref());
    let mut request = kube::core::Request::new(url)
        .patch_metadata(&d.object.name, params, &Patch::Apply(&d.body()))
        .map_err(kube::Error::BuildRequest)?;
    request.extensions_mut().insert("patch");
    let response = client.send(request.map(kube::client::Body::from)).await?;
    let code = response.status();
    let bytes = response.into_body().collect_bytes().await?;
    if code.is_client_error() || code.is_server_error() {
        let status = serde_json::from_slice::<kube::core::Status>(&bytes).unwrap_or_else(|_| {
            let text = String::from_utf8_lossy(&bytes);
            kube::core::Status::failure(text.trim(), "Failed to parse error data").with_code(code.as_u16())
        });
        return Err(kube::Error::Api(status.boxed()));
    }
    let meta = serde_json::from_slice(&bytes).map_err(kube::Error::SerdeError)?;
    Ok((meta, code == http::StatusCode::CREATED))
}

/// The message of an immutable-field rejection without recreate.
pub fn immutable_message(d: &Desired, err: &kube::Error) -> String {
    if d.recreate {
        return format!(
            "{}: immutable field changed; a PersistentVolumeClaim is never re-created (its volume could go with it): {}",
            d.origin,
            api_message(err)
        );
    }
    format!(
        "{}: immutable field changed; enable recreate_on_immutable or annotate gitward.dev/recreate: enabled: {}",
        d.origin,
        api_message(err)
    )
}

/// Deletes the object (background propagation: no finalizer waits on a garbage collector),
/// waits until it is gone (event-driven, bounded), and applies it again.
async fn recreate(api: &Api<DynamicObject>, d: &Desired, params: &PatchParams) -> Result<LiveMeta, String> {
    delete_and_wait(api, d, None).await?;
    api.patch_metadata(&d.object.name, params, &Patch::Apply(&d.body()))
        .await
        .map(|o| live_meta(&o.metadata))
        .map_err(|e| format!("recreate: apply failed: {}", api_message(&e)))
}

/// Deletes the object with background propagation and waits (at most 60 s, on a watch) until
/// it is gone; the first half of a re-create in either apply mode. `uid`, when known (the
/// object just read), is a delete precondition: another object of the name is never hit.
pub async fn delete_and_wait(api: &Api<DynamicObject>, d: &Desired, uid: Option<String>) -> Result<(), String> {
    let delete = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        preconditions: uid.map(|uid| kube::api::Preconditions { uid: Some(uid), resource_version: None }),
        ..Default::default()
    };
    let uid = match api.delete(&d.object.name, &delete).await {
        Ok(either) => either.left().and_then(|o| o.metadata.uid),
        Err(e) if is_status(&e, 404) => None,
        Err(e) => return Err(format!("recreate: delete failed: {}", api_message(&e))),
    };
    if let Some(uid) = uid {
        let gone = await_condition(api.clone(), &d.object.name, conditions::is_deleted(&uid));
        if tokio::time::timeout(Duration::from_secs(60), gone).await.is_err() {
            return Err("recreate: the old object was not gone within 60s".into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(rv: &str, own_apply: Option<u64>) -> LiveMeta {
        LiveMeta { resource_version: rv.into(), own_apply, ..Default::default() }
    }

    /// gitward's `Apply` entry as the API server writes it, at `time`, owning `fields`.
    fn entry(time: &str, fields: serde_json::Value) -> u64 {
        let meta: kube::core::ObjectMeta = serde_json::from_value(serde_json::json!({"name": "web", "managedFields": [
            {"manager": "gitward", "operation": "Apply", "apiVersion": "apps/v1", "time": time,
             "fieldsType": "FieldsV1", "fieldsV1": fields}]}))
        .unwrap();
        crate::cluster::live::own_apply(&meta, "gitward").unwrap()
    }

    #[test]
    fn a_moved_resource_version_is_a_correction_only_when_gitwards_entry_moved_too() {
        let applied = entry("2026-11-25T10:00:00Z", serde_json::json!({"f:spec": {"f:replicas": {}}}));
        let again = entry("2026-11-25T10:00:07Z", serde_json::json!({"f:spec": {"f:replicas": {}}}));
        let step = Step { index: 0, op: Op::Unchanged, cached_resource_version: Some("5".into()) };
        assert!(!corrected(&step, Some(&meta("7", Some(applied))), &meta("7", Some(applied))), "nothing moved");
        assert!(!corrected(&step, Some(&meta("7", Some(applied))), &meta("9", Some(applied))), "a status write");
        assert!(
            corrected(&step, Some(&meta("7", Some(applied))), &meta("9", Some(again))),
            "gitward's apply changed it"
        );
        assert!(
            corrected(&step, Some(&meta("7", None)), &meta("9", Some(again))),
            "entry unknown: the resourceVersion"
        );
        assert!(!corrected(&step, None, &meta("5", Some(again))), "no cache entry: the plan's resourceVersion");
        assert!(corrected(&step, None, &meta("6", Some(again))));
    }

    #[test]
    fn a_field_taken_after_the_cache_last_saw_the_object_is_no_correction() {
        // The cache still holds gitward owning `replicas`; an autoscaler's scale has since taken
        // it, and gitward's apply (which leaves `replicas` to it) changed nothing: the API
        // server answers with gitward's smaller field set at the same time, and a new
        // resourceVersion (the scale's).
        let cached = entry("2026-11-25T10:00:00Z", serde_json::json!({"f:spec": {"f:replicas": {}, "f:paused": {}}}));
        let returned = entry("2026-11-25T10:00:00Z", serde_json::json!({"f:spec": {"f:paused": {}}}));
        assert_ne!(cached, returned, "gitward's entry moved");
        let step = Step { index: 0, op: Op::Unchanged, cached_resource_version: Some("7".into()) };
        assert!(!corrected(&step, Some(&meta("7", Some(cached))), &meta("12", Some(returned))));
    }

    #[test]
    fn a_field_taken_back_within_the_second_of_gitwards_last_change_is_a_correction() {
        // The cache saw a hand edit take `replicas`; gitward's apply took it back (setting
        // git's value) in the same second as its previous change: the time is the same, the
        // field set larger.
        let cached = entry("2026-11-25T10:00:00Z", serde_json::json!({"f:spec": {"f:paused": {}}}));
        let returned = entry("2026-11-25T10:00:00Z", serde_json::json!({"f:spec": {"f:replicas": {}, "f:paused": {}}}));
        let step = Step { index: 0, op: Op::Unchanged, cached_resource_version: Some("8".into()) };
        assert!(corrected(&step, Some(&meta("8", Some(cached))), &meta("9", Some(returned))));
    }
}
