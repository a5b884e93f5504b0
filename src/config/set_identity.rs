//! What a `[[sync_set]]` directory may not choose: the identity its unit writes or reads as.
//!
//! A directory's name comes from whoever can push to the set's repository. `{dir}` and `{path}`
//! are therefore refused in the keys that pick an identity, a credential or a place gitward
//! reads with its own rights — `service_account`, `substitute.from`, `decryption`,
//! `inventory`, `cluster`, `git` and `verify` — and `depends_on` is refused in a template
//! altogether (generated units are not ordered). A `namespace` template with `{dir}` or
//! `{path}` is allowed only when the units write as a ServiceAccount (the set's
//! `service_account` or `[daemon] default_service_account`, whose RBAC bounds them), or when
//! the set's `namespaces` patterns bound the namespaces its units may have.

use toml::Value;

use super::set::SyncSet;
use super::{Result, SyncUnit};

/// The template keys (top-level, or `table.key`) that may not hold `{dir}` or `{path}`.
const FIXED_KEYS: [&str; 7] =
    ["service_account", "substitute.from", "decryption", "inventory", "cluster", "git", "verify"];

/// The placeholders a pushed directory fills.
const FROM_THE_TREE: [&str; 2] = ["{dir}", "{path}"];

/// Whether `value` (a string, or any string inside a list or table) holds `{dir}` or `{path}`.
fn from_the_tree(value: &Value) -> bool {
    match value {
        Value::String(text) => FROM_THE_TREE.iter().any(|p| text.contains(p)),
        Value::Array(items) => items.iter().any(from_the_tree),
        Value::Table(table) => table.values().any(from_the_tree),
        _ => false,
    }
}

impl SyncSet {
    /// Whether the set's `name` template could make a unit named `name`: the template with each
    /// `{dir}`, `{path}` and `{cluster}` read as `*` matches it ([`wildcard_matches`]).
    pub fn could_make(&self, name: &str) -> bool {
        let pattern = ["{dir}", "{path}", "{cluster}"].iter().fold(self.name.clone(), |p, v| p.replace(v, "*"));
        wildcard_matches(&pattern, name)
    }

    /// The template value at `key` (`substitute.from`: `from` of the `substitute` table).
    fn template_value(&self, key: &str) -> Option<&Value> {
        let mut parts = key.split('.');
        let first = self.template.get(parts.next()?)?;
        parts.try_fold(first, |value, part| value.as_table()?.get(part))
    }

    /// Refuses `{dir}` and `{path}` in the keys that choose identity, and `depends_on`.
    ///
    /// Errors: [`super::Error::Invalid`] at `sync_set[<index>].<key>`.
    pub(super) fn check_identity_keys(&self) -> Result<()> {
        if self.template.contains_key("depends_on") {
            let message = "is not supported in a set's template: generated units are not ordered; \
                           name them in a [[sync]] unit's depends_on instead, or write the units as [[sync]] tables";
            return Err(self.invalid("depends_on", message));
        }
        for key in FIXED_KEYS {
            if self.template_value(key).is_some_and(from_the_tree) {
                let message = "cannot hold `{dir}` or `{path}`: a directory pushed to the repository must not \
                               choose the identity, credentials or objects a unit uses";
                return Err(self.invalid(key, message));
            }
        }
        Ok(())
    }

    /// Refuses a `namespace` template with `{dir}` or `{path}` when `sample` (the template
    /// resolved for a sample directory) writes as gitward itself and the set has no
    /// `namespaces` patterns: a directory named `kube-system` would apply there.
    ///
    /// Errors: [`super::Error::Invalid`] at `sync_set[<index>].namespace`.
    pub(super) fn check_namespace_template(&self, sample: &SyncUnit) -> Result<()> {
        let chosen = self.template.get("namespace").is_some_and(from_the_tree);
        if chosen && sample.service_account.is_none() && self.namespaces.is_empty() {
            let message = "holds `{dir}` or `{path}`, so a directory's name chooses where its unit writes: \
                           give the set a service_account (or [daemon] default_service_account), \
                           or bound the namespaces with `namespaces = \"team-*\"`";
            return Err(self.invalid("namespace", message));
        }
        Ok(())
    }

    /// Refuses `unit` (made of directory `path`) when the set has `namespaces` patterns and its
    /// namespace matches none.
    ///
    /// Errors: [`super::Error::Invalid`] at `sync_set[<index>].namespaces`.
    pub(super) fn check_namespace(&self, unit: &SyncUnit, path: &str) -> Result<()> {
        if self.namespaces.is_empty() || self.namespaces.iter().any(|p| wildcard_matches(p, &unit.namespace)) {
            return Ok(());
        }
        let message = format!(
            "the namespace `{}` of unit `{}` (directory `{path}`) matches none of {:?}",
            unit.namespace, unit.name, self.namespaces
        );
        Err(self.invalid("namespaces", message))
    }
}

/// Whether `name` matches `pattern` (`*` any run of characters, `?` one, others literal: a
/// `[[sync_set]]`'s `path_glob` component and `namespaces` pattern), by
/// the usual two-pointer match with one backtrack point: linear in practice.
pub fn wildcard_matches(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let (mut pi, mut ni, mut star, mut mark) = (0, 0, None, 0);
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            (pi, ni) = (pi + 1, ni + 1);
        } else if pi < p.len() && p[pi] == '*' {
            (star, mark, pi) = (Some(pi), ni, pi + 1);
        } else if let Some(s) = star {
            (pi, mark) = (s + 1, mark + 1);
            ni = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::wildcard_matches;

    #[test]
    fn a_namespace_pattern_matches_by_wildcards() {
        assert!(wildcard_matches("team-*", "team-blue"));
        assert!(wildcard_matches("team-*", "team-"));
        assert!(!wildcard_matches("team-*", "kube-system"));
        assert!(wildcard_matches("t?am-*-x", "team-a-b-x"));
        assert!(!wildcard_matches("team", "team-blue"));
        assert!(wildcard_matches("*", "anything"));
    }
}
