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
//!   refused;
//! - bounded as the kernel bounds what it would write: a name of at most [`name::NAME_MAX`]
//!   bytes, a path and a link's target each under [`PATH_MAX`] bytes, all refused when the
//!   entry is added; and the paths, names and link targets the door holds, with a fixed
//!   [`ENTRY_COST`] per entry, at most [`Bounds::max_bytes`] in all, so its memory is bounded
//!   before any tree is walked to its end. A resolution walks each component of the targets it
//!   follows once (`resolve`: a stack of directories, each looked up by name in its parent), so
//!   checking every link takes time linear in the targets followed, at most
//!   [`MAX_LINKS`] + 1 of them, each under [`PATH_MAX`]; all the resolutions of one check
//!   together may read at most [`Bounds::max_bytes`] components (so a check takes time linear
//!   in the bound, however many links lead into one long chain); and a whole pass stops at
//!   its [`Deadline`] (the render's `[render] timeout`), refused.
//!
//! [`Door::materialize`] then writes exactly the map, below a root it creates nothing above:
//! directories made one by one (never `create_dir_all` through an existing link), files
//! opened `O_CREAT | O_EXCL | O_NOFOLLOW`. `archive` reads a tar+gzip into a door, refusing a
//! truncated or corrupt stream and one that inflates past its cap.

pub mod archive;
pub mod name;
mod resolve;

pub use resolve::LINK_REFUSED;

use std::collections::HashMap;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

/// Links followed in one resolution before it counts as a loop: the kernel's `MAXSYMLINKS`.
pub const MAX_LINKS: usize = 40;

/// The kernel's `PATH_MAX`, in bytes with the terminating NUL: an entry's path and a link's
/// target must each be shorter (`symlink(2)` and every path call fail with `ENAMETOOLONG`
/// otherwise).
pub const PATH_MAX: usize = 4096;

/// What the door counts for each entry besides its path, name and link target, in bytes:
/// about what it holds per entry (its node, its slot in its directory's index, allocation
/// headers), so [`Bounds::max_bytes`] bounds its memory, not only its text.
pub const ENTRY_COST: u64 = 192;

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
/// as stored, lossily printed, for a name that is refused; cut to about 200 bytes when longer)
/// and the rule it breaks.
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
        Self { path: shown(path), reason: reason.into() }
    }
}

/// When a pass of the door must have ended: set from the render's `[render] timeout`. A pass
/// still adding or resolving entries then is refused, and stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    /// The instant the pass ends.
    at: Instant,
    /// How long it was given, for the message.
    after: Duration,
}

impl Deadline {
    /// `after` from now.
    pub fn after(after: Duration) -> Self {
        Self { at: Instant::now() + after, after }
    }

    /// The sentence (a [`Refusal`]'s `reason`) of a pass refused at this deadline.
    pub fn reason(&self) -> String {
        format!("the tree was not checked within {:?} ([render] timeout)", self.after)
    }
}

/// What one [`Door`] may hold and how long it may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// The most bytes of paths, names and link targets held, with [`ENTRY_COST`] per entry.
    /// Default 32 MiB, the default `[render] max_tree_bytes`: callers pass the unit's
    /// `max_tree_bytes` (an archive's cap on its files), so a tree may hold as much text about
    /// its entries as it may hold in its files.
    pub max_bytes: u64,
    /// When the pass ends. Default none.
    pub deadline: Option<Deadline>,
}

impl Default for Bounds {
    fn default() -> Self {
        Self { max_bytes: 32 << 20, deadline: None }
    }
}

/// Counts steps of a pass, reads the clock every 1024 of them, and holds what is left of its
/// budget of steps.
#[derive(Debug, Clone, Copy)]
struct Ticker {
    steps: u32,
    deadline: Option<Deadline>,
    /// Steps the pass may still take.
    left: u64,
}

impl Ticker {
    fn new(deadline: Option<Deadline>, budget: u64) -> Self {
        Self { steps: 0, deadline, left: budget }
    }

    /// Takes one step of the budget: `false` once it is spent.
    fn spend(&mut self) -> bool {
        self.left = self.left.saturating_sub(1);
        self.left > 0
    }

    /// The deadline, once it has passed.
    fn tick(&mut self) -> Option<Deadline> {
        self.steps = self.steps.wrapping_add(1);
        let deadline = self.deadline.filter(|_| self.steps.is_multiple_of(1024))?;
        (Instant::now() >= deadline.at).then_some(deadline)
    }
}

