//! The scratch tree: the directories a renderer reads, written from the revision's
//! [`Tree`] (the mirror's object database) into a private directory (mode 0700, removed when
//! dropped). No work tree of the mirror is ever checked out.
//!
//! Files keep their repository paths under `<scratch>/repo/`, so `../base` in an overlay finds
//! its base. Everything written goes through the door ([`crate::source::door`]): the inputs'
//! entries are read into memory, their names checked as git checks them, every symbolic link
//! resolved against that map as the kernel will resolve it (earlier links followed before
//! each `..`), and a tree with one refused entry or one link that leaves `repo/` refuses the
//! render before anything is written. Submodules are not followed.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::{Error, Result};
use crate::source::door::{Bounds, Deadline, Door, Kind, LINK_REFUSED, Refusal};
use crate::source::{EntryKind, ObjectId, Tree};

/// A private scratch directory for one render: `repo/` (the materialized tree), `home/` and
/// `tmp/` (the tool's `HOME` and `TMPDIR`). Removed, with any plaintext in it, on drop; the
/// scratch directories of a process that died before dropping them are removed by the next
/// process's first render ([`sweep`]).
pub(super) struct Scratch {
    dir: tempfile::TempDir,
}

/// The name every scratch directory starts with, followed by the process id and `-`.
const PREFIX: &str = "gitward-render-";

impl Scratch {
    /// Creates `gitward-render-<pid>-*` in the system temp directory (`$TMPDIR`, else `/tmp`),
    /// mode 0700. The first call of a process removes what dead processes left ([`sweep`]).
    pub fn new(unit: &str) -> Result<Self> {
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(|| sweep(&std::env::temp_dir()));
        let io = |e: std::io::Error| Error::Scratch { unit: unit.to_owned(), message: e.to_string() };
        let prefix = format!("{PREFIX}{}-", std::process::id());
        let dir = tempfile::Builder::new().prefix(&prefix).tempdir().map_err(io)?;
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

/// Writes directories and files of one revision's [`Tree`] into a [`Scratch`], through the
/// door ([`door`]): every entry of the inputs is read into an in-memory [`Door`] first (names
/// checked as git checks them, no path twice, links resolved against the map as the kernel
/// will resolve them), and only a tree the door accepts is written. Files over the unit's
/// `max_file_bytes` refuse the render ([`crate::source::Error::FileTooLarge`]), and so do files
/// totalling over `[render] max_tree_bytes` ([`Error::TreeTooLarge`]). The door holds at most
/// `max_tree_bytes` of paths and link targets too, and its pass ends by the render's
/// `[render] timeout` ([`crate::source::door::Bounds`]).
pub(super) struct Materializer<'a> {
    tree: &'a Tree<'a>,
    scratch: &'a Scratch,
    max_bytes: u64,
    door: Door<Payload>,
    /// The directories and files added, to skip an input inside one already added.
    inputs: Vec<String>,
}

/// What a file of the scratch tree holds: a blob of the revision, or bytes gitward itself
/// put there (a chart dependency's archive).
enum Payload {
    Blob(ObjectId),
    Bytes(Vec<u8>),
}

impl<'a> Materializer<'a> {
    /// A materializer of `tree` into `scratch`; `max_bytes` is `[render] max_tree_bytes`,
    /// `timeout` the `[render] timeout` the door's pass must end within.
    pub fn new(tree: &'a Tree<'a>, scratch: &'a Scratch, max_bytes: u64, timeout: std::time::Duration) -> Self {
        let door = Door::bounded(Bounds { max_bytes, deadline: Some(Deadline::after(timeout)) });
        Self { tree, scratch, max_bytes, door, inputs: Vec::new() }
    }

    /// Adds the directory `id`, found at repository path `rel`, and everything below it. A
    /// directory inside one already added is not added again.
    ///
    /// Errors: [`crate::source::Error::Refused`] (through [`Error::Source`]) naming the first
    /// entry the door refuses; [`Error::SymlinkLeavesTree`] for an absolute link;
    /// [`crate::source::Error::ReadObject`] for an object the mirror lacks.
    pub fn dir(&mut self, rel: &str, id: ObjectId) -> Result<()> {
        if self.covered(rel) {
            return Ok(());
        }
        self.door.add_dirs(rel).map_err(|r| self.refused(r))?;
        self.inputs.push(rel.to_owned());
        let mut pending = vec![(rel.to_owned(), id)];
        while let Some((dir, id)) = pending.pop() {
            for entry in self.tree.entries(&dir, id)? {
                let kind = match entry.kind {
                    EntryKind::Dir => Kind::Dir,
                    EntryKind::File { executable } => Kind::File { executable },
                    EntryKind::Symlink => {
                        let path = join(&dir, &String::from_utf8_lossy(&entry.name));
                        Kind::Symlink { target: self.link_target(&path, entry.id)? }
                    }
                    // Submodules are not followed.
                    EntryKind::Submodule => continue,
                };
                let is_dir = kind == Kind::Dir;
                let added = self.door.add(&dir, &entry.name, kind, Payload::Blob(entry.id));
                let path = added.map_err(|r| self.refused(r))?;
                if is_dir {
                    pending.push((path, entry.id));
                }
            }
        }
        Ok(())
    }

