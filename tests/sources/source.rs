//! Integration tests of `gitward::source` against real git repositories.
//!
//! Each test makes a bare "remote" repository in a temp dir and fills it with the git CLI as a
//! user would (commit in a work dir, `git push`); gitward then mirrors it from a state dir in
//! the same temp dir. Expected revisions and blob ids come from `git rev-parse`.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use gitward::source::{Credentials, Error, Revision, Source, SourceSpec, TreeFile};
use tempfile::TempDir;

/// Runs git in `dir` with a fixed identity and no global or system config; panics on failure;
/// returns stdout, trimmed.
fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args(["-c", "user.name=gitward test", "-c", "user.email=test@gitward.invalid"])
        .args(["-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false", "-c", "init.defaultBranch=main"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(output.status.success(), "git {args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap().trim().to_string()
}

/// A bare remote, a work dir that pushes to it, and a state dir for gitward's mirrors.
struct Fixture {
    _temp: TempDir,
    remote: PathBuf,
    work: PathBuf,
    state: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let temp = tempfile::tempdir().unwrap();
        let (remote, work, state) =
            (temp.path().join("remote.git"), temp.path().join("work"), temp.path().join("state"));
        git(temp.path(), &["init", "--bare", "-q", "remote.git"]);
        git(temp.path(), &["init", "-q", "work"]);
        git(&work, &["remote", "add", "origin", remote.to_str().unwrap()]);
        Self { _temp: temp, remote, work, state }
    }

    /// Writes a file in the work dir, creating directories.
    fn write(&self, path: &str, contents: impl AsRef<[u8]>) {
        let path = self.work.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, contents).unwrap();
    }

    /// Commits everything and pushes `main`; returns the commit SHA.
    fn commit_and_push(&self, message: &str) -> String {
        git(&self.work, &["add", "-A"]);
        git(&self.work, &["commit", "-q", "-m", message]);
        git(&self.work, &["push", "-q", "origin", "HEAD:refs/heads/main"]);
        git(&self.work, &["rev-parse", "HEAD"])
    }

    /// Writes `files` (path, content), then commits everything and pushes `main`; the SHA.
    fn push(&self, files: &[(&str, &str)], message: &str) -> String {
        for (path, contents) in files {
            self.write(path, contents);
        }
        self.commit_and_push(message)
    }

    fn git(&self, args: &[&str]) -> String {
        git(&self.work, args)
    }

    /// A spec for `unit` of this remote (as a plain path) at `reference`, repository root.
    fn spec(&self, unit: &str, reference: &str) -> SourceSpec {
        spec(unit, self.remote.to_str().unwrap(), reference)
    }

    fn open(&self, spec: SourceSpec) -> Source {
        Source::open(&self.state, spec).expect("mirror opens")
    }
}

fn spec(unit: &str, repo: &str, reference: &str) -> SourceSpec {
    SourceSpec {
        unit: unit.to_string(),
        repo: repo.to_string(),
        reference: reference.to_string(),
        path: Default::default(),
        credentials: Credentials::default(),
        max_file_bytes: 1024 * 1024,
        verify: None,
    }
}

fn rev(sha: &str) -> Revision {
    Revision(sha.to_string())
}

#[test]
fn fetch_resolves_branch_to_pushed_commit() {
    let fx = Fixture::new();
    let first = fx.push(&[("a.yaml", "kind: A\n")], "first");
    let mut source = fx.open(fx.spec("shop", "main"));
    assert!(matches!(source.resolve(), Err(Error::RefNotFound { .. })), "nothing fetched yet");

    assert_eq!(source.fetch().unwrap(), rev(&first));
    assert_eq!(source.resolve().unwrap(), rev(&first));
    // Shared by repository and credentials: `mirrors/<name>.<key>`, not the unit's name.
    assert_eq!(source.mirror_path().parent(), Some(fx.state.join("mirrors").as_path()));
    let name = source.mirror_path().file_name().unwrap().to_string_lossy().to_string();
    assert!(name.contains('.') && !name.starts_with("shop"), "{name}");
    assert_eq!(git(source.mirror_path(), &["rev-parse", "--is-bare-repository"]), "true");

    let second = fx.push(&[("a.yaml", "kind: A2\n")], "second");
    assert_ne!(first, second);
    assert_eq!(source.resolve().unwrap(), rev(&first), "resolve does not fetch");
    let revision = source.fetch().unwrap();
    assert_eq!(revision, rev(&second));
    assert_eq!(revision.to_string(), second);
    assert_eq!(revision.short(), &second[..12]);
}

