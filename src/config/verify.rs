//! `[sync.verify]`: the keys a unit's revisions must be signed by ([`Verify`]), and which of
//! them the unit's kind of source can be checked with.

use std::path::PathBuf;

use toml::Spanned;

use super::raw::RawVerify;
use super::resolve::Resolver;
use super::{Result, SyncUnit};

/// `[sync.verify]`: signed revisions only, for every part of a unit's source (Flux's
/// `spec.verify`, Argo CD's signature verification). A revision that is not signed by a key
/// in these files is refused before anything of it is read. The files are read at each fetch,
/// so a key added or removed applies from the next fetch on, without a reload.
///
/// Which keys a unit needs follows what its source is, and a key its source cannot be checked
/// with is a config error (it would look like verification while verifying nothing):
/// - a git repository (`repo`, also the values repository of a chart unit): the commit the
///   `ref` resolves to (or the annotated tag it names) is checked against
///   `allowed_signers_file` and/or `openpgp_keys_file`; at least one is set;
/// - an OCI artifact (`repo = "oci://…"`) or an OCI chart (`[sync.helm] repo_url =
///   "oci://…"`): the manifest's cosign signature is checked against
///   `cosign_public_key_file`, which is then required;
/// - a chart from an HTTP chart repository cannot be verified (Helm provenance files are not
///   read): `[sync.verify]` on such a unit is refused, and so it is with `allow_remote_bases
///   = true` (kustomize's remote bases are fetched from outside the signed revision). A Helm
///   chart's dependencies from a chart repository are refused at sync for the same reason
///   (`sync::repo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verify {
    /// SSH signers in git's `gpg.ssh.allowedSignersFile` format (ssh-keygen(1), "ALLOWED
    /// SIGNERS"): `principals [options] keytype base64-key` per line. Default none.
    pub allowed_signers_file: Option<PathBuf>,
    /// OpenPGP public keys, ASCII-armored (`gpg --armor --export`), one or more. Default none.
    pub openpgp_keys_file: Option<PathBuf>,
    /// An ECDSA P-256 public key in PEM (`cosign.pub`, as `cosign generate-key-pair`
    /// writes it) that an OCI artifact's or OCI chart's manifest must be signed by with
    /// `cosign sign --key`. Default none.
    pub cosign_public_key_file: Option<PathBuf>,
}

impl Verify {
    /// Whether a git revision is checked: a git key file is set.
    pub fn checks_git(&self) -> bool {
        self.allowed_signers_file.is_some() || self.openpgp_keys_file.is_some()
    }
}

/// The parts of a unit's source, as far as signatures go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Parts {
    /// A git revision is synced (`repo` is a git repository).
    git: bool,
    /// An OCI manifest is synced (an artifact, or an OCI chart).
    oci: bool,
    /// A chart from an HTTP chart repository is synced.
    http_chart: bool,
    /// kustomize may fetch remote bases (`allow_remote_bases`), bytes from outside the
    /// revision.
    remote_bases: bool,
}

impl Parts {
    fn of(unit: &SyncUnit) -> Self {
        let chart = unit.helm.chart.as_ref();
        let artifact = unit.repo.starts_with("oci://");
        Parts {
            git: !unit.repo.is_empty() && !artifact,
            oci: artifact || chart.is_some_and(|c| c.is_oci()),
            http_chart: chart.is_some_and(|c| !c.is_oci()),
            remote_bases: unit.allow_remote_bases,
        }
    }
}

impl Resolver<'_> {
    /// `sync[index].verify`: the files anchored at the config's directory, then checked
    /// against the kinds of source of `unit` (see [`Verify`]).
    pub(super) fn verify(
        &self,
        index: usize,
        raw: Option<Spanned<RawVerify>>,
        unit: &SyncUnit,
    ) -> Result<Option<Verify>> {
        let Some(raw) = raw else { return Ok(None) };
        let key = |field: &str| format!("sync[{index}].verify{field}");
        let span = raw.span();
        let raw = raw.into_inner();
        let file = |value: Option<Spanned<String>>, field: &str| value.map(|p| self.file(p, &key(field))).transpose();
        let verify = Verify {
            allowed_signers_file: file(raw.allowed_signers_file, ".allowed_signers_file")?,
            openpgp_keys_file: file(raw.openpgp_keys_file, ".openpgp_keys_file")?,
            cosign_public_key_file: file(raw.cosign_public_key_file, ".cosign_public_key_file")?,
        };
        match check(&verify, Parts::of(unit)) {
            Ok(()) => Ok(Some(verify)),
            Err(message) => Err(self.invalid(Some(span), &key(""), message)),
        }
    }
}

