//! Signed revisions only (`[sync.verify]`): commits and annotated tags signed with real
//! `ssh-keygen` keys and a real `gpg` key through the git CLI, synced against the real
//! apiserver. A signed revision syncs; an unsigned one, one signed by a key not trusted, and
//! one whose signature was copied onto other content are refused, and the cluster keeps the
//! last good revision.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::Value;

use crate::common;

const LIMIT: Duration = Duration::from_secs(120);
const WAIT: Duration = Duration::from_secs(60);

/// An ed25519 key made by `ssh-keygen`, and its allowed_signers line.
pub(crate) struct SshKey {
    private: PathBuf,
    pub(crate) line: String,
}

impl SshKey {
    pub(crate) fn new(dir: &Path, name: &str, principal: &str) -> Self {
        let private = dir.join(name);
        let out = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", principal, "-f"])
            .arg(&private)
            .output()
            .expect("ssh-keygen runs (openssh-client; scripts/setup installs it)");
        assert!(out.status.success(), "ssh-keygen: {}", String::from_utf8_lossy(&out.stderr));
        let public = std::fs::read_to_string(private.with_extension("pub")).unwrap();
        let key: Vec<&str> = public.split_whitespace().take(2).collect();
        let line = format!("{principal} namespaces=\"git\" {}", key.join(" "));
        Self { private, line }
    }
}

/// An OpenPGP key made by `gpg` in a home of its own; the agent is stopped on drop.
pub(crate) struct PgpKey {
    home: tempfile::TempDir,
    fingerprint: String,
}

