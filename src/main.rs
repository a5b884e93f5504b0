//! The `gitward` command: a thin CLI over the library.
//!
//! Exit codes (also in each command's `--help`): `run` 0 after SIGTERM/SIGINT, 2 when it cannot start; `sync` 0
//! all objects succeeded, 1 any object failed or was skipped, 2 config or source error (the revision was not
//! applied); with `--wait`, also 1 when what it changed, or a member an earlier sync left unhealthy, did not
//! become healthy within `health_timeout`; `diff` 0 no changes, 1 changes (or a prune a sync would refuse), 2
//! error, including objects a sync would fail (as `kubectl diff`); `validate` 0 valid, 2 invalid; `status` 0
//! every unit applied, its last attempt left no error and all its members are present and healthy, 1 something
//! not (never applied, its last sync failed, a recorded error, a member missing or not healthy), 2 error;
//! `suspend` and `resume` 0 done, 2 error; `reconcile` as `sync` (0 applied, 1 an object not applied, 2 the
//! sync failed as a whole, or the request was not handled in time: queued behind a health wait, or no
//! daemon handled it); `render` 0 printed, 2 error; `sandbox-check` 0 every attack stopped, 1 one escaped, 2
//! a probe did not run; `completions` 0 printed, 2 an unknown shell; `man` 0 written, 2 the directory or a
//! page could not be written; `version` 0.
//!
//! `sync`, `validate` and `status` print one line per unit on stdout ([`gitward::summary`]); logs go to stderr.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use gitward::cli::{
    AttestCommand, AttestVerifyArgs, Cli, Command, NamedArgs, Output, PreviewArgs, PreviewOutput, ReconcileArgs,
    RunArgs, SandboxCheckArgs, StatusArgs, SyncArgs, UnitArgs, ValidateArgs,
};
use gitward::config::Config;
use gitward::observe::{Observer, Observers};
use gitward::sync::{Cause, Engine};
use gitward::telemetry;

/// The allocator: jemalloc, configured in `.cargo/config.toml` to hand freed pages back within a
/// second. At 10,000 objects glibc malloc kept the daemon ~15 MiB above jemalloc at rest and the
/// one-shot `sync` ~18 MiB above it at its peak (fragmentation across per-thread arenas;
/// `benches/RESULTS.md`). mimalloc was tried and held more than glibc. Without the default
/// feature `jemalloc` the system allocator serves, so heaptrack can profile the heap.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// How long `gitward sync` waits, per unit, for its queued Kubernetes Events to be written.
const EVENTS_FLUSH: std::time::Duration = std::time::Duration::from_secs(5);

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Both before the runtime starts: the check's children are tools, forked from a process
    // with no runtime threads or connections, and the probe forks.
    if let Command::SandboxProbe { attack, aim } = &cli.command {
        return sandbox_probe(attack, aim);
    }
    if let Some(code) = generated(&cli.command) {
        return code;
    }
    telemetry::init(cli.log_format);
    if let Command::SandboxCheck(args) = &cli.command {
        return sandbox_check(args);
    }
    let fetching = fetch_timeouts(&cli.command);
    // SAFETY: called once, before any thread (the runtime) exists and before any other git2 call.
    unsafe { gitward::source::start_libgit2(fetching.connect_timeout, fetching.idle_timeout) };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    let code = runtime.block_on(run(cli.command)).unwrap_or_else(|e| {
        tracing::error!(error = %telemetry::error_chain(e.as_ref()), "gitward failed");
        ExitCode::from(2)
    });
    // Dropping the runtime waits for blocking tasks without bound: a render abandoned at
    // shutdown gets one second, then the process exits anyway.
    runtime.shutdown_timeout(Duration::from_secs(1));
    code
}

/// `gitward completions`, `man`, `schema` and `version`: what is generated from the command line's
/// definition ([`gitward::cli::docs`]); `None` for every other command.
fn generated(command: &Command) -> Option<ExitCode> {
    match command {
        Command::Completions { shell } => gitward::cli::docs::completions(*shell, &mut std::io::stdout().lock()),
        Command::Version => print!("{}", gitward::cli::docs::version()),
        Command::Schema => print!("{}", gitward::config::json_schema()),
        Command::Man { dir } => match gitward::cli::docs::man_pages(dir) {
            Ok(pages) => pages.iter().for_each(|p| println!("{}", p.display())),
            Err(e) => {
                eprintln!("gitward man: {}: {e}", dir.display());
                return Some(ExitCode::from(2));
            }
        },
        _ => return None,
    }
    Some(ExitCode::SUCCESS)
}

