//! A download cache of chart archives: `<dir>/<sha256 hex>.tgz`, written whole (a temporary
//! file renamed into place) only after its digest was checked, and hashed again each time it
//! is looked up ([`Cache::path`]): a file whose bytes no longer match its name (replaced by
//! anything that could write there) is removed and downloaded again, never used. The
//! directory is made `0700`. What remains is the moment between that hash and the render's
//! copy of the file into its own scratch directory.

use std::path::{Path, PathBuf};

use sha2::Digest as _;

use crate::source::{Error, Result};

/// How long an archive of the shared dependency cache (`state_dir/charts/dependencies`) may
/// go unused before it is collected: 7 days.
pub(super) const DEPENDENCY_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(7 * 86_400);

/// One unit's cache directory, and the digest fetched before the current one.
#[derive(Debug)]
pub(super) struct Cache {
    dir: PathBuf,
    unit: String,
    previous: std::sync::Mutex<Option<String>>,
}

impl Cache {
    /// Opens (creates) `dir`, mode `0700`.
    ///
    /// Errors: [`Error::OpenMirror`] naming the directory.
    pub fn open(dir: &Path, unit: &str) -> Result<Self> {
        let create = || -> std::io::Result<()> {
            std::fs::create_dir_all(dir)?;
            std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        };
        create().map_err(|e| Error::OpenMirror {
            unit: unit.to_owned(),
            path: dir.to_owned(),
            message: e.to_string(),
        })?;
        Ok(Self { dir: dir.to_owned(), unit: unit.to_owned(), previous: Default::default() })
    }

    /// The cached archive with SHA-256 `digest` (hex), if there is one whose bytes hash to
    /// `digest` now. One that does not is removed (logged as a warning) and `None` returned,
    /// so the caller downloads it again.
    pub fn path(&self, digest: &str) -> Option<PathBuf> {
        let path = self.file(digest)?;
        let actual = std::fs::read(&path).map(|bytes| hex::encode(sha2::Sha256::digest(bytes)));
        match actual {
            Ok(actual) if actual.eq_ignore_ascii_case(digest) => Some(path),
            Ok(actual) => {
                tracing::warn!(unit = %self.unit, archive = %path.display(), actual = %format!("sha256:{actual}"), "a cached chart archive does not match its digest: removed, to be downloaded again");
                if let Err(e) = std::fs::remove_file(&path) {
                    tracing::warn!(unit = %self.unit, archive = %path.display(), error = %e, "cannot remove a cached chart archive");
                }
                None
            }
            Err(e) => {
                tracing::warn!(unit = %self.unit, archive = %path.display(), error = %e, "cannot read a cached chart archive");
                None
            }
        }
    }

