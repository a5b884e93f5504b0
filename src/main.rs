//! The `gitward` command: a thin CLI over the library.
//!
//! Exit codes: `run` 0 after SIGTERM/SIGINT, 2 when it cannot start; `sync` 0 all objects succeeded, 1 any object failed or was skipped, 2 config or
//! source error (the revision was not applied); with `--wait`, also 1 when what it changed, or
//! a member an earlier sync left unhealthy, did not become healthy within `health_timeout`;
//! `diff` 0 no changes, 1 changes, 2 error (as `kubectl diff`); `validate` 0 valid, 2 invalid;
//! `status` 0 every unit applied, its last attempt left no error and all its members are present
//! and healthy, 1 something not (never applied, its last sync failed, a recorded error, a
//! member missing or not healthy), 2 error.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use gitward::config::Config;
use gitward::sync::Engine;
use gitward::telemetry::{self, LogFormat};

/// The allocator: jemalloc, configured in `.cargo/config.toml` to hand freed pages back within a
/// second. At 10,000 objects glibc malloc kept the daemon ~15 MiB above jemalloc at rest and the
/// one-shot `sync` ~18 MiB above it at its peak (fragmentation across per-thread arenas; issue 9,
/// README "Benchmarks"). mimalloc was tried and held more than glibc. Without the default
/// feature `jemalloc` the system allocator serves, so heaptrack can profile the heap.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// gitward keeps a Kubernetes cluster equal to a git repository of manifests.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "GITWARD_LOG_FORMAT")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon: sync each unit on every push, webhook, poll, drift and resync.
    Run(RunArgs),
    /// Sync each unit once: fetch, apply every object with server-side apply, prune.
    Sync(SyncArgs),
    /// Show what a sync would change (server-side dry run), without changing anything.
    Diff(UnitArgs),
    /// Render, parse and check the manifests of each unit without a cluster.
    Validate(UnitArgs),
    /// Show what each unit last applied, when, the result, and the health of its objects, read
    /// from the cluster (no daemon needed).
    Status(StatusArgs),
}

#[derive(clap::Args)]
struct SyncArgs {
    #[command(flatten)]
    units: UnitArgs,
    /// After the apply, wait (at most each unit's `health_timeout`) until what the sync
    /// changed, and every member an earlier sync left unhealthy, is healthy; exit 1 when it is
    /// not.
    #[arg(long)]
    wait: bool,
    /// Prune this once even past `max_prune_fraction` or when the revision holds no objects
    /// (a deliberate clean-up; `allow_prune_all` permits it every time).
    #[arg(long)]
    allow_prune: bool,
}

/// Output format of `gitward status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Output {
    /// One block per unit.
    Text,
    /// `{"units": [...]}`.
    Json,
}

#[derive(clap::Args)]
struct StatusArgs {
    #[command(flatten)]
    units: UnitArgs,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Output::Text)]
    output: Output,
}

#[derive(clap::Args)]
struct RunArgs {
    /// The config file (SIGHUP reloads it).
    #[arg(long, short, env = "GITWARD_CONFIG", default_value = "/etc/gitward/config.toml")]
    config: PathBuf,
}

#[derive(clap::Args)]
struct UnitArgs {
    /// The config file.
    #[arg(long, short, env = "GITWARD_CONFIG", default_value = "/etc/gitward/config.toml")]
    config: PathBuf,
    /// Only this sync unit (by name); default all.
    #[arg(long = "sync")]
    unit: Option<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    telemetry::init(cli.log_format);
    // SAFETY: called once, before any thread (the runtime) exists and before any git fetch.
    unsafe { gitward::source::configure_network_timeouts(Duration::from_secs(10), Duration::from_secs(60)) };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    match runtime.block_on(run(cli.command)) {
        Ok(code) => code,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "gitward failed");
            ExitCode::from(2)
        }
    }
}

async fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run(args) => daemon(args).await,
        Command::Sync(args) => sync(args).await,
        Command::Diff(args) => diff(args).await,
        Command::Validate(args) => validate(args).await,
        Command::Status(args) => status(args).await,
    }
}

/// Runs the daemon until SIGTERM or SIGINT; exits 0 after a graceful stop.
async fn daemon(args: RunArgs) -> anyhow::Result<ExitCode> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("SIGINT handler")?;
    let shutdown = async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    };
    gitward::daemon::run::run(&args.config, None, shutdown).await?;
    Ok(ExitCode::SUCCESS)
}

/// One client per configured cluster (connecting reads kubeconfigs; it contacts nobody).
async fn connect(config: &Config) -> anyhow::Result<gitward::cluster::registry::Registry> {
    gitward::cluster::registry::Registry::connect(&config.clusters, gitward::TOOLING)
        .await
        .map_err(|(name, e)| anyhow::Error::new(e).context(format!("connecting to cluster {name}")))
}

fn load(args: &UnitArgs) -> anyhow::Result<Config> {
    let mut config = Config::load(&args.config)?;
    if let Some(name) = &args.unit {
        config.units.retain(|u| &u.name == name);
        anyhow::ensure!(!config.units.is_empty(), "{}: no sync unit named {name}", args.config.display());
    }
    Ok(config)
}

