//! Render: between the source and the manifest reader, turn a unit's path at a revision into
//! a stream of manifests — plain files as they are, `kustomize build`, or `helm template` —
//! with SOPS-encrypted files decrypted first (DESIGN.md, Data flow).
//!
//! The real tools run as child processes (as Argo CD's repo-server runs them), found through
//! `[render]` or `PATH`, in a private scratch directory materialized from the git object
//! database ([`tree`]), with an empty environment but for what the tool needs, a timeout and
//! a cap on output bytes. A render returns bytes and an origin (`apps/prod (kustomize
//! build)`); the manifest reader parses them as it parses a file and does not know how they
//! were made. Renders are cached by the content they read ([`RenderCache`]).
//!
//! Files: `tree` (scratch directory and materializer), `kustomize`, `helm`, [`sops`], `cache`
//! ([`RenderCache`]), `process` (running a tool within its limits).

mod cache;
mod helm;
mod kustomize;
mod process;
pub mod sops;
mod tree;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use git2::{ObjectType, Oid, Repository, Tree};

pub use cache::RenderCache;
pub use helm::{Capabilities, capabilities};
use process::{Limits, RunError};
use sops::{Decryptor, HashKey};

use crate::config::{RenderMode, RenderTools, SyncUnit};
use crate::manifest::{Loaded, parse_file};
use crate::source::Revision;

/// Why a render failed. All of these stop the revision as a parse error does (nothing
/// applied, nothing pruned); only a new revision or a config change fixes them, except
/// [`Error::Scratch`] and [`Error::Timeout`] on a loaded machine, which a retry may.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The tool is not at its configured path nor on `PATH`.
    #[error("{unit}: {tool} not found ({hint}); set [render] {tool} or put it on PATH")]
    ToolMissing {
        /// The unit that needs it.
        unit: String,
        /// `kustomize`, `helm` or `sops`.
        tool: &'static str,
        /// Where it was looked for.
        hint: String,
    },
    /// The tool ran and failed; `message` is its own (trimmed, secrets masked).
    #[error("{unit}: {path}: {tool} failed: {message}")]
    ToolFailed {
        /// The unit.
        unit: String,
        /// The repository path rendered.
        path: String,
        /// The tool.
        tool: &'static str,
        /// The tool's stderr, trimmed to its last lines, secret values masked.
        message: String,
    },
    /// The tool ran past `[render] timeout` and was killed.
    #[error("{unit}: {path}: {tool} did not finish within {}s and was killed", timeout.as_secs_f64())]
    Timeout {
        /// The unit.
        unit: String,
        /// The repository path rendered.
        path: String,
        /// The tool.
        tool: &'static str,
        /// The limit.
        timeout: std::time::Duration,
    },
    /// The tool wrote more than `[render] max_output_bytes` and was killed.
    #[error("{unit}: {path}: {tool} output is over the limit of {limit} bytes ([render] max_output_bytes)")]
    OutputTooLarge {
        /// The unit.
        unit: String,
        /// The repository path rendered.
        path: String,
        /// The tool.
        tool: &'static str,
        /// The limit in bytes.
        limit: u64,
    },
    /// A kustomization names a remote resource and the unit does not set `allow_remote_bases`.
    #[error(
        "{file}: remote resource {resource:?} refused: a render reads only the revision (set allow_remote_bases = true in unit {unit} to allow it)"
    )]
    RemoteResource {
        /// The unit.
        unit: String,
        /// The kustomization file.
        file: String,
        /// The resource as written.
        resource: String,
    },
    /// A kustomization names a path above the repository root.
    #[error("{file}: {reference:?} leaves the repository (unit {unit})")]
    LeavesRepository {
        /// The unit.
        unit: String,
        /// The kustomization file.
        file: String,
        /// The reference as written.
        reference: String,
    },
    /// A symbolic link in the rendered tree points outside the repository.
    #[error("{path}: symbolic link to {target:?} leaves the repository (unit {unit})")]
    SymlinkLeavesTree {
        /// The unit.
        unit: String,
        /// The link's repository path.
        path: String,
        /// Its target as stored.
        target: String,
    },
    /// A values file named in `[sync.helm] values_files` is not in the revision.
    #[error("{unit}: values file {path} not found at revision {revision}")]
    ValuesFileMissing {
        /// The unit.
        unit: String,
        /// The repository path.
        path: String,
        /// The revision.
        revision: Revision,
    },
    /// A file is over the unit's `max_file_bytes`.
    #[error("{unit}: file {path} is {size} bytes, over the limit of {limit} bytes")]
    FileTooLarge {
        /// The unit.
        unit: String,
        /// The repository path.
        path: String,
        /// Its size.
        size: u64,
        /// The unit's `max_file_bytes`.
        limit: u64,
    },
    /// A SOPS-encrypted file, and the unit has no `[sync.decryption]`.
    #[error("{file}: SOPS-encrypted, and unit {unit} has no [sync.decryption] age_key_file: refused")]
    NoDecryptionKey {
        /// The unit.
        unit: String,
        /// The repository path of the file.
        file: String,
    },
    /// `sops` could not decrypt a file (wrong key, tampered file).
    #[error("{file}: SOPS decryption failed (unit {unit}): {message}")]
    DecryptFailed {
        /// The unit.
        unit: String,
        /// The repository path of the file.
        file: String,
        /// sops's message, trimmed and masked.
        message: String,
    },
    /// The age identity file could not be read.
    #[error("{unit}: age key file {}: {message}", path.display())]
    KeyFile {
        /// The unit.
        unit: String,
        /// The configured path.
        path: PathBuf,
        /// The I/O error.
        message: String,
    },
    /// A manifest made from decrypted content does not parse; the message is masked.
    #[error("{message}")]
    DecryptedUnreadable {
        /// The manifest reader's message, secret values masked.
        message: String,
    },
    /// The rendered stream does not parse as manifests.
    #[error(transparent)]
    Manifest(#[from] crate::manifest::Error),
    /// The scratch directory could not be made or written.
    #[error("{unit}: render scratch directory: {message}")]
    Scratch {
        /// The unit.
        unit: String,
        /// The I/O error.
        message: String,
    },
    /// Reading the revision's objects failed.
    #[error("{unit}: {path}: reading from git: {message}")]
    Git {
        /// The unit.
        unit: String,
        /// The repository path.
        path: String,
        /// libgit2's message.
        message: String,
    },
}