impl PgpKey {
    fn new(uid: &str) -> Self {
        let home = tempfile::Builder::new().prefix("gnupg").tempdir_in("/tmp").unwrap();
        std::fs::set_permissions(home.path(), std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        let gpg = |args: &[&str]| {
            let out = Command::new("gpg")
                .env("GNUPGHOME", home.path())
                .args(["--batch", "--quiet", "--passphrase", ""])
                .args(args)
                .output()
                .expect("gpg runs (gnupg; scripts/setup installs it)");
            assert!(out.status.success(), "gpg {args:?}: {}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        gpg(&["--quick-gen-key", uid, "ed25519", "sign", "never"]);
        let listing = gpg(&["--list-keys", "--with-colons", uid]);
        let fingerprint = listing.lines().find_map(|l| l.strip_prefix("fpr:")).unwrap().trim_matches(':').to_owned();
        Self { home, fingerprint }
    }

    fn export(&self) -> String {
        let out = Command::new("gpg")
            .env("GNUPGHOME", self.home.path())
            .args(["--armor", "--export", &self.fingerprint])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    }
}

impl Drop for PgpKey {
    fn drop(&mut self) {
        let _ = Command::new("gpgconf").env("GNUPGHOME", self.home.path()).args(["--kill", "gpg-agent"]).status();
    }
}

/// How a commit or tag is signed.
pub(crate) enum Sign<'a> {
    No,
    Ssh(&'a SshKey),
    Pgp(&'a PgpKey),
}

/// Runs git in the work tree of `repo`, signing with `sign`; its stdout, trimmed.
fn git(repo: &common::GitRepo, sign: &Sign<'_>, args: &[&str]) -> String {
    let mut command = Command::new("git");
    command.args(["-c", "user.name=gitward-test", "-c", "user.email=test@gitward.dev"]);
    match sign {
        Sign::No => command.args(["-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"]),
        Sign::Ssh(key) => {
            command.args(["-c", "gpg.format=ssh", "-c"]).arg(format!("user.signingkey={}", key.private.display()))
        }
        Sign::Pgp(key) => command
            .env("GNUPGHOME", key.home.path())
            .args(["-c", "gpg.format=openpgp", "-c"])
            .arg(format!("user.signingkey={}", key.fingerprint)),
    };
    let out = command.args(args).current_dir(repo.work()).output().expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Writes ConfigMap `a` with `value`, commits (signed as `sign` says) and pushes; the SHA.
pub(crate) fn push(repo: &common::GitRepo, value: &str, sign: Sign<'_>) -> String {
    repo.write("a.yaml", &common::cm("a", value));
    git(repo, &Sign::No, &["add", "-A"]);
    let signed = if matches!(sign, Sign::No) { "--no-gpg-sign" } else { "-S" };
    git(repo, &sign, &["commit", "-q", signed, "-m", &format!("a = {value}")]);
    git(repo, &Sign::No, &["push", "-q", "-f", "origin", "main"]);
    git(repo, &Sign::No, &["rev-parse", "HEAD"])
}

async fn value(client: &kube::Client, ns: &str) -> Option<String> {
    common::cm_value(client, ns, "a").await
}

/// The `sync failed` error of a `gitward sync` run's log.
pub(crate) fn sync_error(run: &common::Run) -> String {
    let event = common::log_events(&run.stderr, "sync failed").next();
    let event = event.unwrap_or_else(|| panic!("no `sync failed` event: {}", run.stderr));
    let error = &event["fields"]["error"];
    let error = if error.is_null() { &event["error"] } else { error };
    error.as_str().unwrap_or_default().to_owned()
}

/// A test's environment and namespace, a directory, and an SSH key made in it that its
/// `allowed_signers` (written there) trusts, as `release@example.com`.
async fn trusting(prefix: &str) -> (common::TestEnv, String, tempfile::TempDir, SshKey) {
    let (env, ns) = common::setup_ns(prefix).await;
    let dir = tempfile::tempdir().unwrap();
    let trusted = SshKey::new(dir.path(), "trusted", "release@example.com");
    std::fs::write(dir.path().join("allowed_signers"), format!("{}\n", trusted.line)).unwrap();
    (env, ns, dir, trusted)
}

/// Runs `gitward sync` of `config`, which must apply `revision` (exit 0) and log it verified;
/// the signer it names.
fn synced_signer(config: &Path, revision: &str) -> String {
    let run = common::gitward(&["sync"], config, LIMIT);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let verified = common::log_events(&run.stderr, "revision verified").next().expect("a `revision verified` event");
    assert_eq!(field(&verified, "revision"), revision, "{verified}");
    field(&verified, "signer").as_str().unwrap_or_default().to_owned()
}

/// Runs `gitward sync` of `config`, which must refuse the revision (exit 2); its error.
fn refused(config: &Path) -> String {
    let run = common::gitward(&["sync"], config, LIMIT);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    sync_error(&run)
}

/// A field of a log event, whether the JSON layer nests fields or not.
fn field<'a>(event: &'a Value, name: &str) -> &'a Value {
    if event["fields"][name].is_null() { &event[name] } else { &event["fields"][name] }
}

/// The key's fingerprint as `ssh-keygen -l` prints it (`SHA256:…`).
pub(crate) fn fingerprint(key: &SshKey) -> String {
    let out = Command::new("ssh-keygen").arg("-lf").arg(key.private.with_extension("pub")).output().unwrap();
    String::from_utf8_lossy(&out.stdout).split_whitespace().nth(1).unwrap().to_owned()
}

/// `gitward sync` with an allowed_signers file: a commit signed by a trusted SSH key is applied
/// (its signer logged); an unsigned commit, one signed by another key and one carrying a
/// signature copied from a trusted commit onto other content each exit 2 with a message naming
/// the commit and the reason, and the ConfigMap keeps the value of the last good revision.
#[tokio::test]
async fn sync_applies_an_ssh_signed_commit_and_refuses_unsigned_foreign_and_forged_ones() {
    let (env, ns, dir, trusted) = trusting("verify-ssh").await;
    let stranger = SshKey::new(dir.path(), "stranger", "stranger@example.com");
    std::fs::write(dir.path().join("allowed_signers"), format!("# who may release\n{}\n", trusted.line)).unwrap();
    let repo = common::GitRepo::new();
    let extra = "[sync.verify]\nallowed_signers_file = \"allowed_signers\"\n";
    let config = common::config_file(dir.path(), &common::unit_toml("app", &repo.bare(), "", &ns, extra));

    let good = push(&repo, "1", Sign::Ssh(&trusted));
    let signer = synced_signer(&config, &good);
    assert_eq!(value(&env.client, &ns).await.as_deref(), Some("1"));
    assert!(signer.contains("release@example.com") && signer.contains(&fingerprint(&trusted)), "{signer}");

    let unsigned = push(&repo, "2", Sign::No);
    let error = refused(&config);
    assert!(error.contains(&format!("revision {unsigned} refused: commit {unsigned} is not signed")), "{error}");
    assert!(error.contains("allowed_signers"), "{error}");
    assert_eq!(value(&env.client, &ns).await.as_deref(), Some("1"), "the last good revision stays applied");
    let run = common::gitward(&["validate"], &config, LIMIT);
    assert_eq!(run.code, Some(2), "validate refuses it too: {}", run.stderr);
    assert!(run.stderr.contains(&format!("commit {unsigned} is not signed")), "{}", run.stderr);

    let foreign = push(&repo, "3", Sign::Ssh(&stranger));
    let error = refused(&config);
    let expected = format!("commit {foreign} is signed by SSH key {}, which is not in", fingerprint(&stranger));
    assert!(error.contains(&expected), "{error}");
    assert_eq!(value(&env.client, &ns).await.as_deref(), Some("1"));

    // The trusted commit's signature header copied onto a commit of another tree (a=4): the
    // payload no longer matches what was signed.
    push(&repo, "4", Sign::No);
    let tree = git(&repo, &Sign::No, &["rev-parse", "HEAD^{tree}"]);
    let original = git(&repo, &Sign::No, &["cat-file", "commit", &good]);
    let good_tree = original.lines().next().unwrap().strip_prefix("tree ").unwrap().to_owned();
    let forged_text = format!("{}\n", original.replacen(&good_tree, &tree, 1));
    let forged_file = dir.path().join("forged");
    std::fs::write(&forged_file, forged_text).unwrap();
    let forged = git(&repo, &Sign::No, &["hash-object", "-t", "commit", "-w", forged_file.to_str().unwrap()]);
    git(&repo, &Sign::No, &["push", "-q", "-f", "origin", &format!("{forged}:refs/heads/main")]);
    let error = refused(&config);
    assert!(error.contains(&format!("commit {forged} has an SSH signature by release@example.com")), "{error}");
    assert!(error.contains("does not verify"), "{error}");
    assert_eq!(value(&env.client, &ns).await.as_deref(), Some("1"));
}

/// `gitward sync` with an OpenPGP key file: a commit signed by that `gpg` key is applied, one
/// signed by another `gpg` key is refused (exit 2) naming that key, the cluster unchanged.
#[tokio::test]
async fn sync_applies_an_openpgp_signed_commit_and_refuses_one_by_another_key() {
    let (env, ns) = common::setup_ns("verify-pgp").await;
    let dir = tempfile::tempdir().unwrap();
    let trusted = PgpKey::new("Release Key <release@example.com>");
    let stranger = PgpKey::new("Stranger <stranger@example.com>");
    std::fs::write(dir.path().join("keys.asc"), trusted.export()).unwrap();
    let repo = common::GitRepo::new();
    let extra = "[sync.verify]\nopenpgp_keys_file = \"keys.asc\"\n";
    let config = common::config_file(dir.path(), &common::unit_toml("app", &repo.bare(), "", &ns, extra));

    let good = push(&repo, "1", Sign::Pgp(&trusted));
    let signer = synced_signer(&config, &good);
    assert_eq!(value(&env.client, &ns).await.as_deref(), Some("1"));
    assert!(signer.contains(&trusted.fingerprint) && signer.contains("release@example.com"), "{signer}");

    let foreign = push(&repo, "2", Sign::Pgp(&stranger));
    let error = refused(&config);
    let expected = format!("commit {foreign} is signed by OpenPGP key {}, which is not in", stranger.fingerprint);
    assert!(error.contains(&expected), "{error}");
    assert_eq!(value(&env.client, &ns).await.as_deref(), Some("1"), "the last good revision stays applied");

    // An SSH-signed commit where only OpenPGP keys are trusted is refused too.
    let ssh = SshKey::new(dir.path(), "ssh", "dev@example.com");
    let other_format = push(&repo, "3", Sign::Ssh(&ssh));
    let error = refused(&config);
    assert!(error.contains(&format!("commit {other_format} has an SSH signature, but")), "{error}");
    assert_eq!(value(&env.client, &ns).await.as_deref(), Some("1"));
}

/// A unit whose `ref` is an annotated tag checks the tag's signature, not the commit's: a
/// signed tag of an unsigned commit syncs; the tag moved (unsigned) to a signed commit is
/// refused, naming the tag.
#[tokio::test]
async fn a_unit_following_a_tag_checks_the_tag_signature() {
    let (env, ns, dir, trusted) = trusting("verify-tag").await;
    let repo = common::GitRepo::new();
    let extra = "[sync.verify]\nallowed_signers_file = \"allowed_signers\"\n";
    let unit = common::unit_toml("app", &repo.bare(), "", &ns, extra).replace("ref = \"main\"", "ref = \"release\"");
    let config = common::config_file(dir.path(), &unit);

    push(&repo, "1", Sign::No);
    git(&repo, &Sign::Ssh(&trusted), &["tag", "-s", "-m", "release 1", "release"]);
    git(&repo, &Sign::No, &["push", "-q", "-f", "origin", "release"]);
    let run = common::gitward(&["sync"], &config, LIMIT);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(value(&env.client, &ns).await.as_deref(), Some("1"));

    push(&repo, "2", Sign::Ssh(&trusted));
    git(&repo, &Sign::No, &["tag", "-f", "-a", "--no-sign", "-m", "release 2", "release"]);
    git(&repo, &Sign::No, &["push", "-q", "-f", "origin", "release"]);
    let tag = git(&repo, &Sign::No, &["rev-parse", "release"]);
    let error = refused(&config);
    assert!(error.contains(&format!("annotated tag \"release\" ({tag}) is not signed")), "{error}");
    assert_eq!(value(&env.client, &ns).await.as_deref(), Some("1"), "the last good revision stays applied");
}

/// The daemon applies a signed push, then refuses an unsigned push and one signed by a key not
/// trusted: each logs `revision refused` (revision, failure, signer, the revision kept) and
/// counts `gitward_revisions_refused_total`, while the cluster keeps the last good revision;
/// a signed push after them is applied.
#[tokio::test]
async fn the_daemon_keeps_the_last_good_revision_and_logs_and_counts_refusals() {
    let (env, ns, dir, trusted) = trusting("verify-daemon").await;
    let stranger = SshKey::new(dir.path(), "stranger", "stranger@example.com");
    let repo = common::GitRepo::new();
    let good = push(&repo, "1", Sign::Ssh(&trusted));
    let extra = "[sync.verify]\nallowed_signers_file = \"allowed_signers\"\n";
    let (config, port) = common::app_daemon_config(dir.path(), &repo.bare(), &ns, "", extra);
    let daemon = common::Daemon::ready(&config, port, WAIT).await;
    let applied = common::eventually(WAIT, || async { value(&env.client, &ns).await.as_deref() == Some("1") }).await;
    assert!(applied, "the signed revision was not applied: {}", daemon.log_text());

    let refused = |revision: String| {
        let daemon = &daemon;
        async move {
            let mut found = None;
            let seen = common::eventually(WAIT, || {
                found = daemon
                    .logged("revision refused: not signed by a trusted key")
                    .into_iter()
                    .find(|e| e["revision"] == revision.as_str());
                let seen = found.is_some();
                async move { seen }
            })
            .await;
            assert!(seen, "no refusal of {revision}: {}", daemon.log_text());
            found.unwrap()
        }
    };
    let unsigned = push(&repo, "2", Sign::No);
    let event = refused(unsigned.clone()).await;
    assert_eq!(event["failure"], "unsigned", "{event}");
    assert_eq!(event["kept"], good.as_str(), "{event}");
    assert!(event["reason"].as_str().unwrap().contains(&format!("commit {unsigned} is not signed")), "{event}");
    let unsigned_count = r#"unit="app",reason="unsigned""#;
    assert!(
        daemon.metric_sum("gitward_revisions_refused_total", &[unsigned_count]) >= 1.0,
        "{:?}",
        daemon.get("/metrics")
    );
    assert_eq!(value(&env.client, &ns).await.as_deref(), Some("1"), "the last good revision stays applied");

    let foreign = push(&repo, "3", Sign::Ssh(&stranger));
    let event = refused(foreign).await;
    assert_eq!(event["failure"], "unknown-key", "{event}");
    assert_eq!(event["signer"], fingerprint(&stranger).as_str(), "{event}");
    let unknown_count = r#"unit="app",reason="unknown-key""#;
    assert!(
        daemon.metric_sum("gitward_revisions_refused_total", &[unknown_count]) >= 1.0,
        "{:?}",
        daemon.get("/metrics")
    );
    assert_eq!(value(&env.client, &ns).await.as_deref(), Some("1"));

    let next = push(&repo, "4", Sign::Ssh(&trusted));
    let applied = common::eventually(WAIT, || async { value(&env.client, &ns).await.as_deref() == Some("4") }).await;
    assert!(applied, "the signed push was not applied: {}", daemon.log_text());
    let verified = daemon.logged("revision verified").into_iter().any(|e| e["revision"] == next.as_str());
    assert!(verified, "no `revision verified` event for {next}: {}", daemon.log_text());

    // The key file is read at every fetch: the stranger's key added, its next push is applied
    // without a reload.
    let signers = format!("{}\n{}\n", trusted.line, stranger.line);
    std::fs::write(dir.path().join("allowed_signers"), signers).unwrap();
    push(&repo, "5", Sign::Ssh(&stranger));
    let applied = common::eventually(WAIT, || async { value(&env.client, &ns).await.as_deref() == Some("5") }).await;
    assert!(applied, "a push by a newly allowed key was not applied: {}", daemon.log_text());
}

/// A branch pushed under the name of a signed annotated tag: with `[sync.verify]` and `ref =
/// "release"`, the branch `release` at an older signed commit does not take the tag's place —
/// the sync is refused as ambiguous, naming both refs, and the tag's revision stays applied;
/// `refs/tags/release` in full syncs the tag. Without `[sync.verify]` the name resolves as
/// `git rev-parse` resolves it: the tag.
#[tokio::test]
async fn a_branch_named_like_a_signed_tag_does_not_shadow_it() {
    let (env, ns, dir, trusted) = trusting("verify-shadow").await;
    let repo = common::GitRepo::new();
    let verify = "[sync.verify]\nallowed_signers_file = \"allowed_signers\"\n";
    let unit = |reference: &str, extra: &str| {
        let unit = common::unit_toml("app", &repo.bare(), "", &ns, extra);
        unit.replace("ref = \"main\"", &format!("ref = \"{reference}\""))
    };
    let config = |reference: &str, extra: &str| common::config_file(dir.path(), &unit(reference, extra));

    let older = push(&repo, "1", Sign::Ssh(&trusted));
    let tagged = push(&repo, "2", Sign::Ssh(&trusted));
    git(&repo, &Sign::Ssh(&trusted), &["tag", "-s", "-m", "release 2", "release"]);
    git(&repo, &Sign::No, &["push", "-q", "origin", "release"]);
    let run = common::gitward(&["sync"], &config("release", verify), LIMIT);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(value(&env.client, &ns).await.as_deref(), Some("2"));

    git(&repo, &Sign::No, &["push", "-q", "origin", &format!("{older}:refs/heads/release")]);
    let bare = repo.bare();
    let resolved = repo.git(&["--git-dir", bare.to_str().unwrap(), "rev-parse", "release^{commit}"], &repo.work());
    assert_eq!(resolved.trim(), tagged, "git itself takes the tag");
    let run = common::gitward(&["sync"], &config("release", verify), LIMIT);
    assert_eq!(run.code, Some(2), "the shadowing branch is refused: {}", run.stderr);
    let error = sync_error(&run);
    let expected = "reference \"release\" is ambiguous: it names refs/tags/release and refs/heads/release";
    assert!(error.contains(expected), "{error}");
    assert_eq!(value(&env.client, &ns).await.as_deref(), Some("2"), "the tag's revision stays applied");

    let run = common::gitward(&["sync"], &config("refs/tags/release", verify), LIMIT);
    assert_eq!(run.code, Some(0), "the full tag name syncs: {}", run.stderr);
    assert_eq!(value(&env.client, &ns).await.as_deref(), Some("2"));

    let run = common::gitward(&["sync"], &config("release", ""), LIMIT);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let synced = common::log_events(&run.stderr, "sync complete").next().expect("a `sync complete` event");
    assert_eq!(field(&synced, "revision"), tagged.as_str(), "git's order: the tag, not the branch: {synced}");
    assert_eq!(value(&env.client, &ns).await.as_deref(), Some("2"));
}

/// A signed commit whose Helm chart takes a dependency from a chart repository: the
/// dependency's bytes are not covered by the signature (`Chart.lock` pins a version, not the
/// archive), so with `[sync.verify]` the revision is refused naming the dependency and its
/// repository, and nothing is applied; the same chart with the dependency vendored under
/// `charts/` in a signed commit is applied.
#[tokio::test]
async fn a_signed_chart_takes_no_dependency_from_outside_the_signed_revision() {
    use crate::common::charts::{ChartServer, package};
    let (env, ns, dir, trusted) = trusting("verify-deps").await;
    let server = ChartServer::start(&dir.path().join("served"));
    server.publish(dir.path(), "demo", "0.1.0");
    let repo = common::GitRepo::new();
    let dependency = format!("- name: demo\n  version: 0.1.0\n  repository: \"{}/\"\n", server.url);
    repo.write(
        "chart/Chart.yaml",
        &format!("apiVersion: v2\nname: umbrella\nversion: 1.0.0\ndependencies:\n{dependency}"),
    );
    repo.write("chart/Chart.lock", &format!("dependencies:\n{dependency}"));
    let extra = "[sync.helm]\nrelease = \"shop\"\n[sync.verify]\nallowed_signers_file = \"allowed_signers\"\n";
    let unit = common::unit_toml("app", &repo.bare(), "chart", &ns, extra);
    let config = dir.path().join("gitward.toml");
    // Listed, so the refusal is the signature's, not the allow-list's.
    let listed = crate::sources::charts::listed(&server.url);
    std::fs::write(&config, crate::sources::render::config_text(&dir.path().join("state"), &listed, &unit)).unwrap();
    let demo = || async {
        let api: Api<ConfigMap> = Api::namespaced(env.client.clone(), &ns);
        api.get_opt("shop-demo").await.unwrap().and_then(|c| c.data).map(|d| d["version"].clone())
    };

    git(&repo, &Sign::No, &["add", "-A"]);
    git(&repo, &Sign::Ssh(&trusted), &["commit", "-q", "-S", "-m", "umbrella with a remote dependency"]);
    git(&repo, &Sign::No, &["push", "-q", "origin", "main"]);
    let error = refused(&config);
    let named = format!("dependency demo 0.1.0 comes from {}, outside the signed revision", server.url);
    assert!(error.contains(&named) && error.contains("chart/Chart.yaml"), "{error}");
    assert_eq!(demo().await, None, "nothing applied");

    package(dir.path(), "demo", "0.1.0", &repo.work().join("chart/charts"));
    git(&repo, &Sign::No, &["add", "-A"]);
    git(&repo, &Sign::Ssh(&trusted), &["commit", "-q", "-S", "-m", "vendor the dependency"]);
    git(&repo, &Sign::No, &["push", "-q", "origin", "main"]);
    let run = common::gitward(&["sync"], &config, LIMIT);
    assert_eq!(run.code, Some(0), "the vendored dependency renders: {}", run.stderr);
    assert_eq!(demo().await.as_deref(), Some("0.1.0"));
}
