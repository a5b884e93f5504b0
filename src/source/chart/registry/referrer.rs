//! A file pushed beside a manifest as an OCI 1.1 referrer of it: an image manifest with an
//! `artifactType`, the empty config (`application/vnd.oci.empty.v1+json`, `{}`) as the image
//! spec's artifact guidance asks, one layer holding the file, and a `subject` naming the
//! manifest as the registry holds it (media type, digest, size). Pushed to the subject's own
//! repository through the same client, credentials and allow-list as the reads: no other host
//! is reached. An OCI artifact's manifest (`source::artifact`) and an OCI chart's
//! (`chart::attach`) are attached through it.
//!
//! A registry that serves the referrers API answers the manifest's `PUT` with `OCI-Subject`;
//! one that does not (the CNCF distribution registry up to v3.1 at least) gets the
//! distribution spec's referrers tag schema: the tag `sha256-<hex of the subject>` holds an
//! image index of the subject's referrers, read, added to and put back. Two writers of that
//! index at once may lose one's entry (the spec's own caveat); the referrer's manifest stays.

use std::collections::BTreeMap;

use super::Registry;
use crate::source::{Error, Result};

/// An OCI image manifest.
const IMAGE_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// An OCI image index: the referrers tag's content.
const IMAGE_INDEX: &str = "application/vnd.oci.image.index.v1+json";

/// The media types a subject manifest is asked for as.
const SUBJECT_TYPES: &str = "application/vnd.oci.image.manifest.v1+json, \
     application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.index.v1+json, \
     application/vnd.docker.distribution.manifest.list.v2+json";

/// The empty descriptor's media type and content (image spec, "Guidance for an Empty
/// Descriptor").
const EMPTY: (&str, &[u8]) = ("application/vnd.oci.empty.v1+json", b"{}");

/// What is pushed as a referrer.
pub struct Referrer<'a> {
    /// The manifest's `artifactType`.
    pub artifact_type: &'a str,
    /// The layer's media type.
    pub media_type: &'a str,
    /// The layer's bytes.
    pub content: &'a [u8],
    /// The manifest's annotations (and the referrers index entry's).
    pub annotations: BTreeMap<String, String>,
}

/// Where a referrer was pushed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attached {
    /// The referrer's manifest, `oci://host/repository@sha256:<hex>`, redacted.
    pub reference: String,
    /// The referrers tag written (`sha256-<hex>`) when the registry has no referrers API.
    pub fallback_tag: Option<String>,
}

/// What [`Registry::attach`] pushed: the referrer manifest's digest, and the referrers tag
/// written when the registry has no referrers API.
pub(in crate::source) struct Pushed {
    /// `sha256:<hex>` of the referrer's manifest.
    pub digest: String,
    /// `sha256-<hex of the subject>`, when written.
    pub fallback_tag: Option<String>,
}

