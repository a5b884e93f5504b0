//! Where a repository's mirror lives under the state directory: `mirrors/<name>.<key>` for a
//! git unit, keyed by the URL and the credential settings; `mirrors/<unit>` for an OCI
//! artifact unit.

use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::source::{Error, Result, SourceSpec};

/// The directory of `spec`'s mirror under `state_dir`: shared by repository and credentials
/// for a git unit (`mirrors/<name>.<key>`), the unit's own (`mirrors/<unit>`) for an OCI
/// artifact unit, whose revisions are unpacked into it.
///
/// Errors: [`Error::OpenMirror`] when an artifact unit's name is not one path component.
pub fn mirror_dir(state_dir: &Path, spec: &SourceSpec, url: &str) -> Result<PathBuf> {
    let mirrors = state_dir.join("mirrors");
    if spec.repo.starts_with("oci://") {
        return per_unit_dir(&mirrors, &spec.unit);
    }
    let c = &spec.credentials;
    let mut hash = Sha256::new();
    for part in [
        Some(url),
        c.ssh_key_file.as_deref().and_then(Path::to_str),
        c.known_hosts_file.as_deref().and_then(Path::to_str),
    ]
    .into_iter()
    .chain([c.token_file.as_deref().and_then(Path::to_str), c.username.as_deref()])
    {
        // A tag per part, so an unset setting and an empty one differ, and parts cannot run together.
        match part {
            Some(text) => hash.update([b"s".as_slice(), &(text.len() as u64).to_le_bytes(), text.as_bytes()].concat()),
            None => hash.update(b"n"),
        }
    }
    let key: String = hash.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect();
    Ok(mirrors.join(format!("{}.{key}", readable_name(url))))
}

/// `mirrors/<unit>`, refusing a unit name that is not one path component.
fn per_unit_dir(mirrors: &Path, unit: &str) -> Result<PathBuf> {
    if !is_single_component(unit) {
        let (unit, path) = (unit.to_string(), mirrors.join(unit));
        return Err(Error::OpenMirror { unit, path, message: "the unit name must be one path component".into() });
    }
    Ok(mirrors.join(unit))
}

/// Whether `unit` names exactly one normal directory (no `/`, not `.` or `..`, not empty).
pub(super) fn is_single_component(unit: &str) -> bool {
    let mut components = Path::new(unit).components();
    matches!((components.next(), components.next()), (Some(Component::Normal(_)), None)) && !unit.contains(['/', '\\'])
}

/// The repository's last path component without `.git`, reduced to `[a-z0-9-]` (at most 40
/// characters; `repo` when nothing is left): never the URL's user or token.
fn readable_name(url: &str) -> String {
    let path = url.split_once("://").map_or(url, |(_, rest)| rest.split_once('/').map_or("", |(_, p)| p));
    let path = path.split(['?', '#']).next().unwrap_or_default();
    let path = path.rsplit_once(':').map_or(path, |(_, p)| p);
    let last = path.trim_end_matches('/').rsplit('/').next().unwrap_or_default();
    let last = last.strip_suffix(".git").unwrap_or(last);
    let name: String = last
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(40)
        .collect();
    let name = name.trim_matches('-');
    if name.is_empty() { "repo".to_string() } else { name.to_string() }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{mirror_dir, readable_name};
    use crate::source::Error;
    use crate::source::shared::open;
    use crate::source::shared::tests::spec;

    #[test]
    fn one_directory_per_url_and_credentials() {
        let state = Path::new("/state");
        let url = "https://git.example.com/acme/fleet.git";
        let a = mirror_dir(state, &spec("a", url), url).unwrap();
        assert_eq!(a, mirror_dir(state, &spec("b", url), url).unwrap(), "units of one URL share");
        assert!(a.file_name().unwrap().to_str().unwrap().starts_with("fleet."), "{}", a.display());
        let other = "https://git.example.com/acme/other.git";
        assert_ne!(a, mirror_dir(state, &spec("a", other), other).unwrap());
        let mut keyed = spec("c", url);
        keyed.credentials.token_file = Some("/run/secrets/token".into());
        assert_ne!(a, mirror_dir(state, &keyed, url).unwrap(), "other credentials, other mirror");
        let mut named = spec("c", url);
        named.credentials.username = Some(String::new());
        assert_ne!(a, mirror_dir(state, &named, url).unwrap(), "an empty setting is not an unset one");
        let artifact = "oci://registry.example.com/acme/fleet";
        assert_eq!(mirror_dir(state, &spec("a", artifact), artifact).unwrap(), state.join("mirrors/a"));
    }

    #[test]
    fn readable_names_carry_no_userinfo() {
        assert_eq!(readable_name("https://bot:s3cr3t@h/o/Shop.git"), "shop");
        assert_eq!(readable_name("git@github.com:acme/fleet.git"), "fleet");
        assert_eq!(readable_name("/srv/git/fleet.git/"), "fleet");
        assert_eq!(readable_name("https://bot:s3cr3t@h"), "repo");
        assert_eq!(readable_name("file:///srv/a_b.git"), "a-b");
    }

    #[test]
    fn artifact_unit_names_that_escape_the_mirrors_directory_are_refused() {
        let state = tempfile::tempdir().unwrap();
        for bad in ["", ".", "..", "a/b", "../x", "/abs"] {
            let result = open(state.path(), &spec(bad, "oci://r/x"), "oci://r/x");
            assert!(matches!(result, Err(Error::OpenMirror { .. })), "{bad:?} was accepted");
        }
    }
}
