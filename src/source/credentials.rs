//! Credentials for the remote, and the libgit2 callbacks that hand them over and check the
//! server's SSH host key.
//!
//! Secrets live in files and are read at fetch time, inside the callback, only when the remote
//! asks; nothing secret is stored in a struct, printed by `Debug`, or put in an error.

use std::cell::{Cell, RefCell};
use std::fs;
use std::path::{Path, PathBuf};

use git2::{CertificateCheckStatus, Cred, CredentialType, RemoteCallbacks};

use super::known_hosts::{self, PresentedKey};

/// How many times one fetch offers a credential before giving up. libgit2 calls the credential
/// callback again after every rejection, without end; three covers a key or token plus a
/// server that asks twice, and turns a bad credential into [`super::Error::Credentials`]
/// instead of a hang.
pub const MAX_AUTH_ATTEMPTS: u32 = 3;

/// User name offered with a token over https when [`Credentials::username`] is unset; GitHub
/// and Gitea accept any user name with a token, GitLab wants `oauth2` or the token's user.
const TOKEN_USERNAME: &str = "x-access-token";

/// User name for SSH when neither the URL nor [`Credentials::username`] gives one.
const SSH_USERNAME: &str = "git";

/// Where a sync unit's credentials live. All unset by default: enough for public https
/// repositories and local paths. `Debug` shows file paths only, never contents.
///
/// The SSH agent is never used: a daemon should authenticate with what its config names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    /// Private key file for SSH remotes, used when the server asks for a public key (libgit2
    /// `Cred::ssh_key`; the public key is derived from it). Must not need a passphrase.
    pub ssh_key_file: Option<PathBuf>,
    /// OpenSSH known_hosts file that the SSH server's host key must be listed in (plain or
    /// wildcard host names; hashed names are not supported). Unset: libgit2 checks
    /// `$HOME/.ssh/known_hosts` itself and refuses unknown hosts.
    pub known_hosts_file: Option<PathBuf>,
    /// File holding an access token for https remotes, sent as the password of HTTP basic auth;
    /// surrounding whitespace (a trailing newline) is trimmed. Re-read on every fetch, so it
    /// can be rotated in place (e.g. a mounted Kubernetes Secret).
    pub token_file: Option<PathBuf>,
    /// User name: for https with a token (default `x-access-token`), and for SSH when the URL
    /// names none (default `git`).
    pub username: Option<String>,
}

/// What made a fetch fail inside a callback, so the caller can pick the error variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Failure {
    /// No usable credential, an unreadable credential file, or too many rejections.
    Credentials(String),
    /// The SSH host key is not trusted.
    HostKey(String),
}

/// The per-fetch state behind the callbacks: attempt counters and the first failure.
pub(super) struct Auth<'a> {
    credentials: &'a Credentials,
    ssh_port: u16,
    secret_attempts: Cell<u32>,
    username_requests: Cell<u32>,
    failure: RefCell<Option<Failure>>,
}

impl<'a> Auth<'a> {
    /// Fresh state for one fetch; `ssh_port` is where an SSH remote listens (for
    /// `[host]:port` known_hosts entries).
    pub(super) fn new(credentials: &'a Credentials, ssh_port: u16) -> Self {
        Self {
            credentials,
            ssh_port,
            secret_attempts: Cell::new(0),
            username_requests: Cell::new(0),
            failure: RefCell::new(None),
        }
    }

