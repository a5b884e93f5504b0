//! A real Gitea for the tests ([`Gitea`]): the pinned build of scripts/tools, run with SQLite
//! in a temporary work directory on a free loopback port, an admin user `gw` and an access
//! token of it made with Gitea's own CLI, repositories made through its REST API and pushed to
//! over HTTP with the `git` CLI ([`GiteaWork`]).
//!
//! Gitea built without its `bindata` tag reads its locales, templates and assets from
//! `STATIC_ROOT_PATH`: scripts/tools keeps them beside the binary, in the directory
//! `bin/gitea` links into.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use super::charts::tools_bin;

/// The user the fixture makes and the token belongs to.
pub const USER: &str = "gw";

/// How long Gitea may take to answer its first request (a cold start migrates the database).
const START: Duration = Duration::from_secs(120);

/// A running Gitea, killed on drop.
pub struct Gitea {
    child: Child,
    /// Its HTTP port on 127.0.0.1.
    pub port: u16,
    dir: tempfile::TempDir,
    /// An access token of [`USER`] with every scope.
    pub token: String,
    /// A file holding [`Gitea::token`] and a newline, for gitward's `token_file`.
    pub token_file: PathBuf,
    http: reqwest::Client,
}

/// The gitea binary of scripts/tools, and the directory of the sources it reads at run time.
fn binary() -> (PathBuf, PathBuf) {
    let bin = tools_bin().join("gitea");
    assert!(bin.is_file(), "gitea not in {}: run scripts/tools first", tools_bin().display());
    let real = std::fs::canonicalize(&bin).unwrap();
    let root = real.parent().unwrap().to_path_buf();
    assert!(root.join("options/locale").is_dir(), "no options/ beside {}: run scripts/tools gitea", real.display());
    (real, root)
}

fn app_ini(work: &Path, port: u16, static_root: &Path) -> String {
    let work = work.display();
    format!(
        "APP_NAME = gitward-test\nRUN_MODE = prod\nI_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true\nWORK_PATH = {work}\n\n\
         [server]\nHTTP_ADDR = 127.0.0.1\nHTTP_PORT = {port}\nROOT_URL = http://127.0.0.1:{port}/\n\
         OFFLINE_MODE = true\nDISABLE_SSH = true\nLFS_START_SERVER = false\nSTATIC_ROOT_PATH = {}\n\n\
         [database]\nDB_TYPE = sqlite3\nPATH = {work}/data/gitea.db\n\n\
         [repository]\nROOT = {work}/repos\nDEFAULT_BRANCH = main\n\n\
         [security]\nINSTALL_LOCK = true\nSECRET_KEY = gitward-test-secret-key-gitward-test\n\
         INTERNAL_TOKEN = eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJuYmYiOjE3OTYyMjk3MzJ9.QYTN5l2JgGWicyMIx_SbhAaLk89dq_gsLb45nsivveE\n\n\
         [oauth2]\nJWT_SECRET = TmKl8s4qNnFCHaUmAIoVKmnXohdUclQhE0TUXQKw8AA\n\n\
         [service]\nDISABLE_REGISTRATION = true\n\n[mailer]\nENABLED = false\n\n\
         [indexer]\nREPO_INDEXER_ENABLED = false\n\n[log]\nMODE = console\nLEVEL = warn\nROOT_PATH = {work}/log\n",
        static_root.display()
    )
}

