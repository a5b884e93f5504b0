//! `gitward run`: two pushes synced by the daemon leave two attestations, the second chained to
//! the first, which `gitward attest verify` accepts from the journal and from the cluster.

use std::time::Duration;

use gitward::sync::provenance::dsse;

use super::{Fixture, statement};
use crate::common;

#[tokio::test]
async fn two_pushes_synced_by_the_daemon_leave_two_chained_attestations() {
    let fixture = Fixture::new("prov-daemon", 15).await;
    fixture.repo.push(&[("a.yaml", &common::cm("a", "1"))], "a is 1");
    let daemon = common::Daemon::ready(&fixture.config, fixture.port, Duration::from_secs(60)).await;
    let kept = |n: usize| {
        let fixture = &fixture;
        move || async move { fixture.kept().await.len() == n }
    };
    assert!(common::eventually(Duration::from_secs(60), kept(1)).await, "first: {}", daemon.log_text());
    fixture.repo.push(&[("a.yaml", &common::cm("a", "2"))], "a is 2");
    assert!(common::eventually(Duration::from_secs(60), kept(2)).await, "second: {}", daemon.log_text());
    let envelopes = fixture.kept().await;
    let second = statement(&envelopes[1]);
    assert_eq!(second.predicate.previous.map(|d| d.sha256), Some(dsse::digest(&envelopes[0])));
    assert_eq!(second.predicate.changes.configured, [format!("ConfigMap/{}/a", fixture.env.namespace)]);
    assert_eq!(second.predicate.health, "healthy", "judged after the daemon's health wait");
    let (code, out) = fixture.verify(&[fixture.journal().to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}");
    let (code, out) = fixture.verify(&["--config", fixture.config.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}");
}
