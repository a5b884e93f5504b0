//! A report split over comments, never truncated: each part under the forge's body limit and
//! rendering on its own. A code fence or `<details>` block open where a part ends is closed
//! there and opened again (the fence's info string, the block's `<summary>`) where the next
//! starts. Parts after the first are told apart by [`part_marker`] on their first line.
//!
//! Sizes are counted in bytes, never fewer than the characters a forge counts, so a part under
//! the limit in bytes is under it as the forge counts too.

/// What each preview comment starts with; a report of one part starts with it as given.
pub const MARKER: &str = "<!-- gitward-preview -->";

/// The prefix every preview comment starts with, one part or many.
pub const MARKER_PREFIX: &str = "<!-- gitward-preview";

/// The first line of part `index` (1-based) of `count`: `<!-- gitward-preview part 2/3 -->`.
pub fn part_marker(index: usize, count: usize) -> String {
    format!("<!-- gitward-preview part {index}/{count} -->")
}

/// Room kept for the part marker: its text for counts of up to six digits, and its newline.
const MARKER_ROOM: usize = "<!-- gitward-preview part 999999/999999 -->\n".len();

/// One part as [`split`] made it: the input's text it carries, between what reopens the blocks
/// open where it starts and what closes those open where it ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// The lines that open again the fences and blocks open where the part starts.
    pub reopen: String,
    /// The input's text this part carries: the parts' contents, in order, are the input.
    pub content: String,
    /// The lines that close the fences and blocks open where the part ends.
    pub close: String,
}

impl Part {
    /// The comment body: the part marker, the reopening lines, the content, the closing lines.
    pub fn render(&self, index: usize, count: usize) -> String {
        let mut body = part_marker(index, count);
        body.push('\n');
        body.push_str(&self.reopen);
        body.push_str(&self.content);
        if !self.close.is_empty() && !self.content.is_empty() && !self.content.ends_with('\n') {
            body.push('\n');
        }
        body.push_str(&self.close);
        body
    }
}

/// Splits `markdown` into comment bodies of at most `limit` bytes each: the text itself when
/// it fits, else [`Part`]s rendered with their part markers.
pub fn split_bodies(markdown: &str, limit: usize) -> Vec<String> {
    if markdown.len() <= limit {
        return vec![markdown.to_owned()];
    }
    let parts = split(markdown, limit);
    let count = parts.len();
    parts.iter().enumerate().map(|(i, p)| p.render(i + 1, count)).collect()
}

/// Splits `markdown` at line ends (a line longer than a part can hold at char boundaries) into
/// parts whose [`Part::render`] is at most `limit` bytes. `limit` must leave room for the part
/// marker and a few nested blocks (a forge's limit leaves plenty).
pub fn split(markdown: &str, limit: usize) -> Vec<Part> {
    let mut parts = Vec::new();
    let mut stack: Vec<Open> = Vec::new();
    let mut current = Part { reopen: reopen(&stack), content: String::new(), close: String::new() };
    let mut rest = markdown;
    while !rest.is_empty() {
        let line_end = rest.find('\n').map_or(rest.len(), |i| i + 1);
        let mut after = stack.clone();
        step(&mut after, &rest[..line_end]);
        // The newline a close may need after a content without one, counted always.
        let fixed = MARKER_ROOM + current.reopen.len() + close(&after).len() + 1;
        let room = limit.saturating_sub(fixed + current.content.len());
        if line_end <= room {
            current.content.push_str(&rest[..line_end]);
            stack = after;
            rest = &rest[line_end..];
            continue;
        }
        if !current.content.is_empty() {
            current.close = close(&stack);
            parts.push(std::mem::replace(
                &mut current,
                Part { reopen: reopen(&stack), content: String::new(), close: String::new() },
            ));
            continue;
        }
        // A line longer than a whole part: as much of it as fits, cut at a char boundary.
        let mut cut = room.clamp(1, line_end);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let cut = if cut == 0 { rest.chars().next().map_or(1, char::len_utf8) } else { cut };
        current.content.push_str(&rest[..cut]);
        current.close = close(&stack);
        rest = &rest[cut..];
        parts.push(std::mem::replace(
            &mut current,
            Part { reopen: reopen(&stack), content: String::new(), close: String::new() },
        ));
    }
    if !current.content.is_empty() || parts.is_empty() {
        current.close = close(&stack);
        parts.push(current);
    }
    parts
}

