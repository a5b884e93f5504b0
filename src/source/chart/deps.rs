//! Dependencies of a chart in git: the `dependencies` of its `Chart.yaml` whose `repository`
//! is an `https://`, `http://` or `oci://` URL are fetched as `helm dependency build` fetches
//! them — the version `Chart.lock` pins when there is a lock, else the newest the constraint
//! allows — into a download cache shared by the units of one trust domain,
//! `<state_dir>/charts/dependencies/<domain>/` ([`trust_domain`]: the cluster and the
//! ServiceAccount the unit writes as), keyed by the archive's digest, so an archive is
//! downloaded once per domain and no unit reads bytes a unit of another domain placed. Each
//! archive is hashed again when it is used. Only repositories `[render] chart_repositories`
//! lists are asked ([`allowed`]), and no credentials are sent. A dependency already
//! vendored in the chart's `charts/` (a directory or archive named after it) is left to Helm,
//! as are `alias`, `condition` and `tags`, which `helm template` applies to what `charts/`
//! holds. Each use of an archive marks it (its modification time); an archive no unit has
//! used for [`super::cache::DEPENDENCY_MAX_AGE`] (7 days) is collected at the next fetch.
//!
//! A dependency `Chart.lock` pins, once fetched, is recorded in its domain's cache as a pin
//! (`<hash of repository, name, version>.pin` holding the archive's digest), so later loads
//! take the cached archive without asking the repository: an outage upstream does not fail
//! the sync of a locked chart whose dependencies this domain already has. An unlocked one
//! asks every time, the repository's last good index answer standing in while it is down
//! (`[render] max_index_age`, [`super::kept`]).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use sha2::Digest as _;

use super::cache::Cache;
use super::kept::Kept;
use super::{ChartSpec, http, oci};
use crate::config::{ChartRepositories, ChartSource, VersionConstraint};
use crate::source::{Error, Result};
use crate::telemetry::url::redact;

/// The trust domain of a unit that applies to `cluster` as `service_account`
/// (`<namespace>/<name>`, or `None` for gitward's own identity): 16 hex digits of a SHA-256
/// of both, naming its dependency cache directory. Units that write as the same identity to
/// the same cluster could write each other's objects anyway, so they share downloads; no
/// other unit does.
pub fn trust_domain(cluster: &str, service_account: Option<&str>) -> String {
    let mut hasher = sha2::Sha256::new();
    hasher.update(format!("cluster={cluster}\nservice_account={}\n", service_account.unwrap_or("")));
    hex::encode(hasher.finalize())[..16].to_owned()
}

/// Whether every dependency's repository is listed in `chart_repositories` (a chart in git
/// has no repository of its own): checked for all before any is fetched.
///
/// Errors: a message naming the first dependency refused and why.
pub fn allowed(deps: &[Dependency], chart_repositories: &ChartRepositories) -> std::result::Result<(), String> {
    for dep in deps {
        chart_repositories
            .allows(None, &dep.repository)
            .map_err(|reason| format!("dependency {} on {reason}", dep.name))?;
    }
    Ok(())
}

/// One dependency to fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependency {
    /// The chart's name in its repository.
    pub name: String,
    /// The version constraint (`Chart.yaml`), or the exact version `Chart.lock` pins.
    pub version: String,
    /// The repository URL, without a trailing `/`.
    pub repository: String,
    /// Whether `Chart.lock` pins this dependency (then `version` is exact, and an archive
    /// already cached for it is used without a request: [`fetch`]).
    pub locked: bool,
    /// The archive's SHA-256 (hex) when the lock entry gives a `digest` (Helm's own
    /// `Chart.lock` does not; some tools write one): the archive must have it.
    pub digest: Option<String>,
}

#[derive(Deserialize)]
struct ChartFile {
    #[serde(default)]
    dependencies: Vec<RawDependency>,
}

#[derive(Deserialize)]
struct RawDependency {
    name: String,
    #[serde(default)]
    version: String,
    #[serde(default)]
    repository: String,
    #[serde(default)]
    digest: Option<String>,
}

