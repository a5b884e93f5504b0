//! The process-wide mask set: every value a unit decrypted (SOPS), replaced by `***` in every
//! line gitward writes — logs (through [`MaskedStderr`]), `STATUS=`, the one-shot commands'
//! stdout, change-set messages and the errors recorded on an ApplySet parent.
//!
//! A value is registered once ([`register`]) and kept for the life of the process, so the
//! values of every render a unit made — the revision applied before and the one being
//! applied — stay masked. Each value is masked in the forms it takes on its way out:
//!
//! - as it is, and its base64 (a Secret's `data`);
//! - escaped once by JSON (`\"`, `\n`, `\u0001`), Rust's `{:?}` (the text log format quotes a
//!   field with it), Go's `%q` (`strconv.Quote`: the API server's `Invalid value: "…"`) or a
//!   YAML single-quoted scalar (`''`), and each of those escaped again by JSON or `{:?}` (an API
//!   message inside a JSON log line);
//! - line by line, for a value of several lines (a PEM key): each line of 3 characters or more
//!   is a value of its own, since a message may quote one line.
//!
//! Values (and lines) under 3 characters are too common to replace wherever they occur; they
//! are masked only where they stand as a whole value: a whole quoted token (`"ab"`, `'ab'`,
//! `\"ab\"`) or after `=` or `: ` up to the end of the token (a space, `,`, `;`, a bracket, a
//! quote or the end of the line). Masking is textual: it never parses what it masks.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::io::Write;
use std::sync::{Arc, LazyLock, RwLock};

use aho_corasick::{AhoCorasick, MatchKind};
use base64::Engine as _;

/// What a masked value is replaced with.
pub const MASK: &str = "***";

/// Values shorter than this (in bytes) are masked only where they stand as a whole value.
pub const MIN_SUBSTRING: usize = 3;

/// A set of values to mask and the forms each takes ([module docs](self)).
#[derive(Debug, Default, Clone)]
pub struct MaskSet {
    /// Every form of every value of [`MIN_SUBSTRING`] bytes or more, replaced wherever found.
    long: BTreeSet<String>,
    /// The forms of shorter values, replaced only as a whole value.
    short: BTreeSet<String>,
    /// A matcher over `long`, leftmost-longest; `None` while `long` is empty.
    matcher: Option<Arc<AhoCorasick>>,
}

impl MaskSet {
    /// Adds `value` (with its forms and, for several lines, each line); returns whether the
    /// set grew. An empty value is ignored.
    pub fn insert(&mut self, value: &str) -> bool {
        let mut grew = false;
        let mut values = vec![value.to_owned()];
        if value.contains('\n') {
            values.extend(value.lines().map(|l| l.trim().to_owned()));
        }
        for v in values.into_iter().filter(|v| !v.is_empty()) {
            let encoded = base64::engine::general_purpose::STANDARD.encode(&v);
            let short = v.len() < MIN_SUBSTRING;
            for form in forms(&v) {
                grew |= if short { self.short.insert(form) } else { self.long.insert(form) };
            }
            for form in forms(&encoded) {
                grew |= self.long.insert(form);
            }
        }
        if grew {
            self.matcher =
                AhoCorasick::builder().match_kind(MatchKind::LeftmostLongest).build(&self.long).ok().map(Arc::new);
        }
        grew
    }

    /// Whether nothing was registered.
    pub fn is_empty(&self) -> bool {
        self.long.is_empty() && self.short.is_empty()
    }

    /// `text` with every form of every value replaced by [`MASK`]; borrowed when nothing was.
    pub fn mask<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let mut out = Cow::Borrowed(text);
        if let Some(matcher) = &self.matcher
            && matcher.is_match(text)
        {
            let replacements = vec![MASK; self.long.len()];
            out = Cow::Owned(matcher.replace_all(text, &replacements));
        }
        for value in &self.short {
            if out.contains(value.as_str()) {
                out = Cow::Owned(mask_whole(&out, value));
            }
        }
        out
    }
}

/// `v` as it is and in the escaped forms named in the [module docs](self).
fn forms(v: &str) -> BTreeSet<String> {
    let once = [v.to_owned(), json(v), debug(v), go_quote(v), v.replace('\'', "''")];
    let mut all: BTreeSet<String> = once.iter().cloned().collect();
    for f in &once {
        all.insert(json(f));
        all.insert(debug(f));
    }
    all.remove("");
    all
}

/// `v` inside a JSON string, without the quotes.
fn json(v: &str) -> String {
    let quoted = serde_json::to_string(v).unwrap_or_default();
    quoted[1..quoted.len() - 1].to_owned()
}

/// `v` as Rust's `{:?}` writes it, without the quotes.
fn debug(v: &str) -> String {
    let quoted = format!("{v:?}");
    quoted[1..quoted.len() - 1].to_owned()
}

