//! What `gitward status` prints of the units it read: the one stdout line of a unit, the
//! human-readable report, the JSON report, and the render sandbox line printed after them.

use std::fmt::Write as _;

use super::{MemberHealth, UnitState, unmet};

/// The line of `gitward status` for a unit, in the form of the stdout lines of `sync` and
/// `validate`: the unit's state now ([`UnitState::now`]), the recorded revision, when it was
/// applied, its members by health, and what the last attempt tried when it failed
/// (`; 9c1e0b7 failed`, `; ref v9.9.9 (not resolved) failed`), then when the daemon tries
/// again (`; backing off until 2026-11-22T22:43:07Z`, [`backoff`]).
pub fn line(state: &UnitState) -> String {
    // The members live and those recorded but missing: each counted once, in one health.
    let total: usize = state.members.objects.values().sum::<usize>() + state.members.missing;
    let h = state.members.health;
    let mut health = vec![format!("{} healthy", h.healthy)];
    if h.progressing > 0 {
        health.push(format!("{} progressing", h.progressing));
    }
    if h.degraded > 0 {
        health.push(format!("{} degraded", h.degraded));
    }
    if state.members.missing > 0 {
        health.push(format!("{} missing", state.members.missing));
    }
    let noun = if total == 1 { "object" } else { "objects" };
    let members = format!("{total} {noun}: {}", health.join(", "));
    let line = match &state.last {
        Some(r) => {
            format!("{}: {} {}, applied {} ({members})", state.unit, state.now(), short(&r.revision), r.applied_at)
        }
        None => format!("{}: never applied ({members})", state.unit),
    };
    let attempted = match (&state.attempt.last_attempted_revision, state.attempted()) {
        (Some(revision), _) => Some(short(revision).to_string()),
        (None, other) => other,
    };
    let line = match attempted {
        Some(attempted) if state.attempt.last_error.is_some() => format!("{line}; {attempted} failed"),
        _ if state.attempt.last_error.is_some() => format!("{line}; the last attempt failed"),
        _ => line,
    };
    let line = match backoff(state) {
        Some(backoff) => format!("{line}; {backoff}"),
        None => line,
    };
    let line = if state.suspended.is_some() { format!("{line}; suspended") } else { line };
    match unmet(&state.dependencies) {
        Some(waiting) => format!("{line}; waiting for dependencies: {waiting}"),
        None => line,
    }
}

/// What the line says of the daemon's retry after a failed attempt: `backing off until <T>`
/// while `T` (`gitward.dev/retry-at`) is ahead, `retry due since <T>` once it passed (the
/// retry runs, or no daemon runs the unit); `None` without an error or a retry time.
fn backoff(state: &UnitState) -> Option<String> {
    let at = state.attempt.retry_at.as_deref().filter(|_| state.attempt.last_error.is_some())?;
    let ahead = at.parse::<jiff::Timestamp>().is_ok_and(|t| t > jiff::Timestamp::now());
    Some(if ahead { format!("backing off until {at}") } else { format!("retry due since {at}") })
}

/// A revision's short form, as the other stdout lines print it
/// ([`crate::source::short_revision`]).
fn short(revision: &str) -> String {
    crate::source::short_revision(revision)
}