/// One entry: its parent's index, its path from the root, what it is, its payload and, for a
/// directory, its entries by name.
#[derive(Debug, Clone)]
struct Node<T> {
    parent: u32,
    path: Box<str>,
    kind: Kind,
    payload: Option<T>,
    children: HashMap<Box<str>, u32>,
}

/// The entries of one tree to be written, each checked as it is added, with a payload `T` per
/// entry (a git object id, a tar entry's bytes). Paths are `/`-separated, relative to the root,
/// and sort parents first.
#[derive(Debug, Clone)]
pub struct Door<T> {
    /// Every entry; the root first, at index 0.
    nodes: Vec<Node<T>>,
    bounds: Bounds,
    /// Bytes counted against [`Bounds::max_bytes`].
    held: u64,
    ticker: Ticker,
}

impl<T> Default for Door<T> {
    fn default() -> Self {
        Self::bounded(Bounds::default())
    }
}

impl<T> Door<T> {
    /// An empty door with the default [`Bounds`]: the root alone.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty door within `bounds`.
    pub fn bounded(bounds: Bounds) -> Self {
        let root = Node { parent: 0, path: "".into(), kind: Kind::Dir, payload: None, children: HashMap::new() };
        Self { nodes: vec![root], bounds, held: 0, ticker: Ticker::new(bounds.deadline, u64::MAX) }
    }

    /// Adds the entry `name` (bytes as stored) of the directory `dir` (a path this door holds
    /// as a directory, or `""` for the root); returns its path.
    ///
    /// Errors: a [`Refusal`] naming `dir/name` when the name is refused ([`name::check`]), the
    /// path is already taken or [`PATH_MAX`] bytes or longer, a link's target is refused
    /// (absolute, empty, NUL, [`PATH_MAX`] bytes or longer), `dir` is not a directory of this
    /// door, the door would hold more than [`Bounds::max_bytes`], or the deadline has passed.
    pub fn add(&mut self, dir: &str, name: &[u8], kind: Kind, payload: T) -> Result<String, Refusal> {
        let symlink = matches!(kind, Kind::Symlink { .. });
        let joined = || join(dir, &String::from_utf8_lossy(name));
        let name =
            name::check(name, symlink).map_err(|reason| Refusal::new(&joined(), format!("the name {reason}")))?;
        let path = join(dir, name);
        let parent = self.find(dir).filter(|id| self.nodes[*id as usize].kind == Kind::Dir);
        let Some(parent) = parent else {
            return Err(Refusal::new(&path, format!("{} is not a directory of the tree", shown(dir))));
        };
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
        self.insert(parent, path, kind, Some(payload))
    }

    /// Adds the entry at `path` (`/`-separated, as a tar archive names it): `.` components and
    /// empty ones (`./a`, `a//b`, `dir/`) are dropped, each other component checked as
    /// [`Door::add`] checks a name; missing parent directories are added. A directory added
    /// twice is one directory.
    ///
    /// Errors: a [`Refusal`] naming `path` as given: absolute, a refused component (`..`
    /// among them), a path taken twice, a parent that is a file or link, and as [`Door::add`].
    pub fn add_path(&mut self, path: &str, kind: Kind, payload: T) -> Result<String, Refusal> {
        if path.starts_with('/') {
            return Err(Refusal::new(path, "the path is absolute"));
        }
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
        let Some((last, parents)) = parts.split_last() else {
            return Err(Refusal::new(path, "the path names no entry"));
        };
        let mut dir = 0;
        for part in parents {
            dir = self.dir_below(dir, part).map_err(|r| Refusal::new(path, r.reason))?;
        }
        if let Some(id) = self.nodes[dir as usize].children.get(*last).copied()
            && kind == Kind::Dir
            && self.nodes[id as usize].kind == Kind::Dir
        {
            return Ok(self.nodes[id as usize].path.to_string());
        }
        let dir = self.nodes[dir as usize].path.to_string();
        self.add(&dir, last.as_bytes(), kind, payload).map_err(|r| Refusal::new(path, r.reason))
    }

    /// Adds the directories of `path` (`/`-separated, as a caller names the directory it
    /// writes, such as a kustomization's base) that are missing, each name checked.
    ///
    /// Errors: as [`Door::add_path`]; a component that is a file or a link is "not a directory
    /// of the tree".
    pub fn add_dirs(&mut self, path: &str) -> Result<(), Refusal> {
        let mut dir = 0;
        for part in path.split('/').filter(|p| !p.is_empty()) {
            dir = self.dir_below(dir, part)?;
        }
        Ok(())
    }

