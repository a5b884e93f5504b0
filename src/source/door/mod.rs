//! The door: the one way repository bytes become files. A git tree (the render's scratch
//! tree), an OCI artifact's layer and a chart archive (a chart unit's, or a chart
//! dependency's) are each read into a [`Door`] first — an in-memory map of the entries that
//! would be written, path → [`Kind`] — and nothing reaches the file system until the whole map
//! is checked:
//!
//! - every name as git checks a path it checks out (`name`: `verify_path` of git's
//!   `read-cache.c`, with `core.protectHFS` and `core.protectNTFS` on), so no name is empty,
//!   `.`, `..`, `.git` in any spelling, or holds a `/`;
//! - no path twice, and no entry below a file or a link (a crafted git tree can name an entry
//!   twice; git's `fsck` calls it `duplicateEntries`);
//! - only directories, files and symbolic links: hard links, devices, FIFOs and unknown tar
//!   types are refused (a submodule is the caller's to skip);
//! - every symbolic link resolved against the map itself, never the host's file system, as the
//!   kernel resolves a path (`path_resolution(7)`: each component in turn, a link met on the
//!   way replaced by its target before the components after it, at most 40 links —
//!   `MAXSYMLINKS`); an absolute target, or one whose resolution climbs above the root, is
//!   refused.
//!
//! [`Door::materialize`] then writes exactly the map, below a root it creates nothing above:
//! directories made one by one (never `create_dir_all` through an existing link), files
//! opened `O_CREAT | O_EXCL | O_NOFOLLOW`. `archive` reads a tar+gzip into a door, refusing a
//! truncated or corrupt stream and one that inflates past its cap.

pub mod archive;
pub mod name;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

/// Links followed in one resolution before it counts as a loop: the kernel's `MAXSYMLINKS`.
pub const MAX_LINKS: usize = 40;

/// What an entry of a [`Door`] is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A directory.
    Dir,
    /// A regular file; `executable` for git mode 100755 or a tar mode with an `x` bit.
    File {
        /// Written mode 0700 when set, else 0600.
        executable: bool,
    },
    /// A symbolic link to `target` (relative, `/`-separated, as stored).
    Symlink {
        /// The link's target as stored.
        target: String,
    },
}

/// Why the door refused an entry: its path in the tree (`/`-separated, from the root; the name
/// as stored, lossily printed, for a name that is refused) and the rule it breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct Refusal {
    /// The entry's path in the tree, as stored.
    pub path: String,
    /// The sentence: which rule.
    pub reason: String,
}

impl Refusal {
    fn new(path: &str, reason: impl Into<String>) -> Self {
        Self { path: path.to_owned(), reason: reason.into() }
    }
}

/// The entries of one tree to be written, each checked as it is added, with a payload `T` per
/// entry (a git object id, a tar entry's bytes). Paths are `/`-separated, relative to the root,
/// and sort parents first.
#[derive(Debug, Clone)]
pub struct Door<T> {
    entries: BTreeMap<String, (Kind, Option<T>)>,
}

impl<T> Default for Door<T> {
    fn default() -> Self {
        Self { entries: BTreeMap::new() }
    }
}

impl<T> Door<T> {
    /// An empty door: the root alone.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the entry `name` (bytes as stored) of the directory `dir` (a path this door holds
    /// as a directory, or `""` for the root); returns its path.
    ///
    /// Errors: a [`Refusal`] naming `dir/name` when the name is refused ([`name::check`]), the
    /// path is already taken, or `dir` is not a directory of this door.
    pub fn add(&mut self, dir: &str, name: &[u8], kind: Kind, payload: T) -> Result<String, Refusal> {
        let symlink = matches!(kind, Kind::Symlink { .. });
        let joined = join(dir, &String::from_utf8_lossy(name));
        let name = name::check(name, symlink).map_err(|reason| Refusal::new(&joined, format!("the name {reason}")))?;
        let path = join(dir, name);
        if !dir.is_empty() && !matches!(self.entries.get(dir), Some((Kind::Dir, _))) {
            return Err(Refusal::new(&path, format!("{dir} is not a directory of the tree")));
        }
        if let Kind::Symlink { target } = &kind {
            check_target(&path, target)?;
            // git checks a link's whole path with the link rules (`verify_path`): a link below
            // a directory named `.gitmodules` is refused too.
            for part in dir.split('/').filter(|p| !p.is_empty()) {
                if let Err(reason) = name::check(part.as_bytes(), true) {
                    return Err(Refusal::new(&path, format!("the link's directory {part:?}: {reason}")));
                }
            }
        }
        if self.entries.contains_key(&path) {
            return Err(Refusal::new(&path, "the tree holds this path twice"));
        }
        self.entries.insert(path.clone(), (kind, Some(payload)));
        Ok(path)
    }