/// The human-readable report of `units`, one block per unit, headed by its line of
/// [`line()`] (`attempted`, `error` and the `failed`/`skipped`/`conflict` lines
/// only when the parent records them; `result` is `waiting (since <time>, for <objects>)`
/// while the parent records a health wait in progress, and `attempted` may be
/// `ref v9.9.9 (not resolved)`):
///
/// ```text
/// app: degraded 3f2a9c1, applied 2026-11-22T22:41:07Z (2 objects: 1 healthy, 1 degraded)
///   parent     Secret/shop/gitward-app
///   applyset   applyset-JqJ9Yc2DkxWZbyFhHhnG0nTqB0yF5bF0Z6jUeBBt7Yk-v1
///   select     kubectl get configmaps,deployments.apps -A -l applyset.kubernetes.io/part-of=applyset-JqJ9Yc2DkxWZbyFhHhnG0nTqB0yF5bF0Z6jUeBBt7Yk-v1
///   revision   3f2a9c1e0b7d5a6c8e9f0a1b2c3d4e5f60718293
///   applied    2026-11-22T22:41:07Z
///   result     degraded
///   attempted  9c1e0b7d5a6c8e9f0a1b2c3d4e5f607182933f2a
///   error      web.yaml: document 1: …
///   objects    ConfigMap 1, Deployment 1
///   health     1 healthy, 0 progressing, 1 degraded
///   unhealthy  Deployment/shop/web Failed ProgressDeadlineExceeded: ReplicaSet "web-5d9c" has timed out progressing.
/// ```
pub fn render_text(units: &[UnitState]) -> String {
    let mut out = String::new();
    for u in units {
        let _ = writeln!(out, "{}", line(u));
        let _ = writeln!(out, "  parent     {}", u.parent);
        let _ = writeln!(out, "  applyset   {}", u.applyset_id);
        if let Some(s) = &u.suspended {
            let at = s.at.as_deref().map(|at| format!(" at {at}")).unwrap_or_default();
            let _ = writeln!(out, "  suspended  by {}{at}", s.by);
        }
        if let Some(selector) = &u.selector {
            let _ = writeln!(out, "  select     {selector}");
        }
        for d in &u.dependencies {
            let _ = writeln!(out, "  depends    {}: {}", d.unit, d.reason.as_deref().unwrap_or("ready"));
        }
        match &u.last {
            Some(r) => {
                let _ = writeln!(out, "  revision   {}", r.revision);
                let _ = writeln!(out, "  applied    {}", r.applied_at);
                match &r.waiting {
                    Some(waiting) => {
                        let _ = writeln!(out, "  result     {waiting}");
                    }
                    None => {
                        let _ = writeln!(out, "  result     {}", r.result);
                    }
                }
            }
            None => {
                let _ = writeln!(out, "  revision   - (never applied)");
            }
        }
        // The revision last tried, when it is not the one applied (or it failed).
        let (applied, failed) = (u.last.as_ref().map(|r| r.revision.as_str()), u.attempt.last_error.is_some());
        if let Some(attempted) = u.attempted().filter(|a| Some(a.as_str()) != applied || failed) {
            let _ = writeln!(out, "  attempted  {attempted}");
        }
        if let Some(error) = &u.attempt.last_error {
            let _ = writeln!(out, "  error      {error}");
            if let Some(at) = &u.attempt.retry_at {
                let _ = writeln!(out, "  retry at   {at}");
            }
        }
        // A refused prune skips each member it would have deleted with the same sentence; the
        // error line says it once, so those members are listed without it.
        let prune_told = u.attempt.last_error.as_deref().is_some_and(|e| e.starts_with("prune refused"));
        for f in &u.attempt.failed {
            let reason = match prune_told && f.reason.starts_with("prune refused") {
                true => "not pruned (the prune was refused)",
                false => f.reason.as_str(),
            };
            let _ = writeln!(out, "  {:<9}  {}: {reason}", f.action, f.object);
        }
        let objects: Vec<String> = u.members.objects.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let objects = if objects.is_empty() { "-".to_string() } else { objects.join(", ") };
        let _ = writeln!(out, "  objects    {objects}");
        let h = u.members.health;
        let missing = if u.members.missing > 0 { format!(", {} missing", u.members.missing) } else { String::new() };
        let _ = writeln!(
            out,
            "  health     {} healthy, {} progressing, {} degraded{missing}",
            h.healthy, h.progressing, h.degraded
        );
        for x in &u.members.unhealthy {
            if x.health == MemberHealth::NotCreated {
                let _ = writeln!(out, "  unhealthy  {} NotCreated: {}", x.object, x.message);
                continue;
            }
            let detail = match (x.reason.is_empty(), x.message.is_empty()) {
                (false, false) => format!("{}: {}", x.reason, x.message),
                (false, true) => x.reason.clone(),
                _ => x.message.clone(),
            };
            let _ = writeln!(out, "  unhealthy  {} {} {detail}", x.object, x.health);
        }
    }
    out
}

/// The JSON report of `units`: `{"units": [{"unit", "now", "parent", "applyset_id",
/// "selector", "last": {"revision", "applied_at", "result", "waiting": {"since", "for"} |
/// null} | null, "last_attempted_revision", "last_attempted_ref", "last_error", "failed":
/// [{"object", "action", "reason"}], "retry_at" (RFC 3339, or null), "objects": {Kind: n},
/// "health": {"healthy", "progressing", "degraded"}, "missing", "unhealthy": [{"object",
/// "health", "reason", "message"}], "dependencies": [{"unit", "ready", "reason"}]}]}`; `now` is [`UnitState::now`]; `health` of an unhealthy member is a kstatus
/// name, `NotCreated` (its `message` the recorded failure) or `Missing`.
pub fn render_json(units: &[UnitState]) -> String {
    let units: Vec<serde_json::Value> = units
        .iter()
        .map(|u| {
            let mut v = serde_json::to_value(u).unwrap_or_default();
            v["now"] = serde_json::Value::String(u.now().to_string());
            v
        })
        .collect();
    serde_json::to_string_pretty(&serde_json::json!({ "units": units })).unwrap_or_default()
}

/// The render sandbox this process would run tools in with `mode`, as `/readyz` shows it:
/// `landlock ABI 7, user, network and PID namespaces`, `off (…)` or `unavailable: <what the
/// kernel lacks>`
/// ([`crate::render::sandbox::state`]). `gitward status` prints it after the units (text:
/// a last line `sandbox: …`; JSON: the top-level `sandbox` field).
pub fn sandbox(mode: crate::config::SandboxMode) -> String {
    crate::render::sandbox::state(mode)
}
