//! SSH signatures (OpenSSH `PROTOCOL.sshsig`) checked against git's `allowed_signers` file, as
//! `ssh-keygen -Y verify -n git` does for `git verify-commit` with `gpg.format = ssh`.
//!
//! The allowed_signers format (ssh-keygen(1), "ALLOWED SIGNERS"): one entry per line,
//! `principals [options] keytype base64-key [comment]`; empty lines and `#` lines are ignored.
//! Options (comma-separated, keywords case-insensitive): `namespaces="<pattern-list>"` (the
//! signature's namespace, `git`, must match), `valid-after="<time>"` and
//! `valid-before="<time>"` (`YYYYMMDD[Z]` or `YYYYMMDDHHMM[SS][Z]`, compared with the commit's
//! or tag's own time as git does; read as UTC whether or not it ends in `Z`), and
//! `cert-authority`, which gitward does not support (an error naming the line, rather than a
//! silently ignored entry).

use std::path::Path;

use ssh_key::{HashAlg, PublicKey, SshSig};

use super::{Refusal, Signer, SignerKind, VerifyFailure, read_key_file};

/// The first line of an SSH signature.
pub(super) const ARMOR: &str = "-----BEGIN SSH SIGNATURE-----";

/// The namespace git signs commits and tags in.
const NAMESPACE: &str = "git";

/// One line of the file.
#[derive(Debug)]
struct Entry {
    principals: String,
    namespaces: Option<String>,
    valid_after: Option<i64>,
    valid_before: Option<i64>,
    key: PublicKey,
}

/// Verifies `signature` (armored sshsig) over `payload`, made at `time` (Unix seconds), against
/// the entries of `file`; the signer's principals and key fingerprint when it verifies.
pub(super) fn verify(file: &Path, signature: &str, payload: &[u8], time: i64) -> Result<Signer, Refusal> {
    let entries = parse(&read_key_file(file, "allowed_signers_file")?)
        .map_err(|m| Refusal::new(VerifyFailure::KeyFile, format!("cannot be checked: {}: {m}", file.display())))?;
    let signature = SshSig::from_pem(signature.trim_end()).map_err(|e| {
        Refusal::new(VerifyFailure::BadSignature, format!("has an SSH signature that cannot be read: {e}"))
    })?;
    let fingerprint = signature.public_key().fingerprint(HashAlg::Sha256).to_string();
    let matching: Vec<&Entry> = entries.iter().filter(|e| e.key.key_data() == signature.public_key()).collect();
    if matching.is_empty() {
        let reason = format!("is signed by SSH key {fingerprint}, which is not in {}", file.display());
        return Err(Refusal::new(VerifyFailure::UnknownKey, reason).by(fingerprint));
    }
    let mut last = None;
    for entry in matching {
        let signer = format!("{} ({fingerprint})", entry.principals);
        let refused = |reason: String| Refusal::new(VerifyFailure::BadSignature, reason).by(signer.clone());
        if entry.namespaces.as_deref().is_some_and(|list| !pattern_list_matches(list, NAMESPACE)) {
            last = Some(refused(format!(
                "is signed by {signer}, whose allowed_signers entry does not allow namespace `git`"
            )));
            continue;
        }
        if entry.valid_after.is_some_and(|after| time < after) || entry.valid_before.is_some_and(|before| time > before)
        {
            last = Some(refused(format!("is signed by {signer} at a time outside its allowed_signers validity")));
            continue;
        }
        return match entry.key.verify(NAMESPACE, payload, &signature) {
            Ok(()) => Ok(Signer {
                kind: SignerKind::Ssh,
                identity: Some(entry.principals.clone()),
                fingerprint: fingerprint.clone(),
            }),
            Err(e) => Err(refused(format!("has an SSH signature by {signer} that does not verify: {e}"))),
        };
    }
    Err(last.expect("at least one matching entry"))
}

/// Parses the whole file; the error names the 1-based line.
fn parse(text: &str) -> Result<Vec<Entry>, String> {
    let mut entries = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        entries.push(parse_line(line).map_err(|m| format!("line {}: {m}", index + 1))?);
    }
    Ok(entries)
}

fn parse_line(line: &str) -> Result<Entry, String> {
    let (principals, rest) = next_token(line);
    if rest.is_empty() {
        return Err("expected `principals [options] keytype base64-key`".to_owned());
    }
    // Options come before the key: when the rest is not a key by itself, its first token is them.
    let (options, key) = match PublicKey::from_openssh(rest) {
        Ok(key) => ("", key),
        Err(_) => {
            let (options, key) = next_token(rest);
            (options, PublicKey::from_openssh(key).map_err(|e| format!("not a public key `keytype base64-key`: {e}"))?)
        }
    };
    let mut entry =
        Entry { principals: principals.to_owned(), namespaces: None, valid_after: None, valid_before: None, key };
    for option in split_outside_quotes(options).into_iter().filter(|o| !o.is_empty()) {
        apply_option(&mut entry, option)?;
    }
    Ok(entry)
}