    /// The callbacks for one fetch: credentials and certificate check, both backed by `self`.
    pub(super) fn callbacks(&'a self) -> RemoteCallbacks<'a> {
        let mut callbacks = RemoteCallbacks::new();
        callbacks.credentials(|_url, user, allowed| self.credential(user, allowed));
        callbacks.certificate_check(|cert, host| self.certificate(cert, host));
        callbacks
    }

    /// Why a callback stopped the fetch, if one did.
    pub(super) fn failure(&self) -> Option<Failure> {
        self.failure.borrow().clone()
    }

    /// The credential callback: a user name, an SSH key, or a token, as `allowed` permits and
    /// the config provides; an error after [`MAX_AUTH_ATTEMPTS`] offers.
    pub(super) fn credential(&self, user_from_url: Option<&str>, allowed: CredentialType) -> Result<Cred, git2::Error> {
        let ssh_user = user_from_url.or(self.credentials.username.as_deref()).unwrap_or(SSH_USERNAME);
        if allowed.contains(CredentialType::USERNAME) {
            return self.count(&self.username_requests).and_then(|()| Cred::username(ssh_user));
        }
        self.count(&self.secret_attempts)?;
        if allowed.contains(CredentialType::SSH_KEY)
            && let Some(key) = &self.credentials.ssh_key_file
        {
            return self.ssh_key(ssh_user, key);
        }
        if allowed.contains(CredentialType::USER_PASS_PLAINTEXT)
            && let Some(token) = &self.credentials.token_file
        {
            return self.token(token);
        }
        Err(self.fail(Failure::Credentials(format!("the remote asks for {} but none is configured", wanted(allowed)))))
    }

    /// Counts one callback invocation; an error once the count passes [`MAX_AUTH_ATTEMPTS`].
    fn count(&self, counter: &Cell<u32>) -> Result<(), git2::Error> {
        counter.set(counter.get() + 1);
        if counter.get() <= MAX_AUTH_ATTEMPTS {
            return Ok(());
        }
        Err(self.fail(Failure::Credentials(format!("the remote rejected the credentials {MAX_AUTH_ATTEMPTS} times"))))
    }

    /// An SSH key credential, after checking that the key file can be read.
    fn ssh_key(&self, user: &str, key: &Path) -> Result<Cred, git2::Error> {
        if let Err(error) = fs::File::open(key) {
            let message = format!("cannot read ssh_key_file {}: {error}", key.display());
            return Err(self.fail(Failure::Credentials(message)));
        }
        Cred::ssh_key(user, None, key, None)
    }

    /// A user name and token credential; the token is read from its file now.
    fn token(&self, file: &Path) -> Result<Cred, git2::Error> {
        let token = match fs::read_to_string(file) {
            Ok(token) => token,
            Err(error) => {
                let message = format!("cannot read token_file {}: {error}", file.display());
                return Err(self.fail(Failure::Credentials(message)));
            }
        };
        if token.trim().is_empty() {
            let message = format!("token_file {} is empty", file.display());
            return Err(self.fail(Failure::Credentials(message)));
        }
        let user = self.credentials.username.as_deref().unwrap_or(TOKEN_USERNAME);
        Cred::userpass_plaintext(user, token.trim())
    }

    /// The certificate callback: with a known_hosts file, an SSH host key must be listed there;
    /// everything else (TLS certificates, SSH without the file) passes through to libgit2's
    /// own checks (system CA store; `$HOME/.ssh/known_hosts`).
    fn certificate(&self, cert: &git2::cert::Cert<'_>, host: &str) -> Result<CertificateCheckStatus, git2::Error> {
        let (Some(file), Some(hostkey)) = (&self.credentials.known_hosts_file, cert.as_hostkey()) else {
            return Ok(CertificateCheckStatus::CertificatePassthrough);
        };
        let presented = match (hostkey.hostkey(), hostkey.hash_sha256()) {
            (Some(raw), _) => PresentedKey::Raw(raw),
            (None, Some(hash)) => PresentedKey::Sha256(hash),
            (None, None) => {
                let message = format!("{host} presented no key or SHA-256 fingerprint to check");
                return Err(self.fail(Failure::HostKey(message)));
            }
        };
        self.check_known_hosts(file, host, &presented)
            .map(|()| CertificateCheckStatus::CertificateOk)
            .map_err(|message| self.fail(Failure::HostKey(message)))
    }

    /// Reads `file` and checks the key; the error names the file.
    fn check_known_hosts(&self, file: &Path, host: &str, key: &PresentedKey<'_>) -> Result<(), String> {
        let contents = fs::read_to_string(file)
            .map_err(|error| format!("cannot read known_hosts_file {}: {error}", file.display()))?;
        known_hosts::check(&contents, host, self.ssh_port, key)
            .map_err(|message| format!("{message} in known_hosts_file {}", file.display()))
    }

    /// Records the first failure and turns it into the error libgit2 aborts the fetch with.
    fn fail(&self, failure: Failure) -> git2::Error {
        let message = match &failure {
            Failure::Credentials(message) | Failure::HostKey(message) => message.clone(),
        };
        self.failure.borrow_mut().get_or_insert(failure);
        git2::Error::from_str(&message)
    }
}

/// What the remote asked for, in config terms.
fn wanted(allowed: CredentialType) -> &'static str {
    if allowed.contains(CredentialType::SSH_KEY) {
        "an SSH key (ssh_key_file)"
    } else if allowed.contains(CredentialType::USER_PASS_PLAINTEXT) {
        "a user name and password (token_file)"
    } else {
        "a kind of credential gitward does not support"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error of a credential request that must be refused.
    fn refused(auth: &Auth<'_>, user: Option<&str>, allowed: CredentialType) -> git2::Error {
        match auth.credential(user, allowed) {
            Ok(_) => panic!("a credential was offered"),
            Err(error) => error,
        }
    }

    #[test]
    fn a_rejected_token_is_offered_at_most_three_times() {
        let dir = tempfile::tempdir().unwrap();
        let token_file = dir.path().join("token");
        fs::write(&token_file, "s3cr3t\n").unwrap();
        let credentials = Credentials { token_file: Some(token_file), ..Credentials::default() };
        let auth = Auth::new(&credentials, 22);
        for _ in 0..MAX_AUTH_ATTEMPTS {
            let cred = auth.credential(None, CredentialType::USER_PASS_PLAINTEXT).unwrap();
            assert_eq!(cred.credtype(), CredentialType::USER_PASS_PLAINTEXT.bits());
        }
        let error = refused(&auth, None, CredentialType::USER_PASS_PLAINTEXT);
        assert!(error.message().contains("rejected the credentials 3 times"), "{error}");
        assert!(matches!(auth.failure(), Some(Failure::Credentials(_))));
    }

    #[test]
    fn an_unconfigured_credential_is_a_clear_failure() {
        let credentials = Credentials::default();
        let auth = Auth::new(&credentials, 22);
        let error = refused(&auth, None, CredentialType::USER_PASS_PLAINTEXT);
        assert!(error.message().contains("token_file"), "{error}");
        let error = refused(&auth, Some("git"), CredentialType::SSH_KEY);
        assert!(error.message().contains("ssh_key_file"), "{error}");
        assert_eq!(
            auth.failure(),
            Some(Failure::Credentials(
                "the remote asks for a user name and password (token_file) but none is configured".into()
            )),
            "the first failure is kept"
        );
    }

    #[test]
    fn an_empty_or_missing_token_file_is_named_without_contents() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty");
        fs::write(&empty, " \n").unwrap();
        for (file, expected) in [(empty, "is empty"), (dir.path().join("none"), "cannot read")] {
            let credentials = Credentials { token_file: Some(file), ..Credentials::default() };
            let auth = Auth::new(&credentials, 22);
            let error = refused(&auth, None, CredentialType::USER_PASS_PLAINTEXT);
            assert!(error.message().contains(expected), "{error}");
        }
    }

    #[test]
    fn ssh_asks_for_a_user_name_then_gets_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("id_ed25519");
        fs::write(&key, "not really a key").unwrap();
        let credentials = Credentials { ssh_key_file: Some(key), ..Credentials::default() };
        let auth = Auth::new(&credentials, 22);
        let user = auth.credential(None, CredentialType::USERNAME).unwrap();
        assert_eq!(user.credtype(), CredentialType::USERNAME.bits());
        let key = auth.credential(Some("git"), CredentialType::SSH_KEY).unwrap();
        assert_eq!(key.credtype(), CredentialType::SSH_KEY.bits());
    }

    #[test]
    fn debug_output_holds_paths_not_secrets() {
        let dir = tempfile::tempdir().unwrap();
        let token_file = dir.path().join("token");
        fs::write(&token_file, "s3cr3t").unwrap();
        let credentials = Credentials { token_file: Some(token_file), ..Credentials::default() };
        let debug = format!("{credentials:?}");
        assert!(debug.contains("token") && !debug.contains("s3cr3t"), "{debug}");
    }
}