#[test]
fn a_reopened_mirror_keeps_what_was_fetched() {
    let fx = Fixture::new();
    let head = fx.push(&[("a.yaml", "kind: A\n")], "first");
    fx.open(fx.spec("shop", "main")).fetch().unwrap();
    std::fs::rename(&fx.remote, fx.remote.with_extension("gone")).unwrap();
    assert_eq!(fx.open(fx.spec("shop", "main")).resolve().unwrap(), rev(&head));
}

#[test]
fn force_push_moves_the_revision_back() {
    let fx = Fixture::new();
    let first = fx.push(&[("a.yaml", "v: 1\n")], "first");
    let second = fx.push(&[("a.yaml", "v: 2\n")], "second");
    let mut source = fx.open(fx.spec("shop", "main"));
    assert_eq!(source.fetch().unwrap(), rev(&second));
    fx.git(&["push", "-q", "--force", "origin", &format!("{first}:refs/heads/main")]);
    assert_eq!(source.fetch().unwrap(), rev(&first));
}

#[test]
fn tag_and_commit_sha_references_resolve() {
    let fx = Fixture::new();
    let tagged = fx.push(&[("a.yaml", "v: 1\n")], "first");
    fx.git(&["tag", "-a", "v1.0.0", "-m", "release 1"]);
    fx.git(&["tag", "light"]);
    fx.git(&["branch", "release"]);
    let head = fx.push(&[("a.yaml", "v: 2\n")], "second");
    fx.git(&["tag", "release"]);
    fx.git(&["push", "-q", "origin", "--tags", "refs/heads/release"]);
    let tag_object = fx.git(&["rev-parse", "v1.0.0"]);
    let upper = head.to_uppercase();
    assert_ne!(tag_object, tagged, "an annotated tag is its own object");
    assert_eq!(fx.git(&["rev-parse", "release^{commit}"]), head, "git's own order: the tag");

    let cases = [
        ("v1.0.0", &tagged, "annotated tag, peeled to its commit"),
        ("light", &tagged, "lightweight tag"),
        ("refs/tags/v1.0.0", &tagged, "full tag ref"),
        (tagged.as_str(), &tagged, "full SHA"),
        (&tagged[..10], &tagged, "SHA prefix"),
        (upper.as_str(), &head, "upper-case SHA"),
        ("release", &head, "a tag wins over a branch of the same name, as in git"),
        ("refs/heads/release", &tagged, "unless the full branch ref is given"),
        ("heads/release", &tagged, "refs/<name>"),
        ("main", &head, "branch"),
    ];
    for (reference, expected, why) in cases {
        let mut source = fx.open(fx.spec("shop", reference));
        assert_eq!(source.fetch().unwrap(), rev(expected), "{why}: {reference}");
    }
}

/// Pushes a commit on a branch, then deletes the branch: the commit stays in the remote's
/// object database but no ref reaches it. Returns its SHA.
fn push_orphan_commit(fx: &Fixture) -> String {
    fx.push(&[("a.yaml", "v: 1\n")], "first");
    fx.git(&["checkout", "-q", "-b", "experiment"]);
    fx.write("a.yaml", "v: experiment\n");
    fx.git(&["commit", "-q", "-a", "-m", "experiment"]);
    fx.git(&["push", "-q", "origin", "HEAD:refs/heads/experiment"]);
    fx.git(&["push", "-q", "origin", ":refs/heads/experiment"]);
    fx.git(&["rev-parse", "HEAD"])
}

