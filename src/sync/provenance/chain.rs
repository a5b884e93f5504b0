//! The checks of a unit's attestations read offline (the state directory's JSON lines,
//! envelope files, or the ConfigMap the cluster keeps): each envelope's type and signature, the
//! Statement's types, and per unit the chain — each `previous` the digest of the envelope
//! before it, so a missing or moved attestation is named — and one cluster throughout.

use std::collections::BTreeMap;

use super::dsse::{self, Envelope};
use super::key::VerifyingKey;
use super::statement::{PREDICATE_TYPE, STATEMENT_TYPE, Statement};

/// An envelope that verified, with its digest and Statement.
#[derive(Debug, Clone)]
pub struct Checked {
    /// Its digest ([`dsse::digest`]).
    pub digest: String,
    /// Its Statement.
    pub statement: Statement,
}

/// How the first attestation of a unit may start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// At the unit's first attestation (`previous` null): the state directory keeps them all.
    Genesis,
    /// Anywhere: the ConfigMap keeps only the last ones.
    Any,
}

/// `#<n> (sha256:<first 12 hex digits>)`: an attestation as the checks name it, `n` its place
/// among those given, from 1.
fn name(place: usize, digest: &str) -> String {
    format!("attestation #{} (sha256:{})", place + 1, digest.get(..12).unwrap_or(digest))
}

/// The envelope at `place` verified with `key`, its Statement read and its types checked.
///
/// Errors: what failed, naming the attestation.
fn one(place: usize, envelope: &Envelope, key: &VerifyingKey) -> Result<Checked, String> {
    let digest = dsse::digest(envelope);
    let named = name(place, &digest);
    let payload = dsse::verify(envelope, key).map_err(|e| format!("{named}: {e}"))?;
    let value: serde_json::Value =
        serde_json::from_slice(&payload).map_err(|e| format!("{named}: the payload is not JSON: {e}"))?;
    let types = (value.get("_type").and_then(|v| v.as_str()), value.get("predicateType").and_then(|v| v.as_str()));
    match types {
        (Some(STATEMENT_TYPE), Some(PREDICATE_TYPE)) => {}
        (Some(STATEMENT_TYPE), other) => {
            return Err(format!("{named}: predicateType is {other:?}, not {PREDICATE_TYPE:?}"));
        }
        (other, _) => return Err(format!("{named}: _type is {other:?}, not {STATEMENT_TYPE:?}")),
    }
    let statement = serde_json::from_value(value).map_err(|e| format!("{named}: the predicate does not read: {e}"))?;
    Ok(Checked { digest, statement })
}

/// Checks `envelopes`, in the order given, with `key`: every one verified, then per unit (only
/// `unit`'s when given) the chain from `start` and one cluster id. Returns the unit's (or every
/// unit's) checked attestations in order.
///
/// Errors: the first check that failed, naming the attestation and the reason.
pub fn check(
    envelopes: &[Envelope],
    key: &VerifyingKey,
    unit: Option<&str>,
    start: Start,
) -> Result<Vec<Checked>, String> {
    let mut units: BTreeMap<String, Vec<(usize, Checked)>> = BTreeMap::new();
    for (place, envelope) in envelopes.iter().enumerate() {
        let checked = one(place, envelope, key)?;
        if unit.is_none_or(|u| u == checked.statement.predicate.unit) {
            units.entry(checked.statement.predicate.unit.clone()).or_default().push((place, checked));
        }
    }
    if let Some(unit) = unit
        && units.is_empty()
    {
        return Err(format!("no attestation of unit {unit}"));
    }
    let mut all = Vec::new();
    for (unit, chain) in units {
        links(&unit, &chain, start)?;
        one_cluster(&chain)?;
        all.extend(chain.into_iter().map(|(_, c)| c));
    }
    Ok(all)
}

/// The chain of `unit`'s attestations: each `previous` the digest of the one before it.
fn links(unit: &str, chain: &[(usize, Checked)], start: Start) -> Result<(), String> {
    let previous = |c: &Checked| c.statement.predicate.previous.as_ref().map(|d| d.sha256.clone());
    if let Some((place, first)) = chain.first()
        && start == Start::Genesis
        && let Some(before) = previous(first)
    {
        let named = name(*place, &first.digest);
        if chain.iter().any(|(_, later)| later.digest == before) {
            return Err(format!("reordered: {named} follows sha256:{before}, which is given after it"));
        }
        return Err(format!(
            "chain gap: {named}, the first of unit {unit} given, follows sha256:{before}, which is missing"
        ));
    }
    for (i, pair) in chain.windows(2).enumerate() {
        let ((_, before), (place, this)) = (&pair[0], &pair[1]);
        let named = name(*place, &this.digest);
        match previous(this) {
            Some(p) if p == before.digest => continue,
            Some(p) if chain[i + 2..].iter().any(|(_, later)| later.digest == p) => {
                return Err(format!("reordered: {named} follows sha256:{p}, which is given after it"));
            }
            Some(p) => {
                return Err(format!(
                    "chain gap: {named} follows sha256:{p}, not the attestation before it (sha256:{}): one is missing",
                    before.digest
                ));
            }
            None => {
                return Err(format!(
                    "chain gap: {named} starts a new chain (previous is null) after sha256:{}",
                    before.digest
                ));
            }
        }
    }
    Ok(())
}

/// Every attestation of a unit names the cluster its first names.
fn one_cluster(chain: &[(usize, Checked)]) -> Result<(), String> {
    let Some((_, first)) = chain.first() else { return Ok(()) };
    let cluster = &first.statement.predicate.target.cluster;
    for (place, checked) in chain {
        let this = &checked.statement.predicate.target.cluster;
        if this != cluster {
            return Err(format!(
                "cluster id changed: {} names cluster {}/{}, the unit's first {}/{}",
                name(*place, &checked.digest),
                this.kube_system_uid,
                this.ca_sha256,
                cluster.kube_system_uid,
                cluster.ca_sha256
            ));
        }
    }
    Ok(())
}

/// The envelopes of a file's text: one JSON envelope (however laid out), or JSON lines.
///
/// Errors: a line that is not an envelope, with its number.
pub fn parse(text: &str) -> Result<Vec<Envelope>, String> {
    if let Ok(one) = serde_json::from_str::<Envelope>(text) {
        return Ok(vec![one]);
    }
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| serde_json::from_str(line).map_err(|e| format!("line {}: not a DSSE envelope: {e}", n + 1)))
        .collect()
}

#[cfg(test)]
#[path = "chain_tests.rs"]
mod tests;