/// The dependencies of `chart_yaml` to fetch: remote repositories only (a `file://` or empty
/// repository, or one vendored in `charts/` — `vendored(name)` — is Helm's to find), versions
/// from `chart_lock` when it names the dependency.
///
/// Errors: a message naming the file that does not parse.
pub fn remote(
    chart_yaml: &[u8],
    chart_lock: Option<&[u8]>,
    vendored: impl Fn(&str) -> bool,
) -> std::result::Result<Vec<Dependency>, String> {
    let parse = |file: &str, bytes: &[u8]| -> std::result::Result<ChartFile, String> {
        let text = std::str::from_utf8(bytes).map_err(|e| format!("{file}: {e}"))?;
        serde_saphyr::from_str(text).map_err(|e| format!("{file}: {e}"))
    };
    let chart = parse("Chart.yaml", chart_yaml)?;
    let lock = chart_lock.map(|bytes| parse("Chart.lock", bytes)).transpose()?;
    let mut out = Vec::new();
    for dep in chart.dependencies {
        let remote = ["https://", "http://", "oci://"].iter().any(|s| dep.repository.starts_with(s));
        if !remote || vendored(&dep.name) {
            continue;
        }
        let locked = lock
            .as_ref()
            .and_then(|l| l.dependencies.iter().find(|d| d.name == dep.name && d.repository == dep.repository));
        out.push(Dependency {
            version: locked.map_or(dep.version.clone(), |l| l.version.clone()),
            repository: dep.repository.trim_end_matches('/').to_owned(),
            name: dep.name,
            locked: locked.is_some(),
            digest: locked
                .and_then(|l| l.digest.as_deref())
                .map(|d| d.trim_start_matches("sha256:").to_ascii_lowercase()),
        });
    }
    Ok(out)
}

/// How one unit fetches its dependencies: the limits of a fetch, where it may fetch from, and
/// its trust domain's cache.
#[derive(Debug, Clone)]
pub struct Fetcher {
    /// The sync unit, the subject of every error.
    pub unit: String,
    /// The unit's [`trust_domain`].
    pub domain: String,
    /// The largest archive downloaded (`[render] max_tree_bytes`).
    pub max_bytes: u64,
    /// How long one fetch may take (`[render] timeout`).
    pub timeout: std::time::Duration,
    /// `[render] chart_repositories`.
    pub chart_repositories: ChartRepositories,
    /// `[render] max_index_age`: how old a repository's last good index answer may be to
    /// stand in while the repository is down (unlocked dependencies, or locked ones not yet
    /// cached).
    pub max_index_age: std::time::Duration,
}

/// Fetches `dep` into the cache of the fetcher's trust domain under `state_dir`; returns the
/// archive, verified and marked used. Archives unused for 7 days are collected.
///
/// A dependency `Chart.lock` pins whose archive this domain already fetched (recorded as a
/// pin, [`Cache::pin`], of its repository, name and version, and agreeing with the lock's own
/// `digest` where it gives one) is taken from the cache, hashed again, without any request:
/// a locked chart in git renders while its repositories are down. Otherwise the repository is
/// asked, its last good index answer standing in while it is down ([`super::kept`]).
///
/// Errors: those of a chart unit's fetch ([`super::ChartRepo::fetch`]), and [`Error::Chart`]
/// for a version constraint that does not parse, a repository not allowed, or an archive
/// whose digest is not the one the lock gives.
pub async fn fetch(state_dir: &Path, fetcher: &Fetcher, dep: &Dependency) -> Result<PathBuf> {
    let (unit, timeout) = (fetcher.unit.as_str(), fetcher.timeout);
    if let Err(message) = allowed(std::slice::from_ref(dep), &fetcher.chart_repositories) {
        return Err(Error::Chart { unit: unit.to_owned(), url: redact(&dep.repository), message });
    }
    let version = VersionConstraint::parse(&dep.version).map_err(|message| Error::Chart {
        unit: unit.to_owned(),
        url: redact(&dep.repository),
        message: format!("dependency {} has the version `{}`: {message}", dep.name, dep.version),
    })?;
    let charts = state_dir.join("charts");
    super::cache::remove_legacy(&charts, unit);
    let cache = Cache::open(&charts.join("dependencies").join(&fetcher.domain), unit)?;
    let pin = pin_key(dep);
    if let Some(path) = locked_in_cache(&cache, dep, &pin) {
        tracing::debug!(unit, dependency = %dep.name, version = %dep.version, "locked chart dependency taken from the cache");
        cache.collect_unused(super::cache::DEPENDENCY_MAX_AGE);
        return Ok(path);
    }
    let source = ChartSource::anonymous(&dep.repository, &dep.name, version);
    let spec = ChartSpec {
        unit: unit.to_owned(),
        source,
        max_bytes: fetcher.max_bytes,
        timeout,
        cosign_public_key_file: None,
        chart_repositories: fetcher.chart_repositories.clone(),
    };
    let kept = Kept::new(state_dir, format!("dependencies/{}", fetcher.domain), fetcher.max_index_age);
    let work = async {
        if spec.source.is_oci() { oci::fetch(&spec, &cache).await } else { http::fetch(&spec, &cache, &kept).await }
    };
    let fetched = match tokio::time::timeout(timeout, work).await {
        Ok(fetched) => fetched?,
        Err(_) => {
            let error = Error::FetchFailed {
                unit: unit.to_owned(),
                repo: redact(&dep.repository),
                message: format!("timed out after {timeout:?}"),
            };
            match spec.source.is_oci() {
                true => return Err(error),
                false => http::offline(&spec, &cache, &kept, error)?,
            }
        }
    };
    if let Some(locked) = dep.digest.as_deref().filter(|d| !d.eq_ignore_ascii_case(&fetched.digest)) {
        let message = format!(
            "dependency {} {}: Chart.lock gives sha256:{locked}, the repository serves sha256:{}",
            dep.name, dep.version, fetched.digest
        );
        return Err(Error::Chart { unit: unit.to_owned(), url: redact(&dep.repository), message });
    }
    cache.touch(&fetched.digest);
    if dep.locked {
        cache.pin(&pin, &fetched.digest);
    }
    cache.collect_unused(super::cache::DEPENDENCY_MAX_AGE);
    // The fetch hashed the archive (found in the cache, or as it was stored); not again here.
    cache.file(&fetched.digest).ok_or_else(|| Error::Chart {
        unit: unit.to_owned(),
        url: redact(&dep.repository),
        message: format!("dependency {} was fetched but is not in the cache", dep.name),
    })
}

