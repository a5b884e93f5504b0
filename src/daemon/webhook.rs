//! Webhook checks, pure (no I/O): who signed a `POST /hooks/git` request, which ref it pushed,
//! and which units follow that ref (DESIGN.md, Triggers).
//!
//! Three signature styles are accepted, all with the shared secret read from a file (DESIGN.md
//! decision 10: the secret is never logged, and no message here contains it):
//!
//! - GitHub: `X-Hub-Signature-256: sha256=<hex>`, the HMAC-SHA256 (RFC 2104) of the raw body
//!   keyed with the secret ("Validating webhook deliveries", GitHub docs);
//! - Gitea (and Forgejo, which sends the Gitea header too): `X-Gitea-Signature: <hex>`, the same
//!   HMAC without the prefix;
//! - GitLab: `X-Gitlab-Token: <secret>`, the secret itself (GitLab "Webhooks", secret token).
//!
//! Every comparison runs in constant time: the HMACs through `hmac`'s `verify_slice`, the GitLab
//! token through [`token_matches`].

use std::fmt;

use hmac::{Hmac, KeyInit, Mac};
use http::HeaderMap;
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// GitHub's signature header (`sha256=` + 64 lowercase hex digits).
pub const GITHUB_HEADER: &str = "x-hub-signature-256";
/// Gitea's signature header (64 hex digits, no prefix).
pub const GITEA_HEADER: &str = "x-gitea-signature";
/// GitLab's secret-token header (the secret in clear, over TLS).
pub const GITLAB_HEADER: &str = "x-gitlab-token";

/// Which hosting service's scheme authenticated a request. Also a log field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provider {
    /// `X-Hub-Signature-256` (GitHub, and any host that copies its scheme).
    GitHub,
    /// `X-Gitea-Signature` (Gitea, Forgejo).
    Gitea,
    /// `X-Gitlab-Token`.
    GitLab,
}

