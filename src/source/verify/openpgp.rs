//! OpenPGP signatures (RFC 9580 detached signatures, as `gpg` makes for `git commit -S`)
//! checked against a file of ASCII-armored public keys, with the `pgp` crate.
//!
//! A key counts only when its self-signatures and subkey bindings verify; a key with a
//! (verified) revocation signature signs nothing. The signing key is found by the signature's
//! issuer fingerprint or key ID, among primary keys and subkeys. Key expiry is not checked.

use std::path::Path;

use pgp::composed::{Deserializable, DetachedSignature, SignedPublicKey};
use pgp::types::KeyDetails;

use super::{Refusal, Signer, SignerKind, VerifyFailure, read_key_file};

/// The first line of an OpenPGP signature.
pub(super) const ARMOR: &str = "-----BEGIN PGP SIGNATURE-----";

/// The first line of an armored public key block.
const KEY_ARMOR: &str = "-----BEGIN PGP PUBLIC KEY BLOCK-----";

/// Verifies `signature` (armored) over `payload` against the keys of `file`; the signer's
/// fingerprint and first user ID when it verifies.
pub(super) fn verify(file: &Path, signature: &str, payload: &[u8]) -> Result<Signer, Refusal> {
    let keys = keyring(&read_key_file(file, "openpgp_keys_file")?)
        .map_err(|m| Refusal::new(VerifyFailure::KeyFile, format!("cannot be checked: {}: {m}", file.display())))?;
    let (signature, _) = DetachedSignature::from_string(signature).map_err(|e| {
        Refusal::new(VerifyFailure::BadSignature, format!("has an OpenPGP signature that cannot be read: {e}"))
    })?;
    let fingerprints = signature.signature.issuer_fingerprint();
    let key_ids = signature.signature.issuer_key_id();
    let issuer = fingerprints
        .first()
        .map(|f| format!("{f:X}"))
        .or_else(|| key_ids.first().map(|id| hex::encode_upper(id.as_ref())))
        .unwrap_or_else(|| "an unnamed key".to_owned());
    let issued = |key: &dyn KeyDetails| {
        fingerprints.iter().any(|f| **f == key.fingerprint()) || key_ids.iter().any(|id| **id == key.legacy_key_id())
    };
    for key in &keys {
        let signer = format!("{:X} ({})", key.primary_key.fingerprint(), user_id(key));
        let refused = |reason: String| Refusal::new(VerifyFailure::BadSignature, reason).by(signer.clone());
        let result = if issued(&key.primary_key) {
            signature.verify(&key.primary_key, payload)
        } else if let Some(subkey) = key.public_subkeys.iter().find(|s| issued(&s.key)) {
            signature.verify(&subkey.key, payload)
        } else {
            continue;
        };
        if !key.details.revocation_signatures.is_empty() {
            return Err(refused(format!("is signed by OpenPGP key {signer}, which is revoked")));
        }
        return match result {
            Ok(()) => Ok(Signer {
                kind: SignerKind::OpenPgp,
                identity: key.details.users.first().map(|u| String::from_utf8_lossy(u.id.id()).into_owned()),
                fingerprint: format!("{:X}", key.primary_key.fingerprint()),
            }),
            Err(e) => Err(refused(format!("has an OpenPGP signature by {signer} that does not verify: {e}"))),
        };
    }
    let reason = format!("is signed by OpenPGP key {issuer}, which is not in {}", file.display());
    Err(Refusal::new(VerifyFailure::UnknownKey, reason).by(issuer))
}

/// Every key of every armored block of the file, each with verified bindings.
fn keyring(text: &str) -> Result<Vec<SignedPublicKey>, String> {
    let blocks: Vec<&str> = text.split(KEY_ARMOR).skip(1).collect();
    if blocks.is_empty() {
        return Err(format!("no `{KEY_ARMOR}`: export the keys with `gpg --armor --export KEYID`"));
    }
    let mut keys = Vec::new();
    for (index, block) in blocks.iter().enumerate() {
        let armored = format!("{KEY_ARMOR}{block}");
        let (parsed, _) = SignedPublicKey::from_string_many(&armored)
            .map_err(|e| format!("key block {}: cannot be read: {e}", index + 1))?;
        for key in parsed {
            let key = key.map_err(|e| format!("key block {}: cannot be read: {e}", index + 1))?;
            key.verify_bindings().map_err(|e| {
                format!("key {:X}: its self-signatures do not verify: {e}", key.primary_key.fingerprint())
            })?;
            keys.push(key);
        }
    }
    Ok(keys)
}

/// The key's first user ID, lossily as UTF-8; `no user ID` when it has none.
fn user_id(key: &SignedPublicKey) -> String {
    key.details
        .users
        .first()
        .map_or_else(|| "no user ID".to_owned(), |u| String::from_utf8_lossy(u.id.id()).into_owned())
}
