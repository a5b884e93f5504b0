//! Listing the manifest files of a revision under the unit's path, and reading blobs, straight
//! from the mirror's object database.

use git2::{ObjectType, Oid, Repository, Tree, TreeEntry};

use super::view::root_tree;
use super::{Error, Listing, Result, Revision, SourceSpec, TreeFile, is_kustomization_path, is_manifest_path};

/// Git file modes (git's `tree.h`): regular, executable, symbolic link.
const MODE_FILE: i32 = 0o100644;
const MODE_EXECUTABLE: i32 = 0o100755;
const MODE_SYMLINK: i32 = 0o120000;
/// Directory levels below the unit's path that are followed; a deeper tree is skipped (and
/// the listing marked partial, so nothing is pruned), which bounds the recursion.
pub const MAX_DEPTH: usize = 64;

/// See [`super::Source::list_files`].
pub(super) fn list_files(repo: &Repository, spec: &SourceSpec, revision: &Revision) -> Result<Listing> {
    let unit = spec.unit.as_str();
    let path = spec.path.as_str();
    let root = root_tree(repo, unit, revision)?;
    let Some(tree) = subtree(repo, &root, path) else {
        let (unit, revision, path) = (unit.to_string(), revision.clone(), path);
        let is_file = root.get_path(std::path::Path::new(&path)).is_ok_and(|e| e.kind() == Some(ObjectType::Blob));
        return Err(if is_file {
            Error::PathIsFile { unit, revision, path: path.to_owned() }
        } else {
            Error::PathNotFound { unit, revision, path: path.to_owned() }
        });
    };
    let mut walk = Walk { repo, unit, limit: spec.max_file_bytes, listing: Listing::default(), depth: 0 };
    walk.tree(&tree, path)?;
    walk.listing.files.sort_by(|a, b| a.path.cmp(&b.path));
    walk.listing.skipped.sort();
    walk.listing.partial.sort();
    Ok(walk.listing)
}

/// See [`super::Source::changed_files`].
pub(super) fn changed_files(
    repo: &Repository,
    spec: &SourceSpec,
    from: &Revision,
    to: &Revision,
    max_files: usize,
) -> Result<Option<Vec<TreeFile>>> {
    let unit = spec.unit.as_str();
    let path = spec.path.as_str();
    let tree_at = |revision: &Revision| -> Result<Option<Tree<'_>>> {
        Ok(subtree(repo, &root_tree(repo, unit, revision)?, path))
    };
    let (Some(old), Some(new)) = (tree_at(from)?, tree_at(to)?) else { return Ok(None) };
    let diff = repo.diff_tree_to_tree(Some(&old), Some(&new), None).map_err(|e| Error::git(unit, "diff trees", &e))?;
    let mut files = Vec::new();
    for delta in diff.deltas() {
        let file = delta.new_file();
        let Some(rel) = file.path().and_then(|p| p.to_str()) else { return Ok(None) };
        let full = join(path, rel);
        if is_kustomization_path(&full) {
            return Ok(None);
        }
        match delta.status() {
            git2::Delta::Deleted => {}
            git2::Delta::Added | git2::Delta::Modified if !is_manifest_path(&full) => {}
            git2::Delta::Added | git2::Delta::Modified
                if matches!(i32::from(file.mode()), MODE_FILE | MODE_EXECUTABLE)
                    && rel.matches('/').count() <= MAX_DEPTH =>
            {
                let odb = repo.odb().map_err(|e| Error::git(unit, "open object database", &e))?;
                let (size, _) = odb.read_header(file.id()).map_err(|e| Error::git(unit, "read blob header", &e))?;
                let size = size as u64;
                if size > spec.max_file_bytes || files.len() >= max_files {
                    return Ok(None);
                }
                files.push(TreeFile { path: full, oid: file.id().to_string(), size });
            }
            _ => return Ok(None),
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Some(files))
}

/// See [`super::Source::path_unchanged`].
pub(super) fn path_unchanged(repo: &Repository, spec: &SourceSpec, from: &Revision, to: &Revision) -> Result<bool> {
    let unit = spec.unit.as_str();
    let path = spec.path.as_str();
    let id_at = |revision: &Revision| -> Result<Option<Oid>> {
        Ok(subtree(repo, &root_tree(repo, unit, revision)?, path).map(|tree| tree.id()))
    };
    Ok(matches!((id_at(from)?, id_at(to)?), (Some(a), Some(b)) if a == b))
}

/// See [`super::Source::path_tree`].
pub(super) fn path_tree(
    repo: &Repository,
    spec: &SourceSpec,
    revision: &Revision,
    path: &str,
) -> Result<Option<String>> {
    let root = root_tree(repo, &spec.unit, revision)?;
    Ok(subtree(repo, &root, path).map(|tree| tree.id().to_string()))
}

