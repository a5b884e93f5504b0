//! Locating a render tool (`[render]` path, else `PATH`), telling which binary is there now
//! ([`identity`]) and asking its version once per binary.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::process::{self, Limits, RunError};
use super::sandbox;
use super::{Error, Result};
use crate::config::{RenderTools, SandboxMode};

/// A located tool and its version.
#[derive(Debug, Clone)]
pub(crate) struct Tool {
    /// `kustomize`, `helm` or `sops`: names the tool in errors.
    pub name: &'static str,
    /// The binary run.
    pub path: PathBuf,
    /// Its version line; part of the render cache key.
    pub version: String,
    /// Which file the binary is now ([`identity`]); part of the render cache key, so a tool
    /// replaced in place (a package upgrade, a rebuilt binary with the same version line)
    /// renders again.
    pub identity: String,
}

impl Tool {
    /// Finds `name` (configured path in `tools`, else `PATH`) and asks its version (cached per
    /// path), in the sandbox.
    ///
    /// Errors: [`Error::Sandbox`] first, when `[render] sandbox` is on and the kernel cannot
    /// confine a tool; [`Error::ToolMissing`]; [`Error::ToolFailed`] when the version run fails.
    pub fn find(name: &'static str, tools: &RenderTools, unit: &str) -> Result<Self> {
        sandbox::warn_if_off(tools.sandbox);
        let support = sandbox::Support::probe();
        if let (SandboxMode::On, Some(missing)) = (tools.sandbox, support.missing()) {
            let message = format!("{missing}; set [render] sandbox = \"off\" to run render tools unconfined");
            return Err(Error::Sandbox { unit: unit.to_owned(), tool: name, message });
        }
        let configured = configured(name, tools);
        let missing = || Error::ToolMissing {
            unit: unit.to_owned(),
            tool: name,
            hint: configured.map_or_else(|| "not on PATH".to_owned(), |p| format!("no file at {}", p.display())),
        };
        let path = process::locate(name, configured).ok_or_else(missing)?;
        let failed = |message| Error::ToolFailed {
            unit: unit.to_owned(),
            path: path.display().to_string(),
            tool: name,
            message,
        };
        let identity = identity(&path).map_err(|e| failed(format!("cannot read the binary: {e}")))?;
        let version = version_of(name, &path, &identity, tools).map_err(failed)?;
        Ok(Self { name, path, version, identity })
    }
}

/// Which file `path` names now, following links: device, inode, size, and modification and
/// change times in nanoseconds (`dev:ino size mtime ctime`). A binary replaced by a rename gets
/// a new inode; one rewritten in place a new size or times (the change time cannot be set back,
/// even by `cp -p` or `touch -d`). Reading metadata costs one `stat`, where hashing the content
/// would read 50–100 MB per render.
///
/// Errors: the `stat` error (the binary vanished since it was located).
pub(crate) fn identity(path: &Path) -> std::io::Result<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path)?;
    let nanos = |secs: i64, nsec: i64| i128::from(secs) * 1_000_000_000 + i128::from(nsec);
    Ok(format!(
        "{}:{} {} {} {}",
        m.dev(),
        m.ino(),
        m.size(),
        nanos(m.mtime(), m.mtime_nsec()),
        nanos(m.ctime(), m.ctime_nsec())
    ))
}

/// Versions already asked, per binary path and [`identity`]: a binary replaced in place is
/// asked again.
static VERSIONS: Mutex<BTreeMap<(PathBuf, String), String>> = Mutex::new(BTreeMap::new());

/// `kustomize version`, `helm version --short` or `sops --version`: the first line, asked once
/// per binary (`path` with its `identity`).
fn version_of(name: &str, path: &Path, identity: &str, tools: &RenderTools) -> Result<String, String> {
    let key = (path.to_owned(), identity.to_owned());
    if let Some(v) = VERSIONS.lock().expect("versions lock").get(&key) {
        return Ok(v.clone());
    }
    let args: &[&str] = match name {
        "helm" => &["version", "--short"],
        "sops" => &["--version", "--disable-version-check"],
        _ => &["version"],
    };
    let tmp = std::env::temp_dir();
    let mut cmd = process::command(path, &tmp, &[("HOME", &tmp)]);
    cmd.args(args);
    let limits = Limits { timeout: std::time::Duration::from_secs(20), max_output: 64 << 10, ..Limits::of(tools) };
    let grants = process::Grants { read: vec![path.to_owned()], ..Default::default() };
    let out = process::run(cmd, limits, &grants).map_err(|e| run_message(&e))?;
    let version = String::from_utf8_lossy(&out).lines().next().unwrap_or_default().trim().to_owned();
    VERSIONS.lock().expect("versions lock").insert(key, version.clone());
    Ok(version)
}

fn run_message(e: &RunError) -> String {
    match e {
        RunError::Spawn(e) => format!("cannot run: {e}"),
        RunError::Failed(status, message) => format!("{status}: {}", process::trim_message(message)),
        RunError::Timeout => "timed out".into(),
        RunError::TooLarge => "output too large".into(),
        RunError::Sandbox(message) => format!("cannot run confined: {message}"),
    }
}

/// The configured binary of `name` in `[render]`.
fn configured<'a>(name: &str, tools: &'a RenderTools) -> Option<&'a Path> {
    match name {
        "helm" => tools.helm.as_deref(),
        "sops" => tools.sops.as_deref(),
        _ => tools.kustomize.as_deref(),
    }
}

/// One render tool as found at start: its path and version line, or why it cannot be run.
pub type ToolVersion = Result<(PathBuf, String), String>;

/// The version line of each configured tool, or why it cannot be run; for the daemon's start
/// log. A tool no unit uses may well be missing.
pub fn tool_versions(tools: &RenderTools) -> Vec<(&'static str, ToolVersion)> {
    ["kustomize", "helm", "sops"]
        .into_iter()
        .map(|name| {
            let found = process::locate(name, configured(name, tools)).ok_or_else(|| "not found".to_owned());
            let version = |path: PathBuf| {
                let identity = identity(&path).map_err(|e| format!("cannot read the binary: {e}"))?;
                version_of(name, &path, &identity, tools).map(|v| (path, v))
            };
            (name, found.and_then(version))
        })
        .collect()
}
