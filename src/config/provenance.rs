//! `[provenance]`: the key that signs each sync's attestation — a file, or a Secret in the
//! cluster —, how many a unit's ConfigMap keeps, and whether an OCI artifact unit's are pushed
//! to its registry as referrers (the sync module's `provenance` makes, keeps and verifies them).

use std::path::PathBuf;

use super::Result;
use super::raw::RawProvenance;
use super::resolve::Resolver;
use super::resolve::rules::{dns_label, dns_subdomain};

/// `[provenance]` resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provenance {
    /// Where the PKCS#8 PEM private key (ECDSA P-256 or Ed25519) that signs each attestation
    /// is; read when a unit's engine starts.
    pub key: ProvenanceKey,
    /// How many of a unit's last attestations its ConfigMap keeps; at least 1. Default
    /// [`Provenance::DEFAULT_KEEP`].
    pub keep: usize,
    /// Whether the attestations of an OCI artifact unit, or of a chart unit whose chart is in
    /// an OCI registry, are also pushed to that registry as referrers of the manifest
    /// applied. Default false.
    pub oci_referrers: bool,
}

/// Where `[provenance]`'s signing key is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProvenanceKey {
    /// `key_file`, anchored at the config file's directory.
    File(PathBuf),
    /// `key_secret`: the Secret `namespace/name` of the unit's cluster, its data key
    /// [`ProvenanceKey::SECRET_KEY`].
    Secret {
        /// The Secret's namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

impl ProvenanceKey {
    /// The data key of a `key_secret` Secret that holds the PEM.
    pub const SECRET_KEY: &'static str = "key.pem";
}

impl std::fmt::Display for ProvenanceKey {
    /// `key_file <path>` or `key_secret Secret/<namespace>/<name>`, as errors name it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProvenanceKey::File(path) => write!(f, "key_file {}", path.display()),
            ProvenanceKey::Secret { namespace, name } => write!(f, "key_secret Secret/{namespace}/{name}"),
        }
    }
}

impl Provenance {
    /// How many attestations a unit's ConfigMap keeps by default: the last 20 syncs that
    /// changed something, about 60 KiB of a small unit's envelopes, far below a ConfigMap's
    /// 1 MiB.
    pub const DEFAULT_KEEP: usize = 20;
}

impl Resolver<'_> {
    /// `[provenance]` resolved: exactly one of `key_file` (anchored) and `key_secret`
    /// (`namespace/name`), `keep` at least 1.
    pub(super) fn provenance(&self, raw: RawProvenance) -> Result<Provenance> {
        let key = match (raw.key_file, raw.key_secret) {
            (Some(file), None) => ProvenanceKey::File(self.file(file, "provenance.key_file")?),
            (None, Some(secret)) => {
                let secret = self.check(secret, "provenance.key_secret", secret_name)?;
                let (namespace, name) = secret.split_once('/').expect("checked: namespace/name");
                ProvenanceKey::Secret { namespace: namespace.to_owned(), name: name.to_owned() }
            }
            (Some(_), Some(secret)) => {
                let message = "set key_file or key_secret, not both";
                return Err(self.invalid(Some(secret.span()), "provenance.key_secret", message));
            }
            (None, None) => {
                let message = "needs the signing key: key_file = \"<path>\" or key_secret = \"<namespace>/<name>\"";
                return Err(self.invalid(None, "provenance", message));
            }
        };
        let keep = match raw.keep {
            Some(keep) if *keep.get_ref() == 0 => {
                return Err(self.invalid(Some(keep.span()), "provenance.keep", "must be at least 1"));
            }
            Some(keep) => keep.into_inner() as usize,
            None => Provenance::DEFAULT_KEEP,
        };
        Ok(Provenance { key, keep, oci_referrers: raw.oci_referrers.unwrap_or(false) })
    }
}

/// `namespace/name` of a Secret: an RFC 1123 label and an object name.
fn secret_name(value: &str) -> std::result::Result<(), String> {
    let Some((namespace, name)) = value.split_once('/') else {
        return Err(format!("`{value}` is not `namespace/name` of a Secret"));
    };
    dns_label(namespace)?;
    dns_subdomain(name)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{Provenance, ProvenanceKey};
    use crate::config::tests::{MINIMAL, parse};

    #[test]
    fn every_unit_carries_the_table_its_key_anchored_and_keep_at_least_one() {
        assert_eq!(parse(MINIMAL).unwrap().units[0].provenance, None);
        let config = parse(&format!("[provenance]\nkey_file = \"keys/p.pem\"\n\n{MINIMAL}")).unwrap();
        let want = Provenance {
            key: ProvenanceKey::File(Path::new("/etc/gitward/keys/p.pem").into()),
            keep: 20,
            oci_referrers: false,
        };
        assert_eq!(config.provenance.as_ref(), Some(&want));
        assert_eq!(config.units[0].provenance.as_ref(), Some(&want));
        let zero = parse(&format!("[provenance]\nkey_file = \"p.pem\"\nkeep = 0\n\n{MINIMAL}")).unwrap_err();
        assert!(zero.to_string().contains("provenance.keep: must be at least 1"), "{zero}");
        let on = parse(&format!("[provenance]\nkey_file = \"p.pem\"\noci_referrers = true\n\n{MINIMAL}")).unwrap();
        assert!(on.units[0].provenance.as_ref().is_some_and(|p| p.oci_referrers));
        let none = parse(&format!("[provenance]\nkeep = 3\n\n{MINIMAL}")).unwrap_err().to_string();
        assert!(none.contains("provenance: needs the signing key: key_file"), "{none}");
    }

    #[test]
    fn the_key_may_be_a_secret_named_namespace_slash_name_but_not_beside_a_file() {
        let config = parse(&format!("[provenance]\nkey_secret = \"gitward/provenance-key\"\n\n{MINIMAL}")).unwrap();
        let want = ProvenanceKey::Secret { namespace: "gitward".into(), name: "provenance-key".into() };
        assert_eq!(config.units[0].provenance.as_ref().map(|p| &p.key), Some(&want));
        assert_eq!(want.to_string(), "key_secret Secret/gitward/provenance-key");
        assert_eq!(ProvenanceKey::SECRET_KEY, "key.pem");
        let both = format!("[provenance]\nkey_file = \"p.pem\"\nkey_secret = \"a/b\"\n\n{MINIMAL}");
        let both = parse(&both).unwrap_err().to_string();
        assert!(both.contains("provenance.key_secret: set key_file or key_secret, not both"), "{both}");
        for bad in ["provenance-key", "Gitward/key", "gitward/"] {
            let error = parse(&format!("[provenance]\nkey_secret = \"{bad}\"\n\n{MINIMAL}")).unwrap_err().to_string();
            assert!(error.contains("provenance.key_secret"), "{bad}: {error}");
        }
    }
}
