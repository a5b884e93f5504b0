//! DSSE envelopes (<https://github.com/secure-systems-lab/dsse/blob/master/protocol.md>,
//! envelope format in `envelope.md` beside it): the signature is over the pre-authentication
//! encoding of the payload type and the payload, never the payload alone, so a payload signed
//! as one type cannot be passed off as another. Ten lines of spec; no crate needed.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::key::{SigningKey, VerifyingKey};

/// The payload type of an in-toto Statement in an envelope.
pub const PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";

/// DSSE's pre-authentication encoding: `"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`,
/// lengths as ASCII decimal of the byte counts.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!("DSSEv1 {} {payload_type} {} ", payload_type.len(), payload.len()).into_bytes();
    out.extend_from_slice(payload);
    out
}

/// One signature of an envelope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Signature {
    /// Which key signed (may be empty: the verifier is given its key).
    #[serde(default)]
    pub keyid: String,
    /// The signature over [`pae`], base64.
    pub sig: String,
}

/// A DSSE envelope as JSON: the payload base64, its type, the signatures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Envelope {
    /// The payload's type ([`PAYLOAD_TYPE`]).
    pub payload_type: String,
    /// The payload, base64 (standard alphabet, padded).
    pub payload: String,
    /// Its signatures.
    pub signatures: Vec<Signature>,
}

/// Why an envelope does not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The payload type is not an in-toto Statement's.
    #[error("payloadType is {0:?}, not {PAYLOAD_TYPE:?}")]
    PayloadType(String),
    /// The payload is not base64.
    #[error("payload is not base64")]
    Payload,
    /// No signature verifies with the key.
    #[error("no signature verifies with the key")]
    Signature,
}

impl Envelope {
    /// `payload` of `payload_type` signed with `key`.
    pub fn sign(payload_type: &str, payload: &[u8], key: &SigningKey) -> Self {
        let sig = STANDARD.encode(key.sign(&pae(payload_type, payload)));
        Self {
            payload_type: payload_type.to_owned(),
            payload: STANDARD.encode(payload),
            signatures: vec![Signature { keyid: key.keyid(), sig }],
        }
    }

    /// The envelope as one line of JSON, as it is kept and hashed.
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("an envelope serializes")
    }

    /// The digest that chains attestations: sha256 hex of [`Envelope::to_line`], the compact
    /// form in this field order (so a file pretty-printed by hand hashes the same).
    pub fn digest(&self) -> String {
        hex::encode(Sha256::digest(self.to_line().as_bytes()))
    }

    /// The payload once its type is an in-toto Statement's and a signature verifies with `key`.
    ///
    /// Errors: [`Refused`], the first check that failed.
    pub fn verify(&self, key: &VerifyingKey) -> Result<Vec<u8>, Refused> {
        if self.payload_type != PAYLOAD_TYPE {
            return Err(Refused::PayloadType(self.payload_type.clone()));
        }
        let payload = STANDARD.decode(&self.payload).map_err(|_| Refused::Payload)?;
        let message = pae(&self.payload_type, &payload);
        let signed =
            self.signatures.iter().any(|s| STANDARD.decode(&s.sig).is_ok_and(|sig| key.verify(&message, &sig)));
        if signed { Ok(payload) } else { Err(Refused::Signature) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pae_is_the_spec_s_encoding() {
        // The example of the protocol's test vectors: type "http://example.com/HelloWorld".
        let got = pae("http://example.com/HelloWorld", b"hello world");
        assert_eq!(got, b"DSSEv1 29 http://example.com/HelloWorld 11 hello world");
        assert_eq!(pae("", b""), b"DSSEv1 0  0 ");
        // Lengths count bytes, not characters.
        assert_eq!(pae("t", "é".as_bytes()), "DSSEv1 1 t 2 é".as_bytes());
    }

    #[test]
    fn an_envelope_verifies_and_refuses_a_changed_byte_type_or_key() {
        for key in [SigningKey::p256_from_seed(1), SigningKey::ed25519_from_seed(1)] {
            let envelope = Envelope::sign(PAYLOAD_TYPE, b"{\"a\":1}", &key);
            assert_eq!(envelope.verify(&key.verifying()).unwrap(), b"{\"a\":1}");
            let mut changed = envelope.clone();
            changed.payload = STANDARD.encode(b"{\"a\":2}");
            assert_eq!(changed.verify(&key.verifying()), Err(Refused::Signature));
            let mut retyped = envelope.clone();
            retyped.payload_type = "application/json".into();
            assert!(matches!(retyped.verify(&key.verifying()), Err(Refused::PayloadType(_))));
            let other = SigningKey::ed25519_from_seed(2);
            assert_eq!(envelope.verify(&other.verifying()), Err(Refused::Signature));
        }
    }

    #[test]
    fn the_digest_is_of_the_compact_line_whatever_the_file_s_layout() {
        let key = SigningKey::ed25519_from_seed(3);
        let envelope = Envelope::sign(PAYLOAD_TYPE, b"{}", &key);
        let pretty = serde_json::to_string_pretty(&envelope).unwrap();
        let back: Envelope = serde_json::from_str(&pretty).unwrap();
        assert_eq!(back.digest(), envelope.digest());
        assert_eq!(envelope.digest(), hex::encode(Sha256::digest(envelope.to_line().as_bytes())));
    }
}
