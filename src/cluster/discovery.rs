//! Discovery of only the kinds found in git: `apiVersion` + `kind` → resource and scope.
//!
//! One request per group-version (`/api/v1`, `/apis/<group>/<version>`), kept for the life of
//! the process, except that a kind missing from an answer older than [`STALE_AFTER`] asks
//! again and a group's preferred version is trusted for [`PREFERRED_TTL`]. In the daemon the
//! answers are the cluster's ([`Answers`]): a unit takes what another unit of its cluster
//! learned instead of asking again, so a fleet asks once per group-version, not once per unit. An unknown kind is not an error here: it is `None`, and the engine decides
//! (a CRD of the same revision may define it; [`Discovery::forget`] drops a group-version
//! after CRDs are applied so the next lookup asks again). A full discovery (`Discovery::run`)
//! is avoided on purpose: it fails whole when one aggregated API is down (DESIGN.md, Libraries).
//!
//! [`helm_capabilities`] is the one exception, for Helm units only: every served group version,
//! what `helm template` is told about the cluster, handed to the renderer as data; read from
//! aggregated discovery, with group versions that are unavailable (an APIService down) left out.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use kube::core::GroupVersion;

use internment::ArcIntern;
use kube::discovery::{ApiResource, Scope, oneshot};

use super::{Error, Result, is_status};
use crate::render::Capabilities;

/// How old a group-version's answer must be before an unknown kind in it is asked about again.
pub const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(10);

/// How long a group's preferred version is trusted: a CRD's versions change, and a version no
/// longer served must not make its members look deleted.
pub const PREFERRED_TTL: std::time::Duration = std::time::Duration::from_secs(300);

/// How long a kind whose CRD is Established may take to appear in discovery before its
/// objects fail as "not served" ([`Discovery::resolve_new`]).
pub const NEW_KIND_WITHIN: std::time::Duration = std::time::Duration::from_secs(15);

/// A resolved kind.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// Group, version, kind and plural; one shared copy per kind, so the desired objects of a
    /// kind hold a pointer each rather than five strings.
    pub resource: Arc<ApiResource>,
    /// True for namespaced kinds.
    pub namespaced: bool,
}

/// The kinds one group-version serves, each with whether it is namespaced: what
/// [`Discovery::known`] reads of an answer (its subresources and verbs are dropped). Interned
/// process-wide (`internment`'s `ArcIntern`, freed with its last holder): every unit's engine
/// asks for itself, and the units of a cluster that got the same answer hold one copy of it
/// (at 1,000 units each held ~15 KiB of `/api/v1` before; `benches/RESULTS.md`, "Fleet").
type Kinds = ArcIntern<Vec<(Arc<ApiResource>, bool)>>;

/// The answers of one cluster's discovery, shared by the daemon's units of that cluster
/// ([`Discovery::share`]): group-version → the kinds it serves and when that was learned.
/// Cheap to clone (one shared map).
#[derive(Debug, Clone, Default)]
pub struct Answers(Arc<Mutex<HashMap<String, (Kinds, Instant)>>>);

impl Answers {
    /// The answer for `api_version` and when it was learned, if any unit learned one.
    fn get(&self, api_version: &str) -> Option<(Kinds, Instant)> {
        self.0.lock().expect("discovery answers lock").get(api_version).cloned()
    }

    /// Keeps `kinds`, learned at `at`, as the answer for `api_version` unless a newer one is
    /// kept already.
    fn put(&self, api_version: &str, kinds: &Kinds, at: Instant) {
        let mut answers = self.0.lock().expect("discovery answers lock");
        match answers.get(api_version) {
            Some((_, kept)) if *kept >= at => {}
            _ => {
                answers.insert(api_version.to_owned(), (kinds.clone(), at));
            }
        }
    }
}

/// The discovery cache: group-version → the kinds it serves.
#[derive(Debug, Default)]
pub struct Discovery {
    groups: HashMap<String, Kinds>,
    /// The cluster's answers, taken before asking and given what this cache learns.
    shared: Option<Answers>,
    /// Group-version → an answer of the cluster's is taken only when learned after this: set
    /// by [`Discovery::forget`] (now: a CRD was applied) and [`Discovery::forget_stale`]
    /// ([`STALE_AFTER`] ago).
    not_before: HashMap<String, Instant>,
    /// Group → its preferred version and when that was learned ([`PREFERRED_TTL`]).
    preferred: HashMap<crate::object::Atom, (String, Instant)>,
    fetched: HashMap<String, Instant>,
    /// `GET /api/v1` was asked after a group-version's 404 ([`Discovery::check_core`]): once
    /// per cache, not once per poll for a CRD's new kind.
    core_checked: bool,
    /// Discovery requests sent, for the change set's request count and tests.
    pub requests: usize,
}