/// The key of a locked dependency's pin: the hex SHA-256 of its repository, name and version.
fn pin_key(dep: &Dependency) -> String {
    hex::encode(sha2::Sha256::digest(format!("{}\n{}\n{}\n", dep.repository, dep.name, dep.version)))
}

/// The cached archive of a locked dependency, hashed again now and marked used: the one its
/// pin names, written when this domain fetched that repository, name and version (a lock
/// entry's own `digest` must agree; it never picks an archive by itself, so a lock cannot
/// name another chart's archive). `None` for an unlocked dependency or one not cached.
fn locked_in_cache(cache: &Cache, dep: &Dependency, pin: &str) -> Option<PathBuf> {
    if !dep.locked {
        return None;
    }
    let digest =
        cache.pinned(pin).filter(|pinned| dep.digest.as_ref().is_none_or(|d| d.eq_ignore_ascii_case(pinned)))?;
    let path = cache.path(&digest)?;
    cache.touch(&digest);
    Some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_dependencies_take_the_locked_version_and_skip_vendored_and_local_ones() {
        let chart = b"apiVersion: v2\nname: umbrella\nversion: 1.0.0\ndependencies:\n\
            - {name: demo, version: '>=0.1.0', repository: 'http://charts.example.com/'}\n\
            - {name: lib, version: 0.1.0, repository: 'file://../lib'}\n\
            - {name: vendored, version: 1.x, repository: 'oci://r/charts'}\n\
            - {name: other, version: '~2', repository: 'oci://r/charts', alias: second}\n";
        let lock = b"dependencies:\n- {name: demo, version: 0.1.3, repository: 'http://charts.example.com/'}\n";
        let deps = remote(chart, Some(lock), |name| name == "vendored").unwrap();
        let got: Vec<(&str, &str, &str)> =
            deps.iter().map(|d| (d.name.as_str(), d.version.as_str(), d.repository.as_str())).collect();
        assert_eq!(got, [("demo", "0.1.3", "http://charts.example.com"), ("other", "~2", "oci://r/charts")]);
        assert!(deps[0].locked && !deps[1].locked, "only demo is in the lock");
        let lock = b"dependencies:\n- {name: demo, version: 0.1.3, repository: 'http://charts.example.com/', digest: 'sha256:AB12'}\n";
        assert_eq!(remote(chart, Some(lock), |_| false).unwrap()[0].digest.as_deref(), Some("ab12"));
        assert!(remote(b"dependencies: {", None, |_| false).unwrap_err().starts_with("Chart.yaml: "));
        let error = allowed(&deps, &ChartRepositories::parse(["oci://r/charts"]).unwrap()).unwrap_err();
        assert!(error.starts_with("dependency demo on `http://charts.example.com` is not in"), "{error}");
        assert!(allowed(&deps, &ChartRepositories::parse(["http://charts.example.com", "oci://r"]).unwrap()).is_ok());
    }

    #[test]
    fn trust_domains_differ_by_cluster_and_service_account() {
        let own = trust_domain("prod", None);
        assert_eq!(own, trust_domain("prod", None));
        assert_ne!(own, trust_domain("prod", Some("shop/deployer")));
        assert_ne!(own, trust_domain("staging", None));
        assert_ne!(trust_domain("prod", Some("a/b")), trust_domain("prod", Some("a/c")));
    }
}
