//! `[sync.substitute]` in a sync: the unit's variables read at each load (the `from` objects
//! from the cluster, Secret values registered for masking) and substituted into what was
//! loaded, before anything is resolved or hashed ([`crate::manifest::substitute`]).

use std::io::{Read as _, Write as _};
use std::path::Path;

use super::{Error, Result};
use crate::config::{ClusterConfig, SyncUnit};
use crate::manifest::substitute::{Vars, substitute};
use crate::manifest::{HashKey, Loaded};

/// The file under `state_dir` holding the key that desired hashes of objects that took a
/// Secret's value are keyed with: 32 random bytes made at first use, kept, so the hashes stay
/// the same across restarts (with a new key, each such object is configured once).
pub const KEY_FILE: &str = "substitute.key";

/// The variables of `unit`: its `from` objects read through `client` in order (a later one's key
/// replacing an earlier one's; none read without a client), then the inline `vars` over them,
/// Flux's precedence. Every value of a Secret is registered for masking
/// ([`crate::telemetry::mask::register`]) before it is used.
///
/// Errors: [`Error::Cluster`] ([`crate::cluster::Error::VariablesUnreadable`]) when a `from`
/// object cannot be read.
pub(super) async fn variables(unit: &SyncUnit, client: Option<&kube::Client>) -> Result<Vars> {
    let mut vars = Vars::default();
    if let Some(client) = client {
        for source in &unit.substitute.from {
            let values = crate::cluster::vars::read(client, source).await?;
            if source.secret {
                crate::telemetry::mask::register(values.values());
            }
            for (name, value) in values {
                vars.set(name, value, source.secret);
            }
        }
    }
    for (name, value) in &unit.substitute.vars {
        vars.set(name.clone(), value.clone(), false);
    }
    Ok(vars)
}

/// `[sync.substitute]` applied to `loaded` (its objects and Helm hooks) without an engine, as a
/// sync applies it ([`super::loader::Loader`]), for `gitward render`: inline `vars` need no
/// cluster; a unit with `from` objects has a client of `cluster` made here (gitward's own
/// identity, as the sync reads them) and reads them; the hashes of objects that took a Secret's
/// value are keyed with [`KEY_FILE`] under `state_dir`, as the sync keys them. Unchanged
/// without `[sync.substitute]`.
///
/// Errors: [`Error::Cluster`] when no client can be made or a `from` object cannot be read;
/// [`Error::SubstituteKey`]; [`Error::Manifest`] for a reference to an undefined variable
/// without default, naming the file, document and variable.
pub async fn substitute_loaded(
    cluster: &ClusterConfig,
    state_dir: &Path,
    unit: &SyncUnit,
    loaded: &mut Loaded,
) -> Result<()> {
    let config = &unit.substitute;
    if !config.is_set() {
        return Ok(());
    }
    let client = match config.from.is_empty() {
        true => None,
        false => Some(crate::cluster::connect(cluster).await?),
    };
    let vars = variables(unit, client.as_ref()).await?;
    let key = key(state_dir, config.from.iter().any(|s| s.secret))?;
    for part in [&mut loaded.manifests, &mut loaded.hooks] {
        substitute(part, &vars, &key)?;
    }
    Ok(())
}

/// The install's key ([`KEY_FILE`] under `state_dir`, made when missing): what values that
/// must never be shown are hashed with before they are compared (`gitward preview`), so a
/// hash shown or kept says nothing of a guessable value.
///
/// Errors: [`Error::SubstituteKey`] when the file can be neither read nor made.
pub fn install_key(state_dir: &Path) -> Result<HashKey> {
    key(state_dir, true)
}

/// The key of [`KEY_FILE`] under `state_dir`, made when missing (mode 0600); a fixed key when
/// the unit reads no Secret (it is then never used).
///
/// Errors: [`Error::SubstituteKey`] when the file can be neither read nor made.
pub(super) fn key(state_dir: &Path, reads_secrets: bool) -> Result<HashKey> {
    if !reads_secrets {
        return Ok(HashKey::derive(b"gitward substitute: no Secret is read"));
    }
    let path = state_dir.join(KEY_FILE);
    let failed = |e: std::io::Error| Error::SubstituteKey { path: path.display().to_string(), message: e.to_string() };
    std::fs::create_dir_all(state_dir).map_err(failed)?;
    // Made whole under a name of its own, then linked into place: the link fails when another
    // engine linked first, so every engine reads the one key, never a file half written.
    let made = state_dir.join(format!("{KEY_FILE}.{}.{:016x}", std::process::id(), rand::random::<u64>()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    if !path.exists() {
        let key: [u8; 32] = rand::random();
        let written = options.open(&made).and_then(|mut file| file.write_all(&key).and_then(|()| file.sync_all()));
        let linked = written.and_then(|()| std::fs::hard_link(&made, &path));
        let _ = std::fs::remove_file(&made);
        match linked {
            Ok(()) => return Ok(HashKey::derive(&key)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(failed(e)),
        }
    }
    let mut key = Vec::new();
    std::fs::File::open(&path).and_then(|mut f| f.read_to_end(&mut key)).map_err(failed)?;
    match key.len() {
        32 => Ok(HashKey::derive(&key)),
        n => Err(failed(std::io::Error::other(format!("holds {n} bytes, not 32: remove it")))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_made_once_and_read_after() {
        let dir = tempfile::tempdir().unwrap();
        let first = key(dir.path(), true).unwrap();
        assert_eq!(key(dir.path(), true).unwrap().id(), first.id(), "the same key after a restart");
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(dir.path().join(KEY_FILE)).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
        let other = tempfile::tempdir().unwrap();
        assert_ne!(key(other.path(), true).unwrap().id(), first.id(), "random per state directory");
        std::fs::write(other.path().join(KEY_FILE), b"short").unwrap();
        assert!(key(other.path(), true).unwrap_err().to_string().contains("not 32"));
    }
}
