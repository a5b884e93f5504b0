//! The writes gitward makes to an OCI registry (the distribution spec's push API: a blob by
//! `POST` then `PUT`, a manifest by `PUT`), and a manifest read as the registry holds it — its
//! media type and bytes, for a descriptor that names it. Through the same client, credentials
//! and challenge answers as the reads ([`super`]): a push's `401` names a scope with `push`,
//! answered once by a new token. The upload location a registry gives must be on its own
//! origin; one elsewhere is refused before anything is sent to it.

use sha2::Digest as _;

use super::super::net::Auth;
use super::Registry;
use crate::source::{Error, Result};
use crate::telemetry::url::redact;

/// How much of an error answer's body a push error quotes.
const MAX_ERROR_BYTES: u64 = 4 << 10;

/// A manifest (or index) as the registry holds it.
pub(in crate::source) struct Held {
    /// Its media type: the registry's `Content-Type`, else the body's own `mediaType`.
    pub media_type: String,
    /// Its bytes, whose sha256 is its digest.
    pub bytes: Vec<u8>,
}

/// What a manifest push answered.
pub(in crate::source) struct Pushed {
    /// Whether the registry set `OCI-Subject`: it took the manifest's `subject` into its
    /// referrers API, and the client need not keep the fallback tag.
    pub subject: bool,
}

impl Registry<'_> {
    /// The manifest or index `reference` (a tag or `sha256:<hex>`) of `repository` as held,
    /// asked for as `accept`, within [`MAX_MANIFEST_BYTES`]; `None` for a `404`.
    ///
    /// Errors: those of the reads ([`Registry::manifest`]); [`Error::Chart`] when a digest
    /// reference's bytes do not match it.
    pub async fn manifest_held(&self, repository: &str, reference: &str, accept: &str) -> Result<Option<Held>> {
        let Some((_, headers, bytes, _)) = self.manifest_bytes(repository, reference, accept).await? else {
            return Ok(None);
        };
        let header = headers.get(reqwest::header::CONTENT_TYPE).and_then(|h| h.to_str().ok());
        let header = header.map(|h| h.split(';').next().unwrap_or_default().trim().to_owned());
        let own = || {
            let value: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
            value.get("mediaType")?.as_str().map(str::to_owned)
        };
        let media_type = header.filter(|h| !h.is_empty() && h != "application/json").or_else(own).unwrap_or_default();
        Ok(Some(Held { media_type, bytes }))
    }

    /// Uploads `bytes` as a blob of `repository` (`POST` for a location, `PUT` of the whole);
    /// returns its digest, `sha256:<hex>`.
    ///
    /// Errors: [`Error::FetchFailed`] (no answer, an error status, no upload location),
    /// [`Error::Credentials`] (401 or 403 after authenticating), [`Error::Chart`] for a location
    /// off the registry's origin.
    pub async fn push_blob(&self, repository: &str, bytes: &[u8]) -> Result<String> {
        let digest = format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)));
        let start = format!("{}/v2/{repository}/blobs/uploads/", self.base);
        let response = self.write(reqwest::Method::POST, &start, "application/octet-stream", Vec::new()).await?;
        let location = response.headers().get(reqwest::header::LOCATION).and_then(|l| l.to_str().ok());
        let Some(location) = location else {
            let message = format!("{} answered {} with no Location", redact(&start), response.status());
            return Err(Error::FetchFailed { unit: self.unit.clone(), repo: self.shown.clone(), message });
        };
        let here = url::Url::parse(&start).map_err(|e| self.unreadable(&start, e))?;
        let mut upload = here.join(location).map_err(|e| self.unreadable(&start, e))?;
        if upload.origin() != here.origin() {
            let message = format!("the upload location {} leaves the registry", redact(upload.as_str()));
            return Err(Error::Chart { unit: self.unit.clone(), url: self.shown.clone(), message });
        }
        upload.query_pairs_mut().append_pair("digest", &digest);
        self.write(reqwest::Method::PUT, upload.as_str(), "application/octet-stream", bytes.to_vec()).await?;
        Ok(digest)
    }

    /// Puts `bytes`, a manifest or index of `media_type`, as `reference` (a tag or its
    /// digest) of `repository`.
    ///
    /// Errors: those of [`Registry::push_blob`]'s requests.
    pub async fn push_manifest(
        &self,
        repository: &str,
        reference: &str,
        media_type: &str,
        bytes: Vec<u8>,
    ) -> Result<Pushed> {
        let url = format!("{}/v2/{repository}/manifests/{reference}", self.base);
        let response = self.write(reqwest::Method::PUT, &url, media_type, bytes).await?;
        Ok(Pushed { subject: response.headers().contains_key("oci-subject") })
    }

    /// Sends `method` `url` with `body`, answering the registry's challenge once; the
    /// response of a success status.
    ///
    /// Errors: [`Error::FetchFailed`] (no answer, an error status, quoting the start of its
    /// body), [`Error::Credentials`] (401 or 403 after authenticating).
    async fn write(
        &self,
        method: reqwest::Method,
        url: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> Result<reqwest::Response> {
        let send = |auth: Auth| {
            let (method, body) = (method.clone(), body.clone());
            async move { self.net.send_body(method, url, content_type, body, &auth).await }
        };
        let response = self.authorised(url, send).await?;
        let status = response.status();
        if !status.is_success() {
            let said = self.net.read(url, response, MAX_ERROR_BYTES).await.unwrap_or_default();
            let said = String::from_utf8_lossy(&said);
            let message = format!("{method} {} answered {status}: {}", redact(url), said.trim());
            return Err(Error::FetchFailed { unit: self.unit.clone(), repo: self.shown.clone(), message });
        }
        Ok(response)
    }
}
