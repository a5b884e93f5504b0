//! Cosign signatures of OCI manifests (an artifact unit's, an OCI chart's), checked against
//! one ECDSA P-256 public key, as `cosign verify --key` checks them with key-based signing
//! and no transparency log.
//!
//! Where cosign stores a signature (sigstore/cosign `specs/SIGNATURE_SPEC.md`): the tag
//! `sha256-<hex>.sig` of the signed manifest's repository names an OCI image manifest whose
//! layers (media type `application/vnd.dev.cosign.simplesigning.v1+json`) are simple-signing
//! payloads, one per signature, each carrying its base64 signature in the annotation
//! `dev.cosignproject.cosign/signature`. A payload is the JSON
//! `{"critical": {"identity": {…}, "image": {"docker-manifest-digest": "sha256:…"}, "type":
//! "cosign container image signature"}, "optional": …}`; the signature is an ASN.1 DER ECDSA
//! signature over the payload's bytes with SHA-256. A manifest is signed when one of its
//! payloads verifies with the key *and* names its digest: a valid signature of another digest
//! does not count (re-pushing a tag after signing leaves the signature on the old digest).
//! `critical.identity` is not compared, as cosign does not by default: a signature holds
//! wherever the manifest is copied to.

use std::path::Path;

use base64::Engine as _;
use p256::ecdsa::signature::Verifier as _;
use p256::pkcs8::{DecodePublicKey as _, EncodePublicKey as _};
use sha2::Digest as _;

use super::{Refusal, Signer, SignerKind, VerifyFailure};
use crate::source::chart::registry::{Descriptor, Registry};
use crate::source::{Error, Revision};

/// The media type of a simple-signing payload layer.
pub const PAYLOAD_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";

/// The layer annotation holding a payload's base64 signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";

/// `critical.type` of a cosign payload.
const PAYLOAD_TYPE: &str = "cosign container image signature";

/// The largest payload read: 64 KiB. A payload is a few hundred bytes, plus the annotations
/// `cosign sign -a` adds; a larger layer is not read.
const MAX_PAYLOAD_BYTES: u64 = 64 << 10;

/// The most signature layers tried: 32 signings of one manifest.
const MAX_SIGNATURES: usize = 32;

/// The signed manifest: where it is and how to reach its registry.
pub(in crate::source) struct Signed<'a> {
    /// The registry the manifest was read from (its allow-list, caps and token are reused).
    pub registry: &'a Registry<'a>,
    /// The repository path in the registry.
    pub repository: &'a str,
    /// The manifest's digest, `sha256:<hex>`, as computed from the bytes read.
    pub digest: &'a str,
}

/// Why a check did not succeed: the signature is refused, or the registry could not be asked.
pub(in crate::source) enum Failure {
    /// The manifest is not signed by the key (see [`Refusal`]).
    Refused(Refusal),
    /// Reading the signature failed for another reason than its absence (network, server,
    /// credentials): worth retrying.
    Registry(Error),
}

impl Failure {
    /// The source error: [`Error::Unverified`] of `unit`'s `revision` for a refusal, else
    /// the registry's error.
    pub(in crate::source) fn into_error(self, unit: &str, revision: &Revision) -> Error {
        match self {
            Failure::Refused(refusal) => Error::Unverified {
                unit: unit.to_owned(),
                revision: revision.clone(),
                failure: refusal.failure,
                reason: refusal.reason,
                signer: refusal.signer,
            },
            Failure::Registry(error) => error,
        }
    }
}

impl From<Refusal> for Failure {
    fn from(refusal: Refusal) -> Self {
        Failure::Refused(refusal)
    }
}

