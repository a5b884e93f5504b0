//! The scratch tree: the directories a renderer reads, written from the revision's
//! [`Tree`] (the mirror's object database) into a private directory (mode 0700, removed when
//! dropped). No work tree of the mirror is ever checked out.
//!
//! Files keep their repository paths under `<scratch>/repo/`, so `../base` in an overlay finds
//! its base. Symbolic links are written as links only when their target stays inside the
//! repository; one that leaves it refuses the render. Submodules are not followed.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::{Error, Result};
use crate::source::{EntryKind, ObjectId, Tree};

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

/// Writes directories and files of one revision's [`Tree`] into a [`Scratch`]. Files over the
/// unit's `max_file_bytes` refuse the render ([`crate::source::Error::FileTooLarge`]).
pub(super) struct Materializer<'a> {
    /// The revision's tree.
    pub tree: &'a Tree<'a>,
    /// The scratch directory.
    pub scratch: &'a Scratch,
    /// Repository paths of the files written, in write order.
    pub written: Vec<String>,
}

impl Materializer<'_> {
    /// Writes the directory `id`, found at repository path `rel`, recursively.
    pub fn dir(&mut self, rel: &str, id: ObjectId) -> Result<()> {
        let entries = self.tree.entries(rel, id)?;
        std::fs::create_dir_all(self.scratch.repo_path(rel)).map_err(|e| self.io(rel, &e))?;
        for entry in entries {
            let rel = join(rel, &entry.name);
            match entry.kind {
                EntryKind::Dir => self.dir(&rel, entry.id)?,
                EntryKind::Symlink => self.symlink(&rel, entry.id)?,
                EntryKind::File { executable } => self.file(&rel, entry.id, executable)?,
                // Submodules are not followed.
                EntryKind::Submodule => {}
            }
        }
        Ok(())
    }

    /// Writes the file `id` at repository path `rel` (parents created).
    pub fn file(&mut self, rel: &str, id: ObjectId, executable: bool) -> Result<()> {
        let content = self.tree.read(rel, id)?;
        let target = self.scratch.repo_path(rel);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| self.io(rel, &e))?;
        }
        std::fs::write(&target, content).map_err(|e| self.io(rel, &e))?;
        let mode = if executable { 0o700 } else { 0o600 };
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(mode)).map_err(|e| self.io(rel, &e))?;
        self.written.push(rel.to_owned());
        Ok(())
    }

    /// A link whose target stays inside the repository is written as a link; any other
    /// refuses the render.
    fn symlink(&mut self, rel: &str, id: ObjectId) -> Result<()> {
        let target = String::from_utf8_lossy(&self.tree.read(rel, id)?).into_owned();
        let parent = rel.rsplit_once('/').map_or("", |(dir, _)| dir);
        if target.starts_with('/') || resolve(parent, &target).is_none() {
            return Err(Error::SymlinkLeavesTree { unit: self.tree.unit().to_owned(), path: rel.to_owned(), target });
        }
        std::os::unix::fs::symlink(&target, self.scratch.repo_path(rel)).map_err(|e| self.io(rel, &e))
    }

    fn io(&self, rel: &str, e: &std::io::Error) -> Error {
        Error::Scratch { unit: self.tree.unit().to_owned(), message: format!("{rel}: {e}") }
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
