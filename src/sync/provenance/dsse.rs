//! DSSE envelopes (<https://github.com/secure-systems-lab/dsse/blob/master/protocol.md>) through
//! the `dsse` crate: the signature is over the pre-authentication encoding (PAE) of the payload
//! type and the payload, never the payload alone, so a payload signed as one type cannot be
//! passed off as another. The crate holds the envelope, the encoding and the checks (canonical
//! base64, signatures counted per key); gitward's keys ([`super::key`]) are its signer and
//! verifier. What is gitward's here is the type an attestation must have and the digest that
//! chains them.

use sha2::{Digest as _, Sha256};

use super::key::{SigningKey, VerifyingKey};

pub use ::dsse::{Envelope, Signature};

/// The payload type of an in-toto Statement in an envelope.
pub const PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";

/// Why an envelope does not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The payload type is not an in-toto Statement's.
    #[error("payloadType is {0:?}, not {PAYLOAD_TYPE:?}")]
    PayloadType(String),
    /// No signature verifies with the key.
    #[error("no signature verifies with the key")]
    Signature,
    /// The envelope is not one the `dsse` crate checks: its reason (a payload that is not
    /// canonical base64, no signatures, …).
    #[error("the envelope does not verify: {0}")]
    Envelope(String),
}

/// `payload` of `payload_type` signed with `key`, its key id ([`SigningKey::keyid`]) the
/// signature's `keyid`.
pub fn sign(payload_type: &str, payload: &[u8], key: &SigningKey) -> Envelope {
    ::dsse::sign(payload_type, payload, key).expect("gitward's signers do not fail")
}

/// `envelope` as one line of JSON (the `dsse` crate's member order: `payload`, `payloadType`,
/// `signatures`), as it is kept and hashed.
pub fn to_line(envelope: &Envelope) -> String {
    serde_json::to_string(envelope).expect("an envelope serializes")
}

/// The digest that chains attestations: sha256 hex of [`to_line`], the compact form in the
/// crate's member order (so a file pretty-printed by hand hashes the same).
pub fn digest(envelope: &Envelope) -> String {
    hex::encode(Sha256::digest(to_line(envelope).as_bytes()))
}

/// The payload of `envelope` once its type is an in-toto Statement's and a signature verifies
/// with `key` over the PAE (the `dsse` crate's `verify`, threshold 1).
///
/// Errors: [`Refused`], the first check that failed.
pub fn verify(envelope: &Envelope, key: &VerifyingKey) -> Result<Vec<u8>, Refused> {
    if envelope.payload_type != PAYLOAD_TYPE {
        return Err(Refused::PayloadType(envelope.payload_type.clone()));
    }
    match ::dsse::verify(envelope, &[key], 1) {
        Ok(verified) => Ok(verified.payload),
        Err(::dsse::Error::NoValidSignature { .. }) => Err(Refused::Signature),
        Err(e) => Err(Refused::Envelope(e.to_string())),
    }
}

impl ::dsse::Signer for SigningKey {
    fn sign(&self, message: &[u8]) -> ::dsse::Result<Vec<u8>> {
        Ok(SigningKey::sign(self, message))
    }

    fn key_id(&self) -> Option<String> {
        Some(self.keyid())
    }
}

impl ::dsse::Verifier for VerifyingKey {
    fn verify(&self, message: &[u8], signature: &[u8]) -> bool {
        VerifyingKey::verify(self, message, signature)
    }

    fn key_id(&self) -> Option<String> {
        Some(self.keyid())
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;

    use super::*;

    #[test]
    fn the_signature_is_over_the_spec_s_pae() {
        // The protocol's example: type "http://example.com/HelloWorld", body "hello world".
        let pae = b"DSSEv1 29 http://example.com/HelloWorld 11 hello world";
        assert_eq!(::dsse::pae("http://example.com/HelloWorld", b"hello world"), pae);
        let key = SigningKey::ed25519_from_seed(4);
        let envelope = sign("http://example.com/HelloWorld", b"hello world", &key);
        let sig = STANDARD.decode(&envelope.signatures[0].sig).unwrap();
        assert!(key.verifying().verify(pae, &sig), "the signature is over the PAE, not the payload");
        assert_eq!(envelope.signatures[0].keyid.as_deref(), Some(key.keyid().as_str()));
    }

    #[test]
    fn an_envelope_verifies_and_refuses_a_changed_byte_type_or_key() {
        for key in [SigningKey::p256_from_seed(1), SigningKey::ed25519_from_seed(1)] {
            let envelope = sign(PAYLOAD_TYPE, b"{\"a\":1}", &key);
            assert_eq!(verify(&envelope, &key.verifying()).unwrap(), b"{\"a\":1}");
            let mut changed = envelope.clone();
            changed.payload = STANDARD.encode(b"{\"a\":2}");
            assert!(matches!(verify(&changed, &key.verifying()), Err(Refused::Signature)));
            let mut retyped = envelope.clone();
            retyped.payload_type = "application/json".into();
            assert!(matches!(verify(&retyped, &key.verifying()), Err(Refused::PayloadType(_))));
            let other = SigningKey::ed25519_from_seed(2);
            assert!(matches!(verify(&envelope, &other.verifying()), Err(Refused::Signature)));
        }
    }

    #[test]
    fn the_digest_is_of_the_compact_line_whatever_the_file_s_layout() {
        let key = SigningKey::ed25519_from_seed(3);
        let envelope = sign(PAYLOAD_TYPE, b"{}", &key);
        let pretty = serde_json::to_string_pretty(&envelope).unwrap();
        let back: Envelope = serde_json::from_str(&pretty).unwrap();
        assert_eq!(digest(&back), digest(&envelope));
        assert_eq!(digest(&envelope), hex::encode(Sha256::digest(to_line(&envelope).as_bytes())));
    }
}
