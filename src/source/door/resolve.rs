//! Symbolic links resolved against a [`Door`]'s own map, as the kernel resolves a path
//! (`path_resolution(7)`): component by component, a link met on the way replaced by its
//! target before the components after it, at most [`MAX_LINKS`] links.
//!
//! A resolution holds a stack of the directories it stands in (entry indices from the root)
//! and a stack of the targets still being read (each a cursor into its text): each component
//! of each target followed is read once and looked up by name in its directory, so one
//! resolution takes time linear in the targets it follows — at most [`MAX_LINKS`] + 1 of
//! them, each under [`super::PATH_MAX`] bytes; one check reads at most
//! [`super::Bounds::max_bytes`] components in all. Past the first component the map does not hold,
//! the rest is taken lexically (a stack of names), still within the root.

use super::{Deadline, Door, Kind, MAX_LINKS, Refusal, Ticker, shown};

/// How the reason of a [`Refusal`] of a link whose resolution leaves the tree, or loops,
/// starts.
pub const LINK_REFUSED: &str = "the symbolic link to ";

/// Why a link's target does not resolve inside the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unresolved {
    /// A `..` climbs above the root.
    LeavesTree,
    /// More than [`MAX_LINKS`] links followed.
    Loop,
    /// A target followed is absolute.
    Absolute,
    /// The pass's deadline passed.
    TimedOut(Deadline),
    /// The check's budget of components (its [`super::Bounds::max_bytes`]) is spent.
    TooLong(u64),
}

impl std::fmt::Display for Unresolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::LeavesTree => f.write_str("leaves the tree"),
            Self::Loop => write!(f, "is a loop (more than {MAX_LINKS} links followed)"),
            Self::Absolute => f.write_str("is absolute: it names a host path"),
            Self::TimedOut(deadline) => write!(f, "passed its deadline: {}", deadline.reason()),
            Self::TooLong(budget) => {
                write!(f, "took the tree's links past {budget} components in all ([render] max_tree_bytes)")
            }
        }
    }
}

/// Where a resolution ends: the directories (entry indices, the root first) and the names
/// past the last entry the map holds.
struct Place<'a> {
    dirs: Vec<u32>,
    lexical: Vec<&'a str>,
}

impl<T> Door<T> {
    /// Resolves every symbolic link against this map as the kernel would resolve it once
    /// written (see the module docs); a component the map does not hold ends the following of
    /// links there and the rest is taken lexically, still within the root.
    ///
    /// Errors: a [`Refusal`] naming the first link (in path order) whose resolution leaves
    /// the root or follows more than [`MAX_LINKS`] links (its reason starts with
    /// [`LINK_REFUSED`]), or the link being resolved when the door's deadline passes or the
    /// check's budget of components is spent (its reason starts with `resolving it`).
    pub fn check_links(&self) -> Result<(), Refusal> {
        let mut ticker = Ticker::new(self.bounds.deadline, self.bounds.max_bytes);
        for id in self.sorted() {
            let node = &self.nodes[id as usize];
            if let Kind::Symlink { target } = &node.kind
                && let Err(why) = self.walk(node.parent, target, &mut ticker)
            {
                let reason = match why {
                    Unresolved::TimedOut(_) | Unresolved::TooLong(_) => format!("resolving it {why}"),
                    why => format!("{LINK_REFUSED}{:?} {why}", shown(target)),
                };
                return Err(Refusal::new(&node.path, reason));
            }
        }
        Ok(())
    }

    /// The path `target` names from directory `dir` (a directory of this door), resolved as
    /// the kernel resolves it.
    ///
    /// Errors: why it leaves the root (or that `dir` is not a directory of the tree).
    pub fn resolve(&self, dir: &str, target: &str) -> Result<String, String> {
        let Some(start) = self.find(dir).filter(|id| self.nodes[*id as usize].kind == Kind::Dir) else {
            return Err(format!("{} is not a directory of the tree", shown(dir)));
        };
        let place = self
            .walk(start, target, &mut Ticker::new(self.bounds.deadline, self.bounds.max_bytes))
            .map_err(|e| e.to_string())?;
        let mut path = self.nodes[*place.dirs.last().unwrap_or(&0) as usize].path.to_string();
        for name in place.lexical {
            if !path.is_empty() {
                path.push('/');
            }
            path.push_str(name);
        }
        Ok(path)
    }

    /// Follows `target` from the directory `dir`, counting every component on `ticker`.
    fn walk<'a>(&'a self, dir: u32, target: &'a str, ticker: &mut Ticker) -> Result<Place<'a>, Unresolved> {
        let mut dirs = vec![dir];
        while let Some(&at) = dirs.last().filter(|at| **at != 0) {
            dirs.push(self.nodes[at as usize].parent);
        }
        dirs.reverse();
        let mut place = Place { dirs, lexical: Vec::new() };
        if target.starts_with('/') {
            return Err(Unresolved::Absolute);
        }
        let mut pending = vec![target.split('/')];
        let mut links = 0;
        while let Some(cursor) = pending.last_mut() {
            let Some(part) = cursor.next() else {
                pending.pop();
                continue;
            };
            if let Some(deadline) = ticker.tick() {
                return Err(Unresolved::TimedOut(deadline));
            }
            if !ticker.spend() {
                return Err(Unresolved::TooLong(self.bounds.max_bytes));
            }
            if let Some(next) = self.step(&mut place, part)? {
                links += 1;
                if links > MAX_LINKS {
                    return Err(Unresolved::Loop);
                }
                if next.starts_with('/') {
                    return Err(Unresolved::Absolute);
                }
                pending.push(next.split('/'));
            }
        }
        Ok(place)
    }

    /// Takes one component `part` from `place`: a link's target when it names a link (to be
    /// followed next), else `None`.
    fn step<'a>(&'a self, place: &mut Place<'a>, part: &'a str) -> Result<Option<&'a str>, Unresolved> {
        match part {
            "" | "." => {}
            ".." => {
                if place.lexical.pop().is_none() {
                    if place.dirs.len() == 1 {
                        return Err(Unresolved::LeavesTree);
                    }
                    place.dirs.pop();
                }
            }
            name if !place.lexical.is_empty() => place.lexical.push(name),
            name => {
                let here = *place.dirs.last().unwrap_or(&0);
                match self.nodes[here as usize].children.get(name).copied() {
                    None => place.lexical.push(name),
                    Some(id) => match &self.nodes[id as usize].kind {
                        Kind::Symlink { target } => return Ok(Some(target.as_str())),
                        _ => place.dirs.push(id),
                    },
                }
            }
        }
        Ok(None)
    }
}