    /// Adds the entry at `path` (`/`-separated, as a tar archive names it): `.` components and
    /// empty ones (`./a`, `a//b`, `dir/`) are dropped, each other component checked as
    /// [`Door::add`] checks a name; missing parent directories are added. A directory added
    /// twice is one directory.
    ///
    /// Errors: a [`Refusal`] naming `path` as given: absolute, a refused component (`..`
    /// among them), a path taken twice, a parent that is a file or link.
    pub fn add_path(&mut self, path: &str, kind: Kind, payload: T) -> Result<String, Refusal> {
        if path.starts_with('/') {
            return Err(Refusal::new(path, "the path is absolute"));
        }
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
        let Some((last, parents)) = parts.split_last() else {
            return Err(Refusal::new(path, "the path names no entry"));
        };
        let mut dir = String::new();
        for part in parents {
            let at = join(&dir, part);
            match self.entries.get(&at) {
                Some((Kind::Dir, _)) => dir = at,
                Some(_) => return Err(Refusal::new(path, format!("{at} is not a directory of the tree"))),
                None => dir = self.add_implicit(&dir, part).map_err(|r| Refusal::new(path, r.reason))?,
            }
        }
        if kind == Kind::Dir && matches!(self.entries.get(&join(&dir, last)), Some((Kind::Dir, _))) {
            return Ok(join(&dir, last));
        }
        self.add(&dir, last.as_bytes(), kind, payload).map_err(|r| Refusal::new(path, r.reason))
    }

    /// Adds the directories of `path` (`/`-separated, as a caller names the directory it
    /// writes, such as a kustomization's base) that are missing, each name checked.
    ///
    /// Errors: as [`Door::add_path`].
    pub fn add_dirs(&mut self, path: &str) -> Result<(), Refusal> {
        let mut dir = String::new();
        for part in path.split('/').filter(|p| !p.is_empty()) {
            let at = join(&dir, part);
            match self.entries.get(&at) {
                Some((Kind::Dir, _)) => dir = at,
                Some(_) => return Err(Refusal::new(&at, "is not a directory of the tree")),
                None => dir = self.add_implicit(&dir, part)?,
            }
        }
        Ok(())
    }

    fn add_implicit(&mut self, dir: &str, name: &str) -> Result<String, Refusal> {
        let joined = join(dir, name);
        let name = name::check(name.as_bytes(), false).map_err(|r| Refusal::new(&joined, format!("the name {r}")))?;
        let path = join(dir, name);
        self.entries.insert(path.clone(), (Kind::Dir, None));
        Ok(path)
    }

    /// What sits at `path`, if anything.
    pub fn get(&self, path: &str) -> Option<&Kind> {
        self.entries.get(path).map(|(kind, _)| kind)
    }

    /// Every entry, parents before children: path, kind, payload (`None` for a directory the
    /// door added as a parent).
    pub fn entries(&self) -> impl Iterator<Item = (&str, &Kind, Option<&T>)> {
        self.entries.iter().map(|(path, (kind, payload))| (path.as_str(), kind, payload.as_ref()))
    }

    /// Resolves every symbolic link against this map as the kernel would resolve it once
    /// written (see the module docs); a component the map does not hold ends the following of
    /// links there and the rest is taken lexically, still within the root.
    ///
    /// Errors: a [`Refusal`] naming the first link (in path order) whose resolution leaves
    /// the root or follows more than [`MAX_LINKS`] links.
    pub fn check_links(&self) -> Result<(), Refusal> {
        for (path, (kind, _)) in &self.entries {
            if let Kind::Symlink { target } = kind {
                let parent = path.rsplit_once('/').map_or("", |(dir, _)| dir);
                if let Err(why) = self.resolve(parent, target) {
                    return Err(Refusal::new(path, format!("the symbolic link to {target:?} {why}")));
                }
            }
        }
        Ok(())
    }