/// `gitward sandbox-check`: every attack's outcome on stdout.
fn sandbox_check(args: &SandboxCheckArgs) -> ExitCode {
    use gitward::config::SandboxMode;
    let mode = if args.off { SandboxMode::Off } else { SandboxMode::On };
    let escaped = std::env::current_exe()
        .context("sandbox check: this program's path")
        .and_then(|program| Ok(gitward::sandbox_check::command(&program, mode)?));
    match escaped {
        Ok(escaped) => ExitCode::from(u8::from(escaped)),
        Err(e) => {
            tracing::error!(error = %telemetry::error_chain(e.as_ref()), "gitward failed");
            ExitCode::from(2)
        }
    }
}

/// `gitward sandbox-probe ATTACK AIM`, the child of `sandbox-check`: prints what the attack
/// did.
fn sandbox_probe(attack: &str, aim: &str) -> ExitCode {
    match gitward::sandbox_check::Attack::from_name(attack) {
        Some(attack) => {
            println!("{}", gitward::sandbox_check::probe(attack, aim));
            ExitCode::SUCCESS
        }
        None => {
            eprintln!("sandbox-probe: no attack named {attack}");
            ExitCode::from(2)
        }
    }
}

/// The fetch timeouts of `gitward run`'s config (`[daemon] fetch_connect_timeout`,
/// `fetch_idle_timeout`), read before the runtime starts (libgit2 takes them then); the
/// defaults for other commands, or when the config does not load (the daemon then reports why).
fn fetch_timeouts(command: &Command) -> gitward::config::Fetching {
    match command {
        Command::Run(args) => Config::load(&args.config).map(|c| c.daemon.fetching).unwrap_or_default(),
        _ => gitward::config::Fetching::default(),
    }
}

async fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run(args) => daemon(args).await,
        Command::Sync(args) => sync(args).await,
        Command::Diff(args) => diff(args).await,
        Command::Preview(args) => preview(args).await,
        Command::Validate(args) => validate(args).await,
        Command::Render(args) => Ok(gitward::validate::render_command::run(&args).await?),
        Command::Import(args) => import(args).await,
        Command::Status(args) => status(args).await,
        Command::Suspend(args) => suspend(args, true).await,
        Command::Resume(args) => suspend(args, false).await,
        Command::Reconcile(args) => reconcile(args).await,
        Command::Attest(AttestCommand::Verify(args)) => attest_verify(args).await,
        Command::Attest(AttestCommand::Show { file }) => attest_show(file.as_deref()),
        Command::SandboxCheck(_)
        | Command::SandboxProbe { .. }
        | Command::Completions { .. }
        | Command::Man { .. }
        | Command::Schema
        | Command::Version => unreachable!("run before the runtime starts"),
    }
}

/// The envelopes of `file` (stdin when `None`): one envelope, or JSON lines of them.
fn envelopes(file: Option<&Path>) -> anyhow::Result<Vec<gitward::sync::provenance::dsse::Envelope>> {
    let (text, name) = match file {
        Some(path) => (std::fs::read_to_string(path).with_context(|| path.display().to_string())?, path.display()),
        None => (std::io::read_to_string(std::io::stdin()).context("stdin")?, Path::new("stdin").display()),
    };
    gitward::sync::provenance::chain::parse(&text).map_err(|e| anyhow::anyhow!("{name}: {e}"))
}

