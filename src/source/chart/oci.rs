//! A chart in an OCI registry, as `helm push` stores it: the repository `<path>/<chart>` of
//! `oci://<host>/<path>`, one tag per version (`+` written `_`), an image manifest whose
//! layer `application/vnd.cncf.helm.chart.content.v1.tar+gzip` is the archive.
//!
//! With a cosign key (`[sync.verify] cosign_public_key_file`), the chosen tag's manifest must
//! carry a cosign signature by it (`verify::cosign`), checked before the cached archive is
//! used.
//!
//! A registry on a loopback address (`localhost`, `127.0.0.0/8`, `[::1]`) is spoken to over
//! plain HTTP, as Docker treats loopback registries as insecure by default; any other over
//! HTTPS.

use base64::Engine as _;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use super::cache::Cache;
use super::{ChartSpec, Fetched, Offer};
use crate::source::verify::cosign;
use crate::source::{Error, Result};

/// The media types of a chart archive layer: Helm's, and the legacy one of Helm 3.0–3.7.
const CHART_LAYER: [&str; 2] = ["application/vnd.cncf.helm.chart.content.v1.tar+gzip", "application/tar+gzip"];

/// Lists the tags, chooses the version, reads its manifest, downloads the chart layer unless
/// cached.
pub(super) async fn fetch(spec: &ChartSpec, cache: &Cache) -> Result<Fetched> {
    super::install_crypto_provider();
    let url = &spec.source.repo_url;
    let location = url.trim_start_matches("oci://");
    let (registry, path) = location.split_once('/').unwrap_or((location, ""));
    let repository = if path.is_empty() { spec.source.chart.clone() } else { format!("{path}/{}", spec.source.chart) };
    let chart_url = format!("{url}/{}", spec.source.chart);
    let failed = |message: String| Error::FetchFailed { unit: spec.unit.clone(), repo: chart_url.clone(), message };
    let client = client(spec, registry)?;
    let auth = auth(spec, registry)?;
    let reference = Reference::with_tag(registry.to_owned(), repository.clone(), "latest".to_owned());
    let tags = client.list_tags(&reference, &auth, None, None).await.map_err(|e| classify(spec, &chart_url, e))?;
    let offers = tags.tags.iter().map(|tag| Offer { version: tag.replace('_', "+"), location: tag.clone() }).collect();
    let offer = super::choose(spec, &chart_url, offers)?;
    let reference = Reference::with_tag(registry.to_owned(), repository.clone(), offer.location.clone());
    let (manifest, manifest_digest) =
        client.pull_image_manifest(&reference, &auth).await.map_err(|e| classify(spec, &chart_url, e))?;
    let Some(layer) = manifest.layers.iter().find(|l| CHART_LAYER.contains(&l.media_type.as_str())) else {
        let message = format!("the manifest of tag {} has no Helm chart layer ({})", offer.location, CHART_LAYER[0]);
        return Err(Error::Chart { unit: spec.unit.clone(), url: chart_url, message });
    };
    let Some(digest) = layer.digest.strip_prefix("sha256:") else {
        let message = format!("the chart layer's digest {} is not a sha256 digest", layer.digest);
        return Err(Error::Chart { unit: spec.unit.clone(), url: chart_url, message });
    };
    let cached = cache.path(digest).is_some();
    if let Some(key) = &spec.cosign_public_key_file {
        let (registry, repository) = (registry, repository.as_str());
        let signed = cosign::Signed { client: &client, auth: &auth, registry, repository, digest: &manifest_digest };
        let revision = super::revision(spec, &offer.version, digest).revision;
        let verified = cosign::verify(key, &signed).await;
        let signer = verified.map_err(|f| f.into_error(&spec.unit, &revision, |e| classify(spec, &chart_url, e)))?;
        if !cached {
            tracing::info!(unit = %spec.unit, %revision, manifest = %manifest_digest, signer, "revision verified");
        }
    }
    if cached {
        return Ok(super::revision(spec, &offer.version, digest));
    }
    let size = u64::try_from(layer.size).unwrap_or(u64::MAX);
    if size > spec.max_bytes {
        return Err(Error::FileTooLarge { unit: spec.unit.clone(), path: chart_url, size, limit: spec.max_bytes });
    }
    let mut archive = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    client.pull_blob(&reference, layer, &mut archive).await.map_err(|e| failed(crate::telemetry::error_chain(&e)))?;
    let stored = cache.store(&format!("{chart_url}:{}", offer.location), &archive, Some(digest))?;
    tracing::info!(unit = %spec.unit, chart = %spec.source.chart, version = %offer.version, url = %chart_url, "chart downloaded");
    Ok(super::revision(spec, &offer.version, &stored))
}