/// `v` as Go's `strconv.Quote` (`%q`) writes it, without the quotes: `\"`, `\\`, the C
/// escapes, other control characters as `\xNN`; printable Unicode as it is.
fn go_quote(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x0b' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\x7f' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// `text` with `value` replaced where it stands as a whole value: between matching quotes
/// (also escaped ones, `\"ab\"`), or after `=` or `: ` and before the end of the token.
fn mask_whole(text: &str, value: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = 0;
    for (at, _) in text.match_indices(value) {
        if at < rest {
            continue;
        }
        let (before, after) = (&text[..at], &text[at + value.len()..]);
        let whole = match before.chars().last() {
            Some(q @ ('"' | '\'')) => {
                let escaped = before.ends_with(&format!("\\{q}"));
                if escaped { after.starts_with(&format!("\\{q}")) } else { after.starts_with(q) }
            }
            Some('=') => ends_token(after),
            Some(' ') if before.ends_with(": ") => ends_token(after),
            _ => false,
        };
        if whole {
            out.push_str(&text[rest..at]);
            out.push_str(MASK);
            rest = at + value.len();
        }
    }
    out.push_str(&text[rest..]);
    out
}

/// Whether a token ends where `after` starts.
fn ends_token(after: &str) -> bool {
    after.chars().next().is_none_or(|c| c.is_whitespace() || ",;)]}\"'\\".contains(c))
}

/// The process's mask set.
static SET: LazyLock<RwLock<MaskSet>> = LazyLock::new(Default::default);

/// Adds decrypted `values` to the process's mask set, for every later line gitward writes.
pub fn register<I: IntoIterator<Item = S>, S: AsRef<str>>(values: I) {
    let mut set = SET.write().unwrap_or_else(|e| e.into_inner());
    for v in values {
        set.insert(v.as_ref());
    }
}

/// Whether `value` (as it is) is a registered value of [`MIN_SUBSTRING`] bytes or more, or a
/// registered short one.
pub fn is_registered(value: &str) -> bool {
    let set = SET.read().unwrap_or_else(|e| e.into_inner());
    set.long.contains(value) || set.short.contains(value)
}

/// `text` masked with the process's mask set (see the [module docs](self)).
pub fn mask(text: &str) -> Cow<'_, str> {
    let set = SET.read().unwrap_or_else(|e| e.into_inner());
    if set.is_empty() {
        return Cow::Borrowed(text);
    }
    set.mask(text)
}

/// Standard error, each event masked before it is written: the log writer, so nothing logged
/// can carry a decrypted value. The formatter writes one event into one writer, which masks
/// and writes it when dropped.
#[derive(Debug, Default, Clone, Copy)]
pub struct MaskedStderr;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for MaskedStderr {
    type Writer = MaskedEvent;

    fn make_writer(&'a self) -> Self::Writer {
        MaskedEvent(Vec::new())
    }
}

/// One event's bytes, masked and written to standard error on drop.
#[derive(Debug)]
pub struct MaskedEvent(Vec<u8>);

impl Write for MaskedEvent {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for MaskedEvent {
    fn drop(&mut self) {
        let text = String::from_utf8_lossy(&self.0);
        let _ = std::io::stderr().lock().write_all(mask(&text).as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(values: &[&str]) -> MaskSet {
        let mut set = MaskSet::default();
        for v in values {
            set.insert(v);
        }
        set
    }

    #[test]
    fn a_value_and_its_base64_are_masked() {
        let set = of(&["hunter2-secret"]);
        let encoded = base64::engine::general_purpose::STANDARD.encode("hunter2-secret");
        assert_eq!(set.mask(&format!("bad hunter2-secret or {encoded} in db")), "bad *** or *** in db");
        assert!(matches!(set.mask("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn escaped_forms_are_masked_once_and_twice_escaped() {
        let value = "pa\"ss\\word\n2";
        let set = of(&[value]);
        let go = r#"Invalid value: "pa\"ss\\word\n2": a valid label"#;
        assert_eq!(set.mask(go), r#"Invalid value: "***": a valid label"#);
        // The same message inside a JSON log line.
        let logged = serde_json::to_string(go).unwrap();
        assert!(!set.mask(&logged).contains("ss\\\\\\\\word"), "{}", set.mask(&logged));
        assert_eq!(set.mask(&logged), serde_json::to_string(r#"Invalid value: "***": a valid label"#).unwrap());
        let debug = format!("reason={:?}", format!("value {value}"));
        assert_eq!(set.mask(&debug), "reason=\"value ***\"");
        let yaml = of(&["it's secret"]);
        assert_eq!(yaml.mask("key: 'it''s secret'"), "key: '***'");
        let control = of(&["a\x01bcd"]);
        assert_eq!(control.mask(r#"json "a\u0001bcd" go "a\x01bcd""#), r#"json "***" go "***""#);
    }

    #[test]
    fn each_line_of_a_multi_line_value_is_masked() {
        let pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----\n";
        let set = of(&[pem]);
        let text = "line 2 of the key: MIIEvQIBADANBgkqhkiG9w0BAQEFAASC; line 3 BKcwggSjAgEAAoIBAQC7";
        assert_eq!(set.mask(text), "line 2 of the key: ***; line 3 ***");
        assert_eq!(set.mask(&format!("x={pem:?}")), "x=\"***\"");
    }

    #[test]
    fn short_values_are_masked_only_as_a_whole_value() {
        let set = of(&["q7", "x"]);
        assert_eq!(set.mask(r#"Invalid value: "q7": bad"#), r#"Invalid value: "***": bad"#);
        assert_eq!(set.mask(r#"{"message":"Invalid value: \"q7\""}"#), r#"{"message":"Invalid value: \"***\""}"#);
        assert_eq!(set.mask("password=q7 user=app"), "password=*** user=app");
        assert_eq!(set.mask("password: q7\nuser: app"), "password: ***\nuser: app");
        assert_eq!(set.mask("q7q7 aq7 =q7x x-ray object=ConfigMap/x/db"), "q7q7 aq7 =q7x x-ray object=ConfigMap/x/db");
        assert_eq!(set.mask("'x' and value: x, y"), "'***' and value: ***, y");
    }
}
