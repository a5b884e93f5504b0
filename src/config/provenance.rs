//! `[provenance]`: the key that signs each sync's attestation, how many a unit's ConfigMap
//! keeps, and whether an OCI artifact unit's are pushed to its registry as referrers (the sync
//! module's `provenance` makes, keeps and verifies them).

use std::path::PathBuf;

use super::Result;
use super::raw::RawProvenance;
use super::resolve::Resolver;

/// `[provenance]` resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provenance {
    /// The PKCS#8 PEM private key (ECDSA P-256 or Ed25519) that signs each attestation, anchored
    /// at the config file's directory; read when a unit's engine starts.
    pub key_file: PathBuf,
    /// How many of a unit's last attestations its ConfigMap keeps; at least 1. Default
    /// [`Provenance::DEFAULT_KEEP`].
    pub keep: usize,
    /// Whether an OCI artifact unit's attestations are also pushed to its registry as
    /// referrers of the manifest applied. Default false.
    pub oci_referrers: bool,
}

impl Provenance {
    /// How many attestations a unit's ConfigMap keeps by default: the last 20 syncs that
    /// changed something, about 60 KiB of a small unit's envelopes, far below a ConfigMap's
    /// 1 MiB.
    pub const DEFAULT_KEEP: usize = 20;
}

impl Resolver<'_> {
    /// `[provenance]` resolved: `key_file` anchored, `keep` at least 1.
    pub(super) fn provenance(&self, raw: RawProvenance) -> Result<Provenance> {
        let key_file = self.file(raw.key_file, "provenance.key_file")?;
        let keep = match raw.keep {
            Some(keep) if *keep.get_ref() == 0 => {
                return Err(self.invalid(Some(keep.span()), "provenance.keep", "must be at least 1"));
            }
            Some(keep) => keep.into_inner() as usize,
            None => Provenance::DEFAULT_KEEP,
        };
        Ok(Provenance { key_file, keep, oci_referrers: raw.oci_referrers.unwrap_or(false) })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::Provenance;
    use crate::config::tests::{MINIMAL, parse};

    #[test]
    fn every_unit_carries_the_table_its_key_anchored_and_keep_at_least_one() {
        assert_eq!(parse(MINIMAL).unwrap().units[0].provenance, None);
        let config = parse(&format!("[provenance]\nkey_file = \"keys/p.pem\"\n\n{MINIMAL}")).unwrap();
        let want = Provenance { key_file: Path::new("/etc/gitward/keys/p.pem").into(), keep: 20, oci_referrers: false };
        assert_eq!(config.provenance.as_ref(), Some(&want));
        assert_eq!(config.units[0].provenance.as_ref(), Some(&want));
        let zero = parse(&format!("[provenance]\nkey_file = \"p.pem\"\nkeep = 0\n\n{MINIMAL}")).unwrap_err();
        assert!(zero.to_string().contains("provenance.keep: must be at least 1"), "{zero}");
        assert!(parse(&format!("[provenance]\nkeep = 3\n\n{MINIMAL}")).is_err(), "key_file is required");
        let on = parse(&format!("[provenance]\nkey_file = \"p.pem\"\noci_referrers = true\n\n{MINIMAL}")).unwrap();
        assert!(on.units[0].provenance.as_ref().is_some_and(|p| p.oci_referrers));
    }
}
