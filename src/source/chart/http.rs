//! A chart repository over https or http: `<repo_url>/index.yaml` (Helm's `IndexFile`:
//! `entries.<chart>[]` with `version`, `digest` — the archive's SHA-256 — and `urls`,
//! relative ones resolved against the repository URL, as `helm repo index` without `--url`
//! writes them).

use std::collections::HashMap;

use super::cache::Cache;
use super::index::{self, Entry};
use super::kept::Kept;
use super::net::Net;
use super::{ChartSpec, Fetched, MAX_INDEX_BYTES, Offer};
use crate::source::{Error, Result};
use crate::telemetry::url::{redact, redact_text};

/// Reads the index, chooses the version, downloads its archive unless cached. The archive
/// URL the index gives must be allowed ([`super::net`]): under the repository or listed in
/// `[render] chart_repositories`; the repository's credentials go only to its own origin.
/// An index that parses is kept as the last good answer (`kept`); while the repository is
/// down, that answer stands in if it is young enough ([`stale`]).
pub(super) async fn fetch(spec: &ChartSpec, cache: &Cache, kept: &Kept) -> Result<Fetched> {
    let repo_url = spec.source.repo_url.as_str();
    let net = super::net(spec, Some(repo_url), Some(repo_url))?;
    let base = format!("{repo_url}/");
    let index_url = format!("{base}index.yaml");
    let shown = redact(&index_url);
    net.allowed(&index_url).map_err(|message| Error::Chart { unit: spec.unit.clone(), url: shown.clone(), message })?;
    let listed = match net.get_or_down(&index_url, MAX_INDEX_BYTES).await {
        Ok(bytes) => {
            let listed = read(spec, &shown, &bytes)?;
            kept.store(&spec.unit, repo_url, &spec.source.chart, &listed);
            listed
        }
        Err(failed) if failed.down => stale(spec, kept, failed.error)?,
        Err(failed) => return Err(failed.error),
    };
    resolve(spec, cache, &net, &base, listed).await
}

/// The chart's entries in the index `bytes` read from `shown`.
///
/// Errors: [`Error::Chart`] when it does not parse.
fn read(spec: &ChartSpec, shown: &str, bytes: &[u8]) -> Result<Vec<Entry>> {
    let unreadable = |message: String| Error::Chart {
        unit: spec.unit.clone(),
        url: shown.to_owned(),
        message: format!("the index does not parse: {message}"),
    };
    let text = std::str::from_utf8(bytes).map_err(|e| unreadable(e.to_string()))?;
    index::entries(text, &spec.source.chart).map_err(|e| unreadable(redact_text(&e)))
}

/// The kept answer for the unit's chart when the repository is down with `error`, logged as
/// a warning naming the repository, the error and the answer's age.
///
/// Errors: `error` itself when no answer is kept or the kept one is past
/// `[render] max_index_age`.
pub(super) fn stale(spec: &ChartSpec, kept: &Kept, error: Error) -> Result<Vec<Entry>> {
    let repo_url = spec.source.repo_url.as_str();
    let Some((entries, age)) = kept.load(repo_url, &spec.source.chart) else { return Err(error) };
    tracing::warn!(
        unit = %spec.unit,
        repository = %redact(repo_url),
        chart = %spec.source.chart,
        error = %error,
        age_secs = age.as_secs(),
        "chart repository unreachable: using its last good index answer"
    );
    Ok(entries)
}

/// What a fetch that ran out of time can still give: the version the kept answer
/// ([`stale`]) selects, when its archive is already cached — no request is made.
///
/// Errors: `error` when no answer is kept or young enough, or the archive is not cached;
/// those of [`super::choose`].
pub(super) fn offline(spec: &ChartSpec, cache: &Cache, kept: &Kept, error: Error) -> Result<Fetched> {
    let listed = stale(spec, kept, error.clone())?;
    let (entries, offers) = offers(listed);
    let offer = super::choose(spec, &redact(&spec.source.repo_url), offers)?;
    let expected = entries[&offer.version].digest.as_deref().map(|d| d.trim_start_matches("sha256:").to_owned());
    match expected.as_deref().filter(|d| cache.path(d).is_some()) {
        Some(digest) => Ok(super::revision(spec, &offer.version, digest)),
        None => Err(error),
    }
}

/// The entries by version (the first listed of each) and the offers they make.
fn offers(listed: Vec<Entry>) -> (HashMap<String, Entry>, Vec<Offer>) {
    let mut entries: HashMap<String, Entry> = HashMap::new();
    for entry in listed {
        entries.entry(entry.version.clone()).or_insert(entry);
    }
    let offers = entries
        .values()
        .filter_map(|e| Some(Offer { version: e.version.clone(), location: e.urls.first()?.clone() }))
        .collect();
    (entries, offers)
}

/// Chooses the version among `listed` and downloads its archive (from under `base`, the
/// repository URL with a trailing `/`) unless cached.
///
/// Errors: [`Error::Chart`] (no version matches, an archive URL that does not parse or is not
/// allowed, a digest mismatch), those of [`super::net::Net::get`].
async fn resolve(spec: &ChartSpec, cache: &Cache, net: &Net, base: &str, listed: Vec<Entry>) -> Result<Fetched> {
    let shown = redact(&format!("{base}index.yaml"));
    let unreadable = |message: String| Error::Chart {
        unit: spec.unit.clone(),
        url: shown.clone(),
        message: format!("the index does not parse: {message}"),
    };
    let (entries, offers) = offers(listed);
    let offer = super::choose(spec, &shown, offers)?;
    let expected = entries[&offer.version].digest.as_deref().map(|d| d.trim_start_matches("sha256:").to_owned());
    if let Some(digest) = expected.as_deref().filter(|d| cache.path(d).is_some()) {
        return Ok(super::revision(spec, &offer.version, digest));
    }
    let url = url::Url::parse(base)
        .and_then(|base| base.join(&offer.location))
        .map_err(|e| unreadable(format!("entry {} has the URL `{}`: {e}", offer.version, redact(&offer.location))))?;
    net.allowed(url.as_str()).map_err(|reason| Error::Chart {
        unit: spec.unit.clone(),
        url: shown.clone(),
        message: format!("version {} is to be downloaded from {reason}", offer.version),
    })?;
    let archive = net.get(url.as_str(), spec.max_bytes).await?;
    let digest = cache.store(&redact(url.as_str()), &archive, expected.as_deref())?;
    tracing::info!(unit = %spec.unit, chart = %spec.source.chart, version = %offer.version, url = %redact(url.as_str()), "chart downloaded");
    Ok(super::revision(spec, &offer.version, &digest))
}
