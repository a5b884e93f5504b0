//! A file pushed beside an artifact's manifest as an OCI 1.1 referrer of it
//! (`chart::registry`'s `attach`, which writes the referrer manifest and, for a registry
//! without the referrers API, the `sha256-<hex>` referrers tag's index): to the artifact's
//! own repository with the unit's credentials, allow-list and transport, as [`Artifact::pull`]
//! reads it. No other host is reached.

use super::super::chart::registry::{Attached, Referrer, Registry};
use super::Artifact;
use crate::source::{Error, Result};
use crate::telemetry::url::redact;

impl Artifact {
    /// `oci://host/repository@<digest>` of this artifact's repository, redacted: how logs
    /// name a manifest in it.
    pub fn reference(&self, digest: &str) -> String {
        redact(&format!("oci://{}/{}@{digest}", self.registry, self.repository))
    }

    /// Pushes `referrer` as a referrer of the manifest `subject` (`sha256:<hex>`) of this
    /// artifact's repository. Bounded by the spec's timeout.
    ///
    /// Errors: [`Error::FetchFailed`] (unreachable, an error status, timeout),
    /// [`Error::Credentials`], [`Error::Artifact`] (the subject is not in the registry, a
    /// refused address, a referrers index that does not parse).
    pub async fn attach(&self, subject: &str, referrer: Referrer<'_>) -> Result<Attached> {
        match tokio::time::timeout(self.spec.timeout, self.attach_once(subject, referrer)).await {
            Ok(attached) => attached,
            Err(_) => Err(Error::FetchFailed {
                unit: self.spec.unit.clone(),
                repo: redact(&self.spec.url),
                message: format!("the referrer push timed out after {:?}", self.spec.timeout),
            }),
        }
    }

    async fn attach_once(&self, subject: &str, referrer: Referrer<'_>) -> Result<Attached> {
        let spec = &self.spec;
        let shown = redact(&spec.url);
        let net = self.net()?;
        let registry = Registry::new(&net, &spec.unit, &self.registry, &shown);
        let pushed = registry.attach(&self.repository, subject, referrer).await.map_err(super::as_artifact)?;
        Ok(Attached { reference: self.reference(&pushed.digest), fallback_tag: pushed.fallback_tag })
    }
}