/// `gitward attest verify`: the files, each from its unit's first attestation, then with
/// `--config` what each unit's ConfigMap keeps and its live members; a line per check.
async fn attest_verify(args: AttestVerifyArgs) -> anyhow::Result<ExitCode> {
    use gitward::sync::provenance::{chain, key::VerifyingKey, live};
    let pem = std::fs::read_to_string(&args.key).with_context(|| format!("--key {}", args.key.display()))?;
    let key = VerifyingKey::from_pem(&pem).with_context(|| format!("--key {}", args.key.display()))?;
    anyhow::ensure!(!args.files.is_empty() || args.config.is_some(), "nothing to verify: give FILEs or --config");
    let mut failed = false;
    for file in &args.files {
        let envelopes = envelopes(Some(file))?;
        match chain::check(&envelopes, &key, args.unit.as_deref(), chain::Start::Genesis) {
            Ok(checked) => println!("{}: verified: {} attestations", file.display(), checked.len()),
            Err(reason) => (failed, _) = (true, println!("{}: {reason}", file.display())),
        }
    }
    if let Some(path) = args.config {
        let config = load(&UnitArgs { config: path, unit: args.unit }).await?;
        let clusters = connect(&config).await?;
        for unit in &config.units {
            let client = clusters.client(&unit.cluster).expect("every unit names a configured cluster");
            match live::verify(client, unit, &key).await.map_err(|e| in_unit(&unit.name, &e))? {
                None => println!("{}: verified: the kept attestations, and the live members match the last", unit.name),
                Some(reason) => (failed, _) = (true, println!("{}: {reason}", unit.name)),
            }
        }
    }
    Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// `gitward attest show`: each envelope's header and its Statement, indented; the signature is
/// not checked (`attest verify` does).
fn attest_show(file: Option<&Path>) -> anyhow::Result<ExitCode> {
    use base64::Engine as _;
    for (n, envelope) in envelopes(file)?.iter().enumerate() {
        let keyids: Vec<&str> = envelope.signatures.iter().map(|s| s.keyid.as_deref().unwrap_or("")).collect();
        println!("envelope {}: sha256:{}", n + 1, gitward::sync::provenance::dsse::digest(envelope));
        println!(
            "payloadType: {}
signed by key id: {}",
            envelope.payload_type,
            keyids.join(", ")
        );
        let payload = base64::engine::general_purpose::STANDARD.decode(&envelope.payload).context("payload")?;
        let statement: serde_json::Value = serde_json::from_slice(&payload).context("payload")?;
        println!(
            "{}
",
            serde_json::to_string_pretty(&statement)?
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The units named, of the config they are read from, and its clients.
async fn named(args: &NamedArgs) -> anyhow::Result<(Config, gitward::cluster::registry::Registry)> {
    let mut config = gitward::sync::set::load(&args.config, None).await?;
    let unknown = args.units.iter().find(|n| !config.units.iter().any(|u| &&u.name == n));
    anyhow::ensure!(unknown.is_none(), "{}: no sync unit named {}", args.config.display(), unknown.unwrap());
    config.units.retain(|u| args.units.contains(&u.name));
    let clusters = connect(&config).await?;
    Ok((config, clusters))
}

/// `gitward import`: the objects read, the config written, each warning on stderr.
async fn import(args: gitward::cli::ImportArgs) -> anyhow::Result<ExitCode> {
    let (objects, warnings) = if args.from_cluster {
        gitward::import::from_cluster(args.tool).await?
    } else {
        gitward::import::read_paths(&args.files)?
    };
    let imported = gitward::import::import(args.tool, &objects, warnings);
    match &args.output {
        Some(file) => std::fs::write(file, &imported.config).with_context(|| format!("{}", file.display()))?,
        None => print!("{}", imported.config),
    }
    for warning in &imported.warnings {
        eprintln!("warning: {warning}");
    }
    eprintln!(
        "import: {} [[sync]] and {} [[sync_set]] tables from {} objects, {} warnings",
        imported.units,
        imported.sets,
        objects.len(),
        imported.warnings.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// `gitward suspend` (`suspend`) or `gitward resume`.
async fn suspend(args: NamedArgs, suspend: bool) -> anyhow::Result<ExitCode> {
    let (config, clusters) = named(&args).await?;
    for unit in &config.units {
        let client = clusters.client(&unit.cluster).expect("every unit names a configured cluster");
        let what = gitward::control::set_suspended(client, unit, suspend).await;
        println!("{}: {}", unit.name, what.map_err(|e| in_unit(&unit.name, &e))?);
    }
    Ok(ExitCode::SUCCESS)
}

/// An error about `unit` as the command prints it: `unit <unit>: <chain>`, the unit named once.
fn in_unit(unit: &str, e: &(dyn std::error::Error + 'static)) -> anyhow::Error {
    anyhow::anyhow!("unit {unit}: {}", telemetry::unit_error(unit, e))
}

/// `gitward reconcile`: a request per unit, then (unless `--no-wait`) the wait for each.
async fn reconcile(args: ReconcileArgs) -> anyhow::Result<ExitCode> {
    let (config, clusters) = named(&args.named).await?;
    let mut requests = Vec::new();
    for unit in &config.units {
        let client = clusters.client(&unit.cluster).expect("every unit names a configured cluster");
        let token = gitward::control::request(client, unit).await.map_err(|e| in_unit(&unit.name, &e))?;
        tracing::info!(unit = %unit.name, requested_at = %token, "sync requested");
        requests.push((unit, client, token));
    }
    let mut code = 0;
    for (unit, client, token) in requests {
        if args.no_wait {
            println!("{}: sync requested", unit.name);
            continue;
        }
        match gitward::control::wait_handled(client, unit, &token, Duration::from_secs(args.timeout)).await {
            Ok(state) => {
                println!("{}", telemetry::mask::mask(&gitward::status::line(&state)));
                code = code.max(gitward::control::exit_code(&state));
            }
            Err(e) => {
                tracing::error!(unit = %unit.name, error = %telemetry::error_chain(&e), "reconcile failed");
                code = 2;
            }
        }
    }
    Ok(ExitCode::from(code))
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

/// One client per configured cluster (connecting reads kubeconfigs; it contacts nobody), each
/// sending `gitward/<version> (<host name>-<pid>)`.
async fn connect(config: &Config) -> anyhow::Result<gitward::cluster::registry::Registry> {
    use gitward::cluster::agent;
    gitward::cluster::registry::Registry::connect(&config.clusters, &agent::user_agent(&agent::process_identity()))
        .await
        .map_err(|(name, e)| anyhow::Error::new(e).context(format!("connecting to cluster {name}")))
}

async fn load(args: &UnitArgs) -> anyhow::Result<Config> {
    let mut config = gitward::sync::set::load(&args.config, None).await?;
    if let Some(name) = &args.unit {
        config.units.retain(|u| &u.name == name);
        anyhow::ensure!(!config.units.is_empty(), "{}: no sync unit named {name}", args.config.display());
    }
    Ok(config)
}

async fn sync(mut args: SyncArgs) -> anyhow::Result<ExitCode> {
    args.units.unit = args.units.unit.take().or(args.name.take());
    let mut config = load(&args.units).await?;
    if let Some(revision) = &args.revision {
        gitward::control::pin_revision(&mut config.units, revision, args.units.unit.is_some())
            .map_err(anyhow::Error::msg)?;
    }
    let clusters = connect(&config).await?;
    let mut code = ExitCode::SUCCESS;
    let notify = gitward::notify::Notifications::start(&config.notify, Default::default());
    for unit in &config.units {
        let client = clusters.client(&unit.cluster).expect("every unit names a configured cluster").clone();
        let suspended = gitward::control::is_suspended(&client, unit).await;
        if args.revision.is_some() && !suspended {
            tracing::warn!(unit = %unit.name, "the unit is not suspended: the daemon applies its ref again at its next sync");
        }
        if suspended && args.revision.is_none() && !args.include_suspended {
            tracing::warn!(unit = %unit.name, "not synced: the unit is suspended (--include-suspended syncs it)");
            println!("{}", gitward::summary::suspended(&unit.name));
            continue;
        }
        let dependencies = gitward::status::dependencies(&clusters, unit).await?;
        if let Some(waiting) = gitward::status::unmet(&dependencies).filter(|_| !args.ignore_dependencies) {
            tracing::error!(unit = %unit.name, waiting_for = %waiting, "not synced: waiting for dependencies (--ignore-dependencies syncs anyway)");
            println!("{}", gitward::summary::blocked(&unit.name, &waiting));
            code = ExitCode::from(3);
            continue;
        }
        let mut engine = match Engine::new(client, config.cluster_of(unit), &config.daemon.state_dir, unit).await {
            Ok(engine) => engine,
            Err(e) => {
                tracing::error!(unit = %unit.name, error = %telemetry::unit_error(&unit.name, &e), "sync failed");
                println!("{}", gitward::summary::not_synced(&unit.name));
                code = ExitCode::from(2);
                continue;
            }
        };
        engine.one_shot();
        if args.allow_prune {
            engine.allow_prune_once();
        }
        let (events, written) = gitward::observe::events::Events::for_engine(&engine);
        let (log, stdout) = (gitward::observe::log::Log::default(), gitward::observe::stdout::Stdout);
        let watch = gitward::observe::notify::Watch::new(&notify, unit);
        let mut observers = Observers::default().with(log).with(stdout).with(events).with(watch);
        match engine.sync().await {
            Ok(report) => {
                let ok = finish(&mut engine, report, args.wait, &mut observers).await;
                if !ok && code == ExitCode::SUCCESS {
                    code = ExitCode::from(1);
                }
            }
            Err(e) => {
                let outcome = engine.fail(Cause::cli(), e, None, None).await;
                observers.finished(&outcome);
                code = ExitCode::from(2);
            }
        }
        // The Events queued for this unit are written before the next unit, within a bound.
        drop(observers);
        written.within(EVENTS_FLUSH).await;
    }
    notify.flush(EVENTS_FLUSH).await;
    Ok(code)
}

/// Tells `observers` of a one-shot sync's report, waits for health when asked (for what the
/// sync changed and the members an earlier sync left unhealthy; `wait="none"` when there is
/// nothing to wait for), has the engine finish it (post hooks, the result and the attempt
/// recorded on the ApplySet parent) and tells them its outcome; false when an object failed (a
/// hook included: one that failed or did not end within `health_timeout` fails the sync, as
/// `helm upgrade` fails) or `--wait` found the unit not healthy.
async fn finish(engine: &mut Engine, report: gitward::sync::Report, wait: bool, observers: &mut Observers) -> bool {
    use gitward::sync::HealthStep;
    let cause = Cause::cli();
    observers.applied(&cause, &report, engine.cache().len());
    let outcome = match engine.begin_health(report, cause, wait).await {
        HealthStep::Done(outcome) => *outcome,
        HealthStep::Wait(waiting) => {
            let (pending, mut wait) = *waiting;
            let timeout = engine.health_timeout();
            let unit = pending.report().unit.clone();
            let end =
                wait.run(timeout, |object, status| gitward::observe::log::log_health(&unit, object, status)).await;
            engine.finish(pending, &wait, Some(end), true).await
        }
    };
    observers.finished(&outcome);
    outcome.succeeded()
}

async fn status(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let config = load(&args.units).await?;
    let clusters = connect(&config).await?;
    let mut states = Vec::new();
    for unit in &config.units {
        let client = clusters.client(&unit.cluster).expect("every unit names a configured cluster");
        let mut state = gitward::status::unit_state(client, unit).await.map_err(|e| in_unit(&unit.name, &e))?;
        state.dependencies = gitward::status::dependencies(&clusters, unit).await?;
        states.push(state);
    }
    let sandbox = gitward::status::sandbox(config.render.sandbox);
    match args.output {
        Output::Text => println!("{}sandbox: {sandbox}", gitward::status::render_text(&states)),
        Output::Json => {
            let mut json: serde_json::Value =
                serde_json::from_str(&gitward::status::render_json(&states)).unwrap_or_default();
            json["sandbox"] = serde_json::Value::String(sandbox);
            println!("{}", serde_json::to_string_pretty(&json).unwrap_or_default());
        }
    }
    Ok(if states.iter().all(|s| s.healthy()) { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

async fn diff(args: UnitArgs) -> anyhow::Result<ExitCode> {
    let config = load(&args).await?;
    let clusters = connect(&config).await?;
    let mut changes = false;
    for unit in &config.units {
        let client = clusters.client(&unit.cluster).expect("every unit names a configured cluster").clone();
        let mut engine = Engine::new(client, config.cluster_of(unit), &config.daemon.state_dir, unit)
            .await
            .map_err(|e| in_unit(&unit.name, &e))?;
        engine.one_shot();
        let report = engine.diff(None).await.map_err(|e| in_unit(&unit.name, &e))?;
        // Masked: a label or an annotation of a decrypting render may hold a decrypted value,
        // and the live object the value the revision before decrypted.
        print!("{}", telemetry::mask::mask(&report.render()));
        for warning in &report.warnings {
            tracing::warn!(unit = %unit.name, warning = %warning, "inventory moved");
        }
        for (object, message) in &report.failed {
            tracing::warn!(unit = %unit.name, object = %object, reason = %message, "sync would fail this object");
        }
        changes |= report.has_changes();
        if !report.failed.is_empty() {
            return Ok(ExitCode::from(2));
        }
    }
    Ok(if changes { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// `gitward preview`: the report on stdout in the format asked; exit 0 no change, 1 changes,
/// 2 a unit could not be previewed.
async fn preview(args: PreviewArgs) -> anyhow::Result<ExitCode> {
    let config = gitward::sync::set::load(&args.config, None).await?;
    let clusters = connect(&config).await?;
    let request = gitward::preview::Request { revision: args.revision, base: args.base, units: args.units };
    let report = gitward::preview::preview(&config, &clusters, &request)
        .await
        .with_context(|| args.config.display().to_string())?;
    match args.output {
        PreviewOutput::Text => print!("{}", report.text()),
        PreviewOutput::Markdown => print!("{}", report.markdown()),
        PreviewOutput::Json => println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default()),
    }
    for u in &report.units {
        if let gitward::preview::UnitOutcome::Error { message } = &u.outcome {
            tracing::error!(unit = %u.unit, error = %message, "not previewed");
        }
    }
    Ok(ExitCode::from(report.exit_code()))
}

async fn validate(args: ValidateArgs) -> anyhow::Result<ExitCode> {
    // Every unit is read: a CRD, a Namespace or a duplicate of the one asked for may be in another.
    let scratch = tempfile::Builder::new().prefix("gitward-validate-").tempdir().context("temporary directory")?;
    let mut config = gitward::sync::set::load(&args.units.config, Some(scratch.path())).await?;
    gitward::daemon::run::check_ready_exprs(&config, &args.units.config)?;
    if let Some(name) = &args.units.unit {
        anyhow::ensure!(
            config.units.iter().any(|u| &u.name == name),
            "{}: no sync unit named {name}",
            args.units.config.display()
        );
    }
    if let Some(version) = &args.kube_version {
        for unit in &mut config.units {
            unit.render_tools.kube_version.clone_from(version);
        }
    }
    let results = gitward::validate::validate_units(&config.daemon.state_dir, scratch.path(), &config.units).await;
    let mut code = ExitCode::SUCCESS;
    let mut shown = Vec::new();
    for (unit, result) in config.units.iter().zip(&results) {
        let name = unit.name.as_str();
        if args.units.unit.as_ref().is_some_and(|only| only != name) {
            continue;
        }
        match result {
            Ok(summary) => {
                for problem in &summary.problems {
                    let object = problem.object.as_deref().unwrap_or_default();
                    tracing::error!(unit = name, file = %problem.origin, object = %object, reason = %problem.message, "invalid object");
                }
                for warning in &summary.warnings {
                    match &warning.object {
                        Some(object) => {
                            tracing::warn!(unit = name, file = %warning.origin, object = %object, reason = %warning.message, "object may fail")
                        }
                        // The one warning about a whole file, as `gitward sync` logs it.
                        None => {
                            tracing::warn!(unit = name, file = %warning.origin, reason = %warning.message, "kustomization file in a plain unit")
                        }
                    }
                }
                if summary.problems.is_empty() {
                    tracing::info!(unit = name, revision = %summary.revision, objects = summary.objects, "valid");
                } else {
                    code = ExitCode::from(2);
                }
                shown.push((name, Ok(summary)));
            }
            Err(e) => {
                let error = telemetry::unit_error(name, e);
                tracing::error!(unit = name, error = %error, "invalid");
                code = ExitCode::from(2);
                shown.push((name, Err(error.to_string())));
            }
        }
    }
    match args.output {
        Output::Text => {
            for (name, result) in &shown {
                match result {
                    Ok(summary) => println!("{}", gitward::summary::validate(name, summary)),
                    Err(_) => println!("{}", gitward::summary::unreadable(name)),
                }
            }
        }
        Output::Json => println!("{}", gitward::validate::render_json(&shown)),
    }
    drop(scratch);
    Ok(code)
}