impl Discovery {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the answers of `answers` (the cluster's, shared by its units) before asking the
    /// API server, and gives them what this cache learns.
    pub fn share(&mut self, answers: &Answers) {
        self.shared = Some(answers.clone());
    }

    /// Takes the cluster's answer for `api_version` when there is one learned after what this
    /// cache forgot of it; true when it did.
    fn take_shared(&mut self, api_version: &str) -> bool {
        let Some((kinds, at)) = self.shared.as_ref().and_then(|shared| shared.get(api_version)) else {
            return false;
        };
        if self.not_before.get(api_version).is_some_and(|not_before| at <= *not_before) {
            return false;
        }
        self.groups.insert(api_version.to_owned(), kinds);
        self.fetched.insert(api_version.to_owned(), at);
        true
    }

    /// Resolves `kind` in `api_version` (`v1`, `apps/v1`); `Ok(None)` when the server does not
    /// serve it (404 on the group-version, or the kind absent from it).
    ///
    /// Errors: [`Error::DiscoveryFailed`] for any other API failure (retry with backoff).
    pub async fn resolve(&mut self, client: &kube::Client, api_version: &str, kind: &str) -> Result<Option<Resolved>> {
        if !self.groups.contains_key(api_version) && !self.take_shared(api_version) {
            let gv: GroupVersion =
                api_version.parse().map_err(|e: kube::core::gvk::ParseGroupVersionError| Error::DiscoveryFailed {
                    group_version: api_version.to_string(),
                    source: kube::Error::Service(e.into()),
                })?;
            self.requests += 1;
            let resources = match oneshot::pinned_group(client, &gv).await {
                Ok(group) => group.versioned_resources(&gv.version),
                Err(e) if is_status(&e, 404) => {
                    self.check_core(client).await?;
                    Vec::new()
                }
                Err(source) => return Err(Error::DiscoveryFailed { group_version: api_version.to_string(), source }),
            };
            let kinds = resources.into_iter().map(|(ar, c)| (Arc::new(ar), c.scope == Scope::Namespaced)).collect();
            let (kinds, now) = (ArcIntern::new(kinds), Instant::now());
            if let Some(shared) = &self.shared {
                shared.put(api_version, &kinds, now);
            }
            self.groups.insert(api_version.to_string(), kinds);
            self.fetched.insert(api_version.to_string(), now);
        }
        Ok(self.known(api_version, kind))
    }

    /// After a 404 for a named group-version, asks `GET /api/v1` once per cache (none when its
    /// answer is known): every API server serves it, and the client's layer refuses an answer no API
    /// server gives ([`super::server::NotAnApiServer`]), so a URL that is no API server is
    /// named as such rather than as a group-version it does not serve.
    ///
    /// Errors: [`Error::DiscoveryFailed`] of `v1` when that request fails other than by 404.
    async fn check_core(&mut self, client: &kube::Client) -> Result<()> {
        if self.core_checked || self.groups.contains_key("v1") {
            return Ok(());
        }
        self.core_checked = true;
        self.requests += 1;
        let core = GroupVersion::gv("", "v1");
        match oneshot::pinned_group(client, &core).await {
            Err(source) if !is_status(&source, 404) => {
                Err(Error::DiscoveryFailed { group_version: "v1".to_owned(), source })
            }
            _ => Ok(()),
        }
    }

    /// Resolves `kind` in `api_version` from what is already known, sending nothing; `None` when
    /// the group-version was never asked about or does not serve the kind.
    pub fn known(&self, api_version: &str, kind: &str) -> Option<Resolved> {
        self.groups
            .get(api_version)?
            .iter()
            .find(|(ar, _)| ar.kind == kind)
            .map(|(ar, namespaced)| Resolved { resource: ar.clone(), namespaced: *namespaced })
    }

    /// Resolves a kind whose CRD was just applied and reported Established, asking again with
    /// backoff (100 ms doubling to 2 s) for at most [`NEW_KIND_WITHIN`] while the server does not
    /// serve it yet: the apiserver sets `Established` before its discovery handler serves the
    /// new group-version, so a first answer of "not served" is often only early. `Ok(None)` when
    /// it is still not served after that.
    ///
    /// Errors: as [`Discovery::resolve`].
    pub async fn resolve_new(
        &mut self,
        client: &kube::Client,
        api_version: &str,
        kind: &str,
    ) -> Result<Option<Resolved>> {
        use backon::BackoffBuilder;
        let mut delays = backon::ExponentialBuilder::default()
            .with_min_delay(std::time::Duration::from_millis(100))
            .with_max_delay(std::time::Duration::from_secs(2))
            .with_total_delay(Some(NEW_KIND_WITHIN))
            .without_max_times()
            .build();
        loop {
            if let Some(resolved) = self.resolve(client, api_version, kind).await? {
                return Ok(Some(resolved));
            }
            let Some(delay) = delays.next() else { return Ok(None) };
            tokio::time::sleep(delay).await;
            self.forget(api_version);
        }
    }

    /// Forgets `api_version` when what is known of it was learned more than
    /// [`STALE_AFTER`] ago; true when it did (so one unknown kind costs at most one extra
    /// request per group-version in that time, not one per sync).
    /// The cluster's answer is taken in its place when another unit learned it within
    /// [`STALE_AFTER`].
    pub fn forget_stale(&mut self, api_version: &str) -> bool {
        let stale = self.fetched.get(api_version).is_some_and(|t| t.elapsed() > STALE_AFTER);
        if stale {
            let now = Instant::now();
            self.forget_before(api_version, now.checked_sub(STALE_AFTER).unwrap_or(now));
        }
        stale
    }

    /// Forgets what is known of `api_version`, so the next [`Discovery::resolve`] asks again
    /// (after its CRD was applied): the cluster's answer is taken only once learned after now.
    pub fn forget(&mut self, api_version: &str) {
        self.forget_before(api_version, Instant::now());
    }

    /// Forgets `api_version`, taking the cluster's answer for it only when learned after `at`.
    fn forget_before(&mut self, api_version: &str, at: Instant) {
        self.groups.remove(api_version);
        self.not_before.insert(api_version.to_owned(), at);
    }
}

impl Discovery {
    /// Resolves a group-kind (as the inventory records it) at the group's preferred version;
    /// `Ok(None)` when the server does not serve it any more.
    ///
    /// Errors: [`Error::DiscoveryFailed`] for API failures other than 404.
    pub async fn resolve_group_kind(
        &mut self,
        client: &kube::Client,
        gk: &crate::object::GroupKind,
    ) -> Result<Option<Resolved>> {
        if gk.group.is_empty() {
            return self.resolve(client, "v1", &gk.kind).await;
        }
        if let Some((version, at)) = self.preferred.get(&gk.group).cloned() {
            let gv = format!("{}/{version}", gk.group);
            if at.elapsed() < PREFERRED_TTL
                && let Some(found) = self.resolve(client, &gv, &gk.kind).await?
            {
                return Ok(Some(found));
            }
            // Expired, or the kind is gone from that version: ask the group again.
            self.preferred.remove(&gk.group);
            self.forget(&gv);
        }
        self.requests += 1;
        let group = match oneshot::group(client, &gk.group).await {
            Ok(group) => group,
            Err(e) if is_status(&e, 404) => return Ok(None),
            Err(kube::Error::Discovery(_)) => return Ok(None),
            Err(source) => return Err(Error::DiscoveryFailed { group_version: gk.group.to_string(), source }),
        };
        let version = group.preferred_version_or_latest().to_string();
        self.preferred.insert(gk.group.clone(), (version.clone(), Instant::now()));
        self.resolve(client, &format!("{}/{version}", gk.group), &gk.kind).await
    }
}

/// True when the API group `group` is confirmed gone: no CustomResourceDefinition
/// (`<plural>.<group>`) and no APIService (`<version>.<group>`) names it (two metadata LISTs).
/// Only then may members of a kind of it that discovery no longer serves be dropped from the
/// inventory; a failed LIST, the core group, or any such object present is "not confirmed"
/// (a version no longer served, an aggregated API down).
pub async fn group_gone(client: &kube::Client, group: &str) -> bool {
    use kube::api::{Api, DynamicObject, ListParams};
    use kube::core::{GroupVersionKind, PartialObjectMeta};
    if group.is_empty() {
        return false;
    }
    let kinds = [
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions"),
        ("apiregistration.k8s.io", "v1", "APIService", "apiservices"),
    ];
    let suffix = format!(".{group}");
    for (g, v, kind, plural) in kinds {
        let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(g, v, kind), plural);
        let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client.clone(), &resource);
        match api.list_metadata(&ListParams::default()).await {
            Ok(list) if list.items.iter().any(|i| i.metadata.name.as_deref().is_some_and(|n| n.ends_with(&suffix))) => {
                return false;
            }
            Ok(_) => {}
            Err(_) => return false,
        }
    }
    true
}