    /// Adds the file `id` at repository path `rel` (a values file), unless a directory
    /// added holds it.
    ///
    /// Errors: as [`Materializer::dir`].
    pub fn file(&mut self, rel: &str, id: ObjectId) -> Result<()> {
        if self.covered(rel) {
            return Ok(());
        }
        let parent = rel.rsplit_once('/').map_or("", |(dir, _)| dir);
        self.door.add_dirs(parent).map_err(|r| self.refused(r))?;
        self.door.add_path(rel, Kind::File { executable: false }, Payload::Blob(id)).map_err(|r| self.refused(r))?;
        self.inputs.push(rel.to_owned());
        Ok(())
    }

    /// Adds the file `name` holding `bytes` (a chart dependency's archive) in the directory
    /// `dir`, made when missing: through the door, so a `dir` the revision holds as a link or a
    /// file, or a `name` it holds already, is refused and nothing is written through a link.
    ///
    /// Errors: [`crate::source::Error::Refused`] (through [`Error::Source`]) naming the entry.
    pub fn extra_file(&mut self, dir: &str, name: &str, bytes: Vec<u8>) -> Result<()> {
        self.door.add_dirs(dir).map_err(|r| self.refused(r))?;
        let file = Kind::File { executable: false };
        self.door.add(dir, name.as_bytes(), file, Payload::Bytes(bytes)).map_err(|r| self.refused(r))?;
        Ok(())
    }

    /// Checks every link against the tree ([`Door::check_links`]) and writes the tree into
    /// `repo/`; returns the repository paths of the files written, in path order.
    ///
    /// Errors: [`Error::SymlinkLeavesTree`] naming the first link whose resolution leaves the
    /// tree and its target; [`Error::TreeTooLarge`]; [`crate::source::Error::FileTooLarge`];
    /// [`Error::Scratch`] when the scratch directory cannot be written.
    pub fn finish(self) -> Result<Vec<String>> {
        if let Err(refusal) = self.door.check_links() {
            let target = match self.door.get(&refusal.path) {
                Some(Kind::Symlink { target }) if refusal.reason.starts_with(LINK_REFUSED) => target.clone(),
                _ => return Err(self.refused(refusal)),
            };
            return Err(Error::SymlinkLeavesTree { unit: self.tree.unit().to_owned(), path: refusal.path, target });
        }
        let (unit, mut bytes, mut written) = (self.tree.unit(), 0u64, Vec::new());
        let io =
            |rel: &str, e: std::io::Error| Error::Scratch { unit: unit.to_owned(), message: format!("{rel}: {e}") };
        self.door.materialize(
            &self.scratch.repo_path(""),
            |rel, payload| {
                let id = match payload {
                    Payload::Blob(id) => *id,
                    Payload::Bytes(bytes) => return Ok(bytes.clone()),
                };
                let content = self.tree.read(rel, id)?;
                bytes += content.len() as u64;
                if bytes > self.max_bytes {
                    return Err(Error::TreeTooLarge {
                        unit: unit.to_owned(),
                        path: rel.to_owned(),
                        limit: self.max_bytes,
                    });
                }
                written.push(rel.to_owned());
                Ok(content)
            },
            io,
        )?;
        Ok(written)
    }

    /// Whether `rel` is (inside) an input already added.
    fn covered(&self, rel: &str) -> bool {
        self.inputs.iter().any(|added| {
            added.is_empty() || rel == added || rel.strip_prefix(added.as_str()).is_some_and(|r| r.starts_with('/'))
        })
    }

    /// The target of the link `id` at `rel`: refused when absolute, as the common case, with
    /// the message a person knows.
    ///
    /// Errors: as [`Materializer::dir`]; a target that is not UTF-8 is refused
    /// ([`crate::source::door::name`] holds names to UTF-8 too).
    fn link_target(&self, rel: &str, id: ObjectId) -> Result<String> {
        let Ok(target) = String::from_utf8(self.tree.read(rel, id)?) else {
            let path = crate::source::door::shown(rel);
            let refusal = Refusal { path, reason: "the symbolic link's target is not UTF-8".into() };
            return Err(self.refused(refusal));
        };
        if target.starts_with('/') {
            return Err(Error::SymlinkLeavesTree { unit: self.tree.unit().to_owned(), path: rel.to_owned(), target });
        }
        Ok(target)
    }

    fn refused(&self, refusal: Refusal) -> Error {
        crate::source::Error::refused(self.tree.unit(), None, refusal).into()
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

/// Removes the scratch directories in `tmp` whose process is gone (no `/proc/<pid>`): a render
/// killed mid-way (SIGKILL, OOM, power) leaves decrypted plaintext there. Directories of live
/// processes, and names without a process id, are left alone. Best effort: what cannot be
/// removed stays.
pub(super) fn sweep(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix(PREFIX).and_then(|rest| rest.split_once('-')).map(|(pid, _)| pid) else {
            continue;
        };
        let dead = pid.parse::<u32>().is_ok_and(|pid| !Path::new(&format!("/proc/{pid}")).exists());
        if dead && entry.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
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
