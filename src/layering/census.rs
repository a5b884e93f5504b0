//! The function census: how long each function of the library is, from its `fn` line to its
//! closing brace, test code left out. Past [`MAX_FN_LINES`] a function does more than one step
//! and is split into steps that each have a name.

use super::scan::{Masked, closing_brace, is_path_start, line_of};

/// The most lines a function under `src/` may have, signature and closing brace included.
pub(super) const MAX_FN_LINES: usize = 80;

/// Every function with a body in `text` (test modules left out): `(name, first line, lines)`.
pub(super) fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let code = Masked::new(text, false).without_tests();
    let mut out = Vec::new();
    for (offset, _) in code.match_indices("fn ") {
        if !is_path_start(&code, offset) {
            continue;
        }
        let rest = &code[offset + 3..];
        let name: String = rest.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if name.is_empty() {
            continue;
        }
        // The body opens at the first `{` after the signature; a `;` first is a declaration.
        let Some(open) = rest.find(['{', ';']) else { continue };
        if rest.as_bytes()[open] == b';' {
            continue;
        }
        let body = &rest[open + 1..];
        let Some(close) = closing_brace(body) else { continue };
        let (first, last) = (line_of(&code, offset), line_of(&code, offset + 3 + open + 1 + close));
        out.push((name, first, last - first + 1));
    }
    out
}