    /// The file of the archive `digest` (64 hex digits), if there is one; its bytes unread.
    pub(super) fn file(&self, digest: &str) -> Option<PathBuf> {
        let valid = digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit());
        Some(self.dir.join(format!("{digest}.tgz"))).filter(|path| valid && path.is_file())
    }

    /// Checks `bytes` against `expected` (hex SHA-256, `None` when the repository gives none)
    /// and stores them; returns their digest.
    ///
    /// Errors: [`Error::Chart`] on a digest mismatch (naming `url`, both digests);
    /// [`Error::OpenMirror`] when the file cannot be written.
    pub fn store(&self, url: &str, bytes: &[u8], expected: Option<&str>) -> Result<String> {
        let digest = hex::encode(sha2::Sha256::digest(bytes));
        if let Some(expected) =
            expected.map(|e| e.trim_start_matches("sha256:")).filter(|e| !e.eq_ignore_ascii_case(&digest))
        {
            let message =
                format!("digest mismatch: the repository gives sha256:{expected}, the download is sha256:{digest}");
            return Err(Error::Chart { unit: self.unit.clone(), url: url.to_owned(), message });
        }
        let write = || -> std::io::Result<()> {
            let mut file = tempfile::NamedTempFile::new_in(&self.dir)?;
            std::io::Write::write_all(&mut file, bytes)?;
            file.persist(self.dir.join(format!("{digest}.tgz"))).map_err(|e| e.error)?;
            Ok(())
        };
        write().map_err(|e| Error::OpenMirror {
            unit: self.unit.clone(),
            path: self.dir.clone(),
            message: e.to_string(),
        })?;
        Ok(digest)
    }

    /// Records that the archive `digest` is what `key` (64 hex digits: a hash of a
    /// dependency's repository, name and exact version, [`super::deps`]) names: a file
    /// `<key>.pin` holding the digest, written whole. A failure is logged: the next load then
    /// asks the repository again.
    pub fn pin(&self, key: &str, digest: &str) {
        let path = self.dir.join(format!("{key}.pin"));
        if std::fs::read_to_string(&path).is_ok_and(|held| held == digest) {
            return self.mark(&path);
        }
        let write = || -> std::io::Result<()> {
            let mut file = tempfile::NamedTempFile::new_in(&self.dir)?;
            std::io::Write::write_all(&mut file, digest.as_bytes())?;
            file.persist(&path).map_err(|e| e.error)?;
            Ok(())
        };
        if let Err(e) = write() {
            tracing::warn!(unit = %self.unit, pin = %path.display(), error = %e, "cannot record a chart archive's pin");
        }
    }

    /// The digest [`Cache::pin`] recorded for `key`, marked used now, if there is one that
    /// is 64 hex digits.
    pub fn pinned(&self, key: &str) -> Option<String> {
        let path = self.dir.join(format!("{key}.pin"));
        let digest = std::fs::read_to_string(&path).ok()?;
        let valid = digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit());
        valid.then(|| {
            self.mark(&path);
            digest
        })
    }

    /// Deletes every archive but `current` and the one current before it (kept so a revision
    /// applied before a failing new one can still be read).
    pub fn collect(&self, current: &str) {
        let mut previous = self.previous.lock().expect("cache lock");
        if previous.as_deref() != Some(current) {
            let before = previous.replace(current.to_owned());
            self.sweep(&[Some(current.to_owned()), before]);
        }
    }

    /// Marks the archive `digest` used now (its modification time), for
    /// [`Cache::collect_unused`]. A failure is only logged: the archive is then collected
    /// sooner and downloaded again. The bytes are not hashed here: [`Cache::path`] hashed them
    /// when the fetch found the archive, and the render reads them through the door.
    pub fn touch(&self, digest: &str) {
        let Some(path) = self.file(digest) else { return };
        self.mark(&path);
    }

    /// Sets `path`'s modification time to now; a failure is logged.
    fn mark(&self, path: &Path) {
        let now = std::time::SystemTime::now();
        if let Err(e) = std::fs::File::options().append(true).open(path).and_then(|f| f.set_modified(now)) {
            tracing::warn!(unit = %self.unit, archive = %path.display(), error = %e, "cannot mark a chart archive used");
        }
    }

    /// Deletes every archive not used ([`Cache::touch`], or stored) for `max_age`, and pins
    /// ([`Cache::pin`]) and temporary files as old. For the shared cache of dependencies, where no one unit knows
    /// what the others still use: an archive some unit uses is touched at each of its loads.
    pub fn collect_unused(&self, max_age: std::time::Duration) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return };
        let now = std::time::SystemTime::now();
        for entry in entries.flatten() {
            let modified = entry.metadata().and_then(|m| m.modified());
            let idle = modified.ok().and_then(|m| now.duration_since(m).ok()).unwrap_or_default();
            if idle <= max_age {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            match std::fs::remove_file(entry.path()) {
                Ok(()) => {
                    tracing::info!(unit = %self.unit, archive = %name, idle_secs = idle.as_secs(), "unused chart archive collected")
                }
                Err(e) => {
                    tracing::warn!(unit = %self.unit, archive = %name, error = %e, "cannot remove an unused chart archive")
                }
            }
        }
    }

    fn sweep(&self, keep: &[Option<String>]) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let digest = name.strip_suffix(".tgz").unwrap_or(&name);
            if !keep.iter().flatten().any(|k| k == digest) {
                match std::fs::remove_file(entry.path()) {
                    Ok(()) => tracing::debug!(unit = %self.unit, archive = %name, "old chart archive collected"),
                    Err(e) => {
                        tracing::warn!(unit = %self.unit, archive = %name, error = %e, "cannot remove an old chart archive")
                    }
                }
            }
        }
    }
}