/// A block open at some line: a code fence or a `<details>` element.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Open {
    /// The fence's opening line (its info string kept), and the fence it needs to close.
    Fence { line: String, fence: String },
    /// From the `<details` tag to its line's end, and the `<summary>` line that followed.
    Details { open: String, summary: Option<String>, expect_summary: bool },
}

fn reopen(stack: &[Open]) -> String {
    let mut text = String::new();
    for open in stack {
        match open {
            Open::Fence { line, .. } => text.push_str(line),
            Open::Details { open, summary, .. } => {
                text.push_str(open);
                if let Some(summary) = summary {
                    text.push_str(summary);
                }
                // GitHub renders Markdown inside `<details>` only after a blank line.
                text.push('\n');
            }
        }
    }
    text
}

fn close(stack: &[Open]) -> String {
    let mut text = String::new();
    for open in stack.iter().rev() {
        match open {
            Open::Fence { fence, .. } => text.push_str(fence),
            Open::Details { .. } => text.push_str("</details>"),
        }
        text.push('\n');
    }
    text
}

/// The fence a line opens or closes with: its character and length, if the line is one (at
/// most three spaces of indent, three or more backticks or tildes).
pub(crate) fn fence_of(line: &str) -> Option<(char, usize, &str)> {
    let trimmed = line.trim_start_matches(' ');
    if line.len() - trimmed.len() > 3 {
        return None;
    }
    let c = trimmed.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = trimmed.chars().take_while(|x| *x == c).count();
    (len >= 3).then(|| (c, len, &trimmed[len..]))
}

/// The open blocks after `line`, given those before it.
fn step(stack: &mut Vec<Open>, line: &str) {
    let text = line.trim_end_matches(['\n', '\r']);
    if let Some(Open::Fence { fence, .. }) = stack.last() {
        let closes = fence_of(text).is_some_and(|(c, len, info)| {
            fence.starts_with(c) && len >= fence.chars().count() && info.trim().is_empty()
        });
        if closes {
            stack.pop();
        }
        return;
    }
    if let Some((c, len, info)) = fence_of(text)
        && !(c == '`' && info.contains('`'))
    {
        // A `<details>` whose body starts with a fence has no summary to come.
        if let Some(Open::Details { expect_summary, .. }) = stack.last_mut() {
            *expect_summary = false;
        }
        let mut opening = text.to_owned();
        opening.push('\n');
        stack.push(Open::Fence { line: opening, fence: std::iter::repeat_n(c, len).collect() });
        return;
    }
    if let Some(Open::Details { summary, expect_summary, .. }) = stack.last_mut()
        && *expect_summary
        && !text.trim().is_empty()
    {
        *expect_summary = false;
        if text.trim_start().starts_with("<summary") {
            *summary = Some(format!("{text}\n"));
        }
    }
    let mut at = 0;
    while let Some((offset, opens)) = next_tag(&text[at..]) {
        let start = at + offset;
        if opens {
            let open = format!("{}\n", &text[start..]);
            let expect_summary = !text[start..].contains("<summary");
            stack.push(Open::Details { open, summary: None, expect_summary });
            at = start + "<details".len();
        } else {
            if matches!(stack.last(), Some(Open::Details { .. })) {
                stack.pop();
            }
            at = start + "</details>".len();
        }
    }
}

/// The next `<details …>` (true) or `</details>` (false) tag in `text`, and where it starts.
fn next_tag(text: &str) -> Option<(usize, bool)> {
    let open = text
        .match_indices("<details")
        .find(|(i, _)| text[i + "<details".len()..].starts_with(|c: char| c == '>' || c.is_whitespace()));
    let close = text.find("</details>");
    match (open.map(|(i, _)| i), close) {
        (Some(o), Some(c)) => Some(if o < c { (o, true) } else { (c, false) }),
        (Some(o), None) => Some((o, true)),
        (None, Some(c)) => Some((c, false)),
        (None, None) => None,
    }
}

#[cfg(test)]
#[path = "split_tests.rs"]
mod tests;