/// Whether `verify` checks every part of a source and only those.
fn check(verify: &Verify, parts: Parts) -> std::result::Result<(), String> {
    if parts.http_chart {
        return Err("cannot be checked for a chart from an HTTP chart repository (gitward reads no Helm \
                    provenance files): remove [sync.verify], or take the chart from an oci:// registry and sign \
                    it with cosign (cosign_public_key_file)"
            .into());
    }
    if parts.remote_bases {
        return Err("cannot hold with allow_remote_bases = true: kustomize would fetch remote bases that no \
                    signature covers"
            .into());
    }
    if !parts.git && verify.checks_git() {
        return Err("allowed_signers_file and openpgp_keys_file check git commits and tags, and this unit has no \
                    git revision (an OCI artifact or chart): use cosign_public_key_file"
            .into());
    }
    if !parts.oci && verify.cosign_public_key_file.is_some() {
        return Err("cosign_public_key_file checks OCI artifacts and OCI charts, and this unit's source is a git \
                    repository: use allowed_signers_file or openpgp_keys_file"
            .into());
    }
    if parts.git && !verify.checks_git() {
        let what = if parts.oci { "the values repository `repo`" } else { "the git repository" };
        return Err(format!("names no keys for {what}: set allowed_signers_file, openpgp_keys_file, or both"));
    }
    if parts.oci && verify.cosign_public_key_file.is_none() {
        return Err("names no key for the OCI source: set cosign_public_key_file".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::config::tests::{MINIMAL as UNIT, parse};

    const ARTIFACT: &str = "[[sync]]\nname = \"a\"\nrepo = \"oci://registry.example/app:v1\"\n";
    const OCI_CHART: &str =
        "[[sync]]\nname = \"c\"\n[sync.helm]\nrepo_url = \"oci://r.example/charts\"\nchart = \"c\"\n";
    const HTTP_CHART: &str =
        "[[sync]]\nname = \"c\"\n[sync.helm]\nrepo_url = \"https://charts.example.com\"\nchart = \"c\"\n";

    fn error(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

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
        let err = error(&format!("{UNIT}[sync.verify]\n"));
        assert!(err.contains("sync[0].verify: names no keys for the git repository"), "{err}");
        let err = error(&format!("{UNIT}[sync.verify]\nallowed_signer_file = \"a\"\n"));
        assert!(err.contains("did you mean `allowed_signers_file`"), "{err}");
    }

    #[test]
    fn oci_units_take_a_cosign_key_and_refuse_git_keys() {
        for unit in [ARTIFACT, OCI_CHART] {
            let config = parse(&format!("{unit}[sync.verify]\ncosign_public_key_file = \"cosign.pub\"\n")).unwrap();
            let verify = config.units[0].verify.clone().unwrap();
            assert_eq!(verify.cosign_public_key_file, Some(PathBuf::from("/etc/gitward/cosign.pub")));
            let err = error(&format!("{unit}[sync.verify]\nallowed_signers_file = \"a\"\n"));
            assert!(err.contains("sync[0].verify: allowed_signers_file and openpgp_keys_file check git"), "{err}");
            assert!(err.contains("has no git revision"), "{err}");
            let err = error(&format!("{unit}[sync.verify]\n"));
            assert!(err.contains("names no key for the OCI source: set cosign_public_key_file"), "{err}");
        }
    }

    #[test]
    fn a_git_unit_refuses_a_cosign_key_it_cannot_use() {
        let err = error(&format!(
            "{UNIT}[sync.verify]\nallowed_signers_file = \"a\"\ncosign_public_key_file = \"cosign.pub\"\n"
        ));
        assert!(err.contains("cosign_public_key_file checks OCI artifacts and OCI charts"), "{err}");
    }

    #[test]
    fn an_http_chart_unit_cannot_be_verified() {
        for keys in ["cosign_public_key_file = \"k\"\n", "allowed_signers_file = \"a\"\n"] {
            let err = error(&format!("{HTTP_CHART}[sync.verify]\n{keys}"));
            assert!(err.contains("cannot be checked for a chart from an HTTP chart repository"), "{err}");
        }
    }

    #[test]
    fn remote_bases_are_outside_any_signature() {
        let err = error(&format!(
            "{UNIT}allow_remote_bases = true
[sync.verify]
allowed_signers_file = \"a\"\n"
        ));
        assert!(err.contains("sync[0].verify: cannot hold with allow_remote_bases = true"), "{err}");
    }

    #[test]
    fn an_oci_chart_with_git_values_needs_both_kinds_of_key() {
        let unit = OCI_CHART.replace("[sync.helm]", "repo = \"https://git.example.com/values.git\"\n[sync.helm]");
        let err = error(&format!("{unit}[sync.verify]\ncosign_public_key_file = \"k\"\n"));
        assert!(err.contains("names no keys for the values repository `repo`"), "{err}");
        let err = error(&format!("{unit}[sync.verify]\nallowed_signers_file = \"a\"\n"));
        assert!(err.contains("names no key for the OCI source"), "{err}");
        let both = format!("{unit}[sync.verify]\nallowed_signers_file = \"a\"\ncosign_public_key_file = \"k\"\n");
        assert!(parse(&both).unwrap().units[0].verify.as_ref().is_some_and(|v| v.checks_git()));
    }
}
