//! Reading Rust source without a parser: literals and comments blanked, paths and test
//! modules found, for the edges test and the function census.

use std::path::{Path, PathBuf};

/// A file's text with string and char literals blanked (spaces; newlines kept, so offsets and
/// lines stay), and comments blanked too unless `keep_comments`.
pub(super) struct Masked {
    pub(super) text: String,
    /// The same text with comments blanked as well, to find test modules and braces.
    pub(super) code: String,
}

impl Masked {
    pub(super) fn new(text: &str, keep_comments: bool) -> Self {
        let bytes = text.as_bytes();
        let mut code = bytes.to_vec();
        let mut kept = bytes.to_vec();
        let blank = |buf: &mut Vec<u8>, from: usize, to: usize| {
            for b in &mut buf[from..to] {
                if *b != b'\n' {
                    *b = b' ';
                }
            }
        };
        let mut i = 0;
        while i < bytes.len() {
            let starts_token = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
            let end = if bytes[i..].starts_with(b"//") {
                let end = bytes[i..].iter().position(|&b| b == b'\n').map_or(bytes.len(), |p| i + p);
                blank(&mut code, i, end);
                if !keep_comments {
                    blank(&mut kept, i, end);
                }
                i = end;
                continue;
            } else if bytes[i..].starts_with(b"/*") {
                let end = block_comment_end(bytes, i);
                blank(&mut code, i, end);
                if !keep_comments {
                    blank(&mut kept, i, end);
                }
                i = end;
                continue;
            } else if let Some(end) = starts_token.then(|| raw_string_end(bytes, i)).flatten() {
                end
            } else if bytes[i] == b'"' || (starts_token && bytes[i..].starts_with(b"b\"")) {
                let open = if bytes[i] == b'"' { i } else { i + 1 };
                string_end(bytes, open)
            } else if bytes[i] == b'\'' {
                match char_literal_end(bytes, i) {
                    Some(end) => end,
                    None => {
                        i += 1;
                        continue;
                    }
                }
            } else {
                i += 1;
                continue;
            };
            blank(&mut code, i, end);
            blank(&mut kept, i, end);
            i = end;
        }
        let text = String::from_utf8(kept).expect("blanking keeps UTF-8 boundaries");
        let code = String::from_utf8(code).expect("blanking keeps UTF-8 boundaries");
        Self { text, code }
    }

    /// The text with every inline `#[cfg(test)]` module's body blanked.
    pub(super) fn without_tests(&self) -> String {
        let mut text = self.text.clone().into_bytes();
        for module in test_modules(&self.code) {
            if let Some((start, end)) = module.body {
                for b in &mut text[start..end.min(self.text.len())] {
                    if *b != b'\n' {
                        *b = b' ';
                    }
                }
            }
        }
        String::from_utf8(text).expect("blanking keeps UTF-8 boundaries")
    }
}

impl std::ops::Deref for Masked {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

/// The end (exclusive) of the block comment opening at `start`; block comments nest.
pub(super) fn block_comment_end(bytes: &[u8], start: usize) -> usize {
    let (mut depth, mut i) = (0usize, start);
    while i + 1 < bytes.len() {
        if bytes[i..].starts_with(b"/*") {
            depth += 1;
            i += 2;
        } else if bytes[i..].starts_with(b"*/") {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    bytes.len()
}

/// The end (exclusive) of a raw string (`r"…"`, `r#"…"#`, `br#"…"#`) starting at `start`, if
/// one does.
pub(super) fn raw_string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut i = start;
    if bytes.get(i) == Some(&b'b') {
        i += 1;
    }
    if bytes.get(i) != Some(&b'r') {
        return None;
    }
    i += 1;
    let hashes = bytes[i..].iter().take_while(|&&b| b == b'#').count();
    i += hashes;
    if bytes.get(i) != Some(&b'"') {
        return None;
    }
    let closing: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
    let end = bytes[i + 1..].windows(closing.len()).position(|w| w == closing.as_slice());
    Some(end.map_or(bytes.len(), |p| i + 1 + p + closing.len()))
}

/// The end (exclusive) of the string literal whose opening quote is at `open`.
pub(super) fn string_end(bytes: &[u8], open: usize) -> usize {
    let mut i = open + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// The end (exclusive) of the char literal at `start` (`'x'`, `'\n'`, `'\u{1F600}'`), or
/// `None` for a lifetime or label (`'a`, `'static`).
pub(super) fn char_literal_end(bytes: &[u8], start: usize) -> Option<usize> {
    let rest = &bytes[start + 1..];
    if rest.first() == Some(&b'\\') {
        return rest.iter().skip(1).position(|&b| b == b'\'').map(|p| start + 1 + 1 + p + 1);
    }
    let text = std::str::from_utf8(&rest[..rest.len().min(5)])
        .unwrap_or_else(|e| std::str::from_utf8(&rest[..e.valid_up_to()]).expect("the valid prefix"));
    let first = text.chars().next()?;
    (text[first.len_utf8()..].starts_with('\'')).then(|| start + 1 + first.len_utf8() + 1)
}

/// Whether the path at `offset` starts there (not `$crate::` nor the tail of `foo_crate::`).
pub(super) fn is_path_start(text: &str, offset: usize) -> bool {
    text[..offset].chars().next_back().is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '$'))
}

/// The identifier at the start of `text`.
pub(super) fn ident(text: &str) -> &str {
    let end = text.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(text.len());
    &text[..end]
}

/// The offset of the `}` closing a group whose `{` was just before `text`.
pub(super) fn closing_brace(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return Some(i),
            '}' => depth -= 1,
            _ => {}
        }
    }
    None
}

