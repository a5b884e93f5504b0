//! Who sends gitward's requests: the User-Agent `gitward/<version> (<replica identity>)` that
//! every client of a process carries, impersonating or not, so the API server's audit log
//! tells which replica sent each request; and the identity of a process that has no other.

/// The tool name and version written to the ApplySet parent's `applyset.kubernetes.io/tooling`
/// annotation (`gitward/0.1.0`), as KEP-3659 specifies (`<name>/<semver>`), and the product of
/// the User-Agent.
pub const TOOLING: &str = concat!("gitward/", env!("CARGO_PKG_VERSION"));

/// The User-Agent of every client of a replica whose identity is `identity`:
/// `gitward/<version> (<identity>)` (RFC 9110 `product (comment)`).
pub fn user_agent(identity: &str) -> String {
    format!("{TOOLING} ({identity})")
}

/// This process's identity when nothing names one (one-shot commands, a daemon without
/// Leases; sharding's default): `$POD_NAME` (unique per pod; the Deployment passes it) or
/// else the host name, then `-<pid>`, lowercased, with anything outside `[a-z0-9-]` replaced by
/// `-`, cut to 63 characters — an RFC 1123 label, usable in a Lease name.
pub fn process_identity() -> String {
    let base = std::env::var("POD_NAME")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .or_else(hostname)
        .unwrap_or_else(|| "gitward".to_owned());
    identity_from(&base, std::process::id())
}

/// The kernel's host name, if readable.
pub fn hostname() -> Option<String> {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .map(|s| s.trim().to_string())
        .find(|s| !s.is_empty())
}

/// `<base>-<pid>` made an RFC 1123 label (see [`process_identity`]).
fn identity_from(base: &str, pid: u32) -> String {
    let suffix = format!("-{pid}");
    let clean: String = base
        .trim()
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_lowercase() || c.is_ascii_digit() { c } else { '-' })
        .collect();
    let clean = clean.trim_matches('-');
    let room = 63 - suffix.len();
    let cut = clean[..clean.len().min(room)].trim_end_matches('-');
    let cut = if cut.is_empty() { "gitward" } else { cut };
    format!("{cut}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_are_rfc_1123_labels_ending_in_the_pid() {
        assert_eq!(identity_from("Node_7.example.com", 42), "node-7-example-com-42");
        assert_eq!(identity_from("---", 1), "gitward-1");
        let long = identity_from(&"a".repeat(100), 123456);
        assert_eq!(long.len(), 63);
        assert!(long.ends_with("-123456"));
        assert!(process_identity().ends_with(&format!("-{}", std::process::id())));
        assert_eq!(user_agent("a-1"), format!("gitward/{} (a-1)", env!("CARGO_PKG_VERSION")));
    }
}