/// Checks that `signed`'s manifest carries a cosign signature by the public key in
/// `key_file` (PEM `PUBLIC KEY`, ECDSA P-256, as `cosign generate-key-pair` writes
/// `cosign.pub`), read at each call. Returns the signer: the key's file and its fingerprint,
/// `sha256:<hex of the key's DER>`.
///
/// Errors: [`Failure::Refused`] — the key file cannot be read or is not a P-256 public key
/// ([`VerifyFailure::KeyFile`]); no signature tag, or one without a payload
/// ([`VerifyFailure::Unsigned`]); signatures, none by the key ([`VerifyFailure::UnknownKey`]);
/// a signature by the key of another digest, or a payload that does not parse
/// ([`VerifyFailure::BadSignature`]). [`Failure::Registry`] when the registry cannot be read.
pub(in crate::source) async fn verify(key_file: &Path, signed: &Signed<'_>) -> Result<Signer, Failure> {
    let key = public_key(key_file)?;
    let digest = signed.digest;
    let Some(hex) = digest.strip_prefix("sha256:") else {
        let reason = format!("manifest {digest}: only sha256 digests are signed by cosign");
        return Err(Refusal::new(VerifyFailure::BadSignature, reason).into());
    };
    let tag = format!("sha256-{hex}.sig");
    let unsigned = |why: &str| {
        let reason = format!(
            "manifest {digest} is not signed: {why} ([sync.verify] requires a cosign signature by the key in {})",
            key_file.display()
        );
        Failure::Refused(Refusal::new(VerifyFailure::Unsigned, reason))
    };
    let manifest = match signed.registry.manifest_if_any(signed.repository, &tag).await {
        Ok(Some((manifest, _))) => manifest,
        Ok(None) => return Err(unsigned(&format!("no signature tag {tag}"))),
        Err(Error::Chart { message, .. }) => {
            let reason = format!("manifest {digest}: its signature tag {tag} does not parse: {message}");
            return Err(Refusal::new(VerifyFailure::BadSignature, reason).into());
        }
        Err(error) => return Err(Failure::Registry(error)),
    };
    let layers: Vec<&Descriptor> =
        manifest.layers.iter().filter(|l| l.media_type == PAYLOAD_MEDIA_TYPE).take(MAX_SIGNATURES).collect();
    let mut tally = Tally::default();
    for layer in layers {
        let Some(signature) = layer.annotations.as_ref().and_then(|a| a.get(SIGNATURE_ANNOTATION)) else { continue };
        let Some(payload) = payload(signed, layer).await.map_err(Failure::Registry)? else {
            tally.unreadable += 1;
            continue;
        };
        if !signature_verifies(&key, signature, &payload) {
            tally.foreign += 1;
            continue;
        }
        match signed_digest(&payload) {
            Some(named) if named == digest => return Ok(signer(key_file, &key)),
            Some(named) => tally.other_digest = Some(named),
            None => tally.unreadable += 1,
        }
    }
    Err(tally
        .refusal(digest, &tag, key_file)
        .map_or_else(|| unsigned(&format!("{tag} holds no signed payload")), Failure::from))
}

/// What the signature layers of a tag held, when none signed the manifest by the key.
#[derive(Default)]
struct Tally {
    /// Signatures that do not verify with the key (another key's, or altered).
    foreign: usize,
    /// Payloads over the size cap or that do not parse.
    unreadable: usize,
    /// The digest a verified payload names instead of the manifest's.
    other_digest: Option<String>,
}

impl Tally {
    fn refusal(&self, digest: &str, tag: &str, key_file: &Path) -> Option<Refusal> {
        let key = key_file.display();
        if let Some(other) = &self.other_digest {
            let reason = format!("manifest {digest}: the signature by the key in {key} in {tag} signs {other}, not it");
            return Some(Refusal::new(VerifyFailure::BadSignature, reason));
        }
        if self.foreign > 0 {
            let reason = format!(
                "manifest {digest}: {tag} holds {} cosign signature(s), none by the key in {key} (another key's, or \
                 altered after signing)",
                self.foreign
            );
            return Some(Refusal::new(VerifyFailure::UnknownKey, reason));
        }
        (self.unreadable > 0).then(|| {
            let reason = format!("manifest {digest}: the payloads of {tag} are over 64 KiB or do not parse");
            Refusal::new(VerifyFailure::BadSignature, reason)
        })
    }
}

/// The public key of `path`.
fn public_key(path: &Path) -> Result<p256::PublicKey, Refusal> {
    let text = super::read_key_file(path, "cosign_public_key_file")?;
    p256::PublicKey::from_public_key_pem(text.trim()).map_err(|e| {
        let reason = format!(
            "cannot be checked: cosign_public_key_file {} is not an ECDSA P-256 public key in PEM (as cosign \
             generate-key-pair writes cosign.pub): {e}",
            path.display()
        );
        Refusal::new(VerifyFailure::KeyFile, reason)
    })
}

/// The key of `path`, its fingerprint `sha256:<hex>` of its SubjectPublicKeyInfo DER.
fn signer(path: &Path, key: &p256::PublicKey) -> Signer {
    let der = key.to_public_key_der().map(|d| hex::encode(sha2::Sha256::digest(d.as_bytes()))).unwrap_or_default();
    Signer {
        kind: SignerKind::Cosign,
        identity: Some(path.display().to_string()),
        fingerprint: format!("sha256:{der}"),
    }
}

/// Whether `signature` (base64 of an ASN.1 DER ECDSA signature) is `key`'s over `payload`.
fn signature_verifies(key: &p256::PublicKey, signature: &str, payload: &[u8]) -> bool {
    let Ok(der) = base64::engine::general_purpose::STANDARD.decode(signature.trim()) else { return false };
    let Ok(signature) = p256::ecdsa::Signature::from_der(&der) else { return false };
    p256::ecdsa::VerifyingKey::from(key).verify(payload, &signature).is_ok()
}