async fn sync(args: SyncArgs) -> anyhow::Result<ExitCode> {
    let config = load(&args.units)?;
    let clusters = connect(&config).await?;
    let mut code = ExitCode::SUCCESS;
    for unit in &config.units {
        let client = clusters.client(&unit.cluster).expect("every unit names a configured cluster").clone();
        let engine = Engine::new(client, config.cluster_of(unit), &config.daemon.state_dir, unit).await;
        let mut engine = match engine {
            Ok(engine) => engine,
            Err(e) => {
                tracing::error!(unit = %unit.name, error = %telemetry::error_chain(&e), "sync failed");
                code = ExitCode::from(2);
                continue;
            }
        };
        if args.allow_prune {
            engine.allow_prune_once();
        }
        match engine.sync().await {
            Ok(report) => {
                let healthy = finish(&mut engine, &report, args.wait).await;
                if (!healthy || report.changes.has_failures()) && code == ExitCode::SUCCESS {
                    code = ExitCode::from(1);
                }
            }
            Err(e) => {
                tracing::error!(unit = %unit.name, error = %telemetry::error_chain(&e), "sync failed");
                if let Err(r) = engine.record_failure(&e).await {
                    tracing::debug!(unit = %unit.name, error = %telemetry::error_chain(&r), "could not record the error on the inventory");
                }
                code = ExitCode::from(2);
            }
        }
    }
    Ok(code)
}

/// Logs a one-shot sync's report, waits for health when asked (for what the sync changed and
/// the members an earlier sync left unhealthy; `wait="none"` when there is nothing to wait
/// for), records the result and the attempt on the ApplySet parent; false when `--wait` found
/// the unit not healthy.
async fn finish(engine: &mut Engine, report: &gitward::sync::Report, wait: bool) -> bool {
    use gitward::health::Counts;
    use gitward::health::record::SyncResult;
    use gitward::health::wait::Outcome;
    use gitward::telemetry::HealthSummary;
    telemetry::log_objects(report);
    let failed = report.changes.has_failures();
    let timeout = engine.health_timeout();
    let (summary, judged) = if failed {
        (HealthSummary { counts: Counts::default(), wait: "skipped", result: SyncResult::Failed }, false)
    } else if !wait {
        (HealthSummary { counts: Counts::default(), wait: "none", result: SyncResult::Applied }, false)
    } else if timeout.is_zero() {
        (HealthSummary { counts: Counts::default(), wait: "disabled", result: SyncResult::Applied }, false)
    } else {
        let mut health = engine.health_wait(report).await;
        let judged = health.covers_all() || !health.targets().is_empty();
        let unit = report.unit.as_str();
        let (wait, outcome) = if health.targets().is_empty() {
            ("none", Outcome::Healthy)
        } else {
            let outcome = health.run(timeout, |object, status| telemetry::log_health(unit, object, status)).await;
            (outcome.as_str(), outcome)
        };
        let result = engine.judge_health(&health, Some(outcome)).await;
        (HealthSummary { counts: Counts::of(&health.healths()), wait, result }, judged)
    };
    telemetry::log_summary(report, &summary);
    if let Err(e) = engine.record_sync(report, summary.result, judged).await {
        tracing::warn!(unit = %report.unit, error = %telemetry::error_chain(&e), "could not record the sync result on the inventory");
    }
    !matches!(summary.result, SyncResult::Degraded | SyncResult::Progressing)
}

async fn status(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let config = load(&args.units)?;
    let clusters = connect(&config).await?;
    let mut states = Vec::new();
    for unit in &config.units {
        let client = clusters.client(&unit.cluster).expect("every unit names a configured cluster");
        let state =
            gitward::status::unit_state(client, unit).await.with_context(|| format!("status of unit {}", unit.name))?;
        states.push(state);
    }
    match args.output {
        Output::Text => print!("{}", gitward::status::render_text(&states)),
        Output::Json => println!("{}", gitward::status::render_json(&states)),
    }
    Ok(if states.iter().all(|s| s.healthy()) { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

async fn diff(args: UnitArgs) -> anyhow::Result<ExitCode> {
    let config = load(&args)?;
    let clusters = connect(&config).await?;
    let mut changes = false;
    for unit in &config.units {
        let client = clusters.client(&unit.cluster).expect("every unit names a configured cluster").clone();
        let mut engine = Engine::new(client, config.cluster_of(unit), &config.daemon.state_dir, unit).await?;
        let report = engine.diff().await.with_context(|| format!("diff of unit {}", unit.name))?;
        for d in &report.changed {
            print!("{}", d.diff);
        }
        for p in &report.prunes {
            println!("prune {p}");
        }
        for (object, message) in &report.failed {
            tracing::warn!(unit = %unit.name, object = %object, reason = %message, "dry run rejected");
        }
        changes |= report.has_changes();
        if !report.failed.is_empty() {
            return Ok(ExitCode::from(2));
        }
    }
    Ok(if changes { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

async fn validate(args: UnitArgs) -> anyhow::Result<ExitCode> {
    let config = load(&args)?;
    let mut code = ExitCode::SUCCESS;
    for unit in &config.units {
        match gitward::validate::validate_unit(&config.daemon.state_dir, unit).await {
            Ok(summary) => {
                tracing::info!(unit = %unit.name, revision = %summary.revision, objects = summary.objects, "valid")
            }
            Err(e) => {
                tracing::error!(unit = %unit.name, error = %telemetry::error_chain(&e), "invalid");
                code = ExitCode::from(2);
            }
        }
    }
    Ok(code)
}
