//! The members record's layout: in the parent's own `data` while it fits, else split into
//! pieces, each an object of the parent's kind beside it, that the parent lists.
//!
//! A piece is named by its content (`<parent>-members-<first 16 hex of its sha256>`) and the
//! parent lists each piece's name and full sha256 (key [`CHUNKS_KEY`], one `name sha256` a
//! line). A write creates the pieces the parent does not list yet, then switches the parent
//! to the new listing in one write under its resourceVersion precondition, then deletes the
//! pieces no longer listed that no later write may come to list ([`GENERATION`]): a crash at any point leaves the parent listing pieces that exist
//! and hold the record it was last switched to, so no member is lost (ARCHITECTURE.md, "Where
//! the member record lives"). Piece boundaries depend on the lines themselves (a line ends a
//! piece when its hash falls under a threshold), not on their position, so adding or removing
//! a member rewrites the one piece that holds it, not every piece after it.

use std::collections::BTreeSet;

use base64::Engine as _;
use sha2::{Digest, Sha256};

use super::member_line;
use crate::object::ObjectRef;

/// Key in the parent's `data` listing the pieces of a record too long for the parent: one
/// `<name> <sha256 hex>` a line, in record order.
pub const CHUNKS_KEY: &str = "gitward.dev-members-chunks";
/// Label on each piece of a members record: the ApplySet id of the parent that lists it (not
/// `applyset.kubernetes.io/part-of`: a piece is no member). Selects pieces to sweep.
pub const MEMBERS_OF: &str = "gitward.dev/members-of";

/// Label on the parent: how many times gitward switched it to a new listing of pieces
/// (absent: 0); and on
/// each piece: the generation of the write it was written for, the one its parent's switch
/// would make (ARCHITECTURE.md, "Where the member record lives"). A sweep after the switch to
/// generation `g` deletes only unlisted pieces written for `g` or before: a write whose switch
/// is still to come read a parent of generation `g` or later, so writes for `g + 1` or later.
pub const GENERATION: &str = "gitward.dev/members-generation";

/// One piece of a record as the parent lists it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Chunk {
    /// The object's name, `<parent>-members-<16 hex>`.
    pub name: String,
    /// sha256 of the piece's text (its lines, each ending in `\n`), lowercase hex.
    pub sha256: String,
}

/// How a record is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// The whole record in the parent's `data` (at most the chunk size): the layout every
    /// record had before pieces existed.
    Inline(String),
    /// Pieces in record order, each with its text.
    Chunked(Vec<(Chunk, String)>),
}

/// The layout of `members` for the parent named `parent`: inline when the record's text is at
/// most `max` bytes, else pieces of at most `max` bytes, about `max / 4` on average.
pub fn layout(parent: &str, members: &BTreeSet<ObjectRef>, max: usize) -> Layout {
    let lines: Vec<String> = members.iter().map(|m| member_line(m) + "\n").collect();
    let total: usize = lines.iter().map(String::len).sum();
    if total <= max {
        return Layout::Inline(lines.concat());
    }
    let pieces = split(&lines, max);
    Layout::Chunked(pieces.into_iter().map(|text| (chunk(parent, &text), text)).collect())
}

/// The listing of `chunks` as the parent's [`CHUNKS_KEY`] holds it.
pub fn listing<'a>(chunks: impl IntoIterator<Item = &'a Chunk>) -> String {
    chunks.into_iter().map(|c| format!("{} {}\n", c.name, c.sha256)).collect()
}

/// Parses a listing; `None` when a line is not `<name> <64 hex>`.
pub fn parse_listing(text: &str) -> Option<Vec<Chunk>> {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|line| {
            let (name, sha256) = line.split_once(' ')?;
            let hex = sha256.len() == 64 && sha256.bytes().all(|b| b.is_ascii_hexdigit());
            (hex && !name.is_empty()).then(|| Chunk { name: name.to_string(), sha256: sha256.to_string() })
        })
        .collect()
}

/// sha256 of `text`, lowercase hex.
pub fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// A `data` value as the API holds it for `kind`: base64 for a Secret, the text otherwise.
pub fn encode(kind: &str, text: String) -> String {
    if kind == "Secret" { base64::engine::general_purpose::STANDARD.encode(text) } else { text }
}

/// A `data` value of `kind` back to its text; `None` when a Secret's value is not base64 of
/// UTF-8.
pub fn decode(kind: &str, value: &str) -> Option<String> {
    if kind != "Secret" {
        return Some(value.to_string());
    }
    let bytes = base64::engine::general_purpose::STANDARD.decode(value).ok()?;
    String::from_utf8(bytes).ok()
}