/// Reads what Helm is told about the cluster ([`Capabilities`]: `--kube-version`,
/// `--api-versions`): `/version`, then the aggregated discovery of `/api` and `/apis` (two
/// requests, Kubernetes 1.26+: every group version with its kinds). Not cached here: the
/// renderer keeps it for [`crate::render::CAPABILITIES_TTL`].
///
/// A group version the API server cannot serve now is left out, as Helm's `GetVersionSet`
/// leaves out client-go's failed groups: in aggregated discovery, one marked `freshness:
/// Stale` (kube-aggregator publishes an APIService whose backend is down so, with no or old
/// resources); from a server without aggregated discovery, one whose resource list is
/// answered with an error (503 from an unavailable APIService). One unavailable
/// metrics-server must not fail every Helm unit. Each is logged once per process when it goes
/// missing and once when it is back (`UNAVAILABLE`).
///
/// Errors: [`Error::DiscoveryFailed`] naming `/version`, `/api` or `/apis` (nothing to go on),
/// or, without aggregated discovery, a group version whose request got no answer at all.
pub async fn helm_capabilities(client: &kube::Client) -> Result<Capabilities> {
    let version = client.apiserver_version().await.map_err(failed("/version"))?;
    let core = client.list_core_api_versions_aggregated().await.map_err(failed("/api"))?;
    let groups = client.list_api_groups_aggregated().await.map_err(failed("/apis"))?;
    let (mut api_versions, unavailable) = if core.items.is_empty() || groups.items.is_empty() {
        // A server before aggregated discovery answers with a plain list, read as empty here.
        per_group_version(client).await?
    } else {
        aggregated(core.items.iter().chain(&groups.items))
    };
    log_unavailable(&mut UNAVAILABLE.lock().expect("unavailable lock"), unavailable);
    api_versions.sort();
    api_versions.dedup();
    Ok(Capabilities { kube_version: version.git_version, api_versions })
}

