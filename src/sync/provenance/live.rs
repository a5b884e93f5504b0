//! `gitward attest verify --config`: a unit's attestations as its ConfigMap keeps them, checked
//! as [`super::chain`] checks files, then its live members against the last one — each member
//! there, and gitward's apply entry of it as the sync left it, so a field gitward set and
//! someone changed by hand is named as drift.

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};

use super::chain::{self, Checked, Start};
use super::kept;
use super::key::VerifyingKey;
use super::statement::Member;
use crate::cluster::inventory::Inventory;
use crate::config::SyncUnit;

/// The unit's kept attestations, checked, then its live members against the last: `Ok(None)`
/// when every check holds, `Ok(Some(reason))` naming the first that fails.
///
/// Errors: the ConfigMap or a member cannot be read (other than not found).
pub async fn verify(client: &kube::Client, unit: &SyncUnit, key: &VerifyingKey) -> kube::Result<Option<String>> {
    let inventory = Inventory::new(&unit.inventory);
    let kept = kept::read(client, &inventory).await?;
    let text = kept.lines.join("\n");
    let envelopes = match chain::parse(&text) {
        Ok(envelopes) => envelopes,
        Err(e) => return Ok(Some(format!("ConfigMap/{}: {e}", kept::name(&inventory)))),
    };
    if envelopes.is_empty() {
        return Ok(Some(format!("unit {}: no attestation kept", unit.name)));
    }
    // The ConfigMap keeps the last ones: the first may follow one it dropped.
    let checked = match chain::check(&envelopes, key, Some(&unit.name), Start::Any) {
        Ok(checked) => checked,
        Err(reason) => return Ok(Some(reason)),
    };
    let last = checked.last().expect("at least one checked");
    drift(client, last).await
}

/// The first member of `last` that is gone or whose apply entry moved since: `drift since
/// attestation sha256:<digest>: <object> …`.
///
/// Errors: a member cannot be read (other than not found).
pub async fn drift(client: &kube::Client, last: &Checked) -> kube::Result<Option<String>> {
    let manager = &last.statement.predicate.target.field_manager;
    for member in &last.statement.predicate.members {
        let Some(recorded) = &member.applied else { continue };
        let found = api(client, member).get_opt(&member.name).await?;
        let since = format!("drift since attestation sha256:{}", &last.digest);
        let Some(object) = found else {
            return Ok(Some(format!("{since}: {} is gone", member.object)));
        };
        let live = crate::cluster::live::own_apply(&object.metadata, manager).map(|f| format!("{f:016x}"));
        if live.as_ref() != Some(recorded) {
            return Ok(Some(format!(
                "{since}: {} changed (fields gitward applied were written by another)",
                member.object
            )));
        }
    }
    Ok(None)
}

/// The API of `member`'s resource.
fn api(client: &kube::Client, member: &Member) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(&member.group, &member.version, &member.kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, &member.plural);
    match &member.namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}
