//! Tests of `gitward status`: its text and JSON from a parent's record and the live members.

use super::*;
use crate::health::record::Waiting;

fn state(last: Option<SyncResult>, unhealthy: bool) -> UnitState {
    UnitState {
        unit: "app".into(),
        parent: "Secret/default/gitward-app".into(),
        applyset_id: "applyset-x-v1".into(),
        selector: Some("kubectl get deployments.apps -A -l applyset.kubernetes.io/part-of=applyset-x-v1".into()),
        last: last.map(|r| Record {
            revision: "3f2a".into(),
            applied_at: "2026-11-22T22:41:07Z".into(),
            result: r,
            waiting: None,
            path_tree: None,
        }),
        attempt: LastAttempt { last_attempted_revision: last.map(|_| "3f2a".into()), ..LastAttempt::default() },
        members: LiveMembers {
            objects: BTreeMap::from([("Deployment".to_string(), 1)]),
            health: Counts { healthy: usize::from(!unhealthy), progressing: 0, degraded: usize::from(unhealthy) },
            missing: 0,
            unhealthy: if unhealthy {
                vec![Unhealthy {
                    object: "Deployment/default/web".into(),
                    health: MemberHealth::Is(Health::Failed),
                    reason: "ProgressDeadlineExceeded".into(),
                    message: "timed out".into(),
                }]
            } else {
                Vec::new()
            },
        },
        suspended: None,
        dependencies: Vec::new(),
    }
}

#[test]
fn the_line_gives_result_revision_members_by_health_and_a_failed_attempt() {
    let mut u = state(Some(SyncResult::Degraded), true);
    u.last.as_mut().unwrap().revision = "3f2a9c1e0b7d".into();
    assert_eq!(line(&u), "app: degraded 3f2a9c1, applied 2026-11-22T22:41:07Z (1 object: 0 healthy, 1 degraded)");
    u.attempt.last_attempted_revision = Some("9c1e0b7d5a6c".into());
    u.attempt.last_error = Some("web.yaml: document 1: bad".into());
    u.members.missing = 1;
    assert!(line(&u).ends_with("(2 objects: 0 healthy, 1 degraded, 1 missing); 9c1e0b7 failed"), "{}", line(&u));
    assert_eq!(line(&state(None, false)), "app: never applied (1 object: 1 healthy)");
}

#[test]
fn healthy_needs_an_applied_revision_no_error_and_every_member_current() {
    assert!(state(Some(SyncResult::Healthy), false).healthy());
    assert!(state(Some(SyncResult::Progressing), false).healthy(), "live health wins over the record");
    assert!(!state(Some(SyncResult::Healthy), true).healthy());
    assert!(!state(Some(SyncResult::Failed), false).healthy());
    assert!(!state(None, false).healthy());
    let mut broken_head = state(Some(SyncResult::Healthy), false);
    broken_head.attempt.last_error = Some("a.yaml: document 1: bad".into());
    assert!(!broken_head.healthy(), "a revision at HEAD that does not parse is not healthy");
}