/// An error mapper naming `group_version`.
fn failed(group_version: &str) -> impl FnOnce(kube::Error) -> Error {
    let group_version = group_version.to_owned();
    move |source| Error::DiscoveryFailed { group_version, source }
}

/// Group versions that could not be read: group version → why.
type Unavailable = BTreeMap<String, String>;

/// The served group versions and kinds of aggregated discovery `groups`, leaving out versions
/// marked `Stale` (returned apart).
fn aggregated<'a>(groups: impl Iterator<Item = &'a kube::client::APIGroupDiscovery>) -> (Vec<String>, Unavailable) {
    let (mut out, mut unavailable) = (Vec::new(), Unavailable::new());
    for group in groups {
        let name = group.metadata.as_ref().and_then(|m| m.name.as_deref()).unwrap_or_default();
        for v in &group.versions {
            let Some(version) = v.version.as_deref() else { continue };
            let gv = if name.is_empty() { version.to_owned() } else { format!("{name}/{version}") };
            if v.freshness.as_deref() == Some("Stale") {
                unavailable.insert(gv, "discovery is Stale: its APIService is not available".to_owned());
                continue;
            }
            out.push(gv.clone());
            out.extend(
                v.resources.iter().filter_map(|r| Some(format!("{gv}/{}", r.response_kind.as_ref()?.kind.as_deref()?))),
            );
        }
    }
    (out, unavailable)
}

/// The served group versions and kinds read one group version at a time (before aggregated
/// discovery), leaving out those answered with an error (returned apart).
async fn per_group_version(client: &kube::Client) -> Result<(Vec<String>, Unavailable)> {
    let (mut api_versions, mut unavailable) = (Vec::new(), Unavailable::new());
    let core = client.list_core_api_versions().await.map_err(failed("/api"))?;
    let mut gvs: Vec<String> = core.versions;
    let groups = client.list_api_groups().await.map_err(failed("/apis"))?;
    gvs.extend(groups.groups.into_iter().flat_map(|g| g.versions).map(|v| v.group_version));
    for gv in gvs {
        let read = match gv.contains('/') {
            true => client.list_api_group_resources(&gv).await,
            false => client.list_core_api_resources(&gv).await,
        };
        match read {
            Ok(resources) => push_kinds(&mut api_versions, &gv, &resources),
            Err(kube::Error::Api(status)) => {
                unavailable.insert(gv, format!("{} {}", status.code, status.message));
            }
            Err(source) => return Err(failed(&gv)(source)),
        }
    }
    Ok((api_versions, unavailable))
}

