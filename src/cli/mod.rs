//! The `gitward` command line: its commands and arguments as clap parses them, their `--help`
//! texts ([`help`]), and what is generated from them: shell completions and man pages
//! ([`docs`], with `clap_complete` and `clap_mangen`, so neither drifts from `--help`).
//!
//! The binary (`src/main.rs`) runs what [`Cli`] parses.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::telemetry::LogFormat;

pub mod docs;
pub mod help;

/// gitward keeps a Kubernetes cluster equal to a git repository of manifests.
#[derive(Parser)]
#[command(version, about, after_help = "Run `gitward <command> --help` for its exit codes and an example.")]
pub struct Cli {
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "GITWARD_LOG_FORMAT")]
    pub log_format: LogFormat,
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand)]
pub enum Command {
    /// Run the daemon: sync each unit on every push, webhook, poll, drift and resync.
    #[command(after_help = help::RUN)]
    Run(RunArgs),
    /// Sync each unit once: fetch, apply every object with server-side apply, prune.
    #[command(after_help = help::SYNC)]
    Sync(SyncArgs),
    /// Show what a sync would change (server-side dry run), without changing anything.
    #[command(after_help = help::DIFF)]
    Diff(UnitArgs),
    /// Show what a revision (a pull request's head) would do to the live cluster: per unit
    /// whose render it changes, the merge, the change's effect, drift and the prune.
    #[command(after_help = help::PREVIEW)]
    Preview(PreviewArgs),
    /// Render, parse and check the manifests of each unit without a cluster.
    #[command(after_help = help::VALIDATE)]
    Validate(ValidateArgs),
    /// Print a unit's objects as a sync would send them (rendered, substituted, labelled).
    #[command(after_help = crate::validate::render_command::HELP)]
    Render(crate::validate::render_command::RenderArgs),
    /// Write the config that does what Flux's or Argo CD's objects do, read from YAML files or
    /// the cluster; each field with no equivalent is a warning.
    #[command(after_help = help::IMPORT)]
    Import(ImportArgs),
    /// Show what each unit last applied, when, the result, and the health of its objects, read
    /// from the cluster (no daemon needed).
    #[command(after_help = help::STATUS)]
    Status(StatusArgs),
    /// Suspend units: the daemon applies, prunes and heals nothing of them until resumed.
    #[command(after_help = help::SUSPEND)]
    Suspend(NamedArgs),
    /// Resume suspended units: the daemon syncs what came meanwhile.
    #[command(after_help = help::SUSPEND)]
    Resume(NamedArgs),
    /// Ask the running daemon to sync units now, and wait for the result.
    #[command(after_help = help::RECONCILE)]
    Reconcile(ReconcileArgs),
    /// Verify or show the signed attestations each sync leaves (`[provenance]`).
    #[command(subcommand)]
    Attest(AttestCommand),
    /// Try each way out of the render sandbox from a child run as a tool is, and print whether
    /// each was stopped.
    #[command(after_help = help::SANDBOX_CHECK)]
    SandboxCheck(SandboxCheckArgs),
    /// Print the completion script of `SHELL` for gitward's commands and options.
    #[command(after_help = help::COMPLETIONS)]
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write the man pages, gitward.1 and one per command (gitward-sync.1, …), into `DIR`.
    #[command(after_help = help::MAN)]
    Man {
        /// Where the pages go (made if missing).
        #[arg(value_name = "DIR", default_value = ".")]
        dir: std::path::PathBuf,
    },
    /// Print the JSON Schema of the config file, for editors and validators.
    #[command(after_help = help::SCHEMA)]
    Schema,
    /// Print gitward's version, the commit it was built from and the render tools it pins.
    #[command(after_help = help::VERSION)]
    Version,
    /// One attack of `sandbox-check`, made by the child it starts.
    #[command(hide = true)]
    SandboxProbe {
        /// The attack's name (`read-host`, `tcp`, …).
        attack: String,
        /// What it aims at: a path or a loopback port.
        aim: String,
    },
}

