//! `[provenance] oci_referrers`: each attestation of a unit whose source is in an OCI
//! registry, once kept, also pushed there as an OCI 1.1 referrer of the manifest the sync
//! applied: an OCI artifact's manifest (`source::artifact::Artifact::attach`), or for a chart
//! unit whose `[sync.helm] repo_url` is `oci://…` the manifest of the applied version's tag,
//! once its chart layer is checked to be the revision's (`source::chart::ChartSpec::attach`).
//! artifactType [`ARTIFACT_TYPE`], one layer of [`LAYER_MEDIA_TYPE`] holding the envelope
//! exactly as the journal's line, with the unit's registry credentials and the transport
//! rules of its fetch. A chart from an HTTP chart repository has no manifest: its
//! attestations are not pushed. A push that fails is a warning naming the registry
//! reference, counted by [`referrers_total`]; the sync stands, and the ConfigMap and the
//! journal stay the record.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use tracing::{debug, warn};

use crate::config::SyncUnit;
use crate::source::artifact::{Artifact, Attached, Referrer};
use crate::source::chart::ChartSpec;

/// The referrer manifest's `artifactType`: an in-toto attestation, as the envelope's own
/// payloadType names it.
pub const ARTIFACT_TYPE: &str = "application/vnd.in-toto+json";

/// The media type of the referrer's one layer, the DSSE envelope (as cosign stores
/// attestations).
pub const LAYER_MEDIA_TYPE: &str = "application/vnd.dsse.envelope.v1+json";

/// The layer annotation naming the Statement's predicateType (as cosign writes it).
const PREDICATE_ANNOTATION: &str = "in-toto.io/predicate-type";

/// Attestations pushed as referrers by this process: (pushed, failed).
static PUSHES: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

/// How many attestations this process pushed to registries as referrers, and how many pushes
/// failed: `gitward_attestation_referrers_total{result="pushed"|"failed"}`.
pub fn referrers_total() -> (u64, u64) {
    let [pushed, failed] = &PUSHES;
    (pushed.load(Ordering::Relaxed), failed.load(Ordering::Relaxed))
}

/// Where a unit's attestations are pushed.
pub(super) struct Referrers {
    unit: String,
    target: Target,
}

/// The registry side of a unit, by its kind.
enum Target {
    /// An OCI artifact unit: its artifact's repository.
    Artifact(Box<Artifact>),
    /// A chart unit whose chart is in an OCI registry: the chart's repository.
    Chart(Box<ChartSpec>),
}

impl Referrers {
    /// The referrers of `unit` when `[provenance] oci_referrers` is set and its source is in
    /// an OCI registry: an OCI artifact (`repo = "oci://…"`, no chart) or an OCI chart
    /// (`[sync.helm] repo_url = "oci://…"`); `None` otherwise (a git unit; a chart from an
    /// HTTP chart repository, which has no manifest to attach to).
    pub(super) fn new(unit: &SyncUnit) -> Option<Self> {
        if !unit.provenance.as_ref().is_some_and(|p| p.oci_referrers) {
            return None;
        }
        if let Some(chart) = crate::sync::repo::chart_spec(unit) {
            if !chart.source.is_oci() {
                debug!(unit = %unit.name, "a chart from an HTTP chart repository: attestations are not pushed as referrers");
                return None;
            }
            return Some(Self { unit: unit.name.clone(), target: Target::Chart(Box::new(chart)) });
        }
        if !unit.repo.starts_with("oci://") {
            return None;
        }
        match Artifact::new(crate::sync::repo::artifact_spec(unit)) {
            Ok(artifact) => Some(Self { unit: unit.name.clone(), target: Target::Artifact(Box::new(artifact)) }),
            Err(e) => {
                let error = crate::telemetry::error_chain(&e);
                warn!(unit = %unit.name, error, "attestations will not be pushed as referrers");
                None
            }
        }
    }