/// Removes what earlier versions kept under `charts` (`state_dir/charts`) for `unit`: its
/// archives in `charts/<unit>/` (the directory too, once empty), and the archives left
/// directly in `charts/dependencies/` (the cache all units shared, now one directory per
/// trust domain) and `charts/units/` (a unit named `units`). Files only, and only
/// `<64 hex>.tgz` ones; a failure is logged.
pub(super) fn remove_legacy(charts: &Path, unit: &str) {
    let archive = |name: &str| {
        name.strip_suffix(".tgz").is_some_and(|d| d.len() == 64 && d.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    let own = charts.join(unit);
    let mut dirs = vec![charts.join("dependencies"), charts.join("units")];
    if unit != "units" && unit != "dependencies" {
        dirs.push(own.clone());
    }
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let is_file = entry.file_type().is_ok_and(|t| t.is_file());
            if is_file
                && archive(&entry.file_name().to_string_lossy())
                && let Err(e) = std::fs::remove_file(entry.path())
            {
                tracing::warn!(unit, archive = %entry.path().display(), error = %e, "cannot remove a chart archive of an earlier version's cache");
            }
        }
        if dir == own {
            let _ = std::fs::remove_dir(&dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archives_are_checked_stored_and_old_ones_collected() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path(), "u").unwrap();
        let a = cache.store("http://r/a.tgz", b"a", None).unwrap();
        let err = cache.store("http://r/b.tgz", b"b", Some(&a)).unwrap_err().to_string();
        assert!(err.starts_with("u: http://r/b.tgz: digest mismatch"), "{err}");
        let b = cache
            .store("http://r/b.tgz", b"b", Some(&format!("sha256:{}", hex::encode(sha2::Sha256::digest(b"b")))))
            .unwrap();
        let stale = cache.store("http://r/old.tgz", b"old", None).unwrap();
        cache.collect(&a);
        assert!(cache.path(&stale).is_none() && cache.path(&b).is_none(), "what is not current is collected");
        let b = cache.store("http://r/b.tgz", b"b", None).unwrap();
        cache.collect(&b);
        assert!(cache.path(&a).is_some() && cache.path(&b).is_some(), "the previous archive is kept");
        let c = cache.store("http://r/c.tgz", b"c", None).unwrap();
        cache.collect(&c);
        assert!(cache.path(&a).is_none(), "two versions back is collected");
        assert!(cache.path(&b).is_some() && cache.path(&c).is_some());
        assert_eq!(cache.path("../x"), None);
    }

    #[test]
    fn the_caches_of_earlier_versions_are_removed_and_nothing_else() {
        let charts = tempfile::tempdir().unwrap();
        let (old, shared, kept) = (charts.path().join("demo"), charts.path().join("dependencies"), "a".repeat(64));
        std::fs::create_dir_all(&old).unwrap();
        std::fs::create_dir_all(shared.join("0123456789abcdef")).unwrap();
        std::fs::write(old.join(format!("{kept}.tgz")), b"x").unwrap();
        std::fs::write(shared.join(format!("{kept}.tgz")), b"x").unwrap();
        std::fs::write(shared.join("0123456789abcdef").join(format!("{kept}.tgz")), b"x").unwrap();
        remove_legacy(charts.path(), "demo");
        assert!(!old.exists(), "the unit's old cache is gone");
        assert!(!shared.join(format!("{kept}.tgz")).exists(), "the old shared archives are gone");
        assert!(shared.join("0123456789abcdef").join(format!("{kept}.tgz")).exists(), "a trust domain's cache stays");
    }

    #[test]
    fn an_archive_replaced_in_the_cache_is_removed_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path(), "u").unwrap();
        let digest = cache.store("http://r/a.tgz", b"honest", None).unwrap();
        let path = cache.path(&digest).expect("stored and verified");
        std::fs::write(&path, b"poisoned").unwrap();
        assert_eq!(cache.path(&digest), None, "a file whose bytes are not its digest is not used");
        assert!(!path.exists(), "and is removed, to be downloaded again");
    }

    #[test]
    fn archives_unused_for_longer_than_the_age_are_collected_and_touched_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path(), "u").unwrap();
        let (used, idle) = (cache.store("u", b"used", None).unwrap(), cache.store("u", b"idle", None).unwrap());
        let long_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(30 * 86_400);
        for digest in [&used, &idle] {
            let file = std::fs::File::options().append(true).open(cache.path(digest).unwrap()).unwrap();
            file.set_modified(long_ago).unwrap();
        }
        cache.touch(&used);
        cache.collect_unused(DEPENDENCY_MAX_AGE);
        assert!(cache.path(&used).is_some(), "used now: kept");
        assert!(cache.path(&idle).is_none(), "unused for 30 days: collected");
    }

    /// A unit named `dependencies` (or `units`) caches its chart in `charts/units/<unit>/`,
    /// apart from the dependency cache of every trust domain: neither directory holds the
    /// other, an archive stored in one is not found in the other, and opening or collecting
    /// the unit's cache removes nothing of the dependency cache.
    #[test]
    fn a_unit_named_dependencies_shares_no_cache_with_the_dependencies() {
        let state = tempfile::tempdir().unwrap();
        let domain = super::super::deps::trust_domain("default", None);
        let deps = Cache::open(&state.path().join("charts/dependencies").join(domain), "other").unwrap();
        let dependency = deps.store("http://r/dep.tgz", b"a dependency", None).unwrap();
        for unit in ["dependencies", "units"] {
            let any = crate::config::VersionConstraint::parse("").unwrap();
            let source = crate::config::ChartSource::anonymous("https://charts.example.com", "app", any);
            let spec = super::super::ChartSpec {
                unit: unit.into(),
                source,
                max_bytes: 1 << 20,
                timeout: std::time::Duration::from_secs(1),
                cosign_public_key_file: None,
                chart_repositories: Default::default(),
            };
            let repo = super::super::ChartRepo::open(state.path(), spec, std::time::Duration::ZERO).unwrap();
            let own = &repo.cache;
            assert_eq!(own.dir, state.path().join("charts/units").join(unit));
            assert!(!own.dir.starts_with(&deps.dir) && !deps.dir.starts_with(&own.dir), "{unit}: nested caches");
            assert_eq!(own.path(&dependency), None, "{unit}: the unit reads no dependency's archive");
            let chart = own.store("http://r/app.tgz", format!("the chart of {unit}").as_bytes(), None).unwrap();
            own.collect(&chart);
            assert_eq!(deps.path(&chart), None, "{unit}: the dependencies read no archive of the unit");
            assert!(deps.path(&dependency).is_some(), "{unit}: the dependency cache is untouched");
        }
    }
}
