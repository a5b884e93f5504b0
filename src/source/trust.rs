//! The CA bundle libgit2's HTTPS fetches trust, read on the first HTTPS fetch rather than when
//! libgit2 starts.
//!
//! libgit2 makes its one OpenSSL context when it starts (`git_libgit2_init`) and calls
//! `SSL_CTX_set_default_verify_paths` there, which decodes every certificate of the bundle that
//! `SSL_CERT_FILE` names (the git2 crate sets that variable from `openssl-probe` when it is not
//! set). Decoding a system bundle's certificates costs CPU before gitward's first request
//! (ARCHITECTURE.md, "Figures"), paid by every `gitward` command whether or not a unit
//! fetches over HTTPS. [`start_libgit2`] starts libgit2 with the bundle hidden, and
//! [`trust_bundle_for`] reads it into that same context before the first fetch of an
//! `https://` (or `http://`, which may redirect to HTTPS) URL. What is trusted is the same as
//! before: the hashed certificate directory (`SSL_CERT_DIR`) was never read up front.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Once, OnceLock};

/// OpenSSL's variable for its default CA bundle file (`X509_get_default_cert_file_env`).
const CERT_FILE_VAR: &str = "SSL_CERT_FILE";

/// The bundle OpenSSL would have read when libgit2 started: `SSL_CERT_FILE` when it names an
/// existing file, else the first of `openssl-probe`'s well-known places that exists; `None`
/// when [`start_libgit2`] did not run (libgit2 then read the bundle itself) or none exists.
static BUNDLE: OnceLock<Option<PathBuf>> = OnceLock::new();

/// Starts libgit2 (and its OpenSSL context) without reading the CA bundle, then puts
/// `SSL_CERT_FILE` where the git2 crate would have left it: its value if that file exists, else
/// the bundle `openssl-probe` finds, else as it was. Child processes see the same environment
/// as before.
///
/// How: `SSL_CERT_FILE` names `/dev/null` while libgit2 starts; OpenSSL finds no certificate
/// there and ignores that (`X509_STORE_set_default_paths` clears the error).
///
/// # Safety
///
/// This writes the process environment and libgit2 globals: call it once from `main`, before
/// any thread (and so before the tokio runtime) is started, and before any other git2 call
/// ([`super::start_libgit2`]).
pub(super) unsafe fn start_libgit2() {
    let bundle = openssl_probe::probe().cert_file;
    let before: Option<OsString> = std::env::var_os(CERT_FILE_VAR);
    // SAFETY: the caller guarantees no other thread exists, so none reads the environment, and
    // libgit2 is not started yet. Reading a libgit2 option starts it (git2's `init`).
    unsafe {
        std::env::set_var(CERT_FILE_VAR, "/dev/null");
        let _ = git2::opts::get_mwindow_size();
        match (&bundle, before) {
            (Some(path), _) => std::env::set_var(CERT_FILE_VAR, path),
            (None, Some(value)) => std::env::set_var(CERT_FILE_VAR, value),
            (None, None) => std::env::remove_var(CERT_FILE_VAR),
        }
    }
    let _ = BUNDLE.set(bundle);
}

/// Before a fetch from `url`: when it is an `https://` or `http://` URL and [`start_libgit2`]
/// deferred the CA bundle, reads the bundle into libgit2's OpenSSL context, once per process.
/// Every other fetch reads nothing.
///
/// A bundle that cannot be read is logged (`WARN`) and the fetch goes on: its certificate check
/// then fails with libgit2's own error, as it would have when libgit2 started.
pub(super) fn trust_bundle_for(url: &str) {
    static LOADED: Once = Once::new();
    let Some(Some(bundle)) = BUNDLE.get().filter(|_| over_http(url)) else { return };
    LOADED.call_once(|| {
        // SAFETY: libgit2's context gains the bundle's certificates (`SSL_CTX_load_verify_locations`)
        // before any HTTPS fetch uses it: every fetch passes here first, and `Once` holds the
        // others until this returns. Fetches over other transports do not touch the context.
        if let Err(e) = unsafe { git2::opts::set_ssl_cert_file(bundle) } {
            tracing::warn!(bundle = %bundle.display(), error = %e.message(), "could not read the CA bundle for HTTPS fetches");
        }
    });
}

/// Whether libgit2 fetches `url` with its HTTP transport (scheme `https` or `http`, any case).
fn over_http(url: &str) -> bool {
    let scheme = |s: &str| url.get(..s.len()).is_some_and(|head| head.eq_ignore_ascii_case(s));
    scheme("https://") || scheme("http://")
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_http_urls_need_the_bundle() {
        let cases = [
            ("https://example.com/r.git", true),
            ("HTTPS://example.com/r.git", true),
            ("http://example.com/r.git", true),
            ("ssh://git@example.com/r.git", false),
            ("git@example.com:r.git", false),
            ("git://example.com/r.git", false),
            ("file:///srv/r.git", false),
            ("/srv/https://r.git", false),
            ("http", false),
        ];
        for (url, expected) in cases {
            assert_eq!(super::over_http(url), expected, "{url}");
        }
    }
}