    /// Pushes `line`, the envelope of the sync of `revision` (an artifact's
    /// `<tag>@sha256:<hex>`, a chart's `<chart>@<version>@sha256:<hex>`), as a referrer of the
    /// manifest applied; a failure is logged and counted, never returned.
    pub(super) async fn push(&self, revision: &str, line: &str) {
        let created = jiff::Timestamp::now().to_string();
        let annotations = BTreeMap::from([
            ("org.opencontainers.image.created".to_owned(), created),
            (PREDICATE_ANNOTATION.to_owned(), super::statement::PREDICATE_TYPE.to_owned()),
            ("dev.gitward.unit".to_owned(), self.unit.clone()),
        ]);
        let referrer = Referrer {
            artifact_type: ARTIFACT_TYPE,
            media_type: LAYER_MEDIA_TYPE,
            content: line.as_bytes(),
            annotations,
        };
        let (reference, attached) = match &self.target {
            Target::Artifact(artifact) => {
                let Some(hex) = revision.rsplit_once("sha256:").map(|(_, hex)| hex) else {
                    warn!(unit = %self.unit, revision, "the revision names no manifest digest: no referrer pushed");
                    PUSHES[1].fetch_add(1, Ordering::Relaxed);
                    return;
                };
                let subject = format!("sha256:{hex}");
                (artifact.reference(&subject), artifact.attach(&subject, referrer).await)
            }
            Target::Chart(chart) => (chart.manifest_reference(revision), chart.attach(revision, referrer).await),
        };
        self.count(&reference, attached);
    }

    /// Logs and counts one push's result.
    fn count(&self, reference: &str, attached: crate::source::Result<Attached>) {
        match attached {
            Ok(attached) => {
                PUSHES[0].fetch_add(1, Ordering::Relaxed);
                let fallback_tag = attached.fallback_tag.as_deref().unwrap_or("");
                debug!(unit = %self.unit, referrer = %attached.reference, fallback_tag, "attestation pushed as a referrer");
            }
            Err(e) => {
                PUSHES[1].fetch_add(1, Ordering::Relaxed);
                let error = crate::telemetry::error_chain(&e);
                warn!(unit = %self.unit, reference, error, "could not push the attestation as a referrer");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::Config;

    fn units(port: u16, referrers: bool) -> Vec<std::sync::Arc<SyncUnit>> {
        let text = format!(
            "[provenance]\nkey_file = \"p.pem\"\noci_referrers = {referrers}\n\n\
             [render]\nchart_repositories = [\"oci://127.0.0.1:{port}/m\"]\n\n\
             [[sync]]\nname = \"art\"\nrepo = \"oci://127.0.0.1:{port}/m/app:v1\"\n\n\
             [[sync]]\nname = \"git\"\nrepo = \"https://git.example.com/shop.git\"\n\n\
             [[sync]]\nname = \"oci-chart\"\nnamespace = \"shop\"\n[sync.helm]\n\
             repo_url = \"oci://127.0.0.1:{port}/m\"\nchart = \"demo\"\nrelease = \"shop\"\n\n\
             [[sync]]\nname = \"http-chart\"\nnamespace = \"shop\"\n[sync.helm]\n\
             repo_url = \"https://charts.example.com\"\nchart = \"demo\"\nrelease = \"shop\"\n"
        );
        let config = Config::from_toml(&text, Path::new("/etc/gitward"), "config.toml").unwrap();
        config.units.into_iter().map(std::sync::Arc::new).collect()
    }

    /// Only an artifact unit or an OCI chart unit with `oci_referrers` pushes; a push to a
    /// registry that is down is counted as failed and returns, the sync's result untouched.
    #[tokio::test]
    async fn only_units_from_a_registry_push_and_a_failed_push_is_counted_not_returned() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let off = units(port, false);
        assert!(Referrers::new(&off[0]).is_none(), "oci_referrers is off");
        let on = units(port, true);
        assert!(Referrers::new(&on[1]).is_none(), "a git unit has no registry");
        let referrers = Referrers::new(&on[0]).expect("an artifact unit with oci_referrers");
        let (pushed, failed) = referrers_total();
        referrers.push(&format!("v1@sha256:{}", "0".repeat(64)), "{}").await;
        assert_eq!(referrers_total(), (pushed, failed + 1));
        assert!(Referrers::new(&on[3]).is_none(), "an HTTP chart repository has no manifest");
        let chart = Referrers::new(&on[2]).expect("an OCI chart unit with oci_referrers");
        let Target::Chart(spec) = &chart.target else { panic!("a chart unit's target is its chart") };
        let revision = format!("demo@1.0.0+b@sha256:{}", "0".repeat(64));
        assert_eq!(spec.manifest_reference(&revision), format!("oci://127.0.0.1:{port}/m/demo:1.0.0_b"));
        chart.push(&revision, "{}").await;
        assert_eq!(referrers_total(), (pushed, failed + 2));
    }
}
