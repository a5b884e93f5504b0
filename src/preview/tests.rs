use super::*;

fn changed(refused: Option<&str>, failed: bool) -> UnitPreview {
    let mut merge = vec![MergeEntry {
        object: "ConfigMap/a/settings".into(),
        action: MergeAction::Configure,
        diff: "--- live/ConfigMap/a/settings\n+++ merged/ConfigMap/a/settings\n-  mode: old\n+  mode: new\n".into(),
    }];
    if failed {
        merge.push(MergeEntry {
            object: "Role/a/admin".into(),
            action: MergeAction::WouldFail,
            diff: "roles.rbac.authorization.k8s.io \"admin\" is forbidden".into(),
        });
    }
    let changes = UnitChanges {
        base: Some("fedcba9876543210fedcba9876543210fedcba98".into()),
        revision: "0123456789abcdef0123456789abcdef01234567".into(),
        digests: (Some("a".repeat(64)), "b".repeat(64)),
        merge,
        unchanged: 8,
        effect: vec![EffectEntry {
            object: "ConfigMap/a/settings".into(),
            kind: EffectKind::Changed,
            diff: String::new(),
        }],
        drift: vec![MergeEntry {
            object: "ConfigMap/a/other".into(),
            action: MergeAction::Configure,
            diff: "-  hand: edit\n".into(),
        }],
        prune: PruneView { refused: refused.map(str::to_owned), ..PruneView::default() },
        warnings: Vec::new(),
    };
    UnitPreview { unit: "app".into(), outcome: UnitOutcome::Changed(Box::new(changes)) }
}

fn report(units: Vec<UnitPreview>) -> PreviewReport {
    PreviewReport { revision: "0123456789abcdef0123456789abcdef01234567".into(), units, sets: Vec::new() }
}

fn unchanged(name: &str) -> UnitPreview {
    UnitPreview { unit: name.into(), outcome: UnitOutcome::Unchanged { digest: "c".repeat(64) } }
}

#[test]
fn the_markdown_starts_with_the_marker_and_holds_a_table_and_diff_blocks() {
    let md = report(vec![changed(None, false), unchanged("web")]).markdown();
    assert!(md.starts_with("<!-- gitward-preview -->\n## gitward preview of `0123456`"), "{md}");
    assert!(md.contains("Status: ✅ changes, none failing"), "{md}");
    assert!(md.contains("| `app` | 0 | 1 | 0 | 0 | 1 | 0 | 0 | 1 |"), "{md}");
    assert!(md.contains("| `web` | unchanged |"), "{md}");
    assert!(md.contains("<details><summary>app: fedcba9 → 0123456</summary>\n\n```diff\nmerge would do:\n"), "{md}");
    assert!(md.contains("+  mode: new\n"), "{md}");
    assert!(md.contains("drift (the live cluster differs"), "{md}");
    assert_eq!(md.matches("```").count() % 2, 0, "fences are closed: {md}");
}

#[test]
fn a_refused_prune_or_a_failing_object_makes_the_report_failing() {
    let ok = report(vec![changed(None, false)]);
    assert!(!ok.failing() && ok.has_changes());
    assert_eq!(ok.exit_code(), 1);
    let refused = report(vec![changed(Some("would prune 8 of 10 members, over max_prune_fraction 0.5"), false)]);
    assert!(refused.failing());
    let md = refused.markdown();
    assert!(md.contains("Status: ❌ **failure**") && md.contains("| refused | 1 |"), "{md}");
    assert!(md.contains("prune refused: would prune 8 of 10"), "{md}");
    let failed = report(vec![changed(None, true)]);
    assert!(failed.failing());
    let text = failed.text();
    assert!(
        text.contains("would fail:\n  Role/a/admin: roles.rbac.authorization.k8s.io \"admin\" is forbidden"),
        "{text}"
    );
    assert!(text.ends_with("status: failure (a merge would fail objects or the prune guard would refuse)\n"), "{text}");
}

#[test]
fn unchanged_units_are_one_line_and_no_change_exits_zero() {
    let r = report(vec![unchanged("a"), unchanged("b")]);
    assert_eq!(r.text(), "unchanged: a, b\n");
    assert!(!r.has_changes() && !r.failing());
    assert_eq!(r.exit_code(), 0);
    let err = report(vec![UnitPreview { unit: "c".into(), outcome: UnitOutcome::Error { message: "boom".into() } }]);
    assert_eq!(err.exit_code(), 2);
}

#[test]
fn a_fence_in_a_value_cannot_close_the_block() {
    let mut unit = changed(None, false);
    if let UnitOutcome::Changed(c) = &mut unit.outcome {
        c.merge[0].diff.push_str("+  script: |\n+    ```\n");
    }
    let md = report(vec![unit]).markdown();
    assert_eq!(md.matches("```").count(), 2, "{md}");
}

#[test]
fn the_json_names_the_outcome_of_each_unit() {
    let json = serde_json::to_value(report(vec![changed(None, false), unchanged("web")])).unwrap_or_default();
    assert_eq!(json["units"][0]["outcome"], "changed");
    assert_eq!(json["units"][0]["merge"][0]["action"], "configure");
    assert_eq!(json["units"][1]["outcome"], "unchanged");
}

#[test]
fn units_come_after_the_units_they_depend_on() {
    let unit = |name: &str, deps: &[&str]| {
        let mut u = SyncUnit::new(name, "/repo");
        u.depends_on = deps
            .iter()
            .map(|d| crate::config::Dependency {
                unit: d.to_string(),
                ready_expr: None,
                inventory: SyncUnit::new(*d, "/repo").inventory,
                cluster: u.cluster.clone(),
                same_source: true,
                path: u.path.clone(),
            })
            .collect();
        u
    };
    let (app, db, net, web) = (unit("app", &["db"]), unit("db", &["net"]), unit("net", &[]), unit("web", &["x"]));
    let names: Vec<&str> =
        in_dependency_order(vec![&app, &db, &net, &web]).into_iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["net", "db", "app", "web"], "a dependency not previewed does not hold a unit back");
}