/// The `critical.image.docker-manifest-digest` of a cosign payload whose `critical.type` is
/// cosign's; `None` when it is not such a payload.
fn signed_digest(payload: &[u8]) -> Option<String> {
    let payload: serde_json::Value = serde_json::from_slice(payload).ok()?;
    let critical = payload.get("critical")?;
    (critical.get("type")?.as_str()? == PAYLOAD_TYPE).then_some(())?;
    Some(critical.get("image")?.get("docker-manifest-digest")?.as_str()?.to_owned())
}

/// A payload layer's bytes, read up to [`MAX_PAYLOAD_BYTES`] and checked against the layer's
/// digest; `None` when it is larger or its bytes do not match.
///
/// Errors: the registry's, when the blob cannot be read.
async fn payload(signed: &Signed<'_>, layer: &Descriptor) -> Result<Option<Vec<u8>>, Error> {
    match signed.registry.blob(signed.repository, layer, MAX_PAYLOAD_BYTES).await {
        Ok(bytes) => Ok(Some(bytes)),
        Err(Error::FileTooLarge { .. } | Error::Chart { .. }) => Ok(None),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use p256::ecdsa::signature::Signer as _;

    use super::*;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn payload_of(digest: &str) -> Vec<u8> {
        format!(
            r#"{{"critical":{{"identity":{{"docker-reference":"127.0.0.1:5000/a"}},"image":{{"docker-manifest-digest":"{digest}"}},"type":"{PAYLOAD_TYPE}"}},"optional":null}}"#
        )
        .into_bytes()
    }

    fn sign(key: &p256::ecdsa::SigningKey, payload: &[u8]) -> String {
        let signature: p256::ecdsa::Signature = key.sign(payload);
        base64::engine::general_purpose::STANDARD.encode(signature.to_der().as_bytes())
    }

    #[test]
    fn a_payload_verifies_with_its_key_only_and_names_its_digest() {
        let key = p256::ecdsa::SigningKey::from_slice(&[7u8; 32]).unwrap();
        let other = p256::ecdsa::SigningKey::from_slice(&[9u8; 32]).unwrap();
        let public = p256::PublicKey::from(key.verifying_key());
        let payload = payload_of(DIGEST);
        assert!(signature_verifies(&public, &sign(&key, &payload), &payload));
        assert!(!signature_verifies(&public, &sign(&other, &payload), &payload), "another key");
        let mut altered = payload.clone();
        altered[10] ^= 1;
        assert!(!signature_verifies(&public, &sign(&key, &payload), &altered), "altered payload");
        assert!(!signature_verifies(&public, "not base64!", &payload));
        assert_eq!(signed_digest(&payload).as_deref(), Some(DIGEST));
        assert_eq!(signed_digest(br#"{"critical":{"type":"x","image":{"docker-manifest-digest":"a"}}}"#), None);
        assert_eq!(signed_digest(b"not json"), None);
    }

    #[test]
    fn the_key_file_must_be_a_p256_pem_public_key() {
        let dir = tempfile::tempdir().unwrap();
        let key = p256::ecdsa::SigningKey::from_slice(&[7u8; 32]).unwrap();
        let pem = p256::PublicKey::from(key.verifying_key()).to_public_key_pem(Default::default()).unwrap();
        let good = dir.path().join("cosign.pub");
        std::fs::write(&good, pem).unwrap();
        let public = public_key(&good).map_err(|r| r.reason).unwrap();
        let signer = signer(&good, &public);
        assert!(signer.to_string().starts_with(&format!("cosign key {} (sha256:", good.display())), "{signer}");
        let der = public.to_public_key_der().unwrap();
        assert_eq!(signer.fingerprint, format!("sha256:{}", hex::encode(sha2::Sha256::digest(der.as_bytes()))));
        assert_eq!(signer.identity, Some(good.display().to_string()));
        let bad = dir.path().join("bad.pub");
        std::fs::write(&bad, "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n").unwrap();
        let refusal = public_key(&bad).err().unwrap();
        assert_eq!(refusal.failure, VerifyFailure::KeyFile);
        assert!(refusal.reason.contains("bad.pub is not an ECDSA P-256 public key"), "{}", refusal.reason);
        let missing = public_key(&dir.path().join("missing.pub")).err().unwrap();
        assert_eq!(missing.failure, VerifyFailure::KeyFile);
    }

    #[test]
    fn a_signature_of_another_digest_is_named_before_foreign_ones() {
        let tally = Tally { foreign: 2, unreadable: 0, other_digest: Some("sha256:old".into()) };
        let refusal = tally.refusal(DIGEST, "sha256-x.sig", Path::new("k.pub")).unwrap();
        assert_eq!(refusal.failure, VerifyFailure::BadSignature);
        assert!(refusal.reason.contains("signs sha256:old, not it"), "{}", refusal.reason);
        let foreign = Tally { foreign: 1, ..Tally::default() }.refusal(DIGEST, "t", Path::new("k.pub")).unwrap();
        assert_eq!(foreign.failure, VerifyFailure::UnknownKey);
        assert!(Tally::default().refusal(DIGEST, "t", Path::new("k.pub")).is_none());
    }
}
