//! Checking an SSH server's host key against a known_hosts file in OpenSSH format (sshd(8),
//! "SSH_KNOWN_HOSTS FILE FORMAT").
//!
//! Supported: plain host names and addresses, comma-separated patterns with `*` and `?`,
//! negated patterns (`!pattern`), `[host]:port` for ports other than 22, and the `@revoked`
//! marker (a revoked key is refused for every host). Not supported, and ignored: hashed host
//! names (`|1|salt|hash`, written by `ssh-keygen -H` or `ssh-keyscan -H`) and
//! `@cert-authority` lines. Host names compare case-insensitively.

use sha2::{Digest, Sha256};

/// The key the server presented, as libgit2 hands it over.
pub(super) enum PresentedKey<'a> {
    /// The public key blob in SSH wire format (what known_hosts holds base64-encoded).
    Raw(&'a [u8]),
    /// Only the SHA-256 of that blob.
    Sha256(&'a [u8; 32]),
}

impl PresentedKey<'_> {
    /// Whether `blob` (decoded from a known_hosts line) is this key.
    fn is(&self, blob: &[u8]) -> bool {
        match self {
            PresentedKey::Raw(raw) => *raw == blob,
            PresentedKey::Sha256(hash) => Sha256::digest(blob).as_slice() == hash.as_slice(),
        }
    }
}

/// One parsed known_hosts line.
struct Entry<'a> {
    marker: Option<&'a str>,
    hosts: &'a str,
    key_type: &'a str,
    key: Option<Vec<u8>>,
}

/// Accepts `key` for `host`:`port` when a line of `contents` lists that host with that key and
/// no `@revoked` line lists the key. The error says why not, without the file name.
pub(super) fn check(contents: &str, host: &str, port: u16, key: &PresentedKey<'_>) -> Result<(), String> {
    let name = host_name(host, port);
    let entries: Vec<Entry<'_>> = contents.lines().filter_map(parse_line).collect();
    let is_key = |entry: &Entry<'_>| entry.key.as_deref().is_some_and(|blob| key.is(blob));
    if entries.iter().any(|e| e.marker == Some("@revoked") && is_key(e)) {
        return Err(format!("host key of {name} is marked @revoked"));
    }
    let for_host: Vec<&Entry<'_>> =
        entries.iter().filter(|e| e.marker.is_none() && matches_host(e.hosts, &name)).collect();
    if for_host.iter().any(|e| is_key(e)) {
        return Ok(());
    }
    if let Some(entry) = for_host.first() {
        return Err(format!(
            "host key of {name} does not match the {} key(s) listed for it (first: {}): \
             the server's key changed, or someone is in between",
            for_host.len(),
            entry.key_type
        ));
    }
    let hashed = entries.iter().any(|e| e.hosts.starts_with('|'));
    let hint = if hashed { "; hashed entries (|1|…) are not supported: add an unhashed line" } else { "" };
    Err(format!("{name} is not listed{hint}"))
}

/// How known_hosts names a host: `host`, or `[host]:port` off port 22.
fn host_name(host: &str, port: u16) -> String {
    let host = host.to_ascii_lowercase();
    if port == 22 { host } else { format!("[{host}]:{port}") }
}

/// Splits a line into marker, host patterns, key type and decoded key; `None` for blank lines,
/// comments, lines too short, and `@cert-authority` lines.
fn parse_line(line: &str) -> Option<Entry<'_>> {
    let mut fields = line.split_whitespace().peekable();
    if fields.peek()?.starts_with('#') {
        return None;
    }
    let marker = fields.next_if(|f| f.starts_with('@'));
    if marker == Some("@cert-authority") {
        return None;
    }
    let hosts = fields.next()?;
    let key_type = fields.next()?;
    let key = decode_base64(fields.next()?);
    Some(Entry { marker, hosts, key_type, key })
}

/// OpenSSH pattern-list semantics: some pattern matches and no negated pattern does.
fn matches_host(patterns: &str, name: &str) -> bool {
    let mut matched = false;
    for pattern in patterns.split(',') {
        let pattern = pattern.to_ascii_lowercase();
        match pattern.strip_prefix('!') {
            Some(negated) if wildcard(negated.as_bytes(), name.as_bytes()) => return false,
            Some(_) => {}
            None => matched |= wildcard(pattern.as_bytes(), name.as_bytes()),
        }
    }
    matched
}

