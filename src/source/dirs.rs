//! The directories of a revision's tree that a `[[sync_set]]`'s `path_glob` matches.
//!
//! The glob is matched one component at a time, so the walk reads only the directories on the
//! way: `apps/*` reads the root and `apps`, never below. A component is a name or a pattern of
//! `*` (any run of characters) and `?` (one character); neither matches a name's leading `.`,
//! as in a shell, so `.git`-like directories stay out. Only directories match: files, links
//! and submodules never do. A name that is not UTF-8 is skipped: it could be neither a unit
//! name nor a path in the config.

use super::view::EntryKind;
use super::{Result, Tree};

/// The directories of `tree` that `glob` matches, `/`-separated paths from the root, sorted.
/// `glob` is normalised (no empty component, no `..`), as the config checked it.
///
/// Errors: [`super::Error::ReadObject`] or [`super::Error::Refused`] when a directory on the
/// way cannot be read.
pub fn matching_dirs(tree: &Tree<'_>, glob: &str) -> Result<Vec<String>> {
    let mut level = vec![String::new()];
    for pattern in glob.split('/').filter(|c| !c.is_empty()) {
        let mut next = Vec::new();
        for dir in &level {
            let Some(id) = tree.dir(dir) else { continue };
            for entry in tree.entries(dir, id)? {
                let Ok(name) = std::str::from_utf8(&entry.name) else { continue };
                if entry.kind == EntryKind::Dir && component_matches(pattern, name) {
                    next.push(if dir.is_empty() { name.to_owned() } else { format!("{dir}/{name}") });
                }
            }
        }
        level = next;
    }
    level.sort();
    Ok(level)
}

/// Whether one path component `name` matches `pattern` (`*`, `?`, other characters literal;
/// [`crate::config::wildcard_matches`]); a hidden name (`.git`) only by a pattern that starts
/// with `.`.
pub fn component_matches(pattern: &str, name: &str) -> bool {
    if name.starts_with('.') && !pattern.starts_with('.') {
        return false;
    }
    crate::config::wildcard_matches(pattern, name)
}

#[cfg(test)]
mod tests {
    use super::component_matches;

    #[test]
    fn a_star_matches_any_name_but_a_hidden_one() {
        assert!(component_matches("*", "shop"));
        assert!(!component_matches("*", ".git"));
        assert!(component_matches(".*", ".hidden"));
        assert!(component_matches("team-*", "team-a"));
        assert!(!component_matches("team-*", "other"));
        assert!(component_matches("*-prod", "shop-prod"));
        assert!(component_matches("a*b*c", "axxbyyc"));
        assert!(!component_matches("a*b*c", "axxbyy"));
    }

    #[test]
    fn a_question_mark_matches_one_character_and_others_are_literal() {
        assert!(component_matches("app?", "app1"));
        assert!(!component_matches("app?", "app"));
        assert!(component_matches("apps", "apps"));
        assert!(!component_matches("apps", "apps2"));
    }
}