    /// The path `target` names from directory `dir`, resolved as the kernel resolves it.
    ///
    /// Errors: why it leaves the root.
    pub fn resolve(&self, dir: &str, target: &str) -> Result<String, &'static str> {
        let mut current: Vec<String> = dir.split('/').filter(|p| !p.is_empty()).map(str::to_owned).collect();
        let mut pending: std::collections::VecDeque<String> = steps(target)?;
        let mut links = 0;
        while let Some(step) = pending.pop_front() {
            if step == ".." {
                if current.pop().is_none() {
                    return Err("leaves the tree");
                }
                continue;
            }
            current.push(step);
            if let Some((Kind::Symlink { target }, _)) = self.entries.get(&current.join("/")) {
                links += 1;
                if links > MAX_LINKS {
                    return Err("is a loop (more than 40 links followed)");
                }
                current.pop();
                let mut rest = steps(target)?;
                rest.append(&mut pending);
                pending = rest;
            }
        }
        Ok(current.join("/"))
    }

    /// Writes every entry below `root` (an existing directory): directories mode 0700, files
    /// mode 0600 or 0700 with the bytes `content` gives for each, links as they are. Call after
    /// [`Door::check_links`]. Nothing is written through a link: a directory is made where
    /// nothing is, a file is created new and never followed (`O_EXCL | O_NOFOLLOW`).
    ///
    /// Errors: `content`'s error for a file; an I/O error (wrapped by `io` with the entry's
    /// path) when anything is in the way or cannot be written.
    pub fn materialize<E>(
        &self,
        root: &Path,
        mut content: impl FnMut(&str, &T) -> Result<Vec<u8>, E>,
        io: impl Fn(&str, std::io::Error) -> E,
    ) -> Result<(), E> {
        use std::os::unix::fs::DirBuilderExt as _;
        for (path, (kind, payload)) in &self.entries {
            let at = root.join(path);
            match (kind, payload) {
                (Kind::Dir, _) => {
                    std::fs::DirBuilder::new().mode(0o700).create(&at).map_err(|e| io(path, e))?;
                }
                (Kind::File { executable }, Some(payload)) => {
                    let bytes = content(path, payload)?;
                    let mode = if *executable { 0o700 } else { 0o600 };
                    let mut file = std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .mode(mode)
                        .custom_flags(libc::O_NOFOLLOW)
                        .open(&at)
                        .map_err(|e| io(path, e))?;
                    file.write_all(&bytes).map_err(|e| io(path, e))?;
                }
                (Kind::Symlink { target }, _) => std::os::unix::fs::symlink(target, &at).map_err(|e| io(path, e))?,
                (Kind::File { .. }, None) => {}
            }
        }
        Ok(())
    }
}

/// `dir/name`, or `name` at the root.
fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() { name.to_owned() } else { format!("{dir}/{name}") }
}

/// A link's target: relative, not empty, no NUL (the kernel cannot store one).
fn check_target(path: &str, target: &str) -> Result<(), Refusal> {
    let why = if target.is_empty() {
        "is empty"
    } else if target.starts_with('/') {
        "is absolute: it names a host path"
    } else if target.contains('\0') {
        "holds a NUL byte"
    } else {
        return Ok(());
    };
    Err(Refusal::new(path, format!("the symbolic link's target {target:?} {why}")))
}

/// The components of a relative link target that move a resolution (`.` and empty ones
/// dropped).
///
/// Errors: for an absolute target.
fn steps(target: &str) -> Result<std::collections::VecDeque<String>, &'static str> {
    if target.starts_with('/') {
        return Err("is absolute: it names a host path");
    }
    Ok(target.split('/').filter(|p| !p.is_empty() && *p != ".").map(str::to_owned).collect())
}

#[cfg(test)]
mod tests;
