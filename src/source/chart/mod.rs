//! A chart unit's source: the chart named by `[sync.helm] repo_url`, `chart` and `version`,
//! found in a chart repository's `index.yaml` (`http`) or an OCI registry's tags (`oci`),
//! downloaded within a size cap and a timeout, checked against the digest the index or the
//! OCI manifest gives, and kept in a download cache under `<state_dir>/charts/units/<unit>/`,
//! one `<sha256 hex>.tgz` per chart archive, hashed again each time it is used. `helm` only
//! templates the archive (earlier versions kept it in `<state_dir>/charts/<unit>/`, where a
//! unit named `dependencies` shared the dependency cache; that directory is removed). Every
//! request goes through `net`: the `[render] chart_repositories` allow-list, credentials to
//! their own origin only, bodies capped.
//!
//! The revision of a chart is `<chart>@<version>@sha256:<hex>` (the digest of the archive,
//! which `helm repo index` and `helm push` both record), so a version re-published with other
//! bytes is a new revision too. Unlike the git side this is async (reqwest).
//!
//! Files: `http` (an `index.yaml` repository), `index` (reading one chart's entries of an
//! `index.yaml`, with a parse budget scaled to its size), `kept` (the last good index answer
//! per repository and chart, used while the repository is down), `oci` (a chart in a
//! registry), `registry` (the registry reads: tags, manifests, blobs; its pushes and OCI 1.1
//! referrers), `attach` (a referrer of an OCI chart's manifest, as `[provenance]
//! oci_referrers` pushes attestations), `net` (the allow-listed, capped HTTP client), `cache`
//! (the download cache and its collection), `deps` (the dependencies of a chart in git).

mod attach;
mod cache;
pub mod deps;
mod http;
mod index;
mod kept;
pub(super) mod net;
pub(super) mod oci;
pub(super) mod registry;

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{Error, Result, Revision};
use crate::config::{ChartRepositories, ChartSource};
use crate::telemetry::url::redact;

pub use registry::{Attached, Referrer};

/// The largest `index.yaml` read: 64 MiB (the largest public repositories' indexes are a few
/// tens of MiB). A larger one fails the fetch with [`Error::FileTooLarge`].
pub const MAX_INDEX_BYTES: u64 = 64 << 20;

/// What a chart unit fetches, and the limits of a fetch.
#[derive(Debug, Clone)]
pub struct ChartSpec {
    /// The sync unit: the subject of every error, and its cache directory's name.
    pub unit: String,
    /// Repository, chart, version range and credential files.
    pub source: ChartSource,
    /// The largest chart archive downloaded, in bytes (`[render] max_tree_bytes`: the archive
    /// is what the render reads).
    pub max_bytes: u64,
    /// How long one fetch (index or tag list, manifest and archive) may take in all
    /// (`[render] timeout`).
    pub timeout: Duration,
    /// `[sync.verify] cosign_public_key_file`: an OCI chart's manifest must carry a cosign
    /// signature by this key (module `verify::cosign`), checked at every fetch, the cached
    /// archive too. Default none. Only `oci://` repositories can be verified (config refuses
    /// it for an HTTP chart repository).
    pub cosign_public_key_file: Option<PathBuf>,
    /// Where gitward may fetch from besides `source.repo_url` (`[render] chart_repositories`).
    pub chart_repositories: ChartRepositories,
}

/// A chart fetched: its revision and the archive in the download cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// `<chart>@<version>@sha256:<hex>`.
    pub revision: Revision,
    /// The version as published (`1.19.4`).
    pub version: String,
    /// The archive's SHA-256, hex.
    pub digest: String,
    /// Who signed the chart's manifest, under `[sync.verify] cosign_public_key_file`.
    pub signer: Option<crate::source::Signer>,
}

/// One chart unit's source: its spec, HTTP client settings and download cache.
#[derive(Debug)]
pub struct ChartRepo {
    spec: ChartSpec,
    cache: cache::Cache,
    /// The repository's last good index answer for the chart (HTTP repositories).
    kept: kept::Kept,
}

/// One version of the chart that the repository offers.
pub(super) struct Offer {
    /// The version as published.
    pub version: String,
    /// Where it is downloaded from (an archive URL, or an OCI tag).
    pub location: String,
}

impl ChartRepo {
    /// Opens the unit's download cache, `<state_dir>/charts/units/<unit>/`, creating it; an
    /// HTTP repository's last good index answer is used while it is down for up to
    /// `max_index_age` (`[render] max_index_age`, [`kept`]).
    ///
    /// Errors: [`Error::OpenMirror`] when the directory cannot be created.
    pub fn open(state_dir: &Path, spec: ChartSpec, max_index_age: Duration) -> Result<Self> {
        let charts = state_dir.join("charts");
        cache::remove_legacy(&charts, &spec.unit);
        let cache = cache::Cache::open(&charts.join("units").join(&spec.unit), &spec.unit)?;
        let kept = kept::Kept::new(state_dir, format!("units/{}", spec.unit), max_index_age);
        Ok(Self { spec, cache, kept })
    }

