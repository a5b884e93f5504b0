//! `helm template` of a chart archive from a chart repository (a chart unit: `[sync.helm]
//! repo_url`), cached by the archive's digest like any render.

use std::path::Path;

use super::process::{self, Limits, RunError};
use super::sops::Decryptor;
use super::{Error, Renderer, Result, Tool, helm, tree};
use crate::config::SyncUnit;
use crate::manifest::{Loaded, parse_file};
use crate::source::{Revision, door};

impl Renderer {
    /// Renders the chart archive `archive` (of `revision`, `<chart>@<version>@sha256:<hex>`)
    /// with the unit's release, namespace and inline values; served from the render cache
    /// when the revision, values and capabilities are those of the last render. Its objects
    /// are sorted as a chart in git's are (`helm::sort_release`): test hooks skipped, other
    /// hooks set apart in [`Loaded::hooks`] to run as phases of the sync.
    ///
    /// Errors: [`Error::ToolMissing`], [`Error::ToolFailed`] (naming the revision),
    /// [`Error::Timeout`], [`Error::OutputTooLarge`], [`Error::Scratch`], [`Error::Manifest`],
    /// [`Error::HookAnnotation`]; for SOPS-encrypted values files, as a chart in git's:
    /// [`Error::NoDecryptionKey`] without `[sync.decryption]`, [`Error::DecryptFailed`],
    /// [`Error::KeyFile`], [`Error::DecryptedUnreadable`].
    ///
    /// `values_files` are the unit's values files as read from its git repository (path,
    /// bytes), written into the scratch directory at their repository paths for `--values`;
    /// those that are SOPS-encrypted are decrypted there first with the unit's age key, as a
    /// chart in git's values files are, and the objects rendered then get the keyed desired
    /// hash (their values may be secrets); helm's messages are masked.
    pub fn render_chart(
        &mut self,
        unit: &SyncUnit,
        archive: &Path,
        revision: &Revision,
        values_files: &[(String, Vec<u8>)],
    ) -> Result<Loaded> {
        let name = unit.name.as_str();
        let tool = Tool::find("helm", &unit.render_tools, name)?;
        let caps = self.capabilities_for(unit).into_owned();
        let release = helm::release(&unit.helm, name);
        let mut decryptor = match &unit.decryption {
            Some(d) => Some(Decryptor::new(name, Tool::find("sops", &unit.render_tools, name)?, d)?),
            None => None,
        };
        let mut key = super::cache::KeyBuilder::default();
        key.part("chart", &revision.0)
            .part("tool", &format!("{} {} {}", tool.path.display(), tool.version, tool.identity))
            .part("namespace", &unit.namespace)
            .part("release", release)
            .part("values", &serde_json::Value::Object(unit.helm.values.clone()).to_string())
            .part("kube_version", &caps.kube_version)
            .part("api_versions", &caps.api_versions.join(","))
            .part("decryption", &decryptor.as_ref().map_or_else(String::new, |d| d.hash_key.id()));
        let key = key.finish();
        if let Some(loaded) = self.cache.get(&key) {
            return Ok(loaded);
        }
        self.cache.count();
        let scratch = tree::Scratch::new(name)?;
        let written = write_values(&scratch, name, values_files)?;
        // Helm reads the archive itself: the door reads it first, and Helm gets the bytes the
        // door checked, copied into the scratch directory.
        let bytes =
            checked_archive(name, archive, &revision.0, unit.render_tools.max_tree_bytes, unit.render_tools.timeout)?;
        let checked = scratch.tmp().join("chart.tgz");
        std::fs::write(&checked, &bytes)
            .map_err(|e| Error::Scratch { unit: name.to_owned(), message: format!("chart archive: {e}") })?;
        let archive = checked.as_path();
        let limits = Limits::of(&unit.render_tools);
        let decrypted = super::decrypt_in_place(&scratch, &written, unit, decryptor.as_mut(), limits)?;
        let output = helm::template(&tool, &scratch, archive, release, &unit.namespace, &unit.helm, &caps, limits);
        let path = revision.0.clone();
        let bytes = output.map_err(|e| {
            let (unit, tool) = (name.to_owned(), tool.name);
            match e {
                RunError::Spawn(e) => Error::ToolFailed { unit, path, tool, message: format!("cannot run: {e}") },
                RunError::Failed(_, message) => {
                    let message = process::trim_message(&message.replace(&archive.display().to_string(), &revision.0));
                    let message = decryptor.as_ref().map_or_else(|| message.clone(), |d| d.masker.mask(&message));
                    Error::ToolFailed { unit, path, tool, message }
                }
                RunError::Timeout => Error::Timeout { unit, path, tool, timeout: limits.timeout },
                RunError::TooLarge => Error::OutputTooLarge { unit, path, tool, limit: limits.max_output },
                RunError::Sandbox(message) => Error::Sandbox { unit, tool, message },
            }
        })?;
        let mut loaded = match parse_file(&format!("{revision} (helm template)"), &bytes) {
            Ok(loaded) => loaded,
            Err(e) => {
                let message = decryptor.as_ref().filter(|_| decrypted).map(|d| d.masker.mask(&e.to_string()));
                return Err(message.map_or(e.into(), |message| Error::DecryptedUnreadable { message }));
            }
        };
        helm::sort_release(&mut loaded)?;
        if decrypted && let Some(d) = &decryptor {
            for m in loaded.manifests.iter_mut().chain(&mut loaded.hooks) {
                m.hash_key = Some(d.hash_key.clone());
            }
        }
        self.cache.store(key, loaded.clone());
        Ok(loaded)
    }
}

/// Writes the unit's `values_files` (repository path, bytes) into `scratch` at their
/// repository paths, for `--values`: the paths written.
fn write_values(scratch: &tree::Scratch, unit: &str, values_files: &[(String, Vec<u8>)]) -> Result<Vec<String>> {
    let mut written = Vec::with_capacity(values_files.len());
    for (path, bytes) in values_files {
        let on_disk = scratch.repo_path(path);
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(on_disk.parent().unwrap_or(&on_disk))?;
            std::fs::write(&on_disk, bytes)
        };
        write().map_err(|e| Error::Scratch { unit: unit.to_owned(), message: format!("{path}: {e}") })?;
        written.push(path.clone());
    }
    Ok(written)
}

/// The bytes of the chart archive at `path` (named `name` in errors: the revision or the
/// dependency's file name), once the door has read it whole ([`door::archive`]): every entry
/// name and kind checked, links resolved inside it, the stream complete; its files may total
/// at most `max_bytes` (`[render] max_tree_bytes`) and its tar stream twice that and 1 MiB;
/// the door's pass ends within `timeout` (`[render] timeout`).
///
/// Errors: [`crate::source::Error::Refused`] naming the archive and the entry (through
/// [`Error::Source`]); [`Error::Scratch`] when the archive cannot be read.
pub(super) fn checked_archive(
    unit: &str,
    path: &Path,
    name: &str,
    max_bytes: u64,
    timeout: std::time::Duration,
) -> Result<Vec<u8>> {
    let bytes = std::fs::read(path)
        .map_err(|e| Error::Scratch { unit: unit.to_owned(), message: format!("chart archive {name}: {e}") })?;
    let max_stream = max_bytes.saturating_mul(2).saturating_add(1 << 20);
    let deadline = Some(door::Deadline::after(timeout));
    door::archive::read_tar_gz(&bytes, max_stream, max_bytes, deadline)
        .map_err(|e| crate::source::Error::refused_archive(unit, name, e))?;
    Ok(bytes)
}