impl Registry<'_> {
    /// Pushes `referrer` as a referrer of the manifest `subject` (`sha256:<hex>`) of
    /// `repository`.
    ///
    /// Errors: those of [`Registry::push_blob`] and [`Registry::manifest_held`];
    /// [`Error::Chart`] when the subject is not in the registry or the referrers index does
    /// not parse.
    pub async fn attach(&self, repository: &str, subject: &str, referrer: Referrer<'_>) -> Result<Pushed> {
        let refused = |message: String| Error::Chart { unit: self.unit.clone(), url: self.shown.clone(), message };
        let Some(held) = self.manifest_held(repository, subject, SUBJECT_TYPES).await? else {
            return Err(refused(format!("the manifest {subject} is not in the registry")));
        };
        let subject = serde_json::json!({"mediaType": held.media_type, "digest": subject, "size": held.bytes.len()});
        let config = self.push_blob(repository, EMPTY.1).await?;
        let layer = self.push_blob(repository, referrer.content).await?;
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": IMAGE_MANIFEST,
            "artifactType": referrer.artifact_type,
            "config": {"mediaType": EMPTY.0, "digest": config, "size": EMPTY.1.len()},
            "layers": [{"mediaType": referrer.media_type, "digest": layer, "size": referrer.content.len()}],
            "subject": subject,
            "annotations": referrer.annotations,
        });
        let bytes = serde_json::to_vec(&manifest).expect("a manifest serializes");
        let digest = format!("sha256:{}", hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes)));
        let entry = serde_json::json!({
            "mediaType": IMAGE_MANIFEST,
            "digest": digest,
            "size": bytes.len(),
            "artifactType": referrer.artifact_type,
            "annotations": referrer.annotations,
        });
        let pushed = self.push_manifest(repository, &digest, IMAGE_MANIFEST, bytes).await?;
        if pushed.subject {
            return Ok(Pushed { digest, fallback_tag: None });
        }
        let tag = fallback_tag(subject["digest"].as_str().unwrap_or_default());
        let held = self.manifest_held(repository, &tag, IMAGE_INDEX).await?;
        let index = with_entry(held.as_ref().map(|h| h.bytes.as_slice()), entry)
            .map_err(|e| refused(format!("the referrers index {tag} does not parse: {e}")))?;
        let index = serde_json::to_vec(&index).expect("an index serializes");
        self.push_manifest(repository, &tag, IMAGE_INDEX, index).await?;
        Ok(Pushed { digest, fallback_tag: Some(tag) })
    }
}

/// The referrers tag of `digest` (`sha256:<hex>` → `sha256-<hex>`, distribution spec's
/// "Referrers Tag Schema").
fn fallback_tag(digest: &str) -> String {
    digest.replacen(':', "-", 1)
}

/// The referrers index `held` (none: a new one) with `entry` added, unless an entry of its
/// digest is there; every other field and entry kept as it was.
///
/// Errors: `held` is not a JSON object, or its `manifests` not an array.
fn with_entry(held: Option<&[u8]>, entry: serde_json::Value) -> std::result::Result<serde_json::Value, String> {
    let mut index = match held {
        Some(bytes) => serde_json::from_slice(bytes).map_err(|e| e.to_string())?,
        None => serde_json::json!({"schemaVersion": 2, "mediaType": IMAGE_INDEX, "manifests": []}),
    };
    let Some(object) = index.as_object_mut() else { return Err("not a JSON object".into()) };
    let manifests = object.entry("manifests").or_insert_with(|| serde_json::json!([]));
    let Some(manifests) = manifests.as_array_mut() else { return Err("`manifests` is not an array".into()) };
    if !manifests.iter().any(|m| m.get("digest") == entry.get("digest")) {
        manifests.push(entry);
    }
    Ok(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_referrers_index_gains_the_entry_once_and_keeps_the_rest() {
        assert_eq!(fallback_tag("sha256:ab12"), "sha256-ab12");
        let entry = serde_json::json!({"digest": "sha256:aa", "artifactType": "t"});
        let new = with_entry(None, entry.clone()).unwrap();
        assert_eq!(new["mediaType"], IMAGE_INDEX);
        assert_eq!(new["manifests"].as_array().unwrap().len(), 1);
        let held = serde_json::json!({"schemaVersion": 2, "manifests": [{"digest": "sha256:bb"}], "x": 1});
        let held = serde_json::to_vec(&held).unwrap();
        let both = with_entry(Some(&held), entry.clone()).unwrap();
        assert_eq!((both["manifests"].as_array().unwrap().len(), both["x"].as_i64()), (2, Some(1)));
        let again = with_entry(Some(&serde_json::to_vec(&both).unwrap()), entry.clone()).unwrap();
        assert_eq!(again, both, "an entry of the same digest is not added twice");
        assert!(with_entry(Some(b"[]"), entry.clone()).is_err());
        assert!(with_entry(Some(br#"{"manifests": {}}"#), entry).is_err());
    }
}
