//! A chart repository over https or http: `<repo_url>/index.yaml` (Helm's `IndexFile`:
//! `entries.<chart>[]` with `version`, `digest` — the archive's SHA-256 — and `urls`,
//! relative ones resolved against the repository URL, as `helm repo index` without `--url`
//! writes them).

use std::collections::HashMap;

use serde::Deserialize;

use super::cache::Cache;
use super::{ChartSpec, Fetched, MAX_INDEX_BYTES, Offer};
use crate::source::{Error, Result};

#[derive(Deserialize)]
struct Index {
    #[serde(default)]
    entries: HashMap<String, Vec<Entry>>,
}

#[derive(Deserialize)]
struct Entry {
    version: String,
    #[serde(default)]
    digest: Option<String>,
    #[serde(default)]
    urls: Vec<String>,
}

/// Reads the index, chooses the version, downloads its archive unless cached.
pub(super) async fn fetch(spec: &ChartSpec, cache: &Cache) -> Result<Fetched> {
    super::install_crypto_provider();
    let client = client(spec)?;
    let base = format!("{}/", spec.source.repo_url);
    let index_url = format!("{base}index.yaml");
    let bytes = get(spec, &client, &index_url, MAX_INDEX_BYTES).await?;
    let unreadable = |message: String| Error::Chart {
        unit: spec.unit.clone(),
        url: index_url.clone(),
        message: format!("the index does not parse: {message}"),
    };
    let text = std::str::from_utf8(&bytes).map_err(|e| unreadable(e.to_string()))?;
    let index: Index = serde_saphyr::from_str(text).map_err(|e| unreadable(e.to_string()))?;
    let mut entries: HashMap<String, Entry> = HashMap::new();
    for entry in index.entries.into_iter().filter(|(name, _)| *name == spec.source.chart).flat_map(|(_, e)| e) {
        entries.entry(entry.version.clone()).or_insert(entry);
    }
    let offers = entries
        .values()
        .filter_map(|e| Some(Offer { version: e.version.clone(), location: e.urls.first()?.clone() }))
        .collect();
    let offer = super::choose(spec, &index_url, offers)?;
    let expected = entries[&offer.version].digest.clone();
    if let Some(digest) = expected.as_deref().filter(|d| cache.path(d).is_some()) {
        return Ok(super::revision(spec, &offer.version, digest));
    }
    let url = url::Url::parse(&base)
        .and_then(|base| base.join(&offer.location))
        .map_err(|e| unreadable(format!("entry {} has the URL `{}`: {e}", offer.version, offer.location)))?;
    let archive = get(spec, &client, url.as_str(), spec.max_bytes).await?;
    let digest = cache.store(url.as_str(), &archive, expected.as_deref())?;
    tracing::info!(unit = %spec.unit, chart = %spec.source.chart, version = %offer.version, url = %url, "chart downloaded");
    Ok(super::revision(spec, &offer.version, &digest))
}

/// A client with the repository's extra CA certificates.
fn client(spec: &ChartSpec) -> Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder().user_agent(concat!("gitward/", env!("CARGO_PKG_VERSION")));
    if let Some(pem) = super::ca_pem(spec)? {
        let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| Error::Credentials {
            unit: spec.unit.clone(),
            repo: spec.source.repo_url.clone(),
            message: format!("ca_file holds no PEM certificate: {e}"),
        })?;
        for cert in certs {
            builder = builder.add_root_certificate(cert);
        }
    }
    builder.build().map_err(|e| Error::FetchFailed {
        unit: spec.unit.clone(),
        repo: spec.source.repo_url.clone(),
        message: crate::telemetry::error_chain(&e),
    })
}

/// GET `url` with the unit's Basic credentials, reading at most `max` bytes.
///
/// Errors: [`Error::FetchFailed`] (no answer, an error status), [`Error::Credentials`] (401,
/// 403), [`Error::FileTooLarge`] (over `max`, by `Content-Length` or as read).
async fn get(spec: &ChartSpec, client: &reqwest::Client, url: &str, max: u64) -> Result<Vec<u8>> {
    let failed = |message: String| Error::FetchFailed { unit: spec.unit.clone(), repo: url.to_owned(), message };
    let mut request = client.get(url);
    if let Some((user, password)) = super::basic_auth(spec)? {
        request = request.basic_auth(user, Some(password));
    }
    let mut response = request.send().await.map_err(|e| failed(crate::telemetry::error_chain(&e)))?;
    let status = response.status();
    if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
        let message = format!("{url} answered {status}");
        return Err(Error::Credentials { unit: spec.unit.clone(), repo: spec.source.repo_url.clone(), message });
    }
    if !status.is_success() {
        return Err(failed(format!("answered {status}")));
    }
    let too_large = |size: u64| Error::FileTooLarge { unit: spec.unit.clone(), path: url.to_owned(), size, limit: max };
    if let Some(length) = response.content_length().filter(|&l| l > max) {
        return Err(too_large(length));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| failed(crate::telemetry::error_chain(&e)))? {
        body.extend_from_slice(&chunk);
        if body.len() as u64 > max {
            return Err(too_large(body.len() as u64));
        }
    }
    Ok(body)
}
