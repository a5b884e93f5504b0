//! A chart in an OCI registry as the subject of a referrer: the manifest of the applied
//! version's tag (the one [`super::oci`] read to fetch it), found again through the same
//! client, credentials and allow-list as the fetch, and written to with
//! [`super::registry::Registry::attach`]. A chart revision names the chart layer's digest,
//! not the manifest's, so the tag's manifest is read and its chart layer must be the
//! revision's: a tag moved since the fetch is refused, naming both digests, rather than a
//! referrer attached to a manifest the sync never applied.

use super::ChartSpec;
use super::oci;
use super::registry::{Attached, Referrer, Registry};
use crate::source::{Error, Result};
use crate::telemetry::url::redact;

impl ChartSpec {
    /// The manifest a referrer of `revision` (`<chart>@<version>@sha256:<hex>`, maybe
    /// `+git:<commit>`) attaches to, as logs name it: `oci://host/path/<chart>:<tag>`,
    /// redacted.
    pub fn manifest_reference(&self, revision: &str) -> String {
        let tag = parts(revision).map(|(version, _)| version.replace('+', "_")).unwrap_or_default();
        redact(&format!("{}/{}:{tag}", self.source.repo_url, self.source.chart))
    }

    /// Pushes `referrer` as a referrer of the manifest of `revision`'s version tag, once that
    /// manifest's chart layer is the revision's digest. Bounded by the spec's timeout.
    ///
    /// Errors: [`Error::FetchFailed`] (unreachable, an error status, timeout),
    /// [`Error::Credentials`], [`Error::Chart`] (not an `oci://` repository or not a chart
    /// revision; a refused address; the tag's manifest has another chart layer or none; a
    /// referrers index that does not parse).
    pub async fn attach(&self, revision: &str, referrer: Referrer<'_>) -> Result<Attached> {
        match tokio::time::timeout(self.timeout, self.attach_once(revision, referrer)).await {
            Ok(attached) => attached,
            Err(_) => Err(Error::FetchFailed {
                unit: self.unit.clone(),
                repo: redact(&self.source.repo_url),
                message: format!("the referrer push timed out after {:?}", self.timeout),
            }),
        }
    }

    async fn attach_once(&self, revision: &str, referrer: Referrer<'_>) -> Result<Attached> {
        let url = &self.source.repo_url;
        let chart_url = redact(&format!("{url}/{}", self.source.chart));
        let refused = |message: String| Error::Chart { unit: self.unit.clone(), url: chart_url.clone(), message };
        if !self.source.is_oci() {
            return Err(refused("an HTTP chart repository holds no manifest to attach to".into()));
        }
        let Some((version, hex)) = parts(revision) else {
            return Err(refused(format!("{revision} is not a chart revision")));
        };
        let (registry, path, userinfo) = oci::split(url);
        let repository = oci::repository(&path, &self.source.chart);
        let net = oci::net(self, url, &registry, userinfo)?;
        net.allowed(url).map_err(refused)?;
        let client = Registry::new(&net, &self.unit, &registry, &chart_url);
        let tag = version.replace('+', "_");
        let (manifest, digest) = client.manifest(&repository, &tag).await?;
        let layer = manifest.layers.iter().find(|l| oci::CHART_LAYER.contains(&l.media_type.as_str()));
        let applied = format!("sha256:{hex}");
        if !layer.is_some_and(|l| l.digest.eq_ignore_ascii_case(&applied)) {
            let found = layer.map_or("none", |l| l.digest.as_str());
            return Err(refused(format!(
                "the tag {tag} now names the manifest {digest}, whose chart layer is {found}, not the applied \
                 {applied}: no referrer attached"
            )));
        }
        let pushed = client.attach(&repository, &digest, referrer).await?;
        let reference = redact(&format!("oci://{registry}/{repository}@{}", pushed.digest));
        Ok(Attached { reference, fallback_tag: pushed.fallback_tag })
    }
}

/// The version and chart layer digest (hex) of a chart revision
/// `<chart>@<version>@sha256:<hex>[+git:<commit>]`.
fn parts(revision: &str) -> Option<(&str, &str)> {
    let (head, tail) = revision.rsplit_once("@sha256:")?;
    let hex = tail.split('+').next().filter(|hex| !hex.is_empty())?;
    let (_, version) = head.split_once('@')?;
    Some((version, hex))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_revision_gives_its_version_and_layer_digest() {
        assert_eq!(parts("demo@0.1.0@sha256:ab12"), Some(("0.1.0", "ab12")));
        assert_eq!(parts("demo@1.0.0+build.1@sha256:ab12+git:0123abcd"), Some(("1.0.0+build.1", "ab12")));
        assert_eq!(parts("v1@sha256:ab12"), None, "an artifact revision names no version");
        assert_eq!(parts("0123abcd"), None);
    }
}
