//! The requests that make and release Namespaces outside any ApplySet: `create_namespace`'s
//! bare Namespace, the parent's namespace made before its first write, and the release of a
//! Namespace a unit no longer declares. When and why is the sync's (`create_namespace`, crash
//! safety); this module only talks to the API server.

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::cluster::inventory::{DESIRED_HASH, PART_OF};
use crate::cluster::is_status;

/// Creates Namespace `name` if it does not exist: a GET by `reader`, then a POST of the bare
/// Namespace (`metadata.name` alone) by `writer` under `field_manager`; a 409 AlreadyExists
/// (someone created it in between) is success. Returns whether this call created it. The
/// engine reads as gitward and writes as the unit's writer (its ServiceAccount when it names
/// one), so a tenant's namespace is made only when its ServiceAccount may make it.
///
/// Errors: the API server's, of the GET or the POST.
pub async fn create_if_missing(
    reader: &kube::Client,
    writer: &kube::Client,
    name: &str,
    field_manager: &str,
) -> kube::Result<bool> {
    if Api::<Namespace>::all(reader.clone()).get_metadata_opt(name).await?.is_some() {
        return Ok(false);
    }
    let bare: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).expect("a valid Namespace");
    let params = PostParams { field_manager: Some(field_manager.to_string()), ..Default::default() };
    match Api::<Namespace>::all(writer.clone()).create(&params, &bare).await {
        Ok(_) => Ok(true),
        Err(e) if is_status(&e, 409) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether Namespace `name` exists: one metadata GET.
///
/// Errors: the API server's.
pub async fn exists(client: &kube::Client, name: &str) -> kube::Result<bool> {
    Ok(Api::<Namespace>::all(client.clone()).get_metadata_opt(name).await?.is_some())
}

/// Releases Namespace `name` from the ApplySet `applyset_id`: one JSON patch of its metadata
/// under `field_manager` that tests the `part-of` label is still `applyset_id`, removes it and,
/// when `with_hash`, gitward's desired-hash annotation (RFC 6902; keys escaped per RFC 6901).
///
/// Errors: the API server's; a 422 when the label is no longer this ApplySet's.
pub async fn release(
    client: &kube::Client,
    name: &str,
    applyset_id: &str,
    with_hash: bool,
    field_manager: &str,
) -> kube::Result<()> {
    let escape = |key: &str| key.replace('~', "~0").replace('/', "~1");
    let label = format!("/metadata/labels/{}", escape(PART_OF));
    let mut ops =
        vec![json!({"op": "test", "path": label, "value": applyset_id}), json!({"op": "remove", "path": label})];
    if with_hash {
        ops.push(json!({"op": "remove", "path": format!("/metadata/annotations/{}", escape(DESIRED_HASH))}));
    }
    let patch: json_patch::Patch = serde_json::from_value(serde_json::Value::Array(ops)).expect("a JSON patch");
    let params = PatchParams { field_manager: Some(field_manager.to_owned()), ..Default::default() };
    Api::<Namespace>::all(client.clone()).patch_metadata(name, &params, &Patch::Json::<()>(patch)).await.map(|_| ())
}