/// `gitward attest`'s commands.
#[derive(Subcommand)]
pub enum AttestCommand {
    /// Check attestations: each signature, payloadType and predicateType, per unit the chain
    /// of `previous` digests (a missing or moved one named) and one cluster; with --config also
    /// those the cluster keeps, and that the live members still match the last one.
    #[command(after_help = help::ATTEST_VERIFY)]
    Verify(AttestVerifyArgs),
    /// Print attestations readably: each envelope's type and key id, and its Statement.
    #[command(after_help = help::ATTEST_SHOW)]
    Show {
        /// An envelope file or a journal of JSON lines; default stdin.
        #[arg(value_name = "FILE")]
        file: Option<PathBuf>,
    },
}

/// Arguments of `gitward attest verify`.
#[derive(clap::Args)]
pub struct AttestVerifyArgs {
    /// The public key (PEM, P-256 or Ed25519) of `[provenance] key_file`.
    #[arg(long, value_name = "PUB")]
    pub key: PathBuf,
    /// The config: also check the attestations each unit's ConfigMap keeps in the cluster, and
    /// its live members against the last.
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// Only this sync unit (by name); default all.
    #[arg(long = "sync")]
    pub unit: Option<String>,
    /// Envelope files or journals (`<state_dir>/attestations/<unit>.jsonl`), each checked from
    /// the unit's first attestation, in the order given.
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

/// Arguments of `gitward sandbox-check`.
#[derive(clap::Args)]
pub struct SandboxCheckArgs {
    /// Run the attacks with the sandbox off (`[render] sandbox = "off"`), to see each work.
    #[arg(long)]
    pub off: bool,
}

/// Arguments of `gitward suspend` and `resume`: the config and the units named.
#[derive(clap::Args)]
pub struct NamedArgs {
    /// The config file.
    #[arg(long, short, env = "GITWARD_CONFIG", default_value = "/etc/gitward/config.toml")]
    pub config: PathBuf,
    /// The sync units, by name.
    #[arg(required = true, value_name = "NAME")]
    pub units: Vec<String>,
}

/// Arguments of `gitward reconcile`.
#[derive(clap::Args)]
pub struct ReconcileArgs {
    /// The config file and the units.
    #[command(flatten)]
    pub named: NamedArgs,
    /// Return once the request is written, without waiting for the sync.
    #[arg(long)]
    pub no_wait: bool,
    /// How long to wait for the daemon to handle each request, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub timeout: u64,
}

/// Arguments of `gitward sync`.
#[derive(clap::Args)]
pub struct SyncArgs {
    /// The config file and the unit.
    #[command(flatten)]
    pub units: UnitArgs,
    /// After the apply, wait (at most each unit's `health_timeout`) until what the sync
    /// changed, and every member an earlier sync left unhealthy, is healthy; exit 1 when it is
    /// not.
    #[arg(long)]
    pub wait: bool,
    /// Prune this once even past `max_prune_fraction` or when the revision holds no objects
    /// (a deliberate clean-up; `allow_prune_all` permits it every time).
    #[arg(long)]
    pub allow_prune: bool,
    /// Sync even when a unit of `depends_on` is not ready (exit 3 otherwise).
    #[arg(long)]
    pub ignore_dependencies: bool,
    /// Sync suspended units too (`suspend = true` or `gitward suspend`); without it they are
    /// skipped, each with a line saying so (`--revision` syncs its one unit either way).
    #[arg(long)]
    pub include_suspended: bool,
    /// Apply this revision (a commit SHA, or a tag or branch) instead of the unit's `ref`,
    /// once; needs one unit (`--sync NAME` or NAME). With the unit suspended the daemon
    /// leaves it applied: a rollback. Resumed, the daemon heals toward it and syncs the ref's
    /// tip; while the tip fails, the rollback stays applied.
    #[arg(long, value_name = "SHA")]
    pub revision: Option<String>,
    /// The sync unit, as `--sync`.
    #[arg(value_name = "NAME", conflicts_with = "unit")]
    pub name: Option<String>,
}

/// Output format of `gitward status` and `validate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// One block per unit.
    Text,
    /// `{"units": [...]}`.
    Json,
}

