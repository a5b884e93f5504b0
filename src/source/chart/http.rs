//! A chart repository over https or http: `<repo_url>/index.yaml` (Helm's `IndexFile`:
//! `entries.<chart>[]` with `version`, `digest` — the archive's SHA-256 — and `urls`,
//! relative ones resolved against the repository URL, as `helm repo index` without `--url`
//! writes them).

use std::collections::HashMap;

use super::cache::Cache;
use super::index::{self, Entry};
use super::{ChartSpec, Fetched, MAX_INDEX_BYTES, Offer};
use crate::source::{Error, Result};
use crate::telemetry::url::{redact, redact_text};

/// Reads the index, chooses the version, downloads its archive unless cached. The archive
/// URL the index gives must be allowed ([`super::net`]): under the repository or listed in
/// `[render] chart_repositories`; the repository's credentials go only to its own origin.
pub(super) async fn fetch(spec: &ChartSpec, cache: &Cache) -> Result<Fetched> {
    let repo_url = spec.source.repo_url.as_str();
    let net = super::net(spec, Some(repo_url), Some(repo_url))?;
    let base = format!("{repo_url}/");
    let index_url = format!("{base}index.yaml");
    let shown = redact(&index_url);
    net.allowed(&index_url).map_err(|message| Error::Chart { unit: spec.unit.clone(), url: shown.clone(), message })?;
    let bytes = net.get(&index_url, MAX_INDEX_BYTES).await?;
    let unreadable = |message: String| Error::Chart {
        unit: spec.unit.clone(),
        url: shown.clone(),
        message: format!("the index does not parse: {message}"),
    };
    let text = std::str::from_utf8(&bytes).map_err(|e| unreadable(e.to_string()))?;
    let listed = index::entries(text, &spec.source.chart).map_err(|e| unreadable(redact_text(&e)))?;
    drop(bytes);
    let mut entries: HashMap<String, Entry> = HashMap::new();
    for entry in listed {
        entries.entry(entry.version.clone()).or_insert(entry);
    }
    let offers = entries
        .values()
        .filter_map(|e| Some(Offer { version: e.version.clone(), location: e.urls.first()?.clone() }))
        .collect();
    let offer = super::choose(spec, &shown, offers)?;
    let expected = entries[&offer.version].digest.as_deref().map(|d| d.trim_start_matches("sha256:").to_owned());
    if let Some(digest) = expected.as_deref().filter(|d| cache.path(d).is_some()) {
        return Ok(super::revision(spec, &offer.version, digest));
    }
    let url = url::Url::parse(&base)
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
