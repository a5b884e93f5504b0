//! A chart in an OCI registry, as `helm push` stores it: the repository `<path>/<chart>` of
//! `oci://<host>/<path>`, one tag per version (`+` written `_`), an image manifest whose
//! layer `application/vnd.cncf.helm.chart.content.v1.tar+gzip` is the archive. Read through
//! [`super::registry`]: the tag list, the manifest and the layer each within a byte cap.
//!
//! With a cosign key (`[sync.verify] cosign_public_key_file`), the chosen tag's manifest must
//! carry a cosign signature by it (`verify::cosign`), checked before the cached archive is
//! used.

use base64::Engine as _;

use super::cache::Cache;
use super::registry::Registry;
use super::{ChartSpec, Fetched, Offer};
use crate::source::verify::cosign;
use crate::source::{Error, Result};
use crate::telemetry::url::redact;

/// The media types of a chart archive layer: Helm's, and the legacy one of Helm 3.0–3.7.
pub(super) const CHART_LAYER: [&str; 2] =
    ["application/vnd.cncf.helm.chart.content.v1.tar+gzip", "application/tar+gzip"];

/// Lists the tags, chooses the version, reads its manifest, downloads the chart layer unless
/// cached.
pub(super) async fn fetch(spec: &ChartSpec, cache: &Cache) -> Result<Fetched> {
    let url = &spec.source.repo_url;
    let (registry, path, userinfo) = split(url);
    let repository = repository(&path, &spec.source.chart);
    let chart_url = redact(&format!("{url}/{}", spec.source.chart));
    let net = net(spec, url, &registry, userinfo)?;
    net.allowed(url).map_err(|message| Error::Chart { unit: spec.unit.clone(), url: chart_url.clone(), message })?;
    let client = Registry::new(&net, &spec.unit, &registry, &chart_url);
    let tags = client.tags(&repository).await?;
    let offers = tags.iter().map(|tag| Offer { version: tag.replace('_', "+"), location: tag.clone() }).collect();
    let offer = super::choose(spec, &chart_url, offers)?;
    let (manifest, manifest_digest) = client.manifest(&repository, &offer.location).await?;
    let Some(layer) = manifest.layers.iter().find(|l| CHART_LAYER.contains(&l.media_type.as_str())) else {
        let message = format!("the manifest of tag {} has no Helm chart layer ({})", offer.location, CHART_LAYER[0]);
        return Err(Error::Chart { unit: spec.unit.clone(), url: chart_url, message });
    };
    let Some(digest) = layer.digest.strip_prefix("sha256:") else {
        let message = format!("the chart layer's digest {} is not a sha256 digest", layer.digest);
        return Err(Error::Chart { unit: spec.unit.clone(), url: chart_url, message });
    };
    let cached = cache.path(digest).is_some();
    let mut signed_by = None;
    if let Some(key) = &spec.cosign_public_key_file {
        let signed = cosign::Signed { registry: &client, repository: &repository, digest: &manifest_digest };
        let revision = super::revision(spec, &offer.version, digest).revision;
        let verified = cosign::verify(key, &signed).await;
        let signer = verified.map_err(|f| f.into_error(&spec.unit, &revision))?;
        if !cached {
            tracing::info!(unit = %spec.unit, %revision, manifest = %manifest_digest, signer = %signer, "revision verified");
        }
        signed_by = Some(signer);
    }
    if cached {
        return Ok(Fetched { signer: signed_by, ..super::revision(spec, &offer.version, digest) });
    }
    let archive = client.blob(&repository, layer, spec.max_bytes).await?;
    let stored = cache.store(&format!("{chart_url}:{}", offer.location), &archive, Some(digest))?;
    tracing::info!(unit = %spec.unit, chart = %spec.source.chart, version = %offer.version, url = %chart_url, "chart downloaded");
    Ok(Fetched { signer: signed_by, ..super::revision(spec, &offer.version, &stored) })
}