#[test]
fn commit_sha_reachable_from_no_ref_is_fetched_by_id_when_the_server_allows_it() {
    let fx = Fixture::new();
    let orphan = push_orphan_commit(&fx);
    git(&fx.remote, &["config", "uploadpack.allowAnySHA1InWant", "true"]);
    let daemon = crate::common::git_remote::GitDaemon::serve(fx.remote.parent().unwrap());

    let mut source = fx.open(spec("shop", &daemon.url("remote.git"), &orphan));
    assert_eq!(source.fetch().unwrap(), rev(&orphan));
    drop(daemon);
    assert_eq!(source.resolve().unwrap(), rev(&orphan), "the fetched commit stays in the mirror");
}

/// A server-side `uploadpack.packObjectsHook` that takes 200 ms to start each pack, and
/// notes in `<dir>/overlaps` each pack started while another was being sent: two fetches
/// of one client (here, into one mirror) at once. Returns the global config to serve with.
fn overlap_detector(dir: &Path) -> PathBuf {
    let hook = dir.join("pack-objects-hook");
    let script = format!(
        "#!/bin/sh\nif ! mkdir {d}/in-flight 2>/dev/null; then echo overlap >> {d}/overlaps; fi\nsleep 0.2\n\"$@\"\nstatus=$?\nrmdir {d}/in-flight 2>/dev/null\nexit $status\n",
        d = dir.display()
    );
    std::fs::write(&hook, script).unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let global = dir.join("gitconfig");
    std::fs::write(&global, format!("[uploadpack]\n\tpackObjectsHook = {}\n", hook.display())).unwrap();
    global
}

