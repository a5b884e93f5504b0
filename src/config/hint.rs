//! What to do about a config the TOML parser refused: the parser's message made a sentence a
//! person can act on.
//!
//! - An unknown key gets the closest known key of its table ("did you mean", by Jaro-Winkler
//!   similarity, `strsim`) and an example line for it, taken from the documented `config.toml`
//!   at the repository root (compiled in), so the example never drifts from the documentation.
//! - A table written with the wrong brackets (`[sync]` for the array of tables `[[sync]]`, or
//!   `[[daemon]]` for the table `[daemon]`) says which brackets to write.
//!
//! Any other message is kept as the parser wrote it.

use std::collections::HashMap;
use std::sync::LazyLock;

/// The documented example config, whose `key = value` lines (commented out or not) give the
/// example values.
const EXAMPLE: &str = include_str!("../../config.toml");

/// How similar (Jaro-Winkler, 0.0–1.0) a known key must be to a misspelt one to be suggested:
/// `intervall` → `interval` is 0.98, `kubeconfg` → `kubeconfig` 0.98, `repository` → `repo`
/// 0.88; unrelated keys (`bogus_key` → `path`) stay under 0.7.
const MIN_SIMILARITY: f64 = 0.8;

/// The parser's `message` about `key` (the dotted table path without indexes, `sync.git`;
/// `None` at the top level) rewritten when a hint applies, else unchanged.
pub(super) fn explain(key: Option<&str>, message: &str) -> String {
    let table = key.unwrap_or("");
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let Some((unknown, expected)) = rest.split_once('`') else { return message.to_owned() };
        return unknown_key(table, unknown, &backticked(expected));
    }
    if message.starts_with("invalid type: map, expected a sequence") && !table.is_empty() {
        return format!(
            "`[{table}]` is a single table, but {table} is an array of tables: write `[[{table}]]` (two brackets) \
             before each one"
        );
    }
    if message.starts_with("invalid type: sequence, expected struct") && !table.is_empty() {
        return format!("`[[{table}]]` makes an array of tables, but {table} is one table: write `[{table}]`");
    }
    message.to_owned()
}

/// The sentence for `unknown` in `table`, whose known keys are `known`.
fn unknown_key(table: &str, unknown: &str, known: &[&str]) -> String {
    let best = known
        .iter()
        .map(|k| (strsim::jaro_winkler(unknown, k), *k))
        .filter(|(score, _)| *score >= MIN_SIMILARITY)
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match best {
        Some((_, key)) => {
            let example = example(table, key).map(|line| format!(", as in `{line}`")).unwrap_or_default();
            format!("unknown key `{unknown}`: did you mean `{key}`{example}?")
        }
        None if known.is_empty() => format!("unknown key `{unknown}`: this table takes no keys"),
        None => format!("unknown key `{unknown}`; the keys here are {}", known.join(", ")),
    }
}