/// The piece holding `text` for the parent named `parent`: its name is the parent's (cut to
/// leave room, within a DNS subdomain's 253 characters), `-members-` and 16 hex of its sha256.
fn chunk(parent: &str, text: &str) -> Chunk {
    let sha256 = sha256_hex(text);
    let suffix = format!("-members-{}", &sha256[..16]);
    let mut stem = &parent[..parent.len().min(253 - suffix.len())];
    stem = stem.trim_end_matches(['-', '.']);
    Chunk { name: format!("{stem}{suffix}"), sha256 }
}

/// Splits the record's `lines` (each ending in `\n`) into texts of at most `max` bytes. A line
/// ends a piece when its FNV-1a hash is below a threshold proportional to its length (a
/// piece is `max / 4` bytes on average), or when the next line would not fit.
fn split(lines: &[String], max: usize) -> Vec<String> {
    let target = (max / 4).max(1) as u128;
    let mut pieces = Vec::new();
    let mut piece = String::new();
    for line in lines {
        if !piece.is_empty() && piece.len() + line.len() > max {
            pieces.push(std::mem::take(&mut piece));
        }
        piece.push_str(line);
        if u128::from(fnv1a(line.as_bytes())) * target < (line.len() as u128) << 64 {
            pieces.push(std::mem::take(&mut piece));
        }
    }
    if !piece.is_empty() {
        pieces.push(piece);
    }
    pieces
}

/// FNV-1a, 64 bits, then MurmurHash3's 64-bit finalizer (FNV alone leaves names that differ
/// in their last digits with close high bits: hundreds of lines in a row without a boundary):
/// a hash fixed by its definition, so piece boundaries stay where they were across releases.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h = bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3));
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::GroupKind;

    fn members(names: impl IntoIterator<Item = String>) -> BTreeSet<ObjectRef> {
        names.into_iter().map(|n| ObjectRef::new(GroupKind::new("", "ConfigMap"), Some("shop"), n)).collect()
    }

    fn pieces(layout: &Layout) -> Vec<(Chunk, String)> {
        match layout {
            Layout::Chunked(pieces) => pieces.clone(),
            Layout::Inline(_) => panic!("expected pieces"),
        }
    }

    #[test]
    fn a_record_that_fits_stays_inline_as_before() {
        let m = members((0..3).map(|i| format!("cm-{i}")));
        assert_eq!(
            layout("gitward-shop", &m, 1024),
            Layout::Inline("ConfigMap/shop/cm-0\nConfigMap/shop/cm-1\nConfigMap/shop/cm-2\n".into())
        );
    }

    #[test]
    fn pieces_hold_every_line_once_in_order_within_the_limit() {
        let m = members((0..2000).map(|i| format!("cm-{i:05}")));
        let all: String = m.iter().map(|r| member_line(r) + "\n").collect();
        let pieces = pieces(&layout("gitward-shop", &m, 2048));
        assert!(pieces.len() > 4, "{}", pieces.len());
        assert!(pieces.iter().all(|(_, text)| text.len() <= 2048 && text.ends_with('\n')));
        assert_eq!(pieces.iter().map(|(_, t)| t.as_str()).collect::<String>(), all);
        for (chunk, text) in &pieces {
            assert_eq!(chunk.sha256, sha256_hex(text));
            assert_eq!(chunk.name, format!("gitward-shop-members-{}", &chunk.sha256[..16]));
        }
        let listed = listing(pieces.iter().map(|(c, _)| c));
        assert_eq!(parse_listing(&listed).unwrap(), pieces.iter().map(|(c, _)| c.clone()).collect::<Vec<_>>());
        assert_eq!(parse_listing("name not-a-hash"), None);
    }

    #[test]
    fn adding_a_member_rewrites_only_the_piece_that_holds_it() {
        let before = members((0..2000).map(|i| format!("cm-{i:05}")));
        let mut after = before.clone();
        after.extend(members(["cm-01000a".to_string()]));
        let names = |l: &Layout| -> BTreeSet<String> { pieces(l).into_iter().map(|(c, _)| c.name).collect() };
        let (old, new) = (names(&layout("p", &before, 2048)), names(&layout("p", &after, 2048)));
        assert!(old.len() > 20, "{}", old.len());
        assert!(old.difference(&new).count() <= 1, "{old:?} → {new:?}");
        assert!(new.difference(&old).count() <= 2, "{old:?} → {new:?}");
    }

    #[test]
    fn a_long_parent_name_still_makes_a_valid_piece_name() {
        let parent = format!("{}.x", "a".repeat(250));
        let c = chunk(&parent, "text");
        assert!(c.name.len() <= 253, "{}", c.name.len());
        assert!(!c.name.contains(".-") && !c.name.contains("--members"), "{}", c.name);
    }

    #[test]
    fn secret_values_are_base64_and_config_map_values_text() {
        assert_eq!(decode("Secret", &encode("Secret", "a\n".into())).as_deref(), Some("a\n"));
        assert_eq!(encode("ConfigMap", "a\n".into()), "a\n");
        assert_eq!(decode("Secret", "%%"), None);
    }
}
