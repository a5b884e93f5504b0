//! `gitward attest verify --config`: a unit's attestations as its ConfigMap keeps them, checked
//! as [`super::chain`] checks files, then its live members against the last one — each member
//! there, and gitward's apply entry of it as the sync left it, so a field gitward set and
//! someone changed by hand is named as drift.

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};

use super::chain::{self, Checked, Start};
use super::kept;
use super::key::VerifyingKey;
use super::members::{self, Member};
use crate::cluster::inventory::Inventory;
use crate::config::SyncUnit;

/// The unit's kept attestations, checked, then its live members against the last: `Ok(None)`
/// when every check holds, `Ok(Some(reason))` naming the first that fails.
///
/// Errors: the ConfigMap or a member cannot be read (other than not found).
pub async fn verify(client: &kube::Client, unit: &SyncUnit, key: &VerifyingKey) -> kube::Result<Option<String>> {
    let inventory = Inventory::new(&unit.inventory);
    let configmap = format!("ConfigMap/{}/{}", kept::namespace(&inventory), kept::name(&inventory));
    let Some(object) = kept::read(client, &inventory).await? else {
        return Ok(Some(format!("unit {}: no attestation kept ({configmap} does not exist)", unit.name)));
    };
    let text: Vec<&str> = kept::envelopes(&object).into_iter().map(|(_, line)| line).collect();
    let envelopes = match chain::parse(&text.join("\n")) {
        Ok(envelopes) => envelopes,
        Err(e) => return Ok(Some(format!("{configmap}: {e}"))),
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
    let record = match kept::members(&object) {
        Ok(Some(record)) => record,
        Ok(None) => return Ok(Some(format!("{configmap}: keeps no members record of the last attestation"))),
        Err(e) => return Ok(Some(format!("{configmap}: the members record does not read: {e}"))),
    };
    let bound = &last.statement.predicate.members;
    if members::digest(&record) != bound.sha256 {
        return Ok(Some(format!(
            "{configmap}: the members record is not the one attestation sha256:{} binds (sha256:{})",
            last.digest, bound.sha256
        )));
    }
    match members::parse(&record) {
        Ok(members) => drift(client, last, &members).await,
        Err(line) => Ok(Some(format!("{configmap}: line {line} of the members record is not a member"))),
    }
}

/// The first of `members` (the record `last` binds) that is gone or whose apply entry moved
/// since: `drift since attestation sha256:<digest>: <object> …`.
///
/// Errors: a member cannot be read (other than not found).
pub async fn drift(client: &kube::Client, last: &Checked, members: &[Member]) -> kube::Result<Option<String>> {
    let manager = &last.statement.predicate.target.field_manager;
    for member in members {
        let Some(recorded) = &member.applied else { continue };
        let found = api(client, member).get_opt(&member.name).await?;
        let since = format!("drift since attestation sha256:{}", &last.digest);
        let Some(object) = found else {
            return Ok(Some(format!("{since}: {} is gone", member.object())));
        };
        let live = crate::cluster::live::own_apply(&object.metadata, manager).map(|f| format!("{f:016x}"));
        if live.as_ref() != Some(recorded) {
            return Ok(Some(format!(
                "{since}: {} changed (fields gitward applied were written by another)",
                member.object()
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
