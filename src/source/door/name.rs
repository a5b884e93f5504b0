//! One entry name (one path component) checked as git checks the paths it will check out:
//! `verify_path` and `verify_dotfile` of git's `read-cache.c`, with `core.protectHFS` and
//! `core.protectNTFS` both on (`is_hfs_dotgit`, `is_ntfs_dotgit` of git's `utf8.c` and
//! `path.c`), and the symbolic links `git fsck` refuses by name (`.gitmodules`,
//! `.gitattributes`, `.gitignore`, `.mailmap`, HFS and NTFS spellings included). Stricter than
//! git in four ways: a name must be UTF-8 (it is written as a path and printed in errors), may
//! hold neither a backslash (a separator where Windows reads the path) nor NUL, and may be at
//! most [`NAME_MAX`] bytes long.

/// The longest name one path component may have, in bytes: Linux's `NAME_MAX`, which no
/// file system it writes to exceeds; a longer name could never be written.
pub const NAME_MAX: usize = 255;

/// Why `name` may not be an entry of a tree, or `Ok` with the name as text. `symlink`: the
/// entry is a symbolic link (git refuses more names for links).
///
/// Errors: a sentence naming the rule (`is "..", which names the parent directory`).
pub fn check(name: &[u8], symlink: bool) -> Result<&str, String> {
    if name.len() > NAME_MAX {
        return Err(format!("is {} bytes long: a name may be at most {NAME_MAX} bytes (NAME_MAX)", name.len()));
    }
    let Ok(name) = std::str::from_utf8(name) else { return Err("is not UTF-8".into()) };
    match name {
        "" => return Err("is empty".into()),
        "." => return Err("is \".\", which names its own directory".into()),
        ".." => return Err("is \"..\", which names the parent directory".into()),
        _ => {}
    }
    if name.contains('/') {
        return Err("holds a \"/\": one name may not be a path".into());
    }
    if name.contains('\\') {
        return Err("holds a backslash, a path separator on Windows".into());
    }
    if name.contains('\0') {
        return Err("holds a NUL byte".into());
    }
    if is_dotgit(name) {
        return Err(format!("{name:?} is read as \".git\" (git refuses it on checkout)"));
    }
    if symlink && let Some(file) = git_file(name) {
        return Err(format!("a symbolic link named {name:?} is read as {file:?} (git refuses it)"));
    }
    Ok(name)
}

/// The characters HFS+ ignores when it compares names (git's `next_hfs_char`): zero-width
/// joiners and marks, directional formatting, `U+FEFF`.
fn hfs_ignorable(c: char) -> bool {
    matches!(c, '\u{200c}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{206a}'..='\u{206f}' | '\u{feff}')
}

/// `name` as HFS+ and NTFS would compare it to a dotfile: HFS-ignorable characters dropped,
/// ASCII lowered, anything from a `:` on (an NTFS stream) and trailing dots and spaces (which
/// NTFS drops) removed.
fn folded(name: &str) -> String {
    let mut out: String = name.chars().filter(|c| !hfs_ignorable(*c)).map(|c| c.to_ascii_lowercase()).collect();
    if let Some(colon) = out.find(':') {
        out.truncate(colon);
    }
    out.trim_end_matches(['.', ' ']).to_owned()
}

/// `.git` in any spelling git refuses: any ASCII case, with HFS-ignorable characters anywhere,
/// with NTFS's trailing dots, spaces or `:stream`, or NTFS's short name `git~1`.
fn is_dotgit(name: &str) -> bool {
    matches!(folded(name).as_str(), ".git" | "git~1")
}

/// The git file a symbolic link named `name` would stand for (`.gitmodules` and the others
/// `git fsck` refuses as links), in any HFS or NTFS spelling; NTFS short names (`gitmod~1`)
/// too.
fn git_file(name: &str) -> Option<&'static str> {
    const FILES: [(&str, &str); 4] =
        [(".gitmodules", "gitmod"), (".gitattributes", "gitatt"), (".gitignore", "gitign"), (".mailmap", "mailma")];
    let folded = folded(name);
    FILES.iter().find_map(|(file, short)| {
        let short_name = folded
            .strip_prefix(short)
            .and_then(|rest| rest.strip_prefix('~'))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        (folded == *file || short_name).then_some(*file)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_git_refuses_are_refused_with_a_reason() {
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "../x",
            ".git",
            ".GIT",
            ".Git",
            ".git.",
            ".git ",
            ".git. . ",
            ".git::$INDEX_ALLOCATION",
            "git~1",
            "GIT~1",
            ".g\u{200c}it",
            "\u{feff}.git",
            "a\\b",
            "nul\0",
        ] {
            assert!(check(bad.as_bytes(), false).is_err(), "{bad:?} accepted");
        }
        assert!(check(b"\xff\xfe", false).is_err());
        assert!(check("a".repeat(NAME_MAX + 1).as_bytes(), false).unwrap_err().contains("NAME_MAX"));
        assert!(check("a".repeat(NAME_MAX).as_bytes(), false).is_ok());
        for link_only in [".gitmodules", ".GITMODULES", ".gitmodules.", "gitmod~1", ".gitattributes", ".mailmap "] {
            assert!(check(link_only.as_bytes(), true).is_err(), "{link_only:?} accepted as a link");
            assert!(check(link_only.as_bytes(), false).is_ok(), "{link_only:?} refused as a file");
        }
        for good in ["a", ".github", ".gitignore", "git~12", "...", "values.yaml", "über.yaml", ".git-blame", "x.git"]
        {
            assert_eq!(check(good.as_bytes(), false), Ok(good));
        }
        let reason = check(b"..", false).unwrap_err();
        assert!(reason.contains("parent directory"), "{reason}");
    }
}