/// `Result` alias of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A located tool and its version.
#[derive(Debug, Clone)]
pub(crate) struct Tool {
    name: &'static str,
    path: PathBuf,
    version: String,
}

impl Tool {
    /// Finds `name` (configured path, else `PATH`) and asks its version (cached per path).
    fn find(name: &'static str, configured: Option<&Path>, unit: &str) -> Result<Self> {
        let missing = || Error::ToolMissing {
            unit: unit.to_owned(),
            tool: name,
            hint: configured.map_or_else(|| "not on PATH".to_owned(), |p| format!("no file at {}", p.display())),
        };
        let path = process::locate(name, configured).ok_or_else(missing)?;
        let version = version_of(name, &path).map_err(|message| Error::ToolFailed {
            unit: unit.to_owned(),
            path: path.display().to_string(),
            tool: name,
            message,
        })?;
        Ok(Self { name, path, version })
    }
}

/// Versions already asked, per binary path.
static VERSIONS: Mutex<BTreeMap<PathBuf, String>> = Mutex::new(BTreeMap::new());

/// `kustomize version`, `helm version --short` or `sops --version`: the first line.
fn version_of(name: &str, path: &Path) -> Result<String, String> {
    if let Some(v) = VERSIONS.lock().expect("versions lock").get(path) {
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
    let limits = Limits { timeout: std::time::Duration::from_secs(20), max_output: 64 << 10 };
    let out = process::run(cmd, limits).map_err(|e| run_message(&e))?;
    let version = String::from_utf8_lossy(&out).lines().next().unwrap_or_default().trim().to_owned();
    VERSIONS.lock().expect("versions lock").insert(path.to_owned(), version.clone());
    Ok(version)
}

fn run_message(e: &RunError) -> String {
    match e {
        RunError::Spawn(e) => format!("cannot run: {e}"),
        RunError::Failed(status, message) => format!("{status}: {}", process::trim_message(message)),
        RunError::Timeout => "timed out".into(),
        RunError::TooLarge => "output too large".into(),
    }
}

/// One render tool as found at start: its path and version line, or why it cannot be run.
pub type ToolVersion = Result<(PathBuf, String), String>;

/// The version line of each configured tool, or why it cannot be run; for the daemon's start
/// log. A tool no unit uses may well be missing.
pub fn tool_versions(tools: &RenderTools) -> Vec<(&'static str, ToolVersion)> {
    [("kustomize", &tools.kustomize), ("helm", &tools.helm), ("sops", &tools.sops)]
        .into_iter()
        .map(|(name, configured)| {
            let found = process::locate(name, configured.as_deref()).ok_or_else(|| "not found".to_owned());
            (name, found.and_then(|path| version_of(name, &path).map(|v| (path, v))))
        })
        .collect()
}

/// How the unit's path renders at this revision: [`RenderMode::Auto`] resolved by the files
/// at the path (a kustomization file → kustomize; `Chart.yaml` → Helm; else plain).
pub fn resolve_mode(root: &Tree<'_>, unit: &SyncUnit) -> RenderMode {
    match unit.render {
        RenderMode::Auto if kustomize::is_kustomization_dir(root, &unit.path) => RenderMode::Kustomize,
        RenderMode::Auto
            if matches!(tree::entry_at(root, &tree::join(&unit.path, "Chart.yaml")), Some((ObjectType::Blob, _))) =>
        {
            RenderMode::Helm
        }
        RenderMode::Auto => RenderMode::Plain,
        mode => mode,
    }
}

/// The per-unit render state: the render cache, the cluster's capabilities (for Helm) and
/// which blobs were SOPS-encrypted (for plain units, whose parse cache skips unchanged blobs).
#[derive(Debug, Default)]
pub struct Renderer {
    cache: RenderCache,
    capabilities: Option<Capabilities>,
    encrypted: std::collections::HashSet<String>,
    hash_key: Option<HashKey>,
}

impl Renderer {
    /// An empty renderer: the first load renders.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many renders ran (cache misses).
    pub fn renders(&self) -> usize {
        self.cache.renders()
    }

    /// Whether capabilities were set.
    pub fn has_capabilities(&self) -> bool {
        self.capabilities.is_some()
    }

    /// Sets what Helm is told about the cluster (`--kube-version`, `--api-versions`).
    pub fn set_capabilities(&mut self, capabilities: Capabilities) {
        self.capabilities = Some(capabilities);
    }

    /// Renders the unit's path at `revision` with `mode` (kustomize or Helm) and parses the
    /// output; served from the cache when nothing it reads changed.
    ///
    /// Errors: every [`Error`] variant but the plain-unit ones.
    pub fn render(
        &mut self,
        repo: &Repository,
        revision: &Revision,
        root: &Tree<'_>,
        unit: &SyncUnit,
        mode: RenderMode,
    ) -> Result<Loaded> {
        let name = unit.name.as_str();
        let (tool_name, configured) = match mode {
            RenderMode::Helm => ("helm", unit.render_tools.helm.as_deref()),
            _ => ("kustomize", unit.render_tools.kustomize.as_deref()),
        };
        let tool = Tool::find(tool_name, configured, name)?;
        let dirs = match mode {
            RenderMode::Helm => vec![unit.path.clone()],
            _ => kustomize::input_dirs(repo, root, &unit.path, name, unit.allow_remote_bases)?,
        };
        let mut inputs: Vec<(String, Oid, bool)> = Vec::new();
        for dir in &dirs {
            if let Some(oid) = tree::tree_at(root, dir) {
                inputs.push((dir.clone(), oid, true));
            }
        }
        if mode == RenderMode::Helm {
            for file in &unit.helm.values_files {
                match tree::entry_at(root, file) {
                    Some((ObjectType::Blob, oid)) => inputs.push((file.clone(), oid, false)),
                    _ => {
                        return Err(Error::ValuesFileMissing {
                            unit: name.to_owned(),
                            path: file.clone(),
                            revision: revision.clone(),
                        });
                    }
                }
            }
        }
        let mut decryptor = match &unit.decryption {
            Some(d) => {
                let sops = Tool::find("sops", unit.render_tools.sops.as_deref(), name)?;
                Some(Decryptor::new(name, sops, d)?)
            }
            None => None,
        };
        let key = self.key(unit, mode, &tool, &inputs, decryptor.as_ref());
        if let Some(loaded) = self.cache.get(&key) {
            return Ok(loaded);
        }
        self.cache.count();
        let scratch = tree::Scratch::new(name)?;
        let mut materializer = tree::Materializer {
            repo,
            scratch: &scratch,
            unit: name,
            max_file_bytes: unit.max_file_bytes,
            written: Vec::new(),
        };
        for (path, oid, is_tree) in &inputs {
            if *is_tree {
                materializer.tree(path, *oid)?;
            } else {
                materializer.file(path, *oid, false)?;
            }
        }
        let written = std::mem::take(&mut materializer.written);
        let limits = Limits { timeout: unit.render_tools.timeout, max_output: unit.render_tools.max_output_bytes };
        let decrypted = decrypt_in_place(&scratch, &written, unit, decryptor.as_mut(), limits)?;
        let output = match mode {
            RenderMode::Helm => helm::template(
                &tool,
                &scratch,
                &unit.path,
                helm::release(&unit.helm, name),
                &unit.namespace,
                &unit.helm,
                self.capabilities.as_ref(),
                limits,
            ),
            _ => kustomize::build(&tool, &scratch, &unit.path, unit.allow_remote_bases, limits),
        };
        let mask = |text: &str| decryptor.as_ref().map_or_else(|| text.to_owned(), |d| d.masker.mask(text));
        let path = if unit.path.is_empty() { ".".to_owned() } else { unit.path.clone() };
        let bytes = output.map_err(|e| match e {
            RunError::Spawn(e) => Error::ToolFailed {
                unit: name.into(),
                path: path.clone(),
                tool: tool.name,
                message: format!("cannot run: {e}"),
            },
            RunError::Failed(_, message) => Error::ToolFailed {
                unit: name.into(),
                path: path.clone(),
                tool: tool.name,
                message: mask(&process::trim_message(&repository_paths(&message, &scratch))),
            },
            RunError::Timeout => {
                Error::Timeout { unit: name.into(), path: path.clone(), tool: tool.name, timeout: limits.timeout }
            }
            RunError::TooLarge => Error::OutputTooLarge {
                unit: name.into(),
                path: path.clone(),
                tool: tool.name,
                limit: limits.max_output,
            },
        })?;
        drop(scratch);
        let origin = match mode {
            RenderMode::Helm => format!("{path} (helm template)"),
            _ => format!("{path} (kustomize build)"),
        };
        let mut loaded = match parse_file(&origin, &bytes) {
            Ok(loaded) => loaded,
            Err(e) if decrypted => return Err(Error::DecryptedUnreadable { message: mask(&e.to_string()) }),
            Err(e) => return Err(e.into()),
        };
        if mode == RenderMode::Helm {
            helm::skip_test_hooks(&mut loaded);
        }
        if decrypted && let Some(d) = &decryptor {
            for m in &mut loaded.manifests {
                m.hash_key = Some(d.hash_key.clone());
            }
        }
        self.cache.store(key, loaded.clone());
        Ok(loaded)
    }

    /// The render cache key of this render (see [`RenderCache`]).
    fn key(
        &self,
        unit: &SyncUnit,
        mode: RenderMode,
        tool: &Tool,
        inputs: &[(String, Oid, bool)],
        decryptor: Option<&Decryptor>,
    ) -> cache::RenderKey {
        let mut key = cache::KeyBuilder::default();
        key.part("mode", &mode.to_string())
            .part("path", &unit.path)
            .part("tool", &format!("{} {}", tool.path.display(), tool.version))
            .part("namespace", &unit.namespace)
            .part("remote", &unit.allow_remote_bases.to_string())
            .part("max_file_bytes", &unit.max_file_bytes.to_string());
        for (path, oid, is_tree) in inputs {
            key.part(if *is_tree { "tree" } else { "blob" }, &format!("{path} {oid}"));
        }
        if mode == RenderMode::Helm {
            key.part("release", helm::release(&unit.helm, &unit.name))
                .part("values", &serde_json::Value::Object(unit.helm.values.clone()).to_string());
            if let Some(caps) = &self.capabilities {
                key.part("kube_version", &caps.kube_version).part("api_versions", &caps.api_versions.join(","));
            }
        }
        key.part("decryption", &decryptor.map_or_else(String::new, |d| d.hash_key.id()));
        key.finish()
    }

    /// For plain units: decrypts `bytes` of file `rel` when they are SOPS-encrypted (and
    /// remembers its blob id `oid`); returns them unchanged otherwise.
    ///
    /// Errors: [`Error::NoDecryptionKey`], [`Error::DecryptFailed`], [`Error::ToolMissing`],
    /// [`Error::KeyFile`].
    pub fn decrypt_plain(&mut self, unit: &SyncUnit, rel: &str, oid: &str, bytes: Vec<u8>) -> Result<Vec<u8>> {
        if !sops::is_encrypted(&bytes) {
            return Ok(bytes);
        }
        self.encrypted.insert(oid.to_owned());
        let name = unit.name.as_str();
        let Some(decryption) = &unit.decryption else {
            return Err(Error::NoDecryptionKey { unit: name.to_owned(), file: rel.to_owned() });
        };
        let sops = Tool::find("sops", unit.render_tools.sops.as_deref(), name)?;
        let mut decryptor = Decryptor::new(name, sops, decryption)?;
        self.hash_key = Some(decryptor.hash_key.clone());
        let scratch = tree::Scratch::new(name)?;
        let file_name = rel.rsplit('/').next().unwrap_or(rel);
        let on_disk = scratch.tmp().join(file_name);
        std::fs::write(&on_disk, &bytes)
            .map_err(|e| Error::Scratch { unit: name.to_owned(), message: e.to_string() })?;
        let limits = Limits { timeout: unit.render_tools.timeout, max_output: unit.render_tools.max_output_bytes };
        let plaintext = decryptor.decrypt(name, rel, &on_disk, scratch.path(), limits)?;
        // The parse of a decrypted file must not quote it in an error.
        if let Err(e) = parse_file(rel, &plaintext) {
            return Err(Error::DecryptedUnreadable { message: decryptor.masker.mask(&e.to_string()) });
        }
        Ok(plaintext)
    }

    /// For plain units: gives every manifest read from an encrypted blob (by `oids`, path →
    /// blob id) the keyed desired hash.
    pub fn key_decrypted(&self, loaded: &mut Loaded, oids: &HashMap<String, String>) {
        let Some(key) = &self.hash_key else { return };
        for m in &mut loaded.manifests {
            if oids.get(&m.file).is_some_and(|oid| self.encrypted.contains(oid)) {
                m.hash_key = Some(key.clone());
            }
        }
    }
}

/// `message` with the scratch directory's paths made repository paths (`/tmp/…/repo/apps/x` →
/// `apps/x`), as users know them.
fn repository_paths(message: &str, scratch: &tree::Scratch) -> String {
    let root = scratch.repo_path("").display().to_string();
    message.replace(&format!("{root}/"), "").replace(&root, ".")
}

/// Decrypts, in the scratch directory, every written YAML/JSON file that is SOPS-encrypted.
/// Returns whether any was.
fn decrypt_in_place(
    scratch: &tree::Scratch,
    written: &[String],
    unit: &SyncUnit,
    mut decryptor: Option<&mut Decryptor>,
    limits: Limits,
) -> Result<bool> {
    let mut any = false;
    for rel in written.iter().filter(|p| crate::manifest::is_manifest_path(p)) {
        let on_disk = scratch.repo_path(rel);
        let io = |e: std::io::Error| Error::Scratch { unit: unit.name.clone(), message: format!("{rel}: {e}") };
        let bytes = std::fs::read(&on_disk).map_err(io)?;
        if !sops::is_encrypted(&bytes) {
            continue;
        }
        let Some(decryptor) = decryptor.as_deref_mut() else {
            return Err(Error::NoDecryptionKey { unit: unit.name.clone(), file: rel.clone() });
        };
        let plaintext = decryptor.decrypt(&unit.name, rel, &on_disk, scratch.path(), limits)?;
        std::fs::write(&on_disk, plaintext).map_err(io)?;
        any = true;
    }
    Ok(any)
}