#[test]
fn text_names_each_unhealthy_object_with_its_reason() {
    let text = render_text(&[state(Some(SyncResult::Degraded), true)]);
    assert!(text.contains("  result     degraded\n"), "{text}");
    assert!(text.contains("  applyset   applyset-x-v1\n"), "{text}");
    assert!(
        text.contains("  select     kubectl get deployments.apps -A -l applyset.kubernetes.io/part-of=applyset-x-v1\n"),
        "{text}"
    );
    assert!(
        text.contains("  unhealthy  Deployment/default/web Failed ProgressDeadlineExceeded: timed out\n"),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_str(&render_json(&[state(None, false)])).unwrap();
    assert_eq!(json["units"][0]["last"], serde_json::Value::Null);
    assert_eq!(json["units"][0]["objects"]["Deployment"], 1);
    assert_eq!(json["units"][0]["applyset_id"], "applyset-x-v1");
}

#[test]
fn a_refused_prune_is_told_once() {
    let mut u = state(Some(SyncResult::Healthy), false);
    let reason = "prune refused: would delete 4 of 5 members (80%), over max_prune_fraction = 0.5";
    u.attempt.last_error = Some(reason.into());
    u.attempt.failed = (0..4)
        .map(|i| NotApplied {
            object: format!("ConfigMap/default/old-{i}"),
            action: "skipped".into(),
            reason: reason.into(),
        })
        .collect();
    let text = render_text(&[u]);
    assert_eq!(text.matches("over max_prune_fraction").count(), 1, "{text}");
    assert!(text.contains(&format!("  error      {reason}\n")), "{text}");
    assert!(text.contains("  skipped    ConfigMap/default/old-0: not pruned (the prune was refused)\n"), "{text}");
}

#[test]
fn text_shows_the_error_the_objects_not_applied_and_missing_members() {
    let mut u = state(Some(SyncResult::Failed), false);
    u.attempt.last_error = Some("1 object not applied: ConfigMap/default/x failed: denied".into());
    u.attempt.failed =
        vec![NotApplied { object: "ConfigMap/default/x".into(), action: "failed".into(), reason: "denied".into() }];
    u.members.missing = 1;
    u.members.unhealthy = vec![Unhealthy {
        object: "ConfigMap/default/y".into(),
        health: MemberHealth::Missing,
        reason: "NotFound".into(),
        message: "gone".into(),
    }];
    let text = render_text(&[u.clone()]);
    assert!(text.contains("  error      1 object not applied: ConfigMap/default/x failed: denied\n"), "{text}");
    assert!(text.contains("  failed     ConfigMap/default/x: denied\n"), "{text}");
    assert!(text.contains("  health     1 healthy, 0 progressing, 0 degraded, 1 missing\n"), "{text}");
    assert!(text.contains("  unhealthy  ConfigMap/default/y Missing NotFound: gone\n"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&render_json(&[u])).unwrap();
    assert_eq!(json["units"][0]["unhealthy"][0]["health"], "Missing");
    assert_eq!(json["units"][0]["failed"][0]["action"], "failed");
}

#[test]
fn the_headline_is_the_health_now_and_the_recorded_result_is_below_it() {
    // The last wait timed out (`progressing`); the Deployment has failed since.
    let mut u = state(Some(SyncResult::Progressing), true);
    assert!(line(&u).starts_with("app: degraded 3f2a, "), "{}", line(&u));
    assert!(render_text(&[u.clone()]).contains("  result     progressing\n"));
    // A wait in progress: `waiting`, and the result line says since when and for what.
    u.members.unhealthy.clear();
    u.members.health = Counts { healthy: 0, progressing: 1, degraded: 0 };
    u.last.as_mut().unwrap().waiting =
        Some(Waiting { since: "2026-11-22T22:41:08Z".into(), objects: "Deployment/default/web".into() });
    assert_eq!(u.now(), "waiting");
    assert!(!u.healthy());
    let text = render_text(&[u.clone()]);
    assert!(text.starts_with("app: waiting 3f2a, applied 2026-11-22T22:41:07Z"), "{text}");
    assert!(text.contains("  result     waiting (since 2026-11-22T22:41:08Z, for Deployment/default/web)\n"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&render_json(&[u])).unwrap();
    assert_eq!(json["units"][0]["now"], "waiting");
    assert_eq!(json["units"][0]["last"]["waiting"]["for"], "Deployment/default/web");
}

#[test]
fn a_ref_that_did_not_resolve_is_the_failed_attempt_not_the_applied_revision() {
    let mut u = state(Some(SyncResult::Healthy), false);
    u.attempt.last_attempted_revision = None;
    u.attempt.last_attempted_ref = Some("v9.9.9".into());
    u.attempt.last_error = Some("ref v9.9.9 not found".into());
    assert_eq!(
        line(&u),
        "app: failed 3f2a, applied 2026-11-22T22:41:07Z (1 object: 1 healthy); ref v9.9.9 (not resolved) failed"
    );
    let text = render_text(&[u]);
    assert!(text.contains("  result     healthy\n  attempted  ref v9.9.9 (not resolved)\n"), "{text}");
}

#[test]
fn a_unit_backing_off_says_until_when_beside_its_error() {
    let mut u = state(Some(SyncResult::Healthy), false);
    u.attempt.last_attempted_revision = None;
    u.attempt.last_attempted_ref = Some("main".into());
    u.attempt.last_error = Some("fetch from /srv/git/app failed".into());
    u.attempt.retry_at = Some("2999-01-01T00:00:00Z".into());
    assert!(
        line(&u).ends_with("; ref main (not resolved) failed; backing off until 2999-01-01T00:00:00Z"),
        "{}",
        line(&u)
    );
    let text = render_text(std::slice::from_ref(&u));
    assert!(
        text.contains("  error      fetch from /srv/git/app failed\n  retry at   2999-01-01T00:00:00Z\n"),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_str(&render_json(std::slice::from_ref(&u))).unwrap();
    assert_eq!(json["units"][0]["retry_at"], "2999-01-01T00:00:00Z");
    assert_eq!(json["units"][0]["now"], "failed");
    assert!(!u.healthy());
    u.attempt.retry_at = Some("2000-01-01T00:00:00Z".into());
    assert!(line(&u).ends_with("; retry due since 2000-01-01T00:00:00Z"), "a retry time passed: {}", line(&u));
    u.attempt.last_error = None;
    assert!(!line(&u).contains("retry"), "no error, no backoff: {}", line(&u));
    u.attempt.retry_at = None;
    let json: serde_json::Value = serde_json::from_str(&render_json(&[u])).unwrap();
    assert!(json["units"][0]["retry_at"].is_null());
}

#[test]
fn a_suspended_unit_says_so_in_its_line_and_block() {
    let state = UnitState {
        suspended: Some(Suspended { by: "ana@box".into(), at: Some("2026-11-28T04:40:00Z".into()) }),
        ..state(Some(SyncResult::Healthy), false)
    };
    assert!(line(&state).ends_with("; suspended"), "{}", line(&state));
    assert!(render_text(std::slice::from_ref(&state)).contains("  suspended  by ana@box at 2026-11-28T04:40:00Z\n"));
    let json: serde_json::Value = serde_json::from_str(&render_json(&[state])).unwrap();
    assert_eq!(json["units"][0]["suspended"]["by"], "ana@box");
}

#[test]
fn a_unit_waiting_for_its_dependencies_names_them() {
    let state = UnitState {
        dependencies: vec![
            DependencyState { unit: "crds".into(), ready: true, reason: None },
            DependencyState { unit: "base".into(), ready: false, reason: Some("not healthy (progressing)".into()) },
        ],
        ..state(Some(SyncResult::Healthy), false)
    };
    assert!(line(&state).ends_with("; waiting for dependencies: base: not healthy (progressing)"), "{}", line(&state));
    let text = render_text(std::slice::from_ref(&state));
    assert!(text.contains("  depends    crds: ready\n  depends    base: not healthy (progressing)\n"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&render_json(&[state])).unwrap();
    assert_eq!(json["units"][0]["dependencies"][1]["ready"], false);
    assert_eq!(json["units"][0]["dependencies"][1]["reason"], "not healthy (progressing)");
}

#[test]
fn the_json_gives_every_field_of_a_unit_at_its_top_level() {
    let json: serde_json::Value = serde_json::from_str(&render_json(&[state(None, false)])).unwrap();
    let mut keys: Vec<&str> = json["units"][0].as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    let expected = [
        "applyset_id",
        "dependencies",
        "failed",
        "health",
        "last",
        "last_attempted_ref",
        "last_attempted_revision",
        "last_error",
        "missing",
        "now",
        "objects",
        "parent",
        "retry_at",
        "selector",
        "suspended",
        "unhealthy",
        "unit",
    ];
    assert_eq!(keys, expected);
}
