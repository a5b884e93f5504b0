//! Fetching over HTTPS as `gitward` runs it, through libgit2 and OpenSSL: a repository whose
//! server certificate a CA of `SSL_CERT_FILE` signed is fetched (the bundle is read on the first
//! HTTPS fetch, not when gitward starts: `src/source/trust.rs`), and one that no trusted CA signed
//! is refused, naming the URL.

use std::path::Path;
use std::time::Duration;

use crate::common::{self, git_remote::GitHttps};

const CONFIG_MAP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: over-https\ndata:\n  a: \"1\"\n";

/// `gitward validate` (offline: no cluster) of one unit fetched from `url`, with
/// `SSL_CERT_FILE` set to `bundle` or unset (by `env`, which execs gitward).
fn validate(url: &str, bundle: Option<&Path>) -> common::Run {
    let dir = tempfile::tempdir().unwrap();
    let unit = format!(
        "[[sync]]\nname = \"app\"\nrepo = \"{url}\"\nref = \"main\"\npath = \"app\"\nnamespace = \"default\"\n"
    );
    let config = common::config_file(dir.path(), &unit);
    let set = bundle.map(|path| format!("SSL_CERT_FILE={}", path.display()));
    let wrapper = match &set {
        Some(set) => vec!["env", set.as_str()],
        None => vec!["env", "-u", "SSL_CERT_FILE"],
    };
    common::gitward_in(&wrapper, &["validate"], &config, Duration::from_secs(60))
}

#[test]
fn a_repository_over_https_is_fetched_when_its_ca_is_trusted_and_refused_when_not() {
    let repo = common::GitRepo::new();
    let revision = repo.push(&[("app/config-map.yaml", CONFIG_MAP)], "one ConfigMap");
    let server = GitHttps::serve(repo.bare().parent().unwrap());
    let url = server.url("remote.git");

    let run = validate(&url, Some(&server.cert));
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (Some(0), format!("app: valid {} (1 object)\n", &revision[..7]).as_str()),
        "{}",
        run.stderr
    );

    // The system's bundle does not hold the test's self-signed certificate.
    let run = validate(&url, None);
    assert_eq!(run.code, Some(2), "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains(&format!("fetch from {url} failed")), "{}", run.stderr);
    assert!(run.stderr.to_lowercase().contains("certificate"), "{}", run.stderr);
    assert_eq!(run.stdout, "app: invalid: its manifests could not be read (the error is logged)\n");
}