impl Provider {
    /// Lowercase name for logs: `github`, `gitea`, `gitlab`.
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::GitHub => "github",
            Provider::Gitea => "gitea",
            Provider::GitLab => "gitlab",
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a request was refused. Not worth retrying with the same request. The Display names the
/// header at fault but never echoes the secret, the signature or the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// The daemon has no webhook secret (or an empty one): unsigned webhooks are never accepted.
    #[error("no webhook secret is configured")]
    NoSecret,
    /// None of the three headers is present.
    #[error("no X-Hub-Signature-256, X-Gitea-Signature or X-Gitlab-Token header")]
    Missing,
    /// The header is present but not of the expected shape (prefix, hex, length, ASCII).
    #[error("{0}: malformed header")]
    Malformed(&'static str),
    /// The signature or token does not match the secret.
    #[error("{0}: does not match the webhook secret")]
    Mismatch(&'static str),
}

/// Checks that `body` was sent by someone who knows `secret`.
///
/// Takes the raw request body, byte for byte as received (a re-serialised JSON body would not
/// verify). When several headers are present, the Gitea one is checked first (Gitea also sends
/// `X-Hub-Signature-256` with the same value), then GitHub's, then GitLab's; only the first
/// present is checked.
///
/// Returns the [`Provider`] whose scheme verified. Errors: [`Rejection::NoSecret`] for an empty
/// secret, [`Rejection::Missing`] without any header, [`Rejection::Malformed`] for a header
/// that is not hex of the right length (or lacks GitHub's `sha256=` prefix),
/// [`Rejection::Mismatch`] when it does not match.
pub fn verify(secret: &[u8], headers: &HeaderMap, body: &[u8]) -> Result<Provider, Rejection> {
    if secret.is_empty() {
        return Err(Rejection::NoSecret);
    }
    if let Some(value) = headers.get(GITEA_HEADER) {
        let tag = decode_hex(value.as_bytes()).ok_or(Rejection::Malformed("X-Gitea-Signature"))?;
        return check_hmac(secret, body, &tag, "X-Gitea-Signature").map(|()| Provider::Gitea);
    }
    if let Some(value) = headers.get(GITHUB_HEADER) {
        let malformed = Rejection::Malformed("X-Hub-Signature-256");
        let hex = value.as_bytes().strip_prefix(b"sha256=").ok_or(malformed)?;
        let tag = decode_hex(hex).ok_or(malformed)?;
        return check_hmac(secret, body, &tag, "X-Hub-Signature-256").map(|()| Provider::GitHub);
    }
    if let Some(value) = headers.get(GITLAB_HEADER) {
        if token_matches(secret, value.as_bytes()) {
            return Ok(Provider::GitLab);
        }
        return Err(Rejection::Mismatch("X-Gitlab-Token"));
    }
    Err(Rejection::Missing)
}

/// 32 bytes from 64 hex digits (either case); `None` for anything else.
fn decode_hex(hex: &[u8]) -> Option<[u8; 32]> {
    let mut tag = [0u8; 32];
    hex::decode_to_slice(hex, &mut tag).ok()?;
    Some(tag)
}

/// HMAC-SHA256(secret, body) compared with `tag` in constant time (`Mac::verify_slice`).
fn check_hmac(secret: &[u8], body: &[u8], tag: &[u8], header: &'static str) -> Result<(), Rejection> {
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(body);
    mac.verify_slice(tag).map_err(|_| Rejection::Mismatch(header))
}

/// Whether `token` equals `secret`, in time independent of where they differ and of their
/// lengths.
///
/// Both sides are first reduced to fixed-length HMAC-SHA256 tags under one key (the secret), so
/// the lengths do not leak; the tags are then compared with `verify_slice`, which is
/// constant-time. A plain `==` stops at the first differing byte, which lets an attacker guess
/// the token byte by byte from response times. Distinct tokens colliding would need a SHA-256
/// collision.
pub fn token_matches(secret: &[u8], token: &[u8]) -> bool {
    let tag_of = |message: &[u8]| {
        let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes a key of any length");
        mac.update(message);
        mac
    };
    let presented = tag_of(token).finalize().into_bytes();
    tag_of(secret).verify_slice(&presented).is_ok()
}

/// The event headers forges name a delivery's event in: GitHub's, Gitea's, Forgejo's, Gogs'
/// and GitLab's.
const EVENT_HEADERS: [&str; 5] =
    ["x-github-event", "x-gitea-event", "x-forgejo-event", "x-gogs-event", "x-gitlab-event"];

/// Whether the delivery is a pull- or merge-request event, which moves no ref a unit follows:
/// an event header naming `pull_request` or one of its kinds (`pull_request_review`, Gitea's
/// `pull_request_sync`: GitHub "Webhook events and payloads", Gitea "Webhooks"), or GitLab's
/// `Merge Request Hook` (GitLab "Webhook events"). Such a delivery wakes the `[[preview]]`
/// tasks and triggers no unit. A delivery naming no event, or another one (`push`, `ping`),
/// is judged by its payload as before.
pub fn is_review_event(headers: &HeaderMap) -> bool {
    EVENT_HEADERS.iter().filter_map(|h| headers.get(*h)?.to_str().ok()).any(|event| {
        let event = event.trim();
        event.starts_with("pull_request") || event.eq_ignore_ascii_case("Merge Request Hook")
    })
}

/// The ref a push payload names: its top-level `ref` field (`refs/heads/main`,
/// `refs/tags/v1`), the same field in GitHub, Gitea and GitLab push (and tag push) events.
///
/// `None` when the body is not a JSON object or has no string `ref` (a GitHub `ping`, a GitLab
/// merge-request event, or a GitHub delivery sent as `application/x-www-form-urlencoded`, whose
/// JSON sits URL-encoded in a `payload` field and is not decoded here).
pub fn pushed_ref(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Push {
        #[serde(rename = "ref")]
        reference: Option<serde_json::Value>,
    }
    match serde_json::from_slice::<Push>(body).ok()?.reference? {
        serde_json::Value::String(s) => Some(s),
        _ => None,
    }
}

/// The commit a push payload says its ref now points to: its top-level `after` field, which
/// GitHub, Gitea and GitLab push events and `examples/post-receive` send, when it is a full
/// SHA-1 or SHA-256 object name and not all zeros (a deleted ref).
///
/// `None` when the payload names none (a hand-made `{"ref": …}`, a GitHub `ping`): such a
/// webhook is an explicit request, which syncs even the revision last applied.
pub fn pushed_commit(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Push {
        after: Option<serde_json::Value>,
    }
    let serde_json::Value::String(after) = serde_json::from_slice::<Push>(body).ok()?.after? else { return None };
    let hex = after.bytes().all(|b| b.is_ascii_hexdigit());
    let named = matches!(after.len(), 40 | 64) && hex && after.bytes().any(|b| b != b'0');
    named.then_some(after)
}

/// Whether a unit whose configured ref is `unit_reference` follows the pushed ref `pushed`.
///
/// `refs/heads/main` matches `main` and `refs/heads/main`; `refs/tags/v1` matches `v1` and
/// `refs/tags/v1`. This mirrors how the source resolves a short name (`refs/tags/<name>`,
/// then `refs/heads/<name>`, then a commit SHA prefix, as `git rev-parse` orders them): a unit
/// pinned to a commit SHA never matches a pushed branch or tag, since a commit cannot move —
/// unless a branch or tag named by an abbreviated SHA exists, which the resolver would follow
/// before the SHA (a full SHA is never shadowed). Other full refs
/// (`refs/pull/1/head`) match only themselves.
pub fn ref_matches(pushed: &str, unit_reference: &str) -> bool {
    if pushed == unit_reference {
        return true;
    }
    let short = pushed.strip_prefix("refs/heads/").or_else(|| pushed.strip_prefix("refs/tags/"));
    short.is_some_and(|short| !short.is_empty() && short == unit_reference)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"It's a Secret to Everybody";
    const BODY: &[u8] = b"Hello, World!";
    /// The example from GitHub's "Validating webhook deliveries" page.
    const GITHUB_EXAMPLE: &str = "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

    fn headers(name: &'static str, value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, value.parse().unwrap());
        h
    }

    #[test]
    fn github_documented_example_verifies() {
        let h = headers(GITHUB_HEADER, &format!("sha256={GITHUB_EXAMPLE}"));
        assert_eq!(verify(SECRET, &h, BODY), Ok(Provider::GitHub));
    }

    #[test]
    fn uppercase_hex_signature_verifies() {
        let h = headers(GITHUB_HEADER, &format!("sha256={}", GITHUB_EXAMPLE.to_uppercase()));
        assert_eq!(verify(SECRET, &h, BODY), Ok(Provider::GitHub));
    }

    #[test]
    fn github_signature_of_another_body_is_a_mismatch() {
        let h = headers(GITHUB_HEADER, &format!("sha256={GITHUB_EXAMPLE}"));
        assert_eq!(verify(SECRET, &h, b"Hello, World?"), Err(Rejection::Mismatch("X-Hub-Signature-256")));
    }

    #[test]
    fn github_signature_with_another_secret_is_a_mismatch() {
        let h = headers(GITHUB_HEADER, &format!("sha256={GITHUB_EXAMPLE}"));
        assert_eq!(verify(b"other", &h, BODY), Err(Rejection::Mismatch("X-Hub-Signature-256")));
    }

    #[test]
    fn github_signature_without_prefix_is_malformed() {
        let h = headers(GITHUB_HEADER, GITHUB_EXAMPLE);
        assert_eq!(verify(SECRET, &h, BODY), Err(Rejection::Malformed("X-Hub-Signature-256")));
    }

    #[test]
    fn sha1_or_short_or_non_hex_signatures_are_malformed() {
        for value in ["sha1=0123", "sha256=", "sha256=abcd", &format!("sha256={}zz", &GITHUB_EXAMPLE[2..])] {
            let h = headers(GITHUB_HEADER, value);
            assert_eq!(verify(SECRET, &h, BODY), Err(Rejection::Malformed("X-Hub-Signature-256")), "{value}");
        }
    }

    #[test]
    fn gitea_signature_has_no_prefix() {
        assert_eq!(verify(SECRET, &headers(GITEA_HEADER, GITHUB_EXAMPLE), BODY), Ok(Provider::Gitea));
        let prefixed = headers(GITEA_HEADER, &format!("sha256={GITHUB_EXAMPLE}"));
        assert_eq!(verify(SECRET, &prefixed, BODY), Err(Rejection::Malformed("X-Gitea-Signature")));
    }

    #[test]
    fn gitea_header_wins_over_github_header() {
        let mut h = headers(GITEA_HEADER, GITHUB_EXAMPLE);
        h.insert(GITHUB_HEADER, "sha256=00".parse().unwrap());
        assert_eq!(verify(SECRET, &h, BODY), Ok(Provider::Gitea));
    }

    #[test]
    fn gitlab_token_is_compared_whole() {
        let ok = headers(GITLAB_HEADER, "It's a Secret to Everybody");
        assert_eq!(verify(SECRET, &ok, BODY), Ok(Provider::GitLab));
        for wrong in ["It's a Secret to Everybod", "It's a Secret to Everybody!", "", "x"] {
            let h = headers(GITLAB_HEADER, wrong);
            assert_eq!(verify(SECRET, &h, BODY), Err(Rejection::Mismatch("X-Gitlab-Token")), "{wrong:?}");
        }
    }

    #[test]
    fn no_header_is_missing() {
        assert_eq!(verify(SECRET, &HeaderMap::new(), BODY), Err(Rejection::Missing));
    }

    #[test]
    fn empty_secret_refuses_everything() {
        let h = headers(GITLAB_HEADER, "");
        assert_eq!(verify(b"", &h, BODY), Err(Rejection::NoSecret));
    }

    #[test]
    fn rejection_messages_never_echo_secret_or_signature() {
        let h = headers(GITLAB_HEADER, "guess");
        let message = verify(SECRET, &h, BODY).unwrap_err().to_string();
        assert_eq!(message, "X-Gitlab-Token: does not match the webhook secret");
        let h = headers(GITHUB_HEADER, &format!("sha256={GITHUB_EXAMPLE}"));
        let message = verify(b"other", &h, BODY).unwrap_err().to_string();
        assert!(!message.contains(GITHUB_EXAMPLE) && !message.contains("other"), "{message}");
    }

    #[test]
    fn pushed_ref_reads_the_top_level_ref_field() {
        let body = br#"{"ref":"refs/heads/main","before":"0","after":"1","repository":{"ref":"x"}}"#;
        assert_eq!(pushed_ref(body).as_deref(), Some("refs/heads/main"));
        assert_eq!(pushed_ref(br#"{"ref":"refs/tags/v1"}"#).as_deref(), Some("refs/tags/v1"));
    }

    #[test]
    fn pull_and_merge_request_events_are_review_events_and_pushes_are_not() {
        let headers = |name: &'static str, value: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(name, http::HeaderValue::from_static(value));
            h
        };
        for (name, value) in [
            ("x-github-event", "pull_request"),
            ("x-github-event", "pull_request_review"),
            ("x-gitea-event", "pull_request_sync"),
            ("x-forgejo-event", "pull_request"),
            ("x-gitlab-event", "Merge Request Hook"),
        ] {
            assert!(is_review_event(&headers(name, value)), "{name}: {value}");
        }
        for (name, value) in [
            ("x-github-event", "push"),
            ("x-github-event", "ping"),
            ("x-gitea-event", "push"),
            ("x-gitlab-event", "Push Hook"),
            ("x-gitlab-event", "Tag Push Hook"),
            ("x-request-id", "pull_request"),
        ] {
            assert!(!is_review_event(&headers(name, value)), "{name}: {value}");
        }
        assert!(!is_review_event(&HeaderMap::new()));
    }

    #[test]
    fn pushed_commit_is_a_full_object_name_that_is_not_all_zeros() {
        let sha1 = "3f2a9c1d7e4b5a6f8091a2b3c4d5e6f708192a3b";
        let body = format!(r#"{{"ref":"refs/heads/main","before":"0","after":"{sha1}"}}"#);
        assert_eq!(pushed_commit(body.as_bytes()).as_deref(), Some(sha1));
        let sha256 = "ab".repeat(32);
        assert_eq!(pushed_commit(format!(r#"{{"after":"{sha256}"}}"#).as_bytes()), Some(sha256));
        let zeros = format!(r#"{{"after":"{}"}}"#, "0".repeat(40));
        for body in [zeros.as_str(), r#"{"ref":"refs/heads/main"}"#, r#"{"after":"1"}"#, r#"{"after":7}"#, "no json"] {
            assert_eq!(pushed_commit(body.as_bytes()), None, "{body}");
        }
    }

    #[test]
    fn pushed_ref_is_none_without_a_string_ref() {
        for body in [&br#"{"zen":"Design for failure."}"#[..], br#"{"ref":1}"#, b"payload=%7B%7D", b"", b"[]"] {
            assert_eq!(pushed_ref(body), None, "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn branch_push_matches_short_and_full_unit_refs() {
        assert!(ref_matches("refs/heads/main", "main"));
        assert!(ref_matches("refs/heads/main", "refs/heads/main"));
        assert!(ref_matches("refs/heads/release/1.0", "release/1.0"));
        assert!(!ref_matches("refs/heads/main", "refs/tags/main"));
        assert!(!ref_matches("refs/heads/main", "dev"));
        assert!(!ref_matches("refs/heads/maintenance", "main"));
    }

    #[test]
    fn tag_push_matches_short_and_full_unit_refs() {
        assert!(ref_matches("refs/tags/v1", "v1"));
        assert!(ref_matches("refs/tags/v1", "refs/tags/v1"));
        assert!(!ref_matches("refs/tags/v1", "refs/heads/v1"));
        assert!(!ref_matches("refs/tags/v1", "v1.1"));
    }

    #[test]
    fn unit_pinned_to_a_commit_never_matches_a_push() {
        let sha = "3f2a9c1d7e4b5a6f8091a2b3c4d5e6f708192a3b";
        assert!(!ref_matches("refs/heads/main", sha));
        assert!(!ref_matches("refs/tags/v1", sha));
        assert!(!ref_matches("refs/heads/main", &sha[..7]));
    }

    #[test]
    fn other_full_refs_match_only_themselves() {
        assert!(ref_matches("refs/pull/1/head", "refs/pull/1/head"));
        assert!(!ref_matches("refs/pull/1/head", "pull/1/head"));
        assert!(!ref_matches("refs/heads/", ""));
    }
}