/// Units of one repository, most pinned to a commit only a fetch by id brings and some
/// following `main`, fetching at once: the mirror runs one fetch at a time, the fetch by id
/// too, so the server never sends two packs into it at once, and every unit resolves its
/// revision.
#[test]
fn units_pinned_to_commit_ids_fetch_one_at_a_time_and_all_resolve() {
    let fx = Fixture::new();
    let orphan = push_orphan_commit(&fx);
    let head = fx.git(&["rev-parse", "main"]);
    git(&fx.remote, &["config", "uploadpack.allowAnySHA1InWant", "true"]);
    let hooks = tempfile::tempdir().unwrap();
    let daemon =
        crate::common::git_remote::GitDaemon::serve_with(fx.remote.parent().unwrap(), &overlap_detector(hooks.path()));
    let units: Vec<(String, String)> =
        (0..8).map(|i| (format!("u{i}"), if i % 4 == 3 { "main".into() } else { orphan.clone() })).collect();
    let sources: Vec<Source> =
        units.iter().map(|(unit, reference)| fx.open(spec(unit, &daemon.url("remote.git"), reference))).collect();
    let barrier = std::sync::Barrier::new(sources.len());
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for mut source in sources {
            let (barrier, failures, orphan, head) = (&barrier, &failures, &orphan, &head);
            scope.spawn(move || {
                barrier.wait();
                let want = if source.spec().reference == "main" { head } else { orphan };
                match source.fetch() {
                    Ok(revision) if revision == rev(want) => {}
                    other => failures.lock().unwrap().push(format!("{}: {other:?}", source.spec().unit)),
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{} fetches failed: {failures:#?}", failures.len());
    let overlaps = std::fs::read_to_string(hooks.path().join("overlaps")).unwrap_or_default();
    assert_eq!(overlaps.lines().count(), 0, "packs sent into the mirror at once");
}

#[test]
fn commit_sha_reachable_from_no_ref_is_not_found_over_a_local_path() {
    // libgit2's local transport sends only what refs reach (see Source::fetch).
    let fx = Fixture::new();
    let orphan = push_orphan_commit(&fx);
    let mut source = fx.open(fx.spec("shop", &orphan));
    let error = source.fetch().unwrap_err();
    assert!(
        matches!(&error, Error::RefNotFound { unit, reference, .. } if unit == "shop" && *reference == orphan),
        "{error}"
    );
}

/// A reference that names nothing is `RefNotFound`, and its message names the repository and
/// the branches and tags nearest the reference, nearest first (a typo shows its fix).
#[test]
fn missing_ref_is_ref_not_found_naming_the_repository_and_the_closest_refs() {
    let fx = Fixture::new();
    fx.push(&[("a.yaml", "v: 1\n")], "first");
    fx.git(&["tag", "v1.2.0"]);
    fx.git(&["push", "-q", "origin", "v1.2.0"]);
    fx.git(&["push", "-q", "origin", "main:release-1.2"]);
    let repository = fx.remote.display().to_string();
    for (reference, closest) in [
        ("mian", "branch main, tag v1.2.0, branch release-1.2"),
        ("v9.9.9", "tag v1.2.0, branch main, branch release-1.2"),
        ("relese-1.2", "branch release-1.2, branch main, tag v1.2.0"),
        ("0123456789abcdef0123456789abcdef01234567", ""),
    ] {
        let closest = if closest.is_empty() { String::new() } else { format!("; closest: {closest}") };
        let mut source = fx.open(fx.spec("shop", reference));
        let error = source.fetch().unwrap_err();
        assert!(matches!(&error, Error::RefNotFound { reference: r, .. } if r == reference), "{error}");
        assert_eq!(
            error.to_string(),
            format!(
                "shop: reference \"{reference}\" not found in {repository}: no branch, tag or commit of that name{closest}"
            )
        );
        assert!(!error.is_retryable());
    }
}

#[test]
fn deleted_branch_is_pruned_from_the_mirror() {
    let fx = Fixture::new();
    let head = fx.push(&[("a.yaml", "v: 1\n")], "first");
    fx.git(&["push", "-q", "origin", "HEAD:refs/heads/feature"]);
    let mut source = fx.open(fx.spec("shop", "feature"));
    assert_eq!(source.fetch().unwrap(), rev(&head));

    fx.git(&["push", "-q", "origin", ":refs/heads/feature"]);
    assert!(matches!(source.fetch(), Err(Error::RefNotFound { .. })));
    let refs = git(source.mirror_path(), &["for-each-ref", "--format=%(refname)"]);
    assert_eq!(refs, "refs/heads/main");
}

#[test]
fn list_files_reads_only_manifests_under_path_in_sorted_order() {
    let fx = Fixture::new();
    fx.write("root.yaml", "kind: Outside\n");
    fx.write("apps/other/x.yaml", "kind: Outside\n");
    fx.write("apps/shop/b.yaml", "kind: B\n");
    fx.write("apps/shop/a.yml", "kind: A\n");
    fx.write("apps/shop/nested/deep/c.json", "{\"kind\": \"C\"}\n");
    fx.write("apps/shop/z.yaml", "kind: Z\n");
    fx.write("apps/shop/README.md", "# shop\n");
    fx.write("apps/shop/notes.txt", "notes\n");
    fx.write("apps/shop/nested/Chart.yaml.txt", "not a manifest\n");
    std::os::unix::fs::symlink("b.yaml", fx.work.join("apps/shop/link.yaml")).unwrap();
    std::os::unix::fs::symlink("../other", fx.work.join("apps/shop/other")).unwrap();
    fx.git(&["add", "-A"]);
    let submodule_commit = "1111111111111111111111111111111111111111";
    fx.git(&["update-index", "--add", "--cacheinfo", &format!("160000,{submodule_commit},apps/shop/vendor")]);
    fx.git(&["commit", "-q", "-m", "tree with a submodule"]);
    fx.git(&["push", "-q", "origin", "HEAD:refs/heads/main"]);
    let head = fx.git(&["rev-parse", "HEAD"]);

    let mut spec = fx.spec("shop", "main");
    spec.path = "/apps/shop/".into();
    let mut source = fx.open(spec);
    let revision = source.fetch().unwrap();
    assert_eq!(revision, rev(&head));
    let listing = source.list_files(&revision).unwrap();

    let expected: Vec<TreeFile> = ["a.yml", "b.yaml", "nested/deep/c.json", "z.yaml"]
        .iter()
        .map(|name| {
            let path = format!("apps/shop/{name}");
            let oid = fx.git(&["rev-parse", &format!("HEAD:{path}")]);
            let size = fx.git(&["cat-file", "-s", &oid]).parse().unwrap();
            TreeFile { path, oid, size }
        })
        .collect();
    assert_eq!(listing.files, expected);
    let skipped: Vec<(&str, &str)> =
        listing.skipped.iter().map(|(path, reason)| (path.as_str(), reason.as_str())).collect();
    assert_eq!(
        skipped,
        [
            ("apps/shop/link.yaml", "symbolic link: not followed"),
            ("apps/shop/other", "symbolic link: not followed"),
            ("apps/shop/vendor", "submodule: not followed"),
        ]
    );
}

#[test]
fn empty_path_lists_the_whole_repository() {
    let fx = Fixture::new();
    fx.push(&[("z.yaml", "kind: Z\n"), ("a/b.json", "{}\n"), ("a.yaml", "kind: A\n")], "tree");
    let mut source = fx.open(fx.spec("shop", "main"));
    let revision = source.fetch().unwrap();
    let paths: Vec<String> = source.list_files(&revision).unwrap().files.into_iter().map(|f| f.path).collect();
    assert_eq!(paths, ["a.yaml", "a/b.json", "z.yaml"], "byte order of the full path");
}

#[test]
fn missing_path_is_path_not_found_and_a_file_says_so() {
    let fx = Fixture::new();
    fx.push(&[("apps/shop/a.yaml", "kind: A\n")], "tree");
    for path in ["apps/nope", "apps/shop/a.yaml"] {
        let mut spec = fx.spec("shop", "main");
        spec.path = path.into();
        let mut source = fx.open(spec);
        let revision = source.fetch().unwrap();
        let error = source.list_files(&revision).unwrap_err();
        let (unit, revision, path) = ("shop".to_owned(), revision.clone(), path.to_owned());
        let expected = match path.ends_with(".yaml") {
            true => Error::PathIsFile { unit, revision: revision.clone(), path },
            false => Error::PathNotFound { unit, revision: revision.clone(), path },
        };
        assert_eq!(error, expected);
        assert!(error.to_string().contains(&revision.0), "{error}");
    }
}

#[test]
fn file_over_limit_is_an_error_naming_the_file() {
    let fx = Fixture::new();
    fx.write("apps/fits.yaml", vec![b'#'; 100]);
    fx.write("apps/README.md", vec![b'#'; 1000]);
    let mut spec = fx.spec("shop", "main");
    spec.max_file_bytes = 100;
    fx.commit_and_push("fits");
    let mut source = fx.open(spec);
    let revision = source.fetch().unwrap();
    assert_eq!(source.list_files(&revision).unwrap().files.len(), 1, "at the limit is fine");

    fx.write("apps/big.yaml", vec![b'#'; 101]);
    fx.commit_and_push("too big");
    let revision = source.fetch().unwrap();
    let error = source.list_files(&revision).unwrap_err();
    assert_eq!(error, Error::FileTooLarge { unit: "shop".into(), path: "apps/big.yaml".into(), size: 101, limit: 100 });
    assert_eq!(error.to_string(), "shop: file apps/big.yaml is 101 bytes, over the limit of 100 bytes");
}

#[test]
fn unreachable_repository_is_a_clear_error() {
    let fx = Fixture::new();
    let head = fx.push(&[("a.yaml", "kind: A\n")], "first");
    let mut source = fx.open(fx.spec("shop", "main"));
    assert_eq!(source.fetch().unwrap(), rev(&head));

    let moved = fx.remote.with_extension("moved");
    std::fs::rename(&fx.remote, &moved).unwrap();
    let error = source.fetch().unwrap_err();
    let Error::FetchFailed { unit, repo, .. } = &error else { panic!("not FetchFailed: {error:?}") };
    assert_eq!((unit.as_str(), repo.as_str()), ("shop", fx.remote.to_str().unwrap()));
    let message = error.to_string();
    assert!(message.starts_with(&format!("shop: fetch from {} failed: ", fx.remote.display())), "{message}");
    assert!(error.is_retryable());
    assert_eq!(source.resolve().unwrap(), rev(&head), "the last good fetch is kept");
    let listing = source.list_files(&rev(&head)).unwrap();
    assert_eq!(listing.files.len(), 1, "and its files stay readable");

    let nowhere = format!("file://{}", fx.state.join("nothing-here.git").display());
    let mut source = Source::open(&fx.state, spec("other", &nowhere, "main")).unwrap();
    let error = source.fetch().unwrap_err();
    assert!(matches!(&error, Error::FetchFailed { unit, repo, .. } if unit == "other" && *repo == nowhere));
    assert!(error.to_string().starts_with(&format!("other: fetch from {nowhere} failed: ")), "{error}");
}

#[test]
fn token_in_url_is_never_in_the_error() {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("https://bot:s3cr3t@127.0.0.1:{port}/org/repo.git");
    let state = tempfile::tempdir().unwrap();
    let mut source = Source::open(state.path(), spec("shop", &url, "main")).unwrap();
    assert_eq!(source.redacted_url(), format!("https://***@127.0.0.1:{port}/org/repo.git"));
    let error = source.fetch().unwrap_err();
    assert!(matches!(error, Error::FetchFailed { .. }), "{error:?}");
    let (message, debug) = (error.to_string(), format!("{error:?}"));
    assert!(!message.contains("s3cr3t") && !debug.contains("s3cr3t"), "{message}");
    assert!(message.contains(&format!("https://***@127.0.0.1:{port}/org/repo.git")), "{message}");
}

/// An HTTP server that answers every request with 401 and records each request's
/// `Authorization` header.
fn unauthorised_server() -> (String, Arc<Mutex<Vec<Option<String>>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://127.0.0.1:{}/org/repo.git", listener.local_addr().unwrap().port());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let mut stream = stream.unwrap();
            let mut authorization = None;
            for line in BufReader::new(&stream).lines() {
                let line = line.unwrap();
                if line.is_empty() {
                    break;
                }
                if let Some(value) = line.strip_prefix("Authorization: ") {
                    authorization = Some(value.to_string());
                }
            }
            record.lock().unwrap().push(authorization);
            let response = "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"git\"\r\n\
                            Content-Length: 0\r\nConnection: close\r\n\r\n";
            let _ = stream.write_all(response.as_bytes());
        }
    });
    (url, seen)
}

#[test]
fn rejected_token_gives_up_after_three_attempts() {
    let (url, seen) = unauthorised_server();
    let state = tempfile::tempdir().unwrap();
    let token_file = state.path().join("token");
    std::fs::write(&token_file, "s3cr3t\n").unwrap();
    let mut spec = spec("shop", &url, "main");
    spec.credentials.token_file = Some(token_file);
    let mut source = Source::open(state.path(), spec).unwrap();

    let error = source.fetch().unwrap_err();
    assert_eq!(
        error,
        Error::Credentials {
            unit: "shop".into(),
            repo: url.clone(),
            message: "the remote rejected the credentials 3 times".into()
        }
    );
    let seen = seen.lock().unwrap().clone();
    let basic = Some("Basic eC1hY2Nlc3MtdG9rZW46czNjcjN0".to_string()); // x-access-token:s3cr3t
    assert_eq!(seen, [None, basic.clone(), basic.clone(), basic], "one anonymous try, then 3");
    assert!(!format!("{error} {error:?}").contains("s3cr3t"));
}

#[test]
fn missing_credentials_are_a_credentials_error() {
    let (url, _seen) = unauthorised_server();
    let state = tempfile::tempdir().unwrap();
    let mut source = Source::open(state.path(), spec("shop", &url, "main")).unwrap();
    let error = source.fetch().unwrap_err();
    assert!(matches!(&error, Error::Credentials { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        format!(
            "shop: authentication to {url} failed: the remote asks for a user name and password \
             (token_file) but none is configured"
        )
    );
}

#[test]
fn read_blob_returns_the_committed_bytes() {
    let fx = Fixture::new();
    let bytes: &[u8] = b"kind: A\r\nbinary: \xff\x00\xfe\nno trailing newline";
    fx.write("a.yaml", bytes);
    fx.commit_and_push("bytes");
    let mut source = fx.open(fx.spec("shop", "main"));
    let revision = source.fetch().unwrap();
    let file = source.list_files(&revision).unwrap().files.remove(0);
    assert_eq!(file.oid, fx.git(&["rev-parse", "HEAD:a.yaml"]));
    assert_eq!(file.size, bytes.len() as u64);
    assert_eq!(source.read_blob(&file.oid).unwrap(), bytes);

    for bad in ["0123456789abcdef0123456789abcdef01234567", "not-an-oid"] {
        let error = source.read_blob(bad).unwrap_err();
        assert!(matches!(&error, Error::ReadBlob { unit, oid, .. } if unit == "shop" && oid == bad), "{error:?}");
    }
}

/// A git unit's mirror is named by its repository, so its name never makes a path; an OCI
/// artifact unit's mirror is named by the unit, which must then be one path component.
#[test]
fn unit_name_must_be_one_path_component() {
    let state = tempfile::tempdir().unwrap();
    let git = Source::open(state.path(), spec("../escape", "/nowhere", "main")).unwrap();
    assert_eq!(git.mirror_path().parent(), Some(state.path().join("mirrors").as_path()));
    let error = Source::open(state.path(), spec("../escape", "oci://registry.invalid/x", "main")).err().unwrap();
    assert!(matches!(error, Error::OpenMirror { .. }), "{error:?}");
    assert!(!state.path().parent().unwrap().join("escape").exists());
}

/// Units of one URL and credentials read one mirror, and a fetch that started after a unit's
/// request serves it: the second unit asking for a fetch no older than the first one's gets
/// what that fetch brought, not a commit pushed since, until it asks for a fresh fetch. A unit
/// with other credentials has its own mirror and fetches for itself.
#[test]
fn units_of_one_repository_share_a_mirror_and_its_fetches() {
    let fx = Fixture::new();
    let first = fx.push(&[("a.yaml", "kind: A\n")], "first");
    let mut a = fx.open(fx.spec("shop", "main"));
    let mut b = fx.open(fx.spec("cart", "main"));
    let mut keyed = fx.spec("billing", "main");
    keyed.credentials.token_file = Some(fx.state.join("token"));
    let mut c = fx.open(keyed);
    assert_eq!(a.mirror_path(), b.mirror_path(), "one mirror for one URL and credentials");
    assert_ne!(a.mirror_path(), c.mirror_path(), "other credentials, another mirror");

    let asked = Instant::now();
    assert_eq!(a.fetch_since(asked).unwrap(), rev(&first));
    let second = fx.push(&[("a.yaml", "kind: A2\n")], "second");
    assert_eq!(b.fetch_since(asked).unwrap(), rev(&first), "served by the fetch `shop` started after the request");
    assert_eq!(c.fetch_since(asked).unwrap(), rev(&second), "its own mirror, its own fetch");
    assert_eq!(b.fetch().unwrap(), rev(&second), "a fresh request fetches");
    assert_eq!(a.resolve().unwrap(), rev(&second), "what `cart` fetched, `shop` reads");
    let entries = std::fs::read_dir(fx.state.join("mirrors")).unwrap().count();
    assert_eq!(entries, 2, "two mirrors on disk for three units");
}

/// A commit that changes only another unit's directory leaves this unit's path the same tree;
/// one that changes a file under it (or removes it) does not. The early apply of a push to a
/// repository many units follow reads no diff for the units it left alone.
#[test]
fn a_path_another_commit_left_alone_is_unchanged_and_an_edited_one_is_not() {
    let fx = Fixture::new();
    fx.write("units/a/cm.yaml", "kind: A\n");
    fx.write("units/b/cm.yaml", "kind: B\n");
    let first = rev(&fx.commit_and_push("first"));
    fx.write("units/b/cm.yaml", "kind: B2\n");
    let second = rev(&fx.commit_and_push("b only"));
    std::fs::remove_dir_all(fx.work.join("units/a")).unwrap();
    let third = rev(&fx.commit_and_push("a removed"));
    let open = |unit: &str, path: &str| {
        let mut spec = fx.spec(unit, "main");
        spec.path = path.into();
        let mut source = fx.open(spec);
        assert_eq!(source.fetch().unwrap(), third);
        source
    };
    let (a, b, root) = (open("a", "units/a/"), open("b", "./units/b"), open("root", ""));
    assert!(a.path_unchanged(&first, &second).unwrap(), "b's commit leaves units/a alone");
    assert!(!b.path_unchanged(&first, &second).unwrap(), "b's commit edits units/b");
    assert!(!root.path_unchanged(&first, &second).unwrap(), "the root holds units/b");
    assert!(!a.path_unchanged(&second, &third).unwrap(), "units/a removed");
    assert!(b.path_unchanged(&second, &third).unwrap());
}