    /// The directory `name` of directory `dir`, added when missing.
    fn dir_below(&mut self, dir: u32, name: &str) -> Result<u32, Refusal> {
        let path = join(&self.nodes[dir as usize].path, name);
        match self.nodes[dir as usize].children.get(name).copied() {
            Some(id) if self.nodes[id as usize].kind == Kind::Dir => Ok(id),
            Some(_) => Err(Refusal::new(&path, "is not a directory of the tree")),
            None => {
                name::check(name.as_bytes(), false).map_err(|r| Refusal::new(&path, format!("the name {r}")))?;
                self.insert(dir, path, Kind::Dir, None).map(|_| self.nodes.len() as u32 - 1)
            }
        }
    }

    /// Puts the checked entry at `path` in directory `parent`, within the bounds.
    fn insert(&mut self, parent: u32, path: String, kind: Kind, payload: Option<T>) -> Result<String, Refusal> {
        if let Some(deadline) = self.ticker.tick() {
            return Err(Refusal::new(&path, deadline.reason()));
        }
        if path.len() >= PATH_MAX {
            return Err(Refusal::new(
                &path,
                format!("the path is {} bytes long: at most {}", path.len(), PATH_MAX - 1),
            ));
        }
        let name = path.rsplit('/').next().unwrap_or(&path);
        let target = match &kind {
            Kind::Symlink { target } => target.len(),
            _ => 0,
        };
        let cost = (path.len() + name.len() + target) as u64 + ENTRY_COST;
        if self.held.saturating_add(cost) > self.bounds.max_bytes {
            let reason = format!(
                "the tree's paths, names and link targets take more than {} bytes ([render] max_tree_bytes)",
                self.bounds.max_bytes
            );
            return Err(Refusal::new(&path, reason));
        }
        let id = u32::try_from(self.nodes.len()).map_err(|_| Refusal::new(&path, "the tree has too many entries"))?;
        let children = &mut self.nodes[parent as usize].children;
        if children.contains_key(name) {
            return Err(Refusal::new(&path, "the tree holds this path twice"));
        }
        children.insert(name.into(), id);
        self.held += cost;
        self.nodes.push(Node { parent, path: path.as_str().into(), kind, payload, children: HashMap::new() });
        Ok(path)
    }

    /// The index of the entry at `path` (the root for `""`), its components looked up one by
    /// one; links are not followed.
    fn find(&self, path: &str) -> Option<u32> {
        path.split('/')
            .filter(|p| !p.is_empty())
            .try_fold(0u32, |at, part| self.nodes[at as usize].children.get(part).copied())
    }

    /// What sits at `path`, if anything.
    pub fn get(&self, path: &str) -> Option<&Kind> {
        self.find(path).filter(|id| *id != 0).map(|id| &self.nodes[id as usize].kind)
    }

    /// The entries' indices in path order (parents before children), the root left out.
    fn sorted(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = (1..self.nodes.len() as u32).collect();
        ids.sort_unstable_by(|a, b| self.nodes[*a as usize].path.cmp(&self.nodes[*b as usize].path));
        ids
    }

    /// Every entry, parents before children (in path order): path, kind, payload (`None` for a
    /// directory the door added as a parent).
    pub fn entries(&self) -> impl Iterator<Item = (&str, &Kind, Option<&T>)> {
        self.sorted().into_iter().map(move |id| {
            let node = &self.nodes[id as usize];
            (&*node.path, &node.kind, node.payload.as_ref())
        })
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
        for (path, kind, payload) in self.entries() {
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

/// `text` as an error shows it: whole up to 256 bytes, else its first 200 bytes (cut at a
/// character), `…` and its length.
pub fn shown(text: &str) -> String {
    if text.len() <= 256 {
        return text.to_owned();
    }
    let mut end = 200;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

/// A link's target: relative, not empty, no NUL (the kernel cannot store one), shorter than
/// [`PATH_MAX`].
fn check_target(path: &str, target: &str) -> Result<(), Refusal> {
    let why = if target.is_empty() {
        "is empty".to_owned()
    } else if target.len() >= PATH_MAX {
        format!("is {} bytes long: a link's target may be at most {} bytes (PATH_MAX)", target.len(), PATH_MAX - 1)
    } else if target.starts_with('/') {
        "is absolute: it names a host path".to_owned()
    } else if target.contains('\0') {
        "holds a NUL byte".to_owned()
    } else {
        return Ok(());
    };
    Err(Refusal::new(path, format!("the symbolic link's target {:?} {why}", shown(target))))
}

#[cfg(test)]
mod tests;
