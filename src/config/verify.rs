//! `[sync.verify]`: the keys a unit's revisions must be signed by ([`Verify`]).

use std::path::PathBuf;

use toml::Spanned;

use super::Result;
use super::raw::RawVerify;
use super::resolve::Resolver;

/// `[sync.verify]`: signed revisions only. The commit a unit's `ref` resolves to (or the
/// annotated tag, when `ref` names one) must carry a valid signature by a key in one of these
/// files, or the revision is refused before anything of it is read (Flux's `spec.verify`, Argo
/// CD's signature verification). At least one of the two is set. Both files are read at each
/// fetch, so a key added or removed applies from the next fetch on, without a reload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verify {
    /// SSH signers in git's `gpg.ssh.allowedSignersFile` format (ssh-keygen(1), "ALLOWED
    /// SIGNERS"): `principals [options] keytype base64-key` per line. Default none.
    pub allowed_signers_file: Option<PathBuf>,
    /// OpenPGP public keys, ASCII-armored (`gpg --armor --export`), one or more. Default none.
    pub openpgp_keys_file: Option<PathBuf>,
}

impl Resolver<'_> {
    /// `sync[index].verify`: the two files anchored at the config's directory; a table naming
    /// neither is an error (it would verify nothing while looking as if it did).
    pub(super) fn verify(&self, index: usize, raw: Option<Spanned<RawVerify>>) -> Result<Option<Verify>> {
        let Some(raw) = raw else { return Ok(None) };
        let key = |field: &str| format!("sync[{index}].verify{field}");
        let span = raw.span();
        let raw = raw.into_inner();
        let verify = Verify {
            allowed_signers_file: raw
                .allowed_signers_file
                .map(|p| self.file(p, &key(".allowed_signers_file")))
                .transpose()?,
            openpgp_keys_file: raw.openpgp_keys_file.map(|p| self.file(p, &key(".openpgp_keys_file"))).transpose()?,
        };
        if verify.allowed_signers_file.is_none() && verify.openpgp_keys_file.is_none() {
            let message = "names no keys: set allowed_signers_file, openpgp_keys_file, or both";
            return Err(self.invalid(Some(span), &key(""), message));
        }
        Ok(Some(verify))
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::config::tests::{MINIMAL as UNIT, parse};

    #[test]
    fn verify_files_are_anchored_and_an_empty_table_is_refused() {
        assert_eq!(parse(UNIT).unwrap().units[0].verify, None);
        let both = parse(&format!(
            "{UNIT}[sync.verify]\nallowed_signers_file = \"keys/allowed_signers\"\nopenpgp_keys_file = \"/k.asc\"\n"
        ))
        .unwrap();
        let verify = both.units[0].verify.clone().unwrap();
        assert_eq!(verify.allowed_signers_file, Some(PathBuf::from("/etc/gitward/keys/allowed_signers")));
        assert_eq!(verify.openpgp_keys_file, Some(PathBuf::from("/k.asc")));
        let err = parse(&format!("{UNIT}[sync.verify]\n")).unwrap_err().to_string();
        assert!(err.contains("sync[0].verify: names no keys"), "{err}");
        let err = parse(&format!("{UNIT}[sync.verify]\nallowed_signer_file = \"a\"\n")).unwrap_err().to_string();
        assert!(err.contains("did you mean `allowed_signers_file`"), "{err}");
    }
}