/// Glob match with `*` (any run, possibly empty) and `?` (one byte).
fn wildcard(pattern: &[u8], name: &[u8]) -> bool {
    match (pattern.split_first(), name.split_first()) {
        (None, None) => true,
        (Some((b'*', rest)), _) => wildcard(rest, name) || (!name.is_empty() && wildcard(pattern, &name[1..])),
        (Some((b'?', rest)), Some((_, name_rest))) => wildcard(rest, name_rest),
        (Some((p, rest)), Some((n, name_rest))) => p == n && wildcard(rest, name_rest),
        _ => false,
    }
}

/// Standard base64 (RFC 4648, `+/`, optional `=` padding), by the base64 crate; `None` on
/// anything else.
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const STANDARD_ANY_PADDING: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    STANDARD_ANY_PADDING.decode(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// github.com's published ed25519 host key.
    const GITHUB: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";

    fn github_key() -> Vec<u8> {
        decode_base64(GITHUB).unwrap()
    }

    fn other_key() -> Vec<u8> {
        let mut key = github_key();
        *key.last_mut().unwrap() ^= 1;
        key
    }

    #[test]
    fn base64_decodes_the_ssh_wire_format() {
        let key = github_key();
        assert_eq!(key.len(), 4 + 11 + 4 + 32);
        assert_eq!(&key[4..15], b"ssh-ed25519");
        assert_eq!(decode_base64("aGk="), Some(b"hi".to_vec()));
        assert_eq!(decode_base64("a-b"), None);
    }

    #[test]
    fn listed_host_with_the_same_key_is_trusted() {
        let file = format!("# comment\n\nGitHub.com,140.82.121.4 ssh-ed25519 {GITHUB}\n");
        let key = github_key();
        assert_eq!(check(&file, "github.com", 22, &PresentedKey::Raw(&key)), Ok(()));
        assert_eq!(check(&file, "140.82.121.4", 22, &PresentedKey::Raw(&key)), Ok(()));
        let hash: [u8; 32] = Sha256::digest(&key).into();
        assert_eq!(check(&file, "github.com", 22, &PresentedKey::Sha256(&hash)), Ok(()));
    }

    #[test]
    fn listed_host_with_another_key_is_refused() {
        let file = format!("github.com ssh-ed25519 {GITHUB}\n");
        let error = check(&file, "github.com", 22, &PresentedKey::Raw(&other_key())).unwrap_err();
        assert!(error.contains("does not match"), "{error}");
    }

    #[test]
    fn unlisted_host_is_refused_with_a_hint_about_hashed_entries() {
        let file = format!("|1|c2FsdA==|aGFzaA== ssh-ed25519 {GITHUB}\n");
        let error = check(&file, "github.com", 22, &PresentedKey::Raw(&github_key())).unwrap_err();
        assert!(error.contains("github.com is not listed; hashed"), "{error}");
    }

    #[test]
    fn ports_wildcards_and_negation_follow_openssh() {
        let key = github_key();
        let raw = PresentedKey::Raw(&key);
        let file = format!("[git.example.com]:2222 ssh-ed25519 {GITHUB}\n");
        assert_eq!(check(&file, "git.example.com", 2222, &raw), Ok(()));
        assert!(check(&file, "git.example.com", 22, &raw).is_err());
        let file = format!("*.example.com,!evil.example.com ssh-ed25519 {GITHUB}\n");
        assert_eq!(check(&file, "git.example.com", 22, &raw), Ok(()));
        assert!(check(&file, "evil.example.com", 22, &raw).is_err());
        assert!(check(&file, "example.org", 22, &raw).is_err());
        let file = format!("git?.example.com ssh-ed25519 {GITHUB}\n");
        assert_eq!(check(&file, "git2.example.com", 22, &raw), Ok(()));
    }

    #[test]
    fn revoked_key_is_refused_even_when_listed() {
        let file = format!("github.com ssh-ed25519 {GITHUB}\n@revoked * ssh-ed25519 {GITHUB}\n");
        let error = check(&file, "github.com", 22, &PresentedKey::Raw(&github_key())).unwrap_err();
        assert!(error.contains("@revoked"), "{error}");
    }

    #[test]
    fn cert_authority_lines_are_ignored() {
        let file = format!("@cert-authority github.com ssh-ed25519 {GITHUB}\n");
        assert!(check(&file, "github.com", 22, &PresentedKey::Raw(&github_key())).is_err());
    }
}