/// An `oci-client` error as a source error: 401/403 are [`Error::Credentials`], a body that
/// does not parse is [`Error::Chart`] naming the URL, anything else [`Error::FetchFailed`].
pub(in crate::source) fn classify(
    spec: &ChartSpec,
    url: &str,
    error: oci_client::errors::OciDistributionError,
) -> Error {
    use oci_client::errors::OciDistributionError as E;
    let message = crate::telemetry::error_chain(&error);
    match error {
        E::AuthenticationFailure(_) | E::UnauthorizedError { .. } => {
            Error::Credentials { unit: spec.unit.clone(), repo: url.to_owned(), message }
        }
        E::ManifestParsingError(_) | E::JsonError(_) | E::UnsupportedMediaTypeError(_) => Error::Chart {
            unit: spec.unit.clone(),
            url: url.to_owned(),
            message: format!("the registry's answer does not parse: {message}"),
        },
        _ => Error::FetchFailed { unit: spec.unit.clone(), repo: url.to_owned(), message },
    }
}

/// A client for `registry` (`host[:port]`): plain HTTP for loopback hosts, the unit's CA file.
pub(in crate::source) fn client(spec: &ChartSpec, registry: &str) -> Result<Client> {
    let host = registry.rsplit_once(':').filter(|(_, port)| port.chars().all(|c| c.is_ascii_digit()));
    let host = host.map_or(registry, |(host, _)| host).trim_matches(['[', ']']);
    let loopback = host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    let protocol = if loopback { ClientProtocol::Http } else { ClientProtocol::Https };
    let extra_root_certificates = match super::ca_pem(spec)? {
        Some(data) => vec![Certificate { encoding: CertificateEncoding::Pem, data }],
        None => Vec::new(),
    };
    Ok(Client::new(ClientConfig {
        protocol,
        extra_root_certificates,
        connect_timeout: Some(spec.timeout),
        read_timeout: Some(spec.timeout),
        ..ClientConfig::default()
    }))
}

/// The registry credentials: `username` + `password_file`, else the `docker_config_file`
/// entry for `registry`, else anonymous.
///
/// Errors: [`Error::Credentials`] naming the file that cannot be read or has no usable entry.
pub(in crate::source) fn auth(spec: &ChartSpec, registry: &str) -> Result<RegistryAuth> {
    if let Some((user, password)) = super::basic_auth(spec)? {
        return Ok(RegistryAuth::Basic(user, password));
    }
    let Some(file) = &spec.source.docker_config_file else { return Ok(RegistryAuth::Anonymous) };
    let refused = |message: String| Error::Credentials {
        unit: spec.unit.clone(),
        repo: spec.source.repo_url.clone(),
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
    let Some((_, entry)) = entry else { return Ok(RegistryAuth::Anonymous) };
    let field = |name: &str| entry.get(name).and_then(|v| v.as_str()).filter(|s| !s.is_empty());
    if let (Some(user), Some(password)) = (field("username"), field("password")) {
        return Ok(RegistryAuth::Basic(user.to_owned(), password.to_owned()));
    }
    let decoded = field("auth").and_then(|a| base64::engine::general_purpose::STANDARD.decode(a).ok());
    let pair = decoded.and_then(|d| String::from_utf8(d).ok());
    match pair.as_deref().and_then(|p| p.split_once(':')) {
        Some((user, password)) => Ok(RegistryAuth::Basic(user.to_owned(), password.to_owned())),
        None => Err(refused(format!("the entry for {registry} has no `auth` (base64 user:password)"))),
    }
}