/// Output format of `gitward preview`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PreviewOutput {
    /// As `gitward diff` prints.
    Text,
    /// A pull-request comment: a marker line, a summary table, a `<details>` block per unit.
    Markdown,
    /// The report as one JSON document.
    Json,
}

/// Arguments of `gitward preview`.
#[derive(clap::Args)]
pub struct PreviewArgs {
    /// The config file.
    #[arg(long, short, env = "GITWARD_CONFIG", default_value = "/etc/gitward/config.toml")]
    pub config: PathBuf,
    /// The revision to preview: a commit SHA, or a tag or branch.
    #[arg(long, value_name = "REV")]
    pub revision: String,
    /// The revision to measure the change from; default: the one each unit last applied.
    #[arg(long, value_name = "REV")]
    pub base: Option<String>,
    /// Only this sync unit (by name; repeat for more); default all.
    #[arg(long = "sync", value_name = "NAME")]
    pub units: Vec<String>,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = PreviewOutput::Text)]
    pub output: PreviewOutput,
}

/// Arguments of `gitward status`.
#[derive(clap::Args)]
pub struct StatusArgs {
    /// The config file and the unit.
    #[command(flatten)]
    pub units: UnitArgs,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Output::Text)]
    pub output: Output,
}

/// Arguments of `gitward validate`.
#[derive(clap::Args)]
pub struct ValidateArgs {
    /// The config file and the unit.
    #[command(flatten)]
    pub units: UnitArgs,
    /// The Kubernetes version Helm charts are rendered for (their `kubeVersion` and
    /// `.Capabilities.KubeVersion`). Default: `[render] kube_version`, else the newest
    /// Kubernetes the pinned Helm knows (v1.37.0).
    #[arg(long, value_name = "VERSION", value_parser = kube_version)]
    pub kube_version: Option<String>,
    /// Output format: one line per unit, or one JSON document (`{"units": [...]}`, each with
    /// its revision, objects, problems and warnings).
    #[arg(long, short, value_enum, default_value_t = Output::Text)]
    pub output: Output,
}

/// Arguments of `gitward import`.
#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("from").required(true).args(["files", "from_cluster"])))]
pub struct ImportArgs {
    /// Whose objects: Flux's (`Kustomization`, `HelmRelease` and their sources) or Argo CD's
    /// (`Application`, `ApplicationSet`, `AppProject`).
    #[arg(value_enum)]
    pub tool: crate::import::Tool,
    /// A YAML or JSON file, or a directory of them (read recursively); repeatable.
    #[arg(long = "file", short = 'f', value_name = "FILE|DIR")]
    pub files: Vec<PathBuf>,
    /// Read the objects from the cluster of the kubeconfig's current context instead.
    #[arg(long, conflicts_with = "files")]
    pub from_cluster: bool,
    /// Write the config to this file. Default: stdout.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Checks `--kube-version` as the config checks `[render] kube_version`.
fn kube_version(value: &str) -> Result<String, String> {
    crate::config::check_kube_version(value).map(|()| value.to_owned())
}

/// Arguments of `gitward run`.
#[derive(clap::Args)]
pub struct RunArgs {
    /// The config file (SIGHUP reloads it).
    #[arg(long, short, env = "GITWARD_CONFIG", default_value = "/etc/gitward/config.toml")]
    pub config: PathBuf,
}

/// The config file and, optionally, one unit: `diff`, and part of `sync`, `status`, `validate`.
#[derive(clap::Args)]
pub struct UnitArgs {
    /// The config file.
    #[arg(long, short, env = "GITWARD_CONFIG", default_value = "/etc/gitward/config.toml")]
    pub config: PathBuf,
    /// Only this sync unit (by name); default all.
    #[arg(long = "sync")]
    pub unit: Option<String>,
}
