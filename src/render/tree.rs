//! The scratch tree: the directories a renderer reads, written from the mirror's object
//! database into a private directory (mode 0700, removed when dropped). No work tree of the
//! mirror is ever checked out.
//!
//! Files keep their repository paths under `<scratch>/repo/`, so `../base` in an overlay finds
//! its base. Symbolic links are written as links only when their target stays inside the
//! repository; one that leaves it refuses the render. Submodules are not followed.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use git2::{ObjectType, Oid, Repository, Tree};

use super::{Error, Result};

/// Git file modes (git's `tree.h`).
const MODE_EXECUTABLE: i32 = 0o100755;
const MODE_SYMLINK: i32 = 0o120000;

/// A private scratch directory for one render: `repo/` (the materialized tree), `home/` and
/// `tmp/` (the tool's `HOME` and `TMPDIR`). Removed, with any plaintext in it, on drop.
pub(super) struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    /// Creates `gitward-render-*` in the system temp directory, mode 0700.
    pub fn new(unit: &str) -> Result<Self> {
        let io = |e: std::io::Error| Error::Scratch { unit: unit.to_owned(), message: e.to_string() };
        let dir = tempfile::Builder::new().prefix("gitward-render-").tempdir().map_err(io)?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).map_err(io)?;
        for sub in ["repo", "home", "tmp"] {
            std::fs::create_dir(dir.path().join(sub)).map_err(io)?;
        }
        Ok(Self { dir })
    }

    /// The scratch directory itself.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Where repository path `rel` (`/`-separated, `""` for the root) is materialized.
    pub fn repo_path(&self, rel: &str) -> PathBuf {
        let mut path = self.dir.path().join("repo");
        if !rel.is_empty() {
            path.push(rel);
        }
        path
    }

    /// The tool's `HOME`.
    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// The tool's `TMPDIR`.
    pub fn tmp(&self) -> PathBuf {
        self.dir.path().join("tmp")
    }
}

/// Writes trees and blobs of one revision into a [`Scratch`].
pub(super) struct Materializer<'a> {
    /// The mirror.
    pub repo: &'a Repository,
    /// The scratch directory.
    pub scratch: &'a Scratch,
    /// The unit, for errors.
    pub unit: &'a str,
    /// The largest blob written, in bytes (the unit's `max_file_bytes`).
    pub max_file_bytes: u64,
    /// Repository paths of the files written, in write order.
    pub written: Vec<String>,
}

impl Materializer<'_> {
    /// Writes the tree `oid`, found at repository path `rel`, recursively.
    pub fn tree(&mut self, rel: &str, oid: Oid) -> Result<()> {
        let tree = self.repo.find_tree(oid).map_err(|e| self.git(rel, &e))?;
        std::fs::create_dir_all(self.scratch.repo_path(rel)).map_err(|e| self.io(rel, &e))?;
        self.entries(rel, &tree)
    }

    /// Writes the blob `oid` at repository path `rel` (parents created).
    pub fn file(&mut self, rel: &str, oid: Oid, executable: bool) -> Result<()> {
        let blob = self.repo.find_blob(oid).map_err(|e| self.git(rel, &e))?;
        if blob.size() as u64 > self.max_file_bytes {
            return Err(Error::FileTooLarge {
                unit: self.unit.to_owned(),
                path: rel.to_owned(),
                size: blob.size() as u64,
                limit: self.max_file_bytes,
            });
        }
        let target = self.scratch.repo_path(rel);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| self.io(rel, &e))?;
        }
        std::fs::write(&target, blob.content()).map_err(|e| self.io(rel, &e))?;
        let mode = if executable { 0o700 } else { 0o600 };
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(mode)).map_err(|e| self.io(rel, &e))?;
        self.written.push(rel.to_owned());
        Ok(())
    }

    fn entries(&mut self, dir: &str, tree: &Tree<'_>) -> Result<()> {
        for entry in tree.iter() {
            let Ok(name) = entry.name() else { continue };
            let rel = join(dir, name);
            match (entry.kind(), entry.filemode()) {
                (Some(ObjectType::Tree), _) => self.tree(&rel, entry.id())?,
                (Some(ObjectType::Blob), MODE_SYMLINK) => self.symlink(&rel, entry.id())?,
                (Some(ObjectType::Blob), mode) => self.file(&rel, entry.id(), mode == MODE_EXECUTABLE)?,
                // Submodules (commits) are not followed.
                _ => {}
            }
        }
        Ok(())
    }

    /// A link whose target stays inside the repository is written as a link; any other
    /// refuses the render.
    fn symlink(&mut self, rel: &str, oid: Oid) -> Result<()> {
        let blob = self.repo.find_blob(oid).map_err(|e| self.git(rel, &e))?;
        let target = String::from_utf8_lossy(blob.content()).into_owned();
        let parent = rel.rsplit_once('/').map_or("", |(dir, _)| dir);
        if target.starts_with('/') || resolve(parent, &target).is_none() {
            return Err(Error::SymlinkLeavesTree { unit: self.unit.to_owned(), path: rel.to_owned(), target });
        }
        std::os::unix::fs::symlink(&target, self.scratch.repo_path(rel)).map_err(|e| self.io(rel, &e))
    }

    fn git(&self, rel: &str, e: &git2::Error) -> Error {
        Error::Git { unit: self.unit.to_owned(), path: rel.to_owned(), message: e.message().to_owned() }
    }

    fn io(&self, rel: &str, e: &std::io::Error) -> Error {
        Error::Scratch { unit: self.unit.to_owned(), message: format!("{rel}: {e}") }
    }
}

/// `dir/name`, or `name` at the root.
pub(super) fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() { name.to_owned() } else { format!("{dir}/{name}") }
}

/// The repository path that `reference` (relative, `/`-separated) names from directory `dir`,
/// with `.` and `..` resolved lexically; `None` when it leaves the repository.
pub(super) fn resolve(dir: &str, reference: &str) -> Option<String> {
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for part in reference.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            part => parts.push(part),
        }
    }
    Some(parts.join("/"))
}

/// What sits at repository path `rel` under `root`: `None` when nothing does.
pub(super) fn entry_at(root: &Tree<'_>, rel: &str) -> Option<(ObjectType, Oid)> {
    if rel.is_empty() {
        return Some((ObjectType::Tree, root.id()));
    }
    let entry = root.get_path(Path::new(rel)).ok()?;
    Some((entry.kind()?, entry.id()))
}

/// The tree id at `rel`, if `rel` is a directory.
pub(super) fn tree_at(root: &Tree<'_>, rel: &str) -> Option<Oid> {
    match entry_at(root, rel)? {
        (ObjectType::Tree, oid) => Some(oid),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_resolve_lexically_and_may_not_leave_the_repository() {
        assert_eq!(resolve("apps/prod", "../base").as_deref(), Some("apps/base"));
        assert_eq!(resolve("apps/prod", "./patch.yaml").as_deref(), Some("apps/prod/patch.yaml"));
        assert_eq!(resolve("apps", "../..").as_deref(), None);
        assert_eq!(resolve("", "..").as_deref(), None);
        assert_eq!(resolve("a", "..").as_deref(), Some(""));
    }

    #[test]
    fn scratch_is_private_and_removed_on_drop() {
        let scratch = Scratch::new("u").unwrap();
        let path = scratch.path().to_path_buf();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        assert!(scratch.repo_path("a/b").ends_with("repo/a/b"));
        drop(scratch);
        assert!(!path.exists());
    }
}