impl Gitea {
    /// Starts Gitea, waits until `/api/v1/version` answers, and makes [`USER`] and its token.
    pub async fn start() -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (bin, static_root) = binary();
        let dir = tempfile::tempdir().unwrap();
        let port = super::free_port();
        std::fs::write(dir.path().join("app.ini"), app_ini(dir.path(), port, &static_root)).unwrap();
        let log = std::fs::File::create(dir.path().join("gitea.log")).unwrap();
        let child = Self::command(&bin, dir.path())
            .arg("web")
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("gitea starts");
        let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
        let mut gitea =
            Gitea { child, port, dir, token: String::new(), token_file: PathBuf::new(), http: http.clone() };
        let version = format!("http://127.0.0.1:{port}/api/v1/version");
        let up = super::eventually(START, || async {
            http.get(&version).send().await.is_ok_and(|r| r.status().is_success())
        })
        .await;
        assert!(up, "gitea did not answer within {START:?}: {}", gitea.log());
        gitea.cli(&[
            "admin",
            "user",
            "create",
            "--username",
            USER,
            "--password",
            "gitward-test-password",
            "--email",
            "gw@gitward.dev",
            "--admin",
            "--must-change-password=false",
        ]);
        let token = gitea.cli(&[
            "admin",
            "user",
            "generate-access-token",
            "--username",
            USER,
            "--token-name",
            "gitward",
            "--scopes",
            "all",
            "--raw",
        ]);
        gitea.token = token.trim().to_owned();
        gitea.token_file = gitea.dir.path().join("token");
        std::fs::write(&gitea.token_file, format!("{}\n", gitea.token)).unwrap();
        gitea
    }

    fn command(bin: &Path, work: &Path) -> Command {
        let mut command = Command::new(bin);
        command
            .arg("--work-path")
            .arg(work)
            .arg("--config")
            .arg(work.join("app.ini"))
            .current_dir(work)
            .env("GITEA_WORK_DIR", work)
            .env("GITEA_I_AM_BEING_UNSAFE_RUNNING_AS_ROOT", "true")
            .env("HOME", work);
        command
    }

    /// Runs the gitea CLI on this instance's config; its stdout, or a panic with its output.
    fn cli(&self, args: &[&str]) -> String {
        let out = Self::command(&binary().0, self.dir.path()).args(args).output().expect("gitea runs");
        assert!(
            out.status.success(),
            "gitea {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// What the server logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("gitea.log")).unwrap_or_default()
    }

    /// The API base gitward's `api_url` names.
    pub fn api_url(&self) -> String {
        format!("http://127.0.0.1:{}/api/v1", self.port)
    }

    /// A request to the API as [`USER`]; the JSON answer, or a panic unless it is 2xx.
    pub async fn api(&self, method: Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self
            .http
            .request(method.clone(), format!("{}{path}", self.api_url()))
            .header("Authorization", format!("token {}", self.token))
            .header("Accept", "application/json");
        if let Some(body) = body {
            request = request.header("Content-Type", "application/json").body(body.to_string());
        }
        let answer = request.send().await.unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = answer.status();
        let text = answer.text().await.unwrap();
        assert!(status.is_success(), "{method} {path}: {status} {text}");
        if text.trim().is_empty() { Value::Null } else { serde_json::from_str(&text).unwrap() }
    }

    /// Creates the private repository `gw/<name>`, empty.
    pub async fn create_repo(&self, name: &str) {
        let body = serde_json::json!({"name": name, "private": true, "auto_init": false, "default_branch": "main"});
        self.api(Method::POST, "/user/repos", Some(body)).await;
    }

    /// The repository's URL for git over HTTP, without credentials.
    pub fn git_url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/{USER}/{name}.git", self.port)
    }

    /// Opens a pull request of branch `head` into `base` of `gw/<name>`; its number.
    pub async fn open_pull(&self, name: &str, head: &str, base: &str, title: &str) -> u64 {
        let body = serde_json::json!({"head": head, "base": base, "title": title});
        let pull = self.api(Method::POST, &format!("/repos/{USER}/{name}/pulls"), Some(body)).await;
        pull["number"].as_u64().unwrap_or_else(|| panic!("no number in {pull}"))
    }

    /// A work tree pushing to `gw/<name>` as [`USER`] with the token.
    pub fn work(&self, name: &str) -> GiteaWork {
        let dir = tempfile::tempdir().unwrap();
        let work = GiteaWork { dir };
        work.git(&["init", "-q", "--initial-branch=main", "."]);
        let remote = format!("http://{USER}:{}@127.0.0.1:{}/{USER}/{name}.git", self.token, self.port);
        work.git(&["remote", "add", "origin", &remote]);
        work
    }
}

impl Drop for Gitea {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A work tree with the Gitea repository as `origin`.
pub struct GiteaWork {
    dir: tempfile::TempDir,
}

impl GiteaWork {
    /// Runs git in the work tree with a fixed identity; its stdout, or a panic.
    pub fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(["-c", "user.name=gitward-test", "-c", "user.email=test@gitward.dev", "-c", "commit.gpgsign=false"])
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Switches to `branch` (made from the commit checked out when new), writes `files`,
    /// commits and pushes the branch; the commit's SHA.
    pub fn push(&self, branch: &str, files: &[(&str, &str)], message: &str) -> String {
        let current = self.git(&["symbolic-ref", "--short", "HEAD"]);
        if current != branch {
            let exists = self.git(&["branch", "--list", branch]);
            let args: &[&str] =
                if exists.is_empty() { &["checkout", "-q", "-b", branch] } else { &["checkout", "-q", branch] };
            self.git(args);
        }
        for (path, content) in files {
            let p = self.dir.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, content).unwrap();
        }
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
        self.git(&["push", "-q", "origin", branch]);
        self.git(&["rev-parse", "HEAD"])
    }
}
