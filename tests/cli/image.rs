//! gitward's container image as `scripts/image` builds it: pushed to the real registry the chart
//! tests use, pulled back with crane, unpacked, and its programs run from it. Each binary runs
//! in a chroot of the image's own files (a user namespace: `unshare --root`), which holds no
//! dynamic loader and no library, so only a static binary starts; `validate` of the example
//! config then renders with the image's own helm and kustomize (`PATH` is the image's
//! `/usr/local/bin` alone).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::{self, charts};

/// The repository root.
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `command`, panicking with its output unless it exits 0.
fn run(command: &mut Command) -> Output {
    let out = command.output().unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(
        out.status.success(),
        "{command:?} exited {}:\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `program args` in a chroot of `fs` (a user namespace of its own, no other file of the host).
fn in_image(fs: &Path, program: &str, args: &[&str]) -> String {
    let out = run(Command::new(on_path("unshare"))
        .args(["--user", "--map-root-user", "--root"])
        .arg(fs)
        .arg(program)
        .args(args)
        .env_clear()
        .env("PATH", "/usr/local/bin")
        .env("HOME", "/tmp"));
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[tokio::test]
async fn the_image_is_pushed_pulled_back_and_its_static_binaries_validate_the_example() {
    let registry = charts::Registry::start().await;
    let crane = charts::tools_bin().join("crane");
    let tag = format!("{}/platform/gitward:test", registry.host);
    let out = run(Command::new(root().join("scripts/image")).arg(&tag).current_dir(root()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let pinned = stdout.lines().last().unwrap_or_default().to_owned();
    assert!(
        pinned.starts_with(&format!("{}/platform/gitward@sha256:", registry.host)),
        "scripts/image printed {stdout:?}"
    );

    // The config the registry holds: who the container runs as and what.
    let config = run(Command::new(&crane).args(["config", &pinned]));
    let config: serde_json::Value = serde_json::from_slice(&config.stdout).unwrap();
    assert_eq!((config["os"].as_str(), config["architecture"].as_str()), (Some("linux"), Some("amd64")), "{config}");
    assert_eq!(config["config"]["User"], "65532:65532", "{config}");
    assert_eq!(
        config["config"]["Entrypoint"],
        serde_json::json!(["/usr/local/bin/gitward", "run", "--config", "/etc/gitward/config.toml"]),
        "{config}"
    );
    let env: Vec<&str> = config["config"]["Env"].as_array().unwrap().iter().filter_map(|v| v.as_str()).collect();
    assert!(env.contains(&"PATH=/usr/local/bin"), "{env:?}");

    // Pulled back by digest and unpacked as a runtime would.
    let dir = tempfile::tempdir().unwrap();
    let fs = dir.path().join("fs");
    std::fs::create_dir(&fs).unwrap();
    let flat = dir.path().join("fs.tar");
    run(Command::new(&crane).arg("export").arg(&pinned).arg(&flat));
    run(Command::new("tar").arg("-xf").arg(&flat).arg("-C").arg(&fs));
    let bin = fs.join("usr/local/bin");
    let mut programs: Vec<String> =
        std::fs::read_dir(&bin).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    programs.sort();
    assert_eq!(programs, ["gitward", "helm", "kustomize", "sops"]);
    let passwd = std::fs::read_to_string(fs.join("etc/passwd")).unwrap();
    assert!(passwd.contains("nonroot:x:65532:65532:"), "{passwd}");
    assert!(std::fs::metadata(fs.join("etc/ssl/certs/ca-certificates.crt")).unwrap().len() > 100_000);
    let entries = list_dir(&fs);
    assert!(
        !entries.iter().any(|p| p.starts_with("lib") || p.starts_with("usr/lib")),
        "a library in the image: {entries:?}"
    );

    // Each program starts in a root holding only the image's files: they are static.
    let version = in_image(&fs, "/usr/local/bin/gitward", &["--version"]);
    assert_eq!(version.trim(), format!("gitward {}", env!("CARGO_PKG_VERSION")));
    assert!(in_image(&fs, "/usr/local/bin/helm", &["version", "--short"]).starts_with("v3."));
    assert!(in_image(&fs, "/usr/local/bin/kustomize", &["version"]).starts_with("v5."));
    assert!(in_image(&fs, "/usr/local/bin/sops", &["--version", "--disable-version-check"]).starts_with("sops 3."));

    // `validate` of the example config, with the image's gitward and its tools only.
    let work = dir.path().join("work");
    let example = common::GitRepo::new();
    example.copy_dir(&root().join("examples/repo/."), ".");
    example.commit_and_push("example manifests");
    let text = std::fs::read_to_string(root().join("config.toml")).unwrap();
    let text: String = text
        .lines()
        .filter(|l| !["kustomize = ", "helm = ", "sops = "].iter().any(|k| l.starts_with(k)))
        .map(|l| {
            l.replace("\"target/example-repo.git\"", &format!("\"{}\"", example.bare().display()))
                .replace("\"target/gitward-state\"", &format!("\"{}\"", work.join("state").display()))
                + "\n"
        })
        .collect();
    std::fs::create_dir(&work).unwrap();
    std::fs::write(work.join("config.toml"), text).unwrap();
    let out = run(Command::new(bin.join("gitward"))
        .args(["validate", "--config"])
        .arg(work.join("config.toml"))
        .env_clear()
        .env("PATH", &bin)
        .env("HOME", &work));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for unit in ["example: valid", "example-kustomize: valid", "example-helm: valid"] {
        assert!(stdout.lines().any(|l| l.starts_with(unit)), "no {unit:?} in {stdout}");
    }
}

/// `program` found on this process's `PATH` (the command's own `PATH` is the image's).
fn on_path(program: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{program} on PATH"))
}

/// Every path under `dir`, relative to it.
fn list_dir(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path.clone());
            }
            out.push(path.strip_prefix(dir).unwrap().to_path_buf());
        }
    }
    out
}
