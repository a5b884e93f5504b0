//! Render: between the source and the manifest reader, turn a unit's path at a revision into
//! a stream of manifests — plain files as they are, `kustomize build`, or `helm template` —
//! with SOPS-encrypted files decrypted first (DESIGN.md, Data flow).
//!
//! The real tools run as child processes (as Argo CD's repo-server runs them), found through
//! `[render]` or `PATH`, in a private scratch directory materialized from the revision's
//! [`source::Tree`](crate::source::Tree) (`tree`), with an empty environment but for what the tool needs, a timeout,
//! a cap on output bytes, and inside the OS sandbox of [`sandbox`] (Landlock, a seccomp filter, private user,
//! network and PID namespaces, no inherited descriptors, a memory cap): what a repository can make a
//! tool read, write or reach is bounded by the kernel; the scans before a run only give the
//! common attempts a clearer error. A render returns bytes and an origin (`apps/prod (kustomize
//! build)`); the manifest reader parses them as it parses a file and does not know how they
//! were made. Renders are cached by the content they read ([`RenderCache`]).
//!
//! Files: `error`, `tool` (locate, version), `tree` (scratch directory and materializer),
//! `kustomize`, `helm`, [`sops`], `cache`
//! ([`RenderCache`]), `process` (running a tool within its limits), [`sandbox`] (confining it),
//! [`sandbox_check`] (the attacks on it, made where gitward runs),
//! `pod` (its namespaces), `seccomp` (its system-call filter), `remote` (which remote bases may be fetched), `proxy` (the only way
//! out for those).

mod cache;
mod chart;
mod error;
mod helm;
mod kustomize;
mod pod;
mod process;
mod proxy;
mod remote;
pub mod sandbox;
pub mod sandbox_check;
mod seccomp;
pub mod sops;
mod tool;
mod tree;

use std::collections::HashMap;

pub use cache::RenderCache;
pub use error::{Error, Result};
pub use helm::{Capabilities, Hook, HookEvent};
use process::{Limits, RunError};
use sops::Decryptor;
use tool::Tool;
pub use tool::tool_versions;

use crate::config::{RenderMode, SyncUnit};
use crate::manifest::{HashKey, Loaded, parse_file};
use crate::source::{ObjectId, Tree};

/// How the unit's path renders at this revision: [`RenderMode::Auto`] resolved by the files
/// at the path (a kustomization file → kustomize; `Chart.yaml` → Helm; else plain).
pub fn resolve_mode(tree: &Tree<'_>, unit: &SyncUnit) -> RenderMode {
    match unit.render {
        RenderMode::Auto if kustomize::is_kustomization_dir(tree, &unit.path) => RenderMode::Kustomize,
        RenderMode::Auto if tree.blob(&unit.path.join("Chart.yaml")).is_some() => RenderMode::Helm,
        RenderMode::Auto => RenderMode::Plain,
        mode => mode,
    }
}

/// How long the cluster's capabilities are used before discovery is asked again: a CRD
/// installed since then reaches `.Capabilities.APIVersions` within this time (the render
/// cache key includes the capabilities, so a change re-renders). 5 minutes: about 30 GETs per
/// Helm unit per period on a typical cluster.
pub const CAPABILITIES_TTL: std::time::Duration = std::time::Duration::from_secs(300);

/// The per-unit render state: the render cache, the cluster's capabilities (for Helm) and
/// which blobs were SOPS-encrypted (for plain units, whose parse cache skips unchanged blobs).
#[derive(Debug, Default)]
pub struct Renderer {
    cache: RenderCache,
    capabilities: Option<Capabilities>,
    /// When the capabilities were read; they are read again after [`CAPABILITIES_TTL`].
    capabilities_read: Option<std::time::Instant>,
    encrypted: std::collections::HashSet<String>,
    hash_key: Option<HashKey>,
    /// Chart archives fetched for the next Helm render's dependencies, put in the chart's
    /// `charts/` ([`Renderer::set_dependencies`]).
    dependencies: Vec<std::path::PathBuf>,
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

    /// Whether capabilities were set less than [`CAPABILITIES_TTL`] ago.
    pub fn has_capabilities(&self) -> bool {
        self.capabilities_read.is_some_and(|read| read.elapsed() < CAPABILITIES_TTL)
    }

    /// Sets the chart archives (in the download cache, named `<sha256>.tgz`) that the next
    /// Helm render of a chart in git adds to its `charts/`: its remote dependencies
    /// (`source::chart::deps`). Part of the render cache key.
    pub fn set_dependencies(&mut self, archives: Vec<std::path::PathBuf>) {
        self.dependencies = archives;
    }