    /// Finds the newest version the range allows and makes sure its archive is in the cache
    /// (downloaded and digest-checked when it is not); then collects the archives of other
    /// versions but the one last fetched before, so a failing render of the new one can fall
    /// back to it. While an HTTP repository is down (no connection, a timeout, a 5xx answer),
    /// its last good index answer stands in for the index, up to `max_index_age` old.
    ///
    /// Errors: [`Error::FetchFailed`] (unreachable, timeout, an HTTP error status),
    /// [`Error::Credentials`] (401/403, an unreadable credential file), [`Error::Chart`] (an
    /// index or manifest that does not parse, naming its URL; no version matches; the digest
    /// differs; a cosign key set for an HTTP repository), [`Error::FileTooLarge`],
    /// [`Error::Unverified`] (an OCI chart not signed by the cosign key).
    pub async fn fetch(&mut self) -> Result<Fetched> {
        let spec = &self.spec;
        if spec.cosign_public_key_file.is_some() && !spec.source.is_oci() {
            let message = "cosign signatures are checked only for oci:// charts, not an HTTP chart repository's";
            return Err(Error::Chart {
                unit: spec.unit.clone(),
                url: spec.source.repo_url.clone(),
                message: message.into(),
            });
        }
        let work = async {
            if spec.source.is_oci() {
                oci::fetch(spec, &self.cache).await
            } else {
                http::fetch(spec, &self.cache, &self.kept).await
            }
        };
        let fetched = match tokio::time::timeout(spec.timeout, work).await {
            Ok(fetched) => fetched?,
            Err(_) => {
                let message = format!("timed out after {:?}", spec.timeout);
                let error = self.failed(&redact(&spec.source.repo_url), message);
                match spec.source.is_oci() {
                    true => return Err(error),
                    false => http::offline(spec, &self.cache, &self.kept, error)?,
                }
            }
        };
        self.cache.collect(&fetched.digest);
        Ok(fetched)
    }

    /// The cached archive of `revision` (one [`ChartRepo::fetch`] returned), hashed again
    /// against the revision's digest now ([`cache::Cache::path`]).
    ///
    /// Errors: [`Error::Chart`] when the revision is not a chart revision or its archive is
    /// no longer cached, or no longer has its digest (then it is removed, and the next fetch
    /// downloads it again).
    pub fn archive(&self, revision: &Revision) -> Result<PathBuf> {
        let digest = revision.0.rsplit_once("@sha256:").map(|(_, rest)| rest.split('+').next().unwrap_or(rest));
        let digest = digest.unwrap_or_default();
        self.cache.path(digest).ok_or_else(|| Error::Chart {
            unit: self.spec.unit.clone(),
            url: redact(&self.spec.source.repo_url),
            message: format!("the archive of {revision} is not in the download cache"),
        })
    }

    fn failed(&self, url: &str, message: String) -> Error {
        Error::FetchFailed { unit: self.spec.unit.clone(), repo: url.to_owned(), message }
    }
}

/// The newest offer the range selects, or [`Error::Chart`] naming the range and what there is.
pub(super) fn choose(spec: &ChartSpec, url: &str, offers: Vec<Offer>) -> Result<Offer> {
    let chosen = spec.source.version.select(offers.iter().map(|o| o.version.as_str())).map(str::to_owned);
    let Some(version) = chosen else {
        let mut published: Vec<&str> = offers.iter().map(|o| o.version.as_str()).collect();
        published.truncate(10);
        let message = format!(
            "no version of chart {} matches `{}` (published: {})",
            spec.source.chart,
            spec.source.version,
            if published.is_empty() { "none".to_owned() } else { published.join(", ") }
        );
        return Err(Error::Chart { unit: spec.unit.clone(), url: url.to_owned(), message });
    };
    Ok(offers.into_iter().find(|o| o.version == version).expect("the chosen version is offered"))
}

/// The revision of `version` of the unit's chart with archive digest `digest` (hex).
pub(super) fn revision(spec: &ChartSpec, version: &str, digest: &str) -> Fetched {
    Fetched {
        revision: Revision(format!("{}@{version}@sha256:{digest}", spec.source.chart)),
        version: version.to_owned(),
        digest: digest.to_owned(),
        signer: None,
    }
}

/// The password of `username`, read from `password_file` now (never kept).
///
/// Errors: [`Error::Credentials`] naming the file.
pub(super) fn basic_auth(spec: &ChartSpec) -> Result<Option<(String, String)>> {
    let (Some(user), Some(file)) = (&spec.source.username, &spec.source.password_file) else { return Ok(None) };
    let password = std::fs::read_to_string(file).map_err(|e| Error::Credentials {
        unit: spec.unit.clone(),
        repo: redact(&spec.source.repo_url),
        message: format!("cannot read password_file {}: {e}", file.display()),
    })?;
    Ok(Some((user.clone(), password.trim_end_matches(['\n', '\r']).to_owned())))
}

/// The PEM bytes of `ca_file`, read now.
///
/// Errors: [`Error::Credentials`] naming the file.
pub(super) fn ca_pem(spec: &ChartSpec) -> Result<Option<Vec<u8>>> {
    let Some(file) = &spec.source.ca_file else { return Ok(None) };
    std::fs::read(file).map(Some).map_err(|e| Error::Credentials {
        unit: spec.unit.clone(),
        repo: redact(&spec.source.repo_url),
        message: format!("cannot read ca_file {}: {e}", file.display()),
    })
}

/// The HTTP client of one fetch for `spec` ([`net::Net`]): `own` is the repository the
/// allow-list counts as the unit's own, `origin` the URL its credentials go to.
///
/// Errors: those of [`basic_auth`], [`ca_pem`] and [`net::Net::new`].
pub(super) fn net(spec: &ChartSpec, own: Option<&str>, origin: Option<&str>) -> Result<net::Net> {
    let (ca, basic) = (ca_pem(spec)?, basic_auth(spec)?);
    net::Net::new(&spec.unit, &spec.chart_repositories, own, origin, ca, basic, spec.timeout)
}

/// rustls needs a process-wide crypto provider for reqwest's client; gitward uses ring (as
/// kube does). Installing it twice is harmless.
pub(super) fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