/// See [`super::Source::read_blob`].
pub(super) fn read_blob(repo: &Repository, unit: &str, oid: &str) -> Result<Vec<u8>> {
    Oid::from_str(oid)
        .and_then(|oid| repo.find_blob(oid))
        .map(|blob| blob.content().to_vec())
        .map_err(|e| Error::ReadBlob { unit: unit.to_string(), oid: oid.to_string(), message: e.message().to_string() })
}

/// The tree at `path` under `root` (`root` itself for `""`); `None` when missing or a file.
fn subtree<'r>(repo: &'r Repository, root: &Tree<'r>, path: &str) -> Option<Tree<'r>> {
    if path.is_empty() {
        return Some(root.clone());
    }
    let entry = root.get_path(std::path::Path::new(path)).ok()?;
    entry.to_object(repo).ok()?.into_tree().ok()
}

/// The state of one recursive listing.
struct Walk<'r> {
    repo: &'r Repository,
    unit: &'r str,
    limit: u64,
    listing: Listing,
    /// Directory levels below the unit's path of the tree being visited.
    depth: usize,
}

impl Walk<'_> {
    /// Visits every entry of `tree`, whose path from the repository root is `dir`.
    fn tree(&mut self, tree: &Tree<'_>, dir: &str) -> Result<()> {
        for entry in tree.iter() {
            let Ok(name) = entry.name() else {
                let name = String::from_utf8_lossy(entry.name_bytes());
                let path = join(dir, &name);
                let hides = entry.kind() != Some(ObjectType::Blob) || is_manifest_path(&path);
                self.skip(path, "name is not valid UTF-8", hides);
                continue;
            };
            if name.len() > super::door::name::NAME_MAX {
                let path = join(dir, &super::door::shown(name));
                self.skip(path, "name longer than 255 bytes (NAME_MAX): never written", true);
                continue;
            }
            self.entry(&entry, join(dir, name))?;
        }
        Ok(())
    }

    /// Recurses into directories, lists manifests, skips links and submodules.
    fn entry(&mut self, entry: &TreeEntry<'_>, path: String) -> Result<()> {
        match (entry.kind(), entry.filemode()) {
            (Some(ObjectType::Tree), _) if self.depth >= MAX_DEPTH => {
                self.skip(path, &format!("deeper than {MAX_DEPTH} directory levels: not followed"), true);
                Ok(())
            }
            (Some(ObjectType::Tree), _) => {
                let tree = self.repo.find_tree(entry.id());
                let tree = tree.map_err(|e| Error::git(self.unit, "read tree", &e))?;
                self.depth += 1;
                let listed = self.tree(&tree, &path);
                self.depth -= 1;
                listed
            }
            (Some(ObjectType::Blob), MODE_FILE | MODE_EXECUTABLE) => self.file(entry.id(), path),
            (Some(ObjectType::Blob), MODE_SYMLINK) => {
                let hides = is_manifest_path(&path);
                self.skip(path, "symbolic link: not followed", hides);
                Ok(())
            }
            (Some(ObjectType::Commit), _) => {
                self.skip(path, "submodule: not followed", true);
                Ok(())
            }
            (_, mode) => {
                let hides = is_manifest_path(&path);
                self.skip(path, &format!("unsupported file mode {mode:o}"), hides);
                Ok(())
            }
        }
    }

    /// Lists a regular file if it is a manifest within the size limit.
    fn file(&mut self, oid: Oid, path: String) -> Result<()> {
        if !is_manifest_path(&path) {
            return Ok(());
        }
        let odb = self.repo.odb().map_err(|e| Error::git(self.unit, "open object database", &e))?;
        let (size, _) = odb.read_header(oid).map_err(|e| Error::git(self.unit, "read blob header", &e))?;
        let size = size as u64;
        if size > self.limit {
            return Err(Error::FileTooLarge { unit: self.unit.to_string(), path, size, limit: self.limit });
        }
        self.listing.files.push(TreeFile { path, oid: oid.to_string(), size });
        Ok(())
    }

    /// Records a skipped entry; `hides_manifests` when it may define objects (see
    /// [`Listing::partial`]).
    fn skip(&mut self, path: String, reason: &str, hides_manifests: bool) {
        if hides_manifests {
            self.listing.partial.push(path.clone());
        }
        self.listing.skipped.push((path, reason.to_string()));
    }
}

/// `dir/name`, or `name` at the root.
fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() { name.to_string() } else { format!("{dir}/{name}") }
}