    /// Sets what Helm is told about the cluster (`--kube-version`, `--api-versions`).
    pub fn set_capabilities(&mut self, capabilities: Capabilities) {
        self.capabilities = Some(capabilities);
        self.capabilities_read = Some(std::time::Instant::now());
    }

    /// Takes the outcome of reading the cluster's capabilities again: a new set replaces the
    /// old; a failed read keeps the last good set (logged, and asked again at the next load:
    /// its age is left as it was), and fails only when there is none — a Helm unit renders as
    /// before rather than failing on one bad discovery answer.
    ///
    /// Errors: the read's error `E`, when no set was ever read.
    pub fn refresh_capabilities<E: std::fmt::Display>(
        &mut self,
        unit: &str,
        read: std::result::Result<Capabilities, E>,
    ) -> std::result::Result<(), E> {
        match read {
            Ok(capabilities) => self.set_capabilities(capabilities),
            Err(e) if self.capabilities.is_some() => {
                tracing::warn!(unit, error = %e, "cannot read the Helm capabilities again: the last good set is kept");
            }
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// Renders the unit's path in `tree` (one revision) with `mode` (kustomize or Helm) and
    /// parses the output; served from the cache when nothing it reads changed.
    ///
    /// Errors: every [`Error`] variant but the plain-unit ones.
    pub fn render(&mut self, tree: &Tree<'_>, unit: &SyncUnit, mode: RenderMode) -> Result<Loaded> {
        let name = unit.name.as_str();
        let tool = match mode {
            RenderMode::Helm => Tool::find("helm", &unit.render_tools, name)?,
            _ => Tool::find("kustomize", &unit.render_tools, name)?,
        };
        let (inputs, remote, hosts) = inputs(tree, unit, mode)?;
        let mut decryptor = match &unit.decryption {
            Some(d) => Some(Decryptor::new(name, Tool::find("sops", &unit.render_tools, name)?, d)?),
            None => None,
        };
        let key = self.key(unit, mode, &tool, &inputs, decryptor.as_ref());
        // A render that fetches a remote base depends on more than the revision: never cached,
        // so an upstream change reaches the next sync (resync, poll) as Flux's reconcile does.
        let cacheable = !remote;
        if let Some(loaded) = self.cache.get(&key).filter(|_| cacheable) {
            return Ok(loaded);
        }
        self.cache.count();
        let job = Job { mode, tool: &tool, inputs: &inputs, hosts: &hosts };
        let (bytes, decrypted) = self.run(tree, unit, job, decryptor.as_mut())?;
        let path = unit.path.display().to_owned();
        let origin = format!("{path} ({})", if mode == RenderMode::Helm { "helm template" } else { "kustomize build" });
        let mut loaded = match parse_file(&origin, &bytes) {
            Ok(loaded) => loaded,
            Err(e) => {
                let message = decryptor.as_ref().filter(|_| decrypted).map(|d| d.masker.mask(&e.to_string()));
                return Err(message.map_or(e.into(), |message| Error::DecryptedUnreadable { message }));
            }
        };
        if mode == RenderMode::Helm {
            helm::sort_release(&mut loaded)?;
        }
        if decrypted && let Some(d) = &decryptor {
            for m in loaded.manifests.iter_mut().chain(&mut loaded.hooks) {
                m.hash_key = Some(d.hash_key.clone());
            }
        }
        if cacheable {
            self.cache.store(key, loaded.clone());
        } else {
            self.cache.clear();
        }
        Ok(loaded)
    }

    /// Materializes `inputs` in a fresh scratch directory, decrypts SOPS files there, runs the
    /// tool; returns its output and whether anything was decrypted. The scratch directory is
    /// removed before this returns.
    fn run(
        &self,
        tree: &Tree<'_>,
        unit: &SyncUnit,
        job: Job<'_>,
        mut decryptor: Option<&mut Decryptor>,
    ) -> Result<(Vec<u8>, bool)> {
        let Job { mode, tool, inputs, hosts } = job;
        let name = unit.name.as_str();
        let scratch = tree::Scratch::new(name)?;
        let tools = &unit.render_tools;
        let mut materializer = tree::Materializer::new(tree, &scratch, tools.max_tree_bytes, tools.timeout);
        // Directories before files, each before what it holds: an input inside one already
        // written is skipped, not written twice.
        let mut ordered: Vec<&Input> = inputs.iter().collect();
        ordered.sort_by(|a, b| (!a.tree, &a.path).cmp(&(!b.tree, &b.path)));
        for input in ordered {
            match input.tree {
                true => materializer.dir(&input.path, input.oid)?,
                false => materializer.file(&input.path, input.oid)?,
            }
        }
        if mode == RenderMode::Helm {
            // The chart's dependencies go through the door with the tree: a `charts` the
            // revision holds as a link is refused, never written through.
            let charts = unit.path.join("charts");
            for archive in &self.dependencies {
                let file = archive.file_name().unwrap_or_default().to_string_lossy().into_owned();
                let bytes = chart::checked_archive(name, archive, &file, tools.max_tree_bytes, tools.timeout)?;
                materializer.extra_file(&charts, &file, bytes)?;
            }
        }
        let written = materializer.finish()?;
        let limits = Limits::of(&unit.render_tools);
        let decrypted = decrypt_in_place(&scratch, &written, unit, decryptor.as_deref_mut(), limits)?;
        let output = match mode {
            RenderMode::Helm => {
                let release = helm::release(&unit.helm, name);
                let caps = self.capabilities_for(unit);
                let chart = scratch.repo_path(&unit.path);
                helm::template(tool, &scratch, &chart, release, &unit.namespace, &unit.helm, &caps, limits)
            }
            _ => {
                let remote = unit.allow_remote_bases.then_some(kustomize::Remote {
                    targets: hosts,
                    ca_file: unit.render_tools.remote_bases.ca_file.as_deref(),
                });
                kustomize::build(tool, &scratch, &unit.path, remote, limits)
            }
        };
        let failure = |e: RunError| {
            let path = unit.path.display().to_owned();
            let (unit, tool) = (name.to_owned(), tool.name);
            match e {
                RunError::Spawn(e) => Error::ToolFailed { unit, path, tool, message: format!("cannot run: {e}") },
                RunError::Failed(_, message)
                    if mode == RenderMode::Helm && helm::missing_dependencies(&message).is_some() =>
                {
                    let missing = helm::missing_dependencies(&message).unwrap_or_default();
                    Error::ChartDependencies { unit, path, missing }
                }
                RunError::Failed(_, message) => {
                    let message = process::trim_message(&repository_paths(&message, &scratch));
                    let message = decryptor.as_ref().map_or_else(|| message.clone(), |d| d.masker.mask(&message));
                    Error::ToolFailed { unit, path, tool, message }
                }
                RunError::Timeout => Error::Timeout { unit, path, tool, timeout: limits.timeout },
                RunError::TooLarge => Error::OutputTooLarge { unit, path, tool, limit: limits.max_output },
                RunError::Sandbox(message) => Error::Sandbox { unit, tool, message },
            }
        };
        Ok((output.map_err(failure)?, decrypted))
    }

    /// What Helm is told about the cluster: what the cluster said ([`Renderer::set_capabilities`]),
    /// else, with no cluster at hand (`gitward validate`), the unit's `[render] kube_version`
    /// and `api_versions`.
    fn capabilities_for(&self, unit: &SyncUnit) -> std::borrow::Cow<'_, Capabilities> {
        match &self.capabilities {
            Some(caps) => std::borrow::Cow::Borrowed(caps),
            None => std::borrow::Cow::Owned(Capabilities {
                kube_version: unit.render_tools.kube_version.clone(),
                api_versions: unit.render_tools.api_versions.clone(),
            }),
        }
    }

    /// The render cache key of this render (see [`RenderCache`]).
    fn key(
        &self,
        unit: &SyncUnit,
        mode: RenderMode,
        tool: &Tool,
        inputs: &[Input],
        decryptor: Option<&Decryptor>,
    ) -> cache::RenderKey {
        let mut key = cache::KeyBuilder::default();
        key.part("mode", &mode.to_string())
            .part("path", &unit.path)
            .part("tool", &format!("{} {} {}", tool.path.display(), tool.version, tool.identity))
            .part("namespace", &unit.namespace)
            .part("remote", &unit.allow_remote_bases.to_string())
            .part("max_file_bytes", &unit.max_file_bytes.to_string());
        for input in inputs {
            key.part(if input.tree { "tree" } else { "blob" }, &format!("{} {}", input.path, input.oid));
        }
        if mode == RenderMode::Helm {
            key.part("release", helm::release(&unit.helm, &unit.name))
                .part("values", &serde_json::Value::Object(unit.helm.values.clone()).to_string());
            let caps = self.capabilities_for(unit);
            key.part("kube_version", &caps.kube_version).part("api_versions", &caps.api_versions.join(","));
            for archive in &self.dependencies {
                key.part("dependency", &archive.display().to_string());
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
        let sops = Tool::find("sops", &unit.render_tools, name)?;
        let mut decryptor = Decryptor::new(name, sops, decryption)?;
        self.hash_key = Some(decryptor.hash_key.clone());
        let scratch = tree::Scratch::new(name)?;
        // The one file written goes through the door's name check too: a crafted tree can
        // name an entry `..`.
        let file_name = rel.rsplit('/').next().unwrap_or(rel);
        let file_name = crate::source::door::name::check(file_name.as_bytes(), false).map_err(|reason| {
            let refusal = crate::source::door::Refusal { path: rel.to_owned(), reason: format!("the name {reason}") };
            crate::source::Error::refused(name, None, refusal)
        })?;
        let on_disk = scratch.tmp().join(file_name);
        std::fs::write(&on_disk, &bytes)
            .map_err(|e| Error::Scratch { unit: name.to_owned(), message: e.to_string() })?;
        let limits = Limits::of(&unit.render_tools);
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
            if oids.get(m.file.as_str()).is_some_and(|oid| self.encrypted.contains(oid)) {
                m.hash_key = Some(key.clone());
            }
        }
    }
}

/// One thing a render reads: a directory (tree) or a values file (blob) at a repository path.
struct Input {
    path: String,
    oid: ObjectId,
    tree: bool,
}

/// What a render of `unit` reads: the directories (the chart, or the kustomizations' roots)
/// and, for Helm, the values files; and whether it also reads a remote base
/// ([`kustomize::Inputs::remote`]).
///
/// Errors: [`Error::RemoteResource`], [`Error::RemoteFile`], [`Error::RemoteBaseRefused`],
/// [`Error::LeavesRepository`], [`Error::ValuesFileMissing`].
fn inputs(tree: &Tree<'_>, unit: &SyncUnit, mode: RenderMode) -> Result<(Vec<Input>, bool, Hosts)> {
    let (dirs, remote, hosts) = match mode {
        RenderMode::Helm => (vec![unit.path.to_string()], false, Hosts::new()),
        _ => {
            let remote = unit.allow_remote_bases.then_some(&unit.render_tools.remote_bases.hosts);
            let read = kustomize::input_dirs(tree, &unit.path, &unit.name, remote)?;
            (read.dirs, read.remote, read.hosts)
        }
    };
    let mut inputs: Vec<Input> =
        dirs.into_iter().filter_map(|path| Some(Input { oid: tree.dir(&path)?, path, tree: true })).collect();
    if mode == RenderMode::Helm {
        for file in &unit.helm.values_files {
            let Some(oid) = tree.blob(file) else {
                let (unit, path, revision) = (unit.name.clone(), file.clone(), tree.revision().clone());
                return Err(Error::ValuesFileMissing { unit, path, revision });
            };
            inputs.push(Input { path: file.clone(), oid, tree: false });
        }
    }
    Ok((inputs, remote, hosts))
}

/// The remote-base hosts a kustomize render may reach ([`kustomize::Inputs::hosts`]).
type Hosts = std::collections::BTreeMap<String, crate::config::Origin>;

/// What one render runs: the mode, the tool, the inputs materialized and the hosts its proxy
/// may reach.
#[derive(Clone, Copy)]
struct Job<'a> {
    mode: RenderMode,
    tool: &'a Tool,
    inputs: &'a [Input],
    hosts: &'a Hosts,
}

/// `message` with the scratch directory's paths made repository paths (`/tmp/…/repo/apps/x` →
/// `apps/x`), as users know them.
fn repository_paths(message: &str, scratch: &tree::Scratch) -> String {
    let root = scratch.repo_path("").display().to_string();
    message.replace(&format!("{root}/"), "").replace(&root, ".")
}

/// Decrypts, in the scratch directory, every written YAML, JSON or dotenv (`*.env`) file that
/// is SOPS-encrypted.
/// Returns whether any was.
fn decrypt_in_place(
    scratch: &tree::Scratch,
    written: &[String],
    unit: &SyncUnit,
    mut decryptor: Option<&mut Decryptor>,
    limits: Limits,
) -> Result<bool> {
    let mut any = false;
    for rel in written.iter().filter(|p| crate::source::is_manifest_path(p) || p.ends_with(".env")) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_capabilities_refresh_keeps_the_last_good_set_and_fails_only_without_one() {
        let mut renderer = Renderer::new();
        assert_eq!(renderer.refresh_capabilities("u", Err::<Capabilities, _>("down")), Err("down"));
        let good = Capabilities { kube_version: "v1.35.0".into(), api_versions: vec!["v1".into(), "apps/v1".into()] };
        renderer.refresh_capabilities::<&str>("u", Ok(good.clone())).unwrap();
        assert_eq!(renderer.refresh_capabilities("u", Err::<Capabilities, _>("down")), Ok(()));
        assert_eq!(renderer.capabilities.as_ref(), Some(&good), "the last good set is kept");
        let newer = Capabilities { api_versions: vec!["v1".into()], ..good };
        renderer.refresh_capabilities::<&str>("u", Ok(newer.clone())).unwrap();
        assert_eq!(renderer.capabilities, Some(newer));
    }
}