/// The registry repository of `chart` under the URL's `path`: `<path>/<chart>`.
pub(super) fn repository(path: &str, chart: &str) -> String {
    if path.is_empty() { chart.to_owned() } else { format!("{path}/{chart}") }
}

/// `oci://[userinfo@]host[:port]/path` as (`host[:port]`, `path`, userinfo).
pub(in crate::source) fn split(url: &str) -> (String, String, Option<String>) {
    let location = url.trim_start_matches("oci://");
    let (authority, path) = location.split_once('/').unwrap_or((location, ""));
    let (userinfo, host) = match authority.rsplit_once('@') {
        Some((info, host)) => (Some(info.to_owned()), host),
        None => (None, authority),
    };
    (host.to_owned(), path.to_owned(), userinfo)
}

/// The client of one registry fetch: the allow-list's own repository `own` (the `oci://`
/// URL), credentials for the registry's origin only — `username` + `password_file`, else
/// the `docker_config_file` entry for `registry`, else the URL's userinfo, else none.
///
/// Errors: [`Error::Credentials`] naming a file that cannot be read or has no usable entry.
pub(in crate::source) fn net(
    spec: &ChartSpec,
    own: &str,
    registry: &str,
    userinfo: Option<String>,
) -> Result<super::net::Net> {
    let origin = format!("{}/", super::registry::base(registry));
    let credentials = match super::basic_auth(spec)? {
        Some(pair) => Some(pair),
        None => match docker_config(spec, registry)? {
            Some(pair) => Some(pair),
            None => userinfo.and_then(|info| {
                let (user, password) = info.split_once(':')?;
                let decode = |s: &str| {
                    url::form_urlencoded::parse(format!("x={s}").as_bytes()).next().map(|(_, v)| v.into_owned())
                };
                Some((decode(user)?, decode(password)?))
            }),
        },
    };
    let ca = super::ca_pem(spec)?;
    super::net::Net::new(&spec.unit, &spec.chart_repositories, Some(own), Some(&origin), ca, credentials, spec.timeout)
}

/// The `docker_config_file` entry for `registry`: `username` and `password`, or `auth`
/// (base64 `user:password`); `None` without the file or the entry.
///
/// Errors: [`Error::Credentials`] naming the file that cannot be read or has no usable entry.
fn docker_config(spec: &ChartSpec, registry: &str) -> Result<Option<(String, String)>> {
    let Some(file) = &spec.source.docker_config_file else { return Ok(None) };
    let refused = |message: String| Error::Credentials {
        unit: spec.unit.clone(),
        repo: redact(&spec.source.repo_url),
        message: format!("docker_config_file {}: {message}", file.display()),
    };
    let text = std::fs::read(file).map_err(|e| refused(e.to_string()))?;
    let config: serde_json::Value = serde_json::from_slice(&text).map_err(|e| refused(format!("not JSON: {e}")))?;
    let auths = config.get("auths").and_then(|a| a.as_object());
    let entry = auths.and_then(|auths| {
        auths.iter().find(|(key, _)| {
            key.trim_start_matches("https://").trim_start_matches("http://").trim_end_matches('/') == registry
        })
    });
    let Some((_, entry)) = entry else { return Ok(None) };
    let field = |name: &str| entry.get(name).and_then(|v| v.as_str()).filter(|s| !s.is_empty());
    if let (Some(user), Some(password)) = (field("username"), field("password")) {
        return Ok(Some((user.to_owned(), password.to_owned())));
    }
    let decoded = field("auth").and_then(|a| base64::engine::general_purpose::STANDARD.decode(a).ok());
    let pair = decoded.and_then(|d| String::from_utf8(d).ok());
    match pair.as_deref().and_then(|p| p.split_once(':')) {
        Some((user, password)) => Ok(Some((user.to_owned(), password.to_owned()))),
        None => Err(refused(format!("the entry for {registry} has no `auth` (base64 user:password)"))),
    }
}
