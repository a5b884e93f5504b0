//! What is generated from the clap definitions ([`super::Cli`]): shell completions
//! (`clap_complete`), man pages (`clap_mangen`) and the version text.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::CommandFactory;

/// The render tools `scripts/tools` pins, `name version` joined by `, ` (set by `build.rs`).
pub const PINNED_TOOLS: &str = env!("GITWARD_PINNED_TOOLS");

/// The commit gitward was built from (`VERGEN_GIT_SHA`, set by `build.rs` from `git`); vergen's
/// placeholder `VERGEN_IDEMPOTENT_OUTPUT` when the build had no git.
pub const COMMIT: &str = env!("VERGEN_GIT_SHA");

/// Writes the completion script of `shell` for every command and option to `out`.
///
/// Errors: none of its own; `clap_complete` panics only on a malformed command, which
/// `Cli`'s own debug assertions (`clap::Command::debug_assert`) catch in the tests first.
pub fn completions(shell: clap_complete::Shell, out: &mut dyn Write) {
    let mut cmd = super::Cli::command();
    clap_complete::generate(shell, &mut cmd, "gitward", out);
}

/// Writes `gitward.1` and one page per command that is not hidden (`gitward-sync.1`, …) into
/// `dir`, made if missing; the paths written, the main page last.
///
/// Errors: the directory cannot be made, or a page created or written.
pub fn man_pages(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut cmd = super::Cli::command().disable_help_subcommand(true);
    // Built, each command's name for its page is `gitward-<command>`.
    cmd.build();
    let mut written = Vec::new();
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        written.push(clap_mangen::Man::new(sub.clone()).generate_to(dir)?);
    }
    written.push(clap_mangen::Man::new(cmd).generate_to(dir)?);
    Ok(written)
}

/// What `gitward version` prints: `gitward <version>`, `commit <sha>` (`unknown` without git
/// at build time) and `render tools pinned: <name version, …>`, one per line.
pub fn version() -> String {
    let commit = if COMMIT == "VERGEN_IDEMPOTENT_OUTPUT" { "unknown" } else { COMMIT };
    format!("gitward {}\ncommit {commit}\nrender tools pinned: {PINNED_TOOLS}\n", env!("CARGO_PKG_VERSION"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_definition_passes_clap_s_own_checks() {
        super::super::Cli::command().debug_assert();
    }

    #[test]
    fn the_version_names_the_commit_and_the_pinned_render_tools() {
        let text = version();
        assert!(text.starts_with(&format!("gitward {}\ncommit ", env!("CARGO_PKG_VERSION"))), "{text}");
        for tool in ["kustomize v", "helm v", "sops v"] {
            assert!(text.contains(tool), "{tool} in {text}");
        }
    }
}
