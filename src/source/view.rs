//! [`Tree`]: a read-only view of one revision's whole tree in the mirror, for readers of more
//! than the unit's manifest files (the render step: kustomize bases outside the unit's path, a
//! chart and its values files). The only way into git outside this module.

use std::fmt;
use std::path::Path;

use git2::{ObjectType, Oid, Repository};

use super::{Error, Handle, Result, Revision, SourceSpec};

/// Git file modes (git's `tree.h`): executable, symbolic link.
const MODE_EXECUTABLE: i32 = 0o100755;
const MODE_SYMLINK: i32 = 0o120000;

/// A git object id, printed as its 40 hex digits: what names a directory or file of a
/// [`Tree`], and changes exactly when its content does (a cache key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectId(Oid);

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// What an entry of a directory of a [`Tree`] is, by its git file mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A directory (a git tree).
    Dir,
    /// A file: any blob that is not a symbolic link; `executable` for mode 100755.
    File {
        /// Mode 100755.
        executable: bool,
    },
    /// A symbolic link (mode 120000): a blob holding the link's target path.
    Symlink,
    /// A submodule (a gitlink: a commit of another repository), never followed.
    Submodule,
}

/// One entry of a directory of a [`Tree`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its name in the directory as stored (one path component, unless the tree is crafted).
    pub name: Vec<u8>,
    /// What it is.
    pub kind: EntryKind,
    /// Its object: a tree for [`EntryKind::Dir`], a blob for files and links, a commit of
    /// another repository for a submodule.
    pub id: ObjectId,
}

/// One revision's whole tree in the unit's mirror, read straight from the object database (no
/// work tree). Paths are relative to the repository root, `/`-separated, `""` for the root.
/// Blobs are read at most `max_file_bytes` at a time (the unit's limit, from its
/// [`SourceSpec`]).
///
/// Borrowed from its [`super::Source`], holding one of the mirror's libgit2 handles for its
/// life: blocking, used on one thread, like the source itself.
pub struct Tree<'r> {
    repo: Handle<'r>,
    /// The root tree's id (looked up per read: the handle's object cache keeps it).
    root: Oid,
    unit: &'r str,
    revision: Revision,
    max_file_bytes: u64,
}

impl<'r> Tree<'r> {
    /// The root tree of `revision`.
    ///
    /// Errors: [`Error::Git`] when the commit or its tree is not in the mirror.
    pub(super) fn new(repo: Handle<'r>, spec: &'r SourceSpec, revision: &Revision) -> Result<Self> {
        let root = root_tree(&repo, &spec.unit, revision)?.id();
        Ok(Self { repo, root, unit: &spec.unit, revision: revision.clone(), max_file_bytes: spec.max_file_bytes })
    }

    /// The revision this is the tree of.
    pub fn revision(&self) -> &Revision {
        &self.revision
    }

    /// The unit whose mirror this is; the subject of every error.
    pub fn unit(&self) -> &str {
        self.unit
    }

    /// Whether anything (a directory, file, link or submodule) is at `rel`.
    pub fn contains(&self, rel: &str) -> bool {
        self.entry_at(rel).is_some()
    }

    /// The id of the directory at `rel` (the root for `""`); `None` when nothing is there or
    /// it is not a directory.
    pub fn dir(&self, rel: &str) -> Option<ObjectId> {
        match self.entry_at(rel)? {
            (ObjectType::Tree, oid) => Some(ObjectId(oid)),
            _ => None,
        }
    }

    /// The id of the blob at `rel`: a file or a symbolic link (whose content is its target);
    /// `None` when nothing is there or it is a directory or submodule.
    pub fn blob(&self, rel: &str) -> Option<ObjectId> {
        match self.entry_at(rel)? {
            (ObjectType::Blob, oid) => Some(ObjectId(oid)),
            _ => None,
        }
    }

    /// The entries of the directory `id`, found at `rel` (for messages), in git's order (by
    /// name), names as stored: a crafted tree may hold any bytes there (`..`, `a/b`), and
    /// [`super::door`] checks them before anything is written.
    ///
    /// Errors: [`Error::ReadObject`] when `id` is not a tree of the mirror;
    /// [`Error::Refused`] for an entry of no kind git writes (mode other than a directory,
    /// file, link or submodule).
    pub fn entries(&self, rel: &str, id: ObjectId) -> Result<Vec<Entry>> {
        let tree = self.repo.find_tree(id.0).map_err(|e| self.read_failed(rel, &e))?;
        let mut entries = Vec::with_capacity(tree.len());
        for entry in tree.iter() {
            let name = entry.name_bytes().to_vec();
            let kind = match (entry.kind(), entry.filemode()) {
                (Some(ObjectType::Tree), _) => EntryKind::Dir,
                (Some(ObjectType::Blob), MODE_SYMLINK) => EntryKind::Symlink,
                (Some(ObjectType::Blob), mode) => EntryKind::File { executable: mode == MODE_EXECUTABLE },
                (Some(ObjectType::Commit), _) => EntryKind::Submodule,
                (_, mode) => {
                    let path = format!("{rel}/{}", String::from_utf8_lossy(&name)).trim_start_matches('/').to_owned();
                    let reason = format!("an entry of mode {mode:o}, which git does not write");
                    return Err(Error::refused(self.unit, None, super::door::Refusal { path, reason }));
                }
            };
            entries.push(Entry { name, kind, id: ObjectId(entry.id()) });
        }
        Ok(entries)
    }

    /// The content of the blob `id`, found at `rel`.
    ///
    /// Errors: [`Error::FileTooLarge`] when it is over the unit's `max_file_bytes` (nothing is
    /// returned); [`Error::ReadObject`] when `id` is not a blob of the mirror.
    pub fn read(&self, rel: &str, id: ObjectId) -> Result<Vec<u8>> {
        let blob = self.repo.find_blob(id.0).map_err(|e| self.read_failed(rel, &e))?;
        let size = blob.size() as u64;
        if size > self.max_file_bytes {
            let (unit, path, limit) = (self.unit.to_owned(), rel.to_owned(), self.max_file_bytes);
            return Err(Error::FileTooLarge { unit, path, size, limit });
        }
        Ok(blob.content().to_vec())
    }

    /// What sits at `rel`: `None` when nothing does.
    fn entry_at(&self, rel: &str) -> Option<(ObjectType, Oid)> {
        if rel.is_empty() {
            return Some((ObjectType::Tree, self.root));
        }
        let entry = self.repo.find_tree(self.root).ok()?.get_path(Path::new(rel)).ok()?;
        Some((entry.kind()?, entry.id()))
    }

    fn read_failed(&self, rel: &str, e: &git2::Error) -> Error {
        Error::ReadObject { unit: self.unit.to_owned(), path: rel.to_owned(), message: e.message().to_owned() }
    }
}

/// The root tree of the commit `revision`.
///
/// Errors: [`Error::Git`] (`read commit`, `read tree`) when either is not in the mirror.
pub(super) fn root_tree<'r>(repo: &'r Repository, unit: &str, revision: &Revision) -> Result<git2::Tree<'r>> {
    let commit = Oid::from_str(&revision.0)
        .and_then(|oid| repo.find_commit(oid))
        .map_err(|e| Error::git(unit, "read commit", &e))?;
    commit.tree().map_err(|e| Error::git(unit, "read tree", &e))
}
