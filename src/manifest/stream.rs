//! Reading a file's bytes into the JSON values of its documents, framed as kubectl frames them.
//!
//! kubectl (`k8s.io/apimachinery/pkg/util/yaml`, `YAMLReader`) cuts a YAML stream into documents
//! at every line that starts with `---`, and rejects a separator line that holds anything but a
//! comment after the dashes; each piece is then parsed on its own. This module cuts the same
//! way, which also lets every error name its document, and parses each piece with serde-saphyr
//! into a [`YamlValue`].

use serde_json::Value;
use serde_saphyr::{DuplicateKeyPolicy, MergeKeyPolicy, SnippetMode, UserMessageFormatter};

use super::error::{Error, Result};
use super::value::{JsonValue, YamlValue};

/// Deepest nesting of mappings and sequences accepted in a YAML document. An OpenAPI schema in a
/// CRD adds two levels per field, and CRDs that unroll recursive types (Keycloak's realm import,
/// Seldon's inference graph) go well past serde-saphyr's default of 64; go-yaml has no limit.
pub(super) const MAX_DEPTH: usize = 256;

/// Stack of the thread that parses a YAML file. serde-saphyr recurses once per nesting level,
/// using about 3 KiB of stack per level in release builds and 24 KiB in debug builds (measured
/// with 2.1.1), so a document at [`MAX_DEPTH`] needs up to 6 MiB: more than the 2 MiB of a
/// tokio or test thread. The stack is reserved address space; only the pages used are committed.
const PARSE_STACK_BYTES: usize = 16 << 20;

/// Most events one document may replay through aliases. Manifests use aliases for a few shared
/// labels or env lists; an alias bomb ("billion laughs") needs millions of replays and stops here
/// instead of eating memory.
pub(super) const MAX_ALIAS_REPLAYED_EVENTS: usize = 100_000;

/// The values of a file's documents, in order, each with its 0-based document index. Empty and
/// comment-only documents are included as `Value::Null` so indices stay true to the file.
pub(super) fn read_documents(file: &str, bytes: &[u8]) -> Result<Vec<(usize, Value)>> {
    let text = std::str::from_utf8(bytes).map_err(|err| Error::Encoding {
        file: file.to_owned(),
        message: format!("invalid byte at offset {}", err.valid_up_to()),
    })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if file.ends_with(".json") { json_documents(file, text) } else { yaml_documents(file, text) }
}

/// A JSON file is a stream of JSON values (kubectl's JSON path reads successive values too);
/// usually just one.
fn json_documents(file: &str, text: &str) -> Result<Vec<(usize, Value)>> {
    let stream = serde_json::Deserializer::from_str(text).into_iter::<JsonValue>();
    let mut documents = Vec::new();
    for (index, value) in stream.enumerate() {
        let value =
            value.map_err(|err| Error::ParseDocument { file: file.to_owned(), index, message: err.to_string() })?;
        documents.push((index, value.0));
    }
    Ok(documents)
}

thread_local! {
    /// True on threads started by [`spawn_parse_thread`]: their stack fits [`MAX_DEPTH`], so
    /// they parse in place.
    static ON_PARSE_STACK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Starts a scoped thread whose stack fits [`MAX_DEPTH`] ([`PARSE_STACK_BYTES`]) and on which
/// [`super::parse_file`] parses YAML in place, for a caller that parses many files: without it,
/// each file is parsed on a thread started for it alone (about 0.15 ms a file, most of a
/// small manifest's parse).
///
/// Errors: the thread could not be started (resource limits).
pub(crate) fn spawn_parse_thread<'scope, T: Send + 'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    f: impl FnOnce() -> T + Send + 'scope,
) -> std::io::Result<std::thread::ScopedJoinHandle<'scope, T>> {
    std::thread::Builder::new().name("manifest-parse".into()).stack_size(PARSE_STACK_BYTES).spawn_scoped(
        scope,
        move || {
            ON_PARSE_STACK.with(|on| on.set(true));
            f()
        },
    )
}

/// Parses a YAML stream on a thread whose stack fits [`MAX_DEPTH`] (this one, when started by
/// [`spawn_parse_thread`], else one of its own), so a deep document is rejected by the depth
/// limit instead of overflowing the caller's stack.
fn yaml_documents(file: &str, text: &str) -> Result<Vec<(usize, Value)>> {
    if ON_PARSE_STACK.with(|on| on.get()) {
        return parse_yaml_stream(file, text);
    }
    std::thread::scope(|scope| {
        let parse = move || parse_yaml_stream(file, text);
        let thread = std::thread::Builder::new().name("manifest-parse".into()).stack_size(PARSE_STACK_BYTES);
        match thread.spawn_scoped(scope, parse) {
            Ok(handle) => handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            // No thread to be had (resource limits): parse on the caller's stack.
            Err(_) => parse_yaml_stream(file, text),
        }
    })
}

