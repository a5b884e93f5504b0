//! The scratch tree: the directories a renderer reads, written from the revision's
//! [`Tree`] (the mirror's object database) into a private directory (mode 0700, removed when
//! dropped). No work tree of the mirror is ever checked out.
//!
//! Files keep their repository paths under `<scratch>/repo/`, so `../base` in an overlay finds
//! its base. Symbolic links are written as links only when their target stays inside the
//! repository, read lexically; once the tree is written, every link is resolved again as the
//! kernel will resolve it ([`Materializer::check_links`]: earlier links followed before each
//! `..`), and one that leaves `repo/` refuses the render. Submodules are not followed.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::{Error, Result};
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

/// Writes directories and files of one revision's [`Tree`] into a [`Scratch`]. Files over the
/// unit's `max_file_bytes` refuse the render ([`crate::source::Error::FileTooLarge`]), and so
/// do files totalling over `[render] max_tree_bytes` ([`Error::TreeTooLarge`]).
pub(super) struct Materializer<'a> {
    /// The revision's tree.
    pub tree: &'a Tree<'a>,
    /// The scratch directory.
    pub scratch: &'a Scratch,
    /// Repository paths of the files written, in write order.
    pub written: Vec<String>,
    /// Repository paths of the symbolic links written, for [`Materializer::check_links`].
    pub links: Vec<String>,
    /// Bytes of files written so far, against `max_bytes`.
    pub bytes: u64,
    /// `[render] max_tree_bytes`: over it the render is refused ([`Error::TreeTooLarge`]).
    pub max_bytes: u64,
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
        self.bytes += content.len() as u64;
        if self.bytes > self.max_bytes {
            let unit = self.tree.unit().to_owned();
            return Err(Error::TreeTooLarge { unit, path: rel.to_owned(), limit: self.max_bytes });
        }
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
        std::os::unix::fs::symlink(&target, self.scratch.repo_path(rel)).map_err(|e| self.io(rel, &e))?;
        self.links.push(rel.to_owned());
        Ok(())
    }

    /// Resolves every symbolic link written, component by component as the kernel does (a link
    /// met on the way is replaced by its target before the next `..` is taken), and refuses
    /// the render at the first that leaves `repo/`: `s -> .` then `t -> s/..` stays inside
    /// when read lexically and names the parent of the tree when followed. Call once every
    /// input is written.
    ///
    /// Errors: [`Error::SymlinkLeavesTree`] naming the link and its target; [`Error::Scratch`]
    /// when the tree cannot be read.
    pub fn check_links(&self) -> Result<()> {
        let root = self.scratch.repo_path("");
        for path in &self.links {
            let parent = path.rsplit_once('/').map_or("", |(dir, _)| dir);
            let target = std::fs::read_link(self.scratch.repo_path(path)).map_err(|e| self.io(path, &e))?;
            if physical(&root, &self.scratch.repo_path(parent), &target).is_none() {
                let (unit, target) = (self.tree.unit().to_owned(), target.to_string_lossy().into_owned());
                return Err(Error::SymlinkLeavesTree { unit, path: path.clone(), target });
            }
        }
        Ok(())
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

/// Links followed in one resolution before it counts as a loop: the kernel's own limit
/// (`MAXSYMLINKS`, 40).
const MAX_LINKS: usize = 40;

/// The path `target` names from directory `dir` (inside `root`), resolved as the kernel
/// resolves it: each component in turn, a symbolic link met on the way replaced by its target
/// before the components after it. `None` when the resolution leaves `root` at any step (an
/// absolute target, a `..` at `root`) or follows more than [`MAX_LINKS`] links. A component
/// that does not exist ends the following of links: nothing below it can be one.
fn physical(root: &Path, dir: &Path, target: &Path) -> Option<PathBuf> {
    let mut current = dir.to_path_buf();
    let mut pending = steps(target)?;
    let mut links = 0;
    while let Some(step) = pending.pop_front() {
        match step {
            Step::Parent => {
                if current == root || !current.pop() || !current.starts_with(root) {
                    return None;
                }
            }
            Step::Name(name) => {
                let next = current.join(&name);
                match std::fs::symlink_metadata(&next) {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        links += 1;
                        if links > MAX_LINKS {
                            return None;
                        }
                        let mut rest = steps(&std::fs::read_link(&next).ok()?)?;
                        rest.append(&mut pending);
                        pending = rest;
                    }
                    _ => current = next,
                }
            }
        }
    }
    current.starts_with(root).then_some(current)
}

/// One component of a link's target that moves the resolution.
enum Step {
    /// `..`.
    Parent,
    /// A name.
    Name(std::ffi::OsString),
}

/// The steps of a relative `path` (`.` dropped); `None` for an absolute one.
fn steps(path: &Path) -> Option<std::collections::VecDeque<Step>> {
    use std::path::Component;
    path.components()
        .filter_map(|c| match c {
            Component::CurDir => None,
            Component::ParentDir => Some(Some(Step::Parent)),
            Component::Normal(name) => Some(Some(Step::Name(name.to_owned()))),
            Component::RootDir | Component::Prefix(_) => Some(None),
        })
        .collect()
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

    #[test]
    fn links_are_resolved_as_the_kernel_does_and_may_not_leave_the_tree() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        let chart = root.join("charts/leak");
        std::fs::create_dir_all(&chart).unwrap();
        std::fs::write(chart.join("values.yaml"), "").unwrap();
        let link = |name: &str, target: &str| std::os::unix::fs::symlink(target, chart.join(name)).unwrap();
        link("s", ".");
        link("t", "s/..");
        link("u", "t/..");
        link("v", "u/..");
        link("values", "s/values.yaml");
        link("loop", "loop/x");
        let at = |target: &str| physical(&root, &chart, Path::new(target));
        assert_eq!(at("values").as_deref(), Some(chart.join("values.yaml").as_path()));
        // Lexically all inside: `t/..` is the chart itself; followed, `s` is the chart, so
        // `t` is charts/ and `u` the repository root, and `v` its parent.
        assert_eq!(at("t").as_deref(), Some(root.join("charts").as_path()));
        assert_eq!(at("u").as_deref(), Some(root.as_path()));
        assert_eq!(at("v"), None);
        assert_eq!(at("u/charts/leak/v/etc"), None);
        assert_eq!(at("loop"), None);
        assert_eq!(at("/etc/passwd"), None);
        assert_eq!(at("missing/../values.yaml").as_deref(), Some(chart.join("values.yaml").as_path()));
    }
}
