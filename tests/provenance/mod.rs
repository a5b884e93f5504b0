//! `[provenance]`: the signed, chained attestation each `gitward sync` that changed anything leaves in the cluster and the state directory, checked by `gitward attest verify` (offline, tampered, and against the live members) and by the real cosign.

pub(crate) mod attest;
pub(crate) mod daemon;
pub(crate) mod live;
pub(crate) mod referrers;
pub(crate) mod signer;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use gitward::sync::provenance::dsse::{self, Envelope};
use gitward::sync::provenance::kept;
use gitward::sync::provenance::key::SigningKey;
use gitward::sync::provenance::statement::Statement;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;

use crate::common;

pub(crate) const LIMIT: Duration = Duration::from_secs(120);

/// A test's unit `app`: its repository, namespace, config and signing key.
pub(crate) struct Fixture {
    pub env: common::TestEnv,
    pub repo: common::GitRepo,
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
    pub port: u16,
    pub key: SigningKey,
}

/// What a test writes into the fixture's config: its `[provenance]` table and the lines of
/// unit `app`'s `[[sync]]` table past its repository, ref, path and namespace.
pub(crate) struct Tables {
    pub provenance: String,
    pub unit: String,
}

impl Fixture {
    /// A unit `app` of a fresh repository into a fresh namespace, `[provenance]` signing with a
    /// P-256 key (`seed`) from `dir/provenance.key`, its public key at `dir/provenance.pub`;
    /// the config serves `gitward sync` and `gitward run` alike.
    pub(crate) async fn new(prefix: &str, seed: u8) -> Self {
        let key_file = |dir: &Path, _: &str| Tables { provenance: key_file_table(dir), unit: String::new() };
        Self::with(prefix, SigningKey::p256_from_seed(seed), key_file).await
    }

    /// [`Fixture::new`] signing with `key` (written to `dir/provenance.key`, its public half to
    /// `dir/provenance.pub`), the config's tables as `tables` makes them of the directory and
    /// the namespace.
    pub(crate) async fn with(prefix: &str, key: SigningKey, tables: impl FnOnce(&Path, &str) -> Tables) -> Self {
        let (env, namespace, repo) = common::setup_repo(prefix).await;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("provenance.key"), key.to_pem()).unwrap();
        std::fs::write(dir.path().join("provenance.pub"), key.verifying().to_pem()).unwrap();
        let Tables { provenance, unit } = tables(dir.path(), &namespace);
        let unit = common::unit_toml("app", &repo.bare(), "", &namespace, &unit);
        let (config, port) = common::daemon_config(dir.path(), &provenance, "", &unit);
        Self { env, repo, dir, config, port, key }
    }

    /// The public key's file.
    pub(crate) fn public(&self) -> PathBuf {
        self.dir.path().join("provenance.pub")
    }

    /// The unit's journal under the state directory.
    pub(crate) fn journal(&self) -> PathBuf {
        self.dir.path().join("state/attestations/app.jsonl")
    }

    /// Pushes `files` and runs `gitward sync`, which must exit 0.
    pub(crate) fn push_and_sync(&self, files: &[(&str, &str)], message: &str) {
        self.repo.push(files, message);
        self.sync();
    }

    /// Runs `gitward sync`, which must exit 0.
    pub(crate) fn sync(&self) {
        let run = common::gitward(&["sync"], &self.config, LIMIT);
        assert_eq!(run.code, Some(0), "sync: {}", run.stderr);
    }

    /// The envelopes the unit's ConfigMap keeps, oldest first.
    pub(crate) async fn kept(&self) -> Vec<Envelope> {
        let api: Api<ConfigMap> = Api::namespaced(self.env.client.clone(), &self.env.namespace);
        let Some(object) = api.get_opt("gitward-app-attestations").await.unwrap() else { return Vec::new() };
        kept::envelopes(&object).into_iter().map(|(_, line)| serde_json::from_str(line).unwrap()).collect()
    }

    /// The members record of the newest attestation the unit's ConfigMap keeps.
    pub(crate) async fn members(&self) -> Option<String> {
        let api: Api<ConfigMap> = Api::namespaced(self.env.client.clone(), &self.env.namespace);
        kept::members(&api.get("gitward-app-attestations").await.unwrap()).unwrap()
    }

    /// `gitward attest verify --key <pub> <args>`: its exit code and stdout.
    pub(crate) fn verify(&self, args: &[&str]) -> (Option<i32>, String) {
        let out = Command::new(common::binary())
            .args(["attest", "verify", "--key"])
            .arg(self.public())
            .args(args)
            .output()
            .expect("gitward runs");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        eprintln!("attest verify {args:?}: {:?}\n{stdout}{}", out.status.code(), String::from_utf8_lossy(&out.stderr));
        (out.status.code(), stdout)
    }
}

/// `[provenance]` signing with `dir/provenance.key`.
pub(crate) fn key_file_table(dir: &Path) -> String {
    format!("[provenance]\nkey_file = \"{}\"\n", dir.join("provenance.key").display())
}

/// The Statement of `envelope`, unverified.
pub(crate) fn statement(envelope: &Envelope) -> Statement {
    use base64::Engine as _;
    let payload = base64::engine::general_purpose::STANDARD.decode(&envelope.payload).unwrap();
    serde_json::from_slice(&payload).unwrap()
}

/// Writes `envelopes` as JSON lines to `path`.
pub(crate) fn write_lines(path: &Path, envelopes: &[Envelope]) {
    let text: String = envelopes.iter().map(|e| format!("{}\n", dsse::to_line(e))).collect();
    std::fs::write(path, text).unwrap();
}