fn parse_yaml_stream(file: &str, text: &str) -> Result<Vec<(usize, Value)>> {
    let chunks = split_yaml(text).map_err(|bad| Error::ParseDocument {
        file: file.to_owned(),
        index: bad.index,
        message: format!(
            "line {}: a `---` document separator may be followed only by a comment, found `{}`",
            bad.line + 1,
            bad.found
        ),
    })?;
    let mut documents = Vec::with_capacity(chunks.len());
    for (index, chunk) in chunks.iter().enumerate() {
        let parsed = serde_saphyr::from_str_with_options::<YamlValue>(chunk.text, yaml_options());
        match parsed {
            Ok(value) => documents.push((index, value.0)),
            Err(err) => return Err(yaml_error(file, index, chunk.line_offset, &err)),
        }
    }
    Ok(documents)
}

/// serde-saphyr options for reading YAML as kubectl does (go-yaml v2, YAML 1.1): `0644` is
/// octal (420), `yes`/`no`/`on`/`off`/`y`/`n` are booleans, anchors and aliases resolve.
///
/// - `<<` reaches [`YamlValue`] as an ordinary key, which expands it with go-yaml v2's
///   precedence; serde-saphyr's own expansion follows the merge-key spec, where a key written
///   before `<<` wins, and kubectl would read such a manifest differently.
/// - A key repeated in one mapping is an error. kubectl 1.35 silently keeps the last value, even
///   with `--validate=strict`, which hides mistakes such as two `env:` blocks; YAML requires
///   unique keys. Like `generateName`, this is a manifest kubectl accepts and gitward refuses.
fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        legacy_octal_numbers: true,
        strict_booleans: false,
        merge_keys: MergeKeyPolicy::AsOrdinary,
        duplicate_keys: DuplicateKeyPolicy::Error,
        emit_comments: false,
        with_snippet: false,
        // The parser's own flow-nesting cap (default 255) goes above the depth budget, so
        // the budget's clearer error is the one reported.
        budget: serde_saphyr::budget! { max_depth: MAX_DEPTH, flow_nesting_limit: MAX_DEPTH + 1 },
        alias_limits: serde_saphyr::alias_limits! {
            max_total_replayed_events: MAX_ALIAS_REPLAYED_EVENTS,
        },
    }
}

/// One document of a YAML stream: its text and how many lines of the file precede it.
struct Chunk<'a> {
    text: &'a str,
    line_offset: usize,
}

/// A separator line with content after the dashes: the document it would start (0-based), its
/// 0-based line, and what follows the dashes.
struct BadSeparator {
    index: usize,
    line: usize,
    found: String,
}

/// Cuts a YAML stream into documents at lines starting with `---`, like kubectl's `YAMLReader`.
/// Each separator starts a document, even an empty one; the text before the first separator is
/// a document only if it holds more than blank and comment lines (so a license header before
/// the first `---` is not counted).
fn split_yaml(text: &str) -> std::result::Result<Vec<Chunk<'_>>, BadSeparator> {
    let mut chunks = Vec::new();
    let (mut start, mut start_line) = (0, 0);
    let mut seen_separator = false;
    let mut offset = 0;
    for (line_number, line) in text.split_inclusive('\n').enumerate() {
        if let Some(rest) = line.strip_prefix("---") {
            let rest = rest.trim();
            let body = &text[start..offset];
            if seen_separator || has_content(body) {
                chunks.push(Chunk { text: body, line_offset: start_line });
            }
            if !rest.is_empty() && !rest.starts_with('#') {
                let found = rest.to_owned();
                return Err(BadSeparator { index: chunks.len(), line: line_number, found });
            }
            seen_separator = true;
            start = offset + line.len();
            start_line = line_number + 1;
        }
        offset += line.len();
    }
    let body = &text[start..];
    if seen_separator || has_content(body) {
        chunks.push(Chunk { text: body, line_offset: start_line });
    }
    Ok(chunks)
}

/// Whether text holds anything but blank lines and comments.
fn has_content(text: &str) -> bool {
    text.lines().map(str::trim).any(|line| !line.is_empty() && !line.starts_with('#'))
}