/// The group versions [`helm_capabilities`] last left out, so each is logged once when it goes
/// missing and once when it is served again, not on every refresh of every Helm unit.
static UNAVAILABLE: std::sync::Mutex<BTreeSet<String>> = std::sync::Mutex::new(BTreeSet::new());

/// Logs the group versions of `now` (group version → the API server's answer) not in `known`
/// (a warning each) and those of `known` no longer in `now` (back), then makes `known` the keys
/// of `now`. Returns what it logged as (missing, back).
fn log_unavailable(known: &mut BTreeSet<String>, now: Unavailable) -> (Vec<String>, Vec<String>) {
    let missing: Vec<String> = now.keys().filter(|gv| !known.contains(*gv)).cloned().collect();
    let back: Vec<String> = known.iter().filter(|gv| !now.contains_key(*gv)).cloned().collect();
    for gv in &missing {
        tracing::warn!(
            group_version = %gv,
            answer = %now[gv],
            "group version unavailable (an aggregated API whose backend is down?): left out of the Helm capabilities"
        );
    }
    for gv in &back {
        tracing::info!(group_version = %gv, "group version served again: back in the Helm capabilities");
    }
    *known = now.into_keys().collect();
    (missing, back)
}

fn push_kinds(
    out: &mut Vec<String>,
    group_version: &str,
    list: &k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList,
) {
    out.push(group_version.to_owned());
    for r in list.resources.iter().filter(|r| !r.name.contains('/')) {
        out.push(format!("{group_version}/{}", r.kind));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unavailable_group_version_is_logged_once_when_it_goes_and_once_when_it_comes_back() {
        let mut known = BTreeSet::new();
        let down = || BTreeMap::from([("metrics.k8s.io/v1beta1".to_owned(), "503 unavailable".to_owned())]);
        assert_eq!(log_unavailable(&mut known, down()), (vec!["metrics.k8s.io/v1beta1".to_owned()], vec![]));
        assert_eq!(log_unavailable(&mut known, down()), (vec![], vec![]), "not again while it stays down");
        assert_eq!(log_unavailable(&mut known, BTreeMap::new()), (vec![], vec!["metrics.k8s.io/v1beta1".to_owned()]));
        assert_eq!(log_unavailable(&mut known, BTreeMap::new()), (vec![], vec![]));
    }

    fn kinds(kind: &str) -> Kinds {
        let gvk = kube::core::GroupVersionKind::gvk("", "v1", kind);
        ArcIntern::new(vec![(Arc::new(ApiResource::from_gvk(&gvk)), true)])
    }

    #[test]
    fn a_unit_takes_its_clusters_answer_unless_it_forgot_that_answer_or_an_older_one() {
        let answers = Answers::default();
        let (mut a, mut b) = (Discovery::new(), Discovery::new());
        a.share(&answers);
        b.share(&answers);
        assert!(!b.take_shared("v1"), "nothing learned yet");
        answers.put("v1", &kinds("ConfigMap"), Instant::now());
        assert!(b.take_shared("v1") && b.known("v1", "ConfigMap").is_some(), "another unit's answer");
        // A CRD was applied: the answer learned before is not taken again, a later one is.
        b.forget("v1");
        assert!(!b.take_shared("v1") && b.known("v1", "ConfigMap").is_none());
        answers.put("v1", &kinds("Secret"), Instant::now() + std::time::Duration::from_millis(1));
        assert!(b.take_shared("v1") && b.known("v1", "Secret").is_some(), "learned after the forget");
        // An older answer never replaces a newer one.
        answers.put("v1", &kinds("Pod"), Instant::now().checked_sub(STALE_AFTER).unwrap());
        assert!(a.take_shared("v1") && a.known("v1", "Secret").is_some() && a.known("v1", "Pod").is_none());
        // A stale answer forgotten: an answer the cluster learned within STALE_AFTER is taken.
        a.fetched.insert("v1".to_owned(), Instant::now().checked_sub(STALE_AFTER * 2).unwrap());
        assert!(a.forget_stale("v1") && a.take_shared("v1"), "the cluster's answer is fresh");
        assert!(!Discovery::new().take_shared("v1"), "a cache that shares nothing asks");
    }
}
