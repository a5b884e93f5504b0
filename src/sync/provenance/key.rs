//! The keys of `[provenance] key_file`: an ECDSA P-256 key (signatures ASN.1 DER over SHA-256,
//! as cosign makes and checks them) or an Ed25519 key, each read from an unencrypted PKCS#8
//! PEM file; their public halves as SubjectPublicKeyInfo PEM, what `cosign
//! verify-blob-attestation --key` and `gitward attest verify --key` read.

use ed25519_dalek::pkcs8::{DecodePrivateKey as _, DecodePublicKey as _, EncodePublicKey as _};
use p256::ecdsa::signature::{Signer as _, Verifier as _};
use sha2::{Digest as _, Sha256};

/// A key that signs attestations.
#[derive(Clone)]
pub enum SigningKey {
    /// ECDSA over P-256 with SHA-256.
    P256(p256::ecdsa::SigningKey),
    /// Ed25519.
    Ed25519(ed25519_dalek::SigningKey),
}

/// A key that checks them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyingKey {
    /// ECDSA over P-256 with SHA-256.
    P256(p256::ecdsa::VerifyingKey),
    /// Ed25519.
    Ed25519(ed25519_dalek::VerifyingKey),
}

/// A key file that cannot be read as either kind.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct KeyError(String);

impl SigningKey {
    /// The private key of a PKCS#8 PEM text (`-----BEGIN PRIVATE KEY-----`), P-256 or Ed25519.
    ///
    /// Errors: an encrypted key (cosign's own format among them) or another algorithm.
    pub fn from_pem(pem: &str) -> Result<Self, KeyError> {
        if pem.contains("ENCRYPTED") {
            return Err(KeyError(
                "an encrypted private key: give an unencrypted PKCS#8 PEM (`openssl pkcs8 -topk8 -nocrypt`)".into(),
            ));
        }
        if let Ok(key) = p256::ecdsa::SigningKey::from_pkcs8_pem(pem) {
            return Ok(Self::P256(key));
        }
        ed25519_dalek::SigningKey::from_pkcs8_pem(pem)
            .map(Self::Ed25519)
            .map_err(|_| KeyError("not a PKCS#8 PEM private key of ECDSA P-256 or Ed25519".into()))
    }

    /// Reads [`SigningKey::from_pem`] from `path`.
    ///
    /// Errors: the file cannot be read, or as [`SigningKey::from_pem`]; both name the file.
    pub fn read(path: &std::path::Path) -> Result<Self, KeyError> {
        let text = std::fs::read_to_string(path).map_err(|e| KeyError(format!("{}: {e}", path.display())))?;
        Self::from_pem(&text).map_err(|e| KeyError(format!("{}: {e}", path.display())))
    }

    /// A P-256 key made of `seed` repeated (tests).
    pub fn p256_from_seed(seed: u8) -> Self {
        Self::P256(p256::ecdsa::SigningKey::from_bytes(&[seed.max(1); 32].into()).expect("a valid scalar"))
    }

    /// An Ed25519 key made of `seed` repeated (tests).
    pub fn ed25519_from_seed(seed: u8) -> Self {
        Self::Ed25519(ed25519_dalek::SigningKey::from_bytes(&[seed; 32]))
    }

    /// The key as unencrypted PKCS#8 PEM, what [`SigningKey::from_pem`] reads.
    pub fn to_pem(&self) -> String {
        use ed25519_dalek::pkcs8::EncodePrivateKey as _;
        let line = p256::pkcs8::LineEnding::LF;
        let pem = match self {
            Self::P256(key) => key.to_pkcs8_pem(line),
            Self::Ed25519(key) => key.to_pkcs8_pem(line),
        };
        pem.expect("a private key encodes").to_string()
    }

    /// The signature of `message`: ASN.1 DER for P-256, the 64 bytes for Ed25519.
    pub fn sign(&self, message: &[u8]) -> Vec<u8> {
        match self {
            Self::P256(key) => {
                let signature: p256::ecdsa::Signature = key.sign(message);
                signature.to_der().as_bytes().to_vec()
            }
            Self::Ed25519(key) => key.sign(message).to_bytes().to_vec(),
        }
    }

    /// Its public half.
    pub fn verifying(&self) -> VerifyingKey {
        match self {
            Self::P256(key) => VerifyingKey::P256(*key.verifying_key()),
            Self::Ed25519(key) => VerifyingKey::Ed25519(key.verifying_key()),
        }
    }

    /// The key id written in each signature: sha256 hex of the public key's DER
    /// SubjectPublicKeyInfo.
    pub fn keyid(&self) -> String {
        self.verifying().keyid()
    }
}

impl VerifyingKey {
    /// The public key of a SubjectPublicKeyInfo PEM text (`-----BEGIN PUBLIC KEY-----`),
    /// P-256 or Ed25519.
    ///
    /// Errors: another algorithm, or not such a PEM.
    pub fn from_pem(pem: &str) -> Result<Self, KeyError> {
        if let Ok(key) = p256::ecdsa::VerifyingKey::from_public_key_pem(pem) {
            return Ok(Self::P256(key));
        }
        ed25519_dalek::VerifyingKey::from_public_key_pem(pem)
            .map(Self::Ed25519)
            .map_err(|_| KeyError("not a PEM public key of ECDSA P-256 or Ed25519".into()))
    }

    /// The key as SubjectPublicKeyInfo PEM.
    pub fn to_pem(&self) -> String {
        let line = p256::pkcs8::LineEnding::LF;
        match self {
            Self::P256(key) => key.to_public_key_pem(line),
            Self::Ed25519(key) => key.to_public_key_pem(line),
        }
        .expect("a public key encodes")
    }

    /// sha256 hex of the key's DER SubjectPublicKeyInfo.
    pub fn keyid(&self) -> String {
        let der = match self {
            Self::P256(key) => key.to_public_key_der(),
            Self::Ed25519(key) => key.to_public_key_der(),
        };
        hex::encode(Sha256::digest(der.expect("a public key encodes").as_bytes()))
    }

    /// Whether `signature` is this key's over `message`.
    pub fn verify(&self, message: &[u8], signature: &[u8]) -> bool {
        match self {
            Self::P256(key) => {
                p256::ecdsa::Signature::from_der(signature).is_ok_and(|sig| key.verify(message, &sig).is_ok())
            }
            Self::Ed25519(key) => ed25519_dalek::Signature::from_slice(signature)
                .is_ok_and(|sig| key.verify_strict(message, &sig).is_ok()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_keys_round_trip_through_pem_and_keep_their_id() {
        for key in [SigningKey::p256_from_seed(7), SigningKey::ed25519_from_seed(7)] {
            let public = key.verifying();
            let back = VerifyingKey::from_pem(&public.to_pem()).unwrap();
            assert_eq!(SigningKey::from_pem(&key.to_pem()).unwrap().verifying(), public);
            assert_eq!(back, public);
            assert_eq!(back.keyid(), key.keyid());
            assert!(public.verify(b"m", &key.sign(b"m")));
            assert!(!public.verify(b"n", &key.sign(b"m")));
        }
    }

    #[test]
    fn an_encrypted_key_is_refused_with_what_to_give_instead() {
        let pem = "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nabc\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n";
        let error = SigningKey::from_pem(pem).err().unwrap().to_string();
        assert!(error.contains("unencrypted PKCS#8"), "{error}");
    }
}