/// Maps a serde-saphyr error to ours, with the line numbered within the file.
fn yaml_error(file: &str, index: usize, line_offset: usize, err: &serde_saphyr::Error) -> Error {
    let options = serde_saphyr::render_options! {
        formatter: &UserMessageFormatter,
        snippets: SnippetMode::Off,
        line_offset: line_offset as u64,
    };
    let message = err.render_with_options(options);
    let file = file.to_owned();
    if is_limit(err) {
        Error::LimitExceeded { file, index, message }
    } else {
        Error::ParseDocument { file, index, message }
    }
}

/// Whether serde-saphyr stopped on one of its limits rather than on bad syntax.
fn is_limit(err: &serde_saphyr::Error) -> bool {
    use serde_saphyr::Error as E;
    match err {
        E::WithSnippet { error, .. } | E::AliasError { error, .. } => is_limit(error),
        E::Budget { .. }
        | E::AliasReplayCounterOverflow { .. }
        | E::AliasReplayLimitExceeded { .. }
        | E::AliasExpansionLimitExceeded { .. }
        | E::AliasReplayStackDepthExceeded { .. } => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(text: &str) -> Vec<(&str, usize)> {
        let chunks = split_yaml(text).ok().unwrap_or_default();
        chunks.iter().map(|c| (c.text, c.line_offset)).collect()
    }

    #[test]
    fn separators_start_documents_even_empty_ones() {
        let text = "# header\n---\na: 1\n---\n---\n# only a comment\n--- # trailing comment\nb: 2\n";
        assert_eq!(texts(text), vec![("a: 1\n", 2), ("", 4), ("# only a comment\n", 5), ("b: 2\n", 7)]);
    }

    #[test]
    fn content_before_the_first_separator_is_a_document() {
        assert_eq!(texts("a: 1\n---\nb: 2"), vec![("a: 1\n", 0), ("b: 2", 2)]);
    }

    #[test]
    fn separator_followed_by_content_is_rejected_like_kubectl() {
        let err = read_documents("x.yaml", b"a: 1\n--- b: 2\n").err();
        let message = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(message.starts_with("x.yaml: document 2: line 2: a `---` document separator"), "{message}");
    }

    #[test]
    fn syntax_error_names_file_document_and_file_line() {
        let text = "a: 1\n---\nkind: x\nmetadata:\n  name: [unclosed\n  other: 1\n";
        let err = read_documents("deploy/app.yaml", text.as_bytes()).err();
        let Some(Error::ParseDocument { file, index, message }) = err else {
            panic!("expected a parse error, got {err:?}");
        };
        assert_eq!((file.as_str(), index), ("deploy/app.yaml", 1));
        assert!(message.contains("line 6"), "{message}");
    }

    #[test]
    fn alias_bomb_is_rejected_as_a_limit() {
        let mut text = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
        for level in 1..10 {
            let refs = vec![format!("*a{}", level - 1); 10].join(", ");
            text.push_str(&format!("a{level}: &a{level} [{refs}]\n"));
        }
        let err = read_documents("bomb.yaml", text.as_bytes()).err();
        let Some(Error::LimitExceeded { index: 0, message, .. }) = err else {
            panic!("expected a limit error, got {err:?}");
        };
        assert!(message.contains("too large or too complex"), "{message}");
    }

    #[test]
    fn deep_nesting_within_the_limit_parses_on_a_small_stack() {
        let depth = MAX_DEPTH - 1;
        let flow = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
        let block: String = (0..depth).map(|level| format!("{}a:\n", "  ".repeat(level))).collect();
        for text in [flow, block] {
            // Test threads get 2 MiB of stack, like tokio's; debug builds need 6 MiB here.
            let docs = read_documents("deep.yaml", text.as_bytes());
            assert!(docs.is_ok(), "{:?}", docs.err());
        }
        let too_deep = format!("{}1{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        let err = read_documents("deep.yaml", too_deep.as_bytes()).err();
        assert!(matches!(err, Some(Error::LimitExceeded { .. })), "{err:?}");
    }

    #[test]
    fn json_file_is_a_stream_of_values() {
        let docs = read_documents("a.json", b"{\"a\": 1.0}\n{\"b\": [2]}").ok().unwrap_or_default();
        assert_eq!(docs, vec![(0, serde_json::json!({"a": 1})), (1, serde_json::json!({"b": [2]}))]);
        let err = read_documents("a.json", b"{\"a\": 1}\n{\"b\": ").err();
        assert!(matches!(err, Some(Error::ParseDocument { index: 1, .. })), "{err:?}");
    }

    #[test]
    fn invalid_utf8_is_an_encoding_error() {
        let err = read_documents("a.yaml", b"a: \xff\n").err();
        assert!(matches!(err, Some(Error::Encoding { .. })), "{err:?}");
    }
}
