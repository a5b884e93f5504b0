//! What `gitward` generates from its command-line definition, read by the programs that use it:
//! bash sources the completion script and completes; `man` formats the pages; `version` names
//! the commit it was built from.

use std::path::Path;
use std::process::Command;

use crate::common;

/// The subcommands a user sees (`--help` lists them; the hidden `sandbox-probe` aside).
const COMMANDS: [&str; 17] = [
    "run",
    "sync",
    "diff",
    "preview",
    "validate",
    "render",
    "import",
    "attest",
    "status",
    "suspend",
    "resume",
    "reconcile",
    "sandbox-check",
    "completions",
    "man",
    "schema",
    "version",
];

/// Runs the gitward binary with `args`, no config: its exit code and stdout.
fn gitward(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(common::binary()).args(args).output().expect("run gitward");
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
}

/// What bash's completion offers for `line` (the words typed; the last one is completed),
/// after sourcing `script`: `COMPREPLY`, one word per line.
fn complete(script: &Path, line: &[&str]) -> Vec<String> {
    let words = line.iter().map(|w| format!("'{w}'")).collect::<Vec<_>>().join(" ");
    let typed = line.join(" ");
    let program = format!(
        "source '{}'; COMP_WORDS=({words}); COMP_CWORD={}; COMP_LINE='{typed}'; COMP_POINT={}; \
         _gitward gitward '{}' '{}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        line.len() - 1,
        typed.len(),
        line[line.len() - 1],
        line[line.len().saturating_sub(2)],
    );
    let out = Command::new("bash").args(["--norc", "-c", &program]).output().expect("run bash");
    assert!(out.status.success(), "bash: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
}

#[test]
fn bash_completes_the_subcommands_and_the_config_option_from_the_generated_script() {
    let dir = tempfile::tempdir().unwrap();
    let (code, script) = gitward(&["completions", "bash"]);
    assert_eq!(code, Some(0));
    let path = dir.path().join("gitward.bash");
    std::fs::write(&path, script).unwrap();
    let offered = complete(&path, &["gitward", ""]);
    for command in COMMANDS {
        assert!(offered.iter().any(|w| w == command), "`gitward <TAB>` offers {command}: {offered:?}");
    }
    assert_eq!(complete(&path, &["gitward", "sync", "--con"]), ["--config"]);
    assert_eq!(complete(&path, &["gitward", "status", "--output", ""]), ["text", "json"]);
    let (code, _) = gitward(&["completions", "tcsh"]);
    assert_eq!(code, Some(2), "an unknown shell is a usage error");
}

#[test]
fn man_formats_the_generated_pages_with_every_subcommand_and_each_command_s_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stdout) = gitward(&["man", &dir.path().display().to_string()]);
    assert_eq!(code, Some(0));
    let listed: Vec<&str> = stdout.lines().collect();
    assert_eq!(listed.len(), COMMANDS.len() + 1, "a page per command and the main one: {stdout}");
    let man = |page: &str| {
        let out = Command::new("man")
            .args(["-l", "-P", "cat"])
            .arg(dir.path().join(page))
            .env("MANWIDTH", "200")
            .output()
            .expect("run man");
        assert!(out.status.success(), "man -l {page}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let main = man("gitward.1");
    for command in COMMANDS {
        assert!(main.contains(&format!("gitward-{command}(1)")), "gitward(1) lists {command}:\n{main}");
    }
    assert!(!main.contains("sandbox-probe"), "the hidden command has no page:\n{main}");
    let sync = man("gitward-sync.1");
    assert!(sync.contains("--wait") && sync.contains("Exit codes: 0 every object applied"), "{sync}");
    assert!(sync.contains("gitward sync --config config.toml --sync apps --wait"), "the example: {sync}");
}

#[test]
fn version_names_the_checked_out_commit_and_the_pinned_render_tools() {
    let (code, stdout) = gitward(&["version"]);
    assert_eq!(code, Some(0));
    let head = Command::new("git").args(["rev-parse", "HEAD"]).current_dir(env!("CARGO_MANIFEST_DIR")).output();
    let head = String::from_utf8_lossy(&head.expect("git rev-parse").stdout).trim().to_owned();
    let commit = stdout.lines().find_map(|l| l.strip_prefix("commit ")).unwrap_or_default();
    assert!(commit.len() >= 7 && head.starts_with(commit), "commit {commit:?} of HEAD {head}: {stdout}");
    let tools = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/tools")).unwrap();
    for tool in ["kustomize", "helm", "sops"] {
        let pinned = tools.lines().find_map(|l| l.trim().strip_prefix(&format!("[{tool}]="))).unwrap();
        let version = pinned.rsplit('@').next().unwrap();
        assert!(stdout.contains(&format!("{tool} {version}")), "{tool} {version}: {stdout}");
    }
}