/// The names in backticks of serde's "expected one of `a`, `b`" (or "expected `a`").
fn backticked(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The example line of `key` in `table` from the documented config (`interval = "60s"`), or for
/// a key that is itself a table, its header (`[daemon.sharding]`).
fn example(table: &str, key: &str) -> Option<String> {
    static LINES: LazyLock<HashMap<(String, String), String>> = LazyLock::new(|| example_lines(EXAMPLE));
    let nested = if table.is_empty() { key.to_owned() } else { format!("{table}.{key}") };
    LINES.get(&(table.to_owned(), key.to_owned())).cloned().or_else(|| {
        let header = LINES.keys().any(|(t, _)| *t == nested);
        header.then(|| {
            if nested == "sync" || nested == "cluster" { format!("[[{nested}]]") } else { format!("[{nested}]") }
        })
    })
}

/// Every `key = value` line of `text` (with or without a leading `# `) by (table, key), the
/// first one of each; tables are named as the parser names them (`sync.helm`, no brackets).
fn example_lines(text: &str) -> HashMap<(String, String), String> {
    let mut lines = HashMap::new();
    let mut table = String::new();
    for line in text.lines() {
        let line = line.trim_start_matches('#').trim();
        let header = line.strip_prefix("[[").and_then(|l| l.strip_suffix("]]"));
        let header = header.or_else(|| line.strip_prefix('[').and_then(|l| l.strip_suffix(']')));
        if let Some(header) = header.filter(|h| !h.is_empty() && h.chars().all(|c| is_key_char(c) || c == '.')) {
            table = header.to_owned();
            continue;
        }
        let Some((key, _)) = line.split_once(" = ") else { continue };
        if !key.is_empty() && key.chars().all(is_key_char) {
            lines.entry((table.clone(), key.to_owned())).or_insert_with(|| line.to_owned());
        }
    }
    lines
}

fn is_key_char(c: char) -> bool {
    c.is_ascii_lowercase() || c == '_'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelt_key_gets_the_closest_one_and_its_documented_example() {
        let message = "unknown field `intervall`, expected one of `state_dir`, `interval`, `resync_interval`";
        assert_eq!(
            explain(Some("daemon"), message),
            "unknown key `intervall`: did you mean `interval`, as in `interval = \"60s\"`?"
        );
        let message = "unknown field `kubeconfg`, expected one of `name`, `kubeconfig`, `context`";
        let text = explain(Some("cluster"), message);
        assert!(text.contains("did you mean `kubeconfig`, as in `kubeconfig = \"/etc/gitward/kubeconfig\"`"), "{text}");
        let message = "unknown field `ssh_key`, expected one of `ssh_key_file`, `known_hosts_file`";
        assert!(explain(Some("sync.git"), message).contains("did you mean `ssh_key_file`"));
    }

    #[test]
    fn a_key_like_none_lists_the_keys_of_its_table() {
        let message = "unknown field `bogus_key`, expected one of `name`, `repo`, `path`";
        assert_eq!(explain(Some("sync"), message), "unknown key `bogus_key`; the keys here are name, repo, path");
    }

    #[test]
    fn a_misspelt_table_is_suggested_with_its_header() {
        let message = "unknown field `deamon`, expected one of `cluster`, `daemon`, `sync`, `render`";
        assert_eq!(explain(None, message), "unknown key `deamon`: did you mean `daemon`, as in `[daemon]`?");
        let message = "unknown field `sharding_`, expected one of `state_dir`, `sharding`";
        assert!(explain(Some("daemon"), message).ends_with("as in `[daemon.sharding]`?"));
    }

    #[test]
    fn wrong_brackets_say_which_to_write() {
        let text = explain(Some("sync"), "invalid type: map, expected a sequence");
        assert!(text.contains("write `[[sync]]`"), "{text}");
        let text = explain(Some("daemon"), "invalid type: sequence, expected struct RawDaemon");
        assert!(text.contains("write `[daemon]`"), "{text}");
        assert_eq!(explain(Some("daemon"), "invalid type: string"), "invalid type: string");
    }

    #[test]
    fn every_documented_table_has_examples() {
        let lines = example_lines(EXAMPLE);
        for (table, key) in [
            ("daemon", "state_dir"),
            ("sync", "max_prune_fraction"),
            ("render", "helm"),
            ("daemon.sharding", "identity"),
        ] {
            assert!(lines.contains_key(&(table.to_owned(), key.to_owned())), "{table}.{key}");
        }
    }

    /// The keys serde accepts in `table`, read from its refusal of an unknown one.
    fn accepted_keys(table: &str) -> Vec<String> {
        let header = match table {
            "sync" => "[[sync]]\nname = \"a\"\nrepo = \"r\"".to_owned(),
            "notify" => "[[notify]]\nkind = \"webhook\"\nurl = \"u\"".to_owned(),
            t if t.starts_with("sync.") => format!("[[sync]]\nname = \"a\"\nrepo = \"r\"\n[{t}]"),
            t => format!("[{t}]"),
        };
        let text = format!("{header}\nzzz_not_a_key = 1\n");
        let message = toml::from_str::<super::super::raw::RawConfig>(&text).expect_err("an unknown key").to_string();
        let expected = message.split("expected one of").nth(1).or_else(|| message.split("expected").nth(1));
        backticked(expected.unwrap_or_else(|| panic!("{table}: {message}"))).into_iter().map(str::to_owned).collect()
    }

    #[test]
    fn config_toml_shows_every_setting() {
        let lines = example_lines(EXAMPLE);
        let tables = [
            "cluster",
            "daemon",
            "daemon.leader_election",
            "daemon.sharding",
            "render",
            "sync",
            "sync.helm",
            "sync.decryption",
            "sync.inventory",
            "sync.git",
            "sync.verify",
            "sync.substitute",
            "notify",
        ];
        let mut missing = Vec::new();
        for table in tables {
            let keys = accepted_keys(table);
            assert!(!keys.is_empty(), "{table}");
            for key in keys {
                // A key that is a table of its own is shown by its header.
                let header = format!("[{table}.{key}]");
                if !lines.contains_key(&(table.to_owned(), key.clone())) && !EXAMPLE.contains(&header) {
                    missing.push(format!("{table}.{key}"));
                }
            }
        }
        assert!(missing.is_empty(), "config.toml has no example line for {missing:?}");
    }
}
