//! The path-unchanged rule answered by the repository's watch: when a unit rests under it
//! ([`quiet`]), and what it does with a revision a push left it ([`Event::Taken`]).

use super::*;
use TriggerKind::Push;

fn taken(to: &str) -> Event {
    Event::Taken(rev(to), later())
}

fn at(state: &State, last: &str, path_only: Option<&str>) -> bool {
    state.last_applied == Some(rev(last)) && state.path_only_at == path_only.map(rev)
}

#[test]
fn a_unit_rests_under_the_rule_only_idle_with_nothing_queued_after_a_path_only_sync() {
    let cases: [(&str, State, Option<&str>); 8] = [
        ("idle after a sync of the path alone", path_only(), Some("a")),
        ("idle after a sync that read more than the path", idle(), None),
        ("a unit without a push lane", State { path_only_at: Some(rev("a")), ..chart() }, None),
        ("backing off", drive(path_only(), vec![Event::RetryAt(retry_deadline())]), None),
        ("probing a push", drive(path_only(), vec![Event::Trigger(Some(t(Push)))]), None),
        ("a trigger queued", State { queued: Some(t(Push)), ..path_only() }, None),
        ("suspended", drive(path_only(), vec![Event::Suspend]), None),
        ("synced nothing yet", State { path_only_at: None, last_applied: None, ..path_only() }, None),
    ];
    let wrong: Vec<String> = cases
        .iter()
        .filter(|(_, state, want)| quiet(state) != want.map(rev).as_ref())
        .map(|(name, state, want)| format!("{name}: got {:?}, want {want:?}", quiet(state)))
        .collect();
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn a_revision_left_by_a_push_is_taken_as_applied_while_the_rule_holds() {
    check(&[
        row("a new revision that left the path alone is taken", path_only, || taken("b"), "idle", &[])
            .then(|s| at(s, "b", Some("b"))),
        row("the revision last applied changes nothing", path_only, || taken("a"), "idle", &[])
            .then(|s| at(s, "a", Some("a"))),
        row(
            "once the rule no longer holds, the push runs as a trigger",
            idle,
            || taken("b"),
            "fetching",
            &["Observe(push)", "Probe(a)"],
        )
        .then(|s| at(s, "a", None)),
    ]);
}
