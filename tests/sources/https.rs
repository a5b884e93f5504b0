//! Fetching over HTTPS as `gitward` runs it, through libgit2 and OpenSSL: a repository whose
//! server certificate a CA of `SSL_CERT_FILE` signed is fetched (the bundle is read on the first
//! HTTPS fetch, not when gitward starts: `src/source/trust.rs`), and one that no trusted CA signed
//! is refused, naming the URL.

use std::path::Path;

use crate::common::{self, git_remote::GitHttps};

const CONFIG_MAP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: over-https\ndata:\n  a: \"1\"\n";

/// `gitward validate` (offline: no cluster) of one unit fetched from `url`, with
/// `SSL_CERT_FILE` set to `bundle` or unset: exit code, stdout, stderr.
fn validate(url: &str, bundle: Option<&Path>) -> (Option<i32>, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let unit = format!(
        "[[sync]]\nname = \"app\"\nrepo = \"{url}\"\nref = \"main\"\npath = \"app\"\nnamespace = \"default\"\n"
    );
    let config = common::config_file(dir.path(), &unit);
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_gitward"));
    command.args(["validate", "--config"]).arg(&config).env_remove("RUST_LOG").env_remove("GITWARD_LOG_FORMAT");
    match bundle {
        Some(path) => command.env("SSL_CERT_FILE", path),
        None => command.env_remove("SSL_CERT_FILE"),
    };
    let out = command.output().expect("gitward runs");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

#[test]
fn a_repository_over_https_is_fetched_when_its_ca_is_trusted_and_refused_when_not() {
    let repo = common::GitRepo::new();
    repo.write("app/config-map.yaml", CONFIG_MAP);
    let revision = repo.commit_and_push("one ConfigMap");
    let server = GitHttps::serve(repo.bare().parent().unwrap());
    let url = server.url("remote.git");

    let (code, stdout, stderr) = validate(&url, Some(&server.cert));
    assert_eq!(
        (code, stdout.as_str()),
        (Some(0), format!("app: valid {} (1 objects)\n", &revision[..7]).as_str()),
        "{stderr}"
    );

    // The system's bundle does not hold the test's self-signed certificate.
    let (code, stdout, stderr) = validate(&url, None);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    assert!(stderr.contains(&format!("fetch from {url} failed")), "{stderr}");
    assert!(stderr.to_lowercase().contains("certificate"), "{stderr}");
    assert_eq!(stdout, "app: invalid: its manifests could not be read (the error is logged)\n");
}