fn apply_option(entry: &mut Entry, option: &str) -> Result<(), String> {
    let (name, value) = match option.split_once('=') {
        Some((name, value)) => (name, Some(value.trim_matches('"'))),
        None => (option, None),
    };
    match (name.to_ascii_lowercase().as_str(), value) {
        ("namespaces", Some(value)) => entry.namespaces = Some(value.to_owned()),
        ("valid-after", Some(value)) => entry.valid_after = Some(parse_time(value)?),
        ("valid-before", Some(value)) => entry.valid_before = Some(parse_time(value)?),
        ("cert-authority", None) => {
            return Err("cert-authority entries are not supported: list the signing keys".to_owned());
        }
        _ => return Err(format!("unknown option `{option}`")),
    }
    Ok(())
}

/// `YYYYMMDD[Z]` or `YYYYMMDDHHMM[SS][Z]`, as Unix seconds (UTC).
fn parse_time(value: &str) -> Result<i64, String> {
    let digits = value.strip_suffix(['Z', 'z']).unwrap_or(value);
    let bad = || format!("`{value}` is not a time: expected YYYYMMDD[Z] or YYYYMMDDHHMM[SS][Z]");
    if !matches!(digits.len(), 8 | 12 | 14) || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let field = |range: std::ops::Range<usize>| digits.get(range).map_or(Ok(0), |s| s.parse::<i8>());
    let year: i16 = digits[..4].parse().map_err(|_| bad())?;
    let (month, day) = (field(4..6).map_err(|_| bad())?, field(6..8).map_err(|_| bad())?);
    let (hour, minute, second) =
        (field(8..10).map_err(|_| bad())?, field(10..12).map_err(|_| bad())?, field(12..14).map_err(|_| bad())?);
    let at = jiff::civil::DateTime::new(year, month, day, hour, minute, second, 0).map_err(|_| bad())?;
    let zoned = at.to_zoned(jiff::tz::TimeZone::UTC).map_err(|_| bad())?;
    Ok(zoned.timestamp().as_second())
}

/// The first token of `text` (a double-quoted part may hold spaces) and the rest, trimmed.
fn next_token(text: &str) -> (&str, &str) {
    let mut quoted = false;
    for (at, c) in text.char_indices() {
        match c {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => return (&text[..at], text[at..].trim_start()),
            _ => {}
        }
    }
    (text, "")
}

/// Splits `text` at commas outside double quotes.
fn split_outside_quotes(text: &str) -> Vec<&str> {
    let (mut parts, mut quoted, mut start) = (Vec::new(), false, 0);
    for (at, c) in text.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => {
                parts.push(&text[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// An OpenSSH pattern-list (ssh_config(5), PATTERNS): comma-separated patterns with `*` and `?`,
/// a `!` before one negates it; matches when some pattern matches and no negated one does.
fn pattern_list_matches(list: &str, value: &str) -> bool {
    let mut matched = false;
    for pattern in list.split(',').map(str::trim) {
        match pattern.strip_prefix('!') {
            Some(negated) if glob(negated.as_bytes(), value.as_bytes()) => return false,
            Some(_) => {}
            None => matched |= glob(pattern.as_bytes(), value.as_bytes()),
        }
    }
    matched
}

fn glob(pattern: &[u8], value: &[u8]) -> bool {
    match (pattern.first(), value.first()) {
        (None, None) => true,
        (Some(b'*'), _) => glob(&pattern[1..], value) || (!value.is_empty() && glob(pattern, &value[1..])),
        (Some(b'?'), Some(_)) => glob(&pattern[1..], &value[1..]),
        (Some(p), Some(v)) if p == v => glob(&pattern[1..], &value[1..]),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH8X8bDgAXuGW8MeNgWdHmMyV4G1xxMt1uvpcPxdUlgh";

    #[test]
    fn allowed_signers_lines_with_and_without_options_parse() {
        let text = format!(
            "# team\n\nalice@example.com {KEY} laptop\nbob@example.com,carol@example.com namespaces=\"git,file\",valid-after=\"20260101\",VALID-BEFORE=\"202701011200Z\" {KEY}\n"
        );
        let entries = parse(&text).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].principals, "alice@example.com");
        assert_eq!(entries[0].namespaces, None);
        assert_eq!(entries[1].namespaces.as_deref(), Some("git,file"));
        assert_eq!(entries[1].valid_after, Some(1_767_225_600));
        assert_eq!(entries[1].valid_before, Some(1_798_804_800));
    }

    #[test]
    fn bad_lines_are_named() {
        let err = parse(&format!("a@b {KEY}\nc@d cert-authority {KEY}\n")).unwrap_err();
        assert!(err.starts_with("line 2: cert-authority"), "{err}");
        let err = parse("a@b ssh-ed25519 notbase64\n").unwrap_err();
        assert!(err.starts_with("line 1: "), "{err}");
        assert!(parse_time("2026-01-01").is_err() && parse_time("20261301").is_err());
    }

    #[test]
    fn namespace_pattern_lists_follow_ssh_config() {
        assert!(pattern_list_matches("git", "git"));
        assert!(pattern_list_matches("file,g*", "git"));
        assert!(!pattern_list_matches("*,!git", "git"));
        assert!(!pattern_list_matches("file", "git"));
        assert!(pattern_list_matches("g?t", "git"));
    }
}