/// The first identifier of each top-level item of a `use` group's inside (`a::b, c, d::{e}`
/// gives `a`, `c`, `d`).
pub(super) fn top_level_items(group: &str) -> Vec<String> {
    let (mut items, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(ident(group[start..i].trim_start()).to_string());
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(ident(group[start..].trim_start()).to_string());
    items
}

/// The 1-based line of `offset`.
pub(super) fn line_of(text: &str, offset: usize) -> usize {
    text[..offset].matches('\n').count() + 1
}

/// The top-level module a file under `src/` belongs to; `""` for `lib.rs` and `main.rs`.
pub(super) fn module_of(rel: &str) -> String {
    let inside = rel.strip_prefix("src/").unwrap_or(rel);
    match inside.split('/').next().unwrap_or_default() {
        "lib.rs" | "main.rs" => String::new(),
        first => first.trim_end_matches(".rs").to_string(),
    }
}

/// Every `.rs` file under `dir`, sorted.
pub(crate) fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("a source directory") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// `file` relative to the crate root, `/`-separated.
pub(super) fn relative(root: &Path, file: &Path) -> String {
    file.strip_prefix(root).expect("under the crate root").to_string_lossy().replace('\\', "/")
}

/// The names of the modules `text` declares as `#[cfg(test)] mod name;` (their files are test
/// code).
pub(super) fn test_children(text: &str) -> Vec<String> {
    let code = Masked::new(text, false);
    test_modules(&code.text).into_iter().filter(|m| m.body.is_none()).map(|m| m.name).collect()
}

/// A `#[cfg(test)] mod` item: its name and, for an inline module, the byte range of its body.
pub(super) struct TestModule {
    pub(super) name: String,
    pub(super) body: Option<(usize, usize)>,
}

/// Every `#[cfg(test)]` module of `code` (strings and comments already blanked).
pub(super) fn test_modules(code: &str) -> Vec<TestModule> {
    let mut out = Vec::new();
    for (offset, attr) in code.match_indices("#[cfg(test)]") {
        let mut rest = code[offset + attr.len()..].trim_start();
        while let Some(other) = rest.strip_prefix("#[") {
            rest = other[other.find(']').map_or(other.len(), |i| i + 1)..].trim_start();
        }
        if let Some(after_pub) = rest.strip_prefix("pub") {
            rest = after_pub.trim_start();
            if rest.starts_with('(') {
                rest = rest[rest.find(')').map_or(0, |i| i + 1)..].trim_start();
            }
        }
        let Some(after_mod) = rest.strip_prefix("mod ") else { continue };
        let name = ident(after_mod.trim_start());
        let after_name = after_mod.trim_start()[name.len()..].trim_start();
        let body = match after_name.chars().next() {
            Some(';') => None,
            Some('{') => {
                let start = code.len() - after_name.len();
                let end = start + 1 + closing_brace(&after_name[1..]).unwrap_or(after_name.len() - 1);
                Some((start, end))
            }
            _ => continue,
        };
        out.push(TestModule { name: name.to_string(), body });
    }
    out
}
