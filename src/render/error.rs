//! [`Error`]: why a render failed.

use std::path::PathBuf;

use crate::source::Revision;

/// Why a render failed. All of these stop the revision as a parse error does (nothing
/// applied, nothing pruned); only a new revision or a config change fixes them, except
/// [`Error::Scratch`] and [`Error::Timeout`] on a loaded machine, which a retry may.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The tool is not at its configured path nor on `PATH`. The message names both fixes:
    /// `scripts/tools` builds the pinned tools into `target/tools/bin`, and `[render] <tool>`
    /// takes a binary's path.
    #[error("{unit}: {tool} not found ({hint}); run scripts/tools to build it, or set [render] {tool} to its path")]
    ToolMissing {
        /// The unit that needs it.
        unit: String,
        /// `kustomize`, `helm` or `sops`.
        tool: &'static str,
        /// Where it was looked for.
        hint: String,
    },
    /// The tool cannot run in the OS sandbox ([`crate::config::SandboxMode::On`]): the kernel
    /// lacks Landlock, or the ruleset could not be built. Not retried: a config change
    /// (`[render] sandbox = "off"`) or another kernel fixes it.
    #[error("{unit}: {tool} refused: cannot confine render tools: {message}")]
    Sandbox {
        /// The unit.
        unit: String,
        /// `kustomize`, `helm` or `sops`.
        tool: &'static str,
        /// What the kernel lacks, or why the ruleset failed.
        message: String,
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
    /// The chart declares dependencies that are not vendored in its `charts/` directory.
    #[error(
        "{unit}: {path}: chart dependencies not in {path}/charts/: {missing}; gitward fetches only those with an \
         https, http or oci repository: vendor the others with `helm dependency build {path}` and commit the \
         charts/ directory"
    )]
    ChartDependencies {
        /// The unit.
        unit: String,
        /// The chart's repository path.
        path: String,
        /// The dependencies Helm named, comma-separated.
        missing: String,
    },
    /// A Helm hook's annotation (`helm.sh/hook`, `helm.sh/hook-weight`,
    /// `helm.sh/hook-delete-policy`) holds a value Helm does not know.
    #[error("{origin}: annotation {annotation}: {message}")]
    HookAnnotation {
        /// File and document (`chart (helm template) (document 3)`).
        origin: String,
        /// The annotation's key.
        annotation: &'static str,
        /// What is wrong and what is allowed.
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
    /// The files materialised for one render total more than `[render] max_tree_bytes`.
    #[error(
        "{unit}: the files this render needs are over the limit of {limit} bytes ([render] max_tree_bytes), \
         reached at {path}"
    )]
    TreeTooLarge {
        /// The unit.
        unit: String,
        /// The repository path of the file that crossed the limit.
        path: String,
        /// The limit.
        limit: u64,
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
    /// A unit with `allow_remote_bases` names a remote base gitward does not fetch: not
    /// `https://`, a host `[render] remote_base_hosts` does not list, or a `?ref=` that is no
    /// plain ref name ([`super::remote`]). Refused before kustomize runs.
    #[error("{file}: remote base {base:?} refused: {reason} (unit {unit})")]
    RemoteBaseRefused {
        /// The unit.
        unit: String,
        /// The kustomization file.
        file: String,
        /// The base as written.
        base: String,
        /// Why.
        reason: String,
    },
    /// A kustomization names a URL in a field kustomize loads a file from, and the unit does
    /// not set `allow_remote_bases`.
    #[error(
        "{file}: {field} names {value:?}, which kustomize would fetch over the network: refused, a render reads only the revision (set allow_remote_bases = true in unit {unit} to allow it)"
    )]
    RemoteFile {
        /// The unit.
        unit: String,
        /// The kustomization file.
        file: String,
        /// The field, with indexes (`configMapGenerator[0].files[1]`).
        field: String,
        /// The value as written.
        value: String,
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
    /// Reading the revision's tree from the mirror failed, or a file it reads is over the
    /// unit's `max_file_bytes` ([`crate::source::Error::FileTooLarge`]).
    #[error(transparent)]
    Source(#[from] crate::source::Error),
}

/// `Result` alias of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_tool_names_scripts_tools_and_the_key() {
        let e = Error::ToolMissing { unit: "app".into(), tool: "kustomize", hint: "not on PATH".into() };
        assert_eq!(
            e.to_string(),
            "app: kustomize not found (not on PATH); run scripts/tools to build it, or set [render] kustomize to its path"
        );
    }
}
