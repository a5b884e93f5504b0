//! Leader election over a real `coordination.k8s.io/v1` Lease on the real test apiserver.
//!
//! Durations are short (a 2 s lease renewed every 500 ms) so the tests are quick. Bounds on
//! waits are generous liveness bounds (something must happen eventually), not performance
//! assertions; the safety assertions (never two leaders, a leader steps down before its Lease
//! can expire) are exact.
//!
//! Run: `scripts/test --test integration leader::`.

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use gitward::lease::election::{self as leader, LeaderConfig, Leadership};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::{Instant, sleep, timeout};

/// Generous upper bound for anything that must eventually happen.
const EVENTUALLY: Duration = Duration::from_secs(15);

/// A candidate for the Lease `gitward` in `namespace`.
fn candidate(namespace: &str, identity: &str, lease_ms: u64, renew_ms: u64) -> LeaderConfig {
    LeaderConfig {
        namespace: namespace.to_string(),
        name: "gitward".to_string(),
        identity: identity.to_string(),
        lease_duration: Duration::from_millis(lease_ms),
        renew_every: Duration::from_millis(renew_ms),
    }
}

/// A quick candidate: 2 s lease, renewed every 500 ms.
fn quick(namespace: &str, identity: &str) -> LeaderConfig {
    candidate(namespace, identity, 2_000, 500)
}

/// The Lease as stored.
async fn lease(client: &kube::Client, namespace: &str) -> Lease {
    Api::<Lease>::namespaced(client.clone(), namespace).get("gitward").await.expect("lease exists")
}

/// The stored Lease's holderIdentity ("" when free).
async fn holder(client: &kube::Client, namespace: &str) -> String {
    lease(client, namespace).await.spec.and_then(|s| s.holder_identity).unwrap_or_default()
}

/// Waits (bounded) until `leadership` says leader; panics otherwise.
async fn becomes_leader(leadership: &mut Leadership, who: &str) -> Instant {
    let acquired = timeout(EVENTUALLY, leadership.until_leader()).await;
    assert!(matches!(acquired, Ok(true)), "{who} did not become leader within {EVENTUALLY:?}");
    Instant::now()
}

/// The Lease's renewTime, if it has one.
async fn renewed(
    client: &kube::Client,
    namespace: &str,
) -> Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime> {
    lease(client, namespace).await.spec.and_then(|s| s.renew_time)
}

/// Waits (bounded) until the Lease's renewTime is later than `after`: its holder renewed it.
async fn renewed_after(
    client: &kube::Client,
    namespace: &str,
    after: &k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime,
) {
    let deadline = Instant::now() + EVENTUALLY;
    while renewed(client, namespace).await.as_ref().is_none_or(|t| t.0 <= after.0) {
        assert!(Instant::now() < deadline, "the Lease was not renewed within {EVENTUALLY:?}");
        sleep(Duration::from_millis(50)).await;
    }
}

/// The requests a client sent, as `METHOD path`, in order.
type Sent = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

/// A client of the test cluster that records each request it sends: a candidate's own account
/// of its rounds, each of which reads the Lease once.
async fn recording_client() -> (kube::Client, Sent) {
    let sent = Sent::default();
    let log = sent.clone();
    let record = tower::util::MapRequestLayer::new(move |request: http::Request<kube::client::Body>| {
        log.lock().unwrap().push(format!("{} {}", request.method(), request.uri().path()));
        request
    });
    let builder = kube::client::ClientBuilder::try_from(kube_config().await).expect("client of the test cluster");
    (builder.with_layer(&record).build(), sent)
}

/// Waits (bounded) until the candidate whose client recorded `sent` has read the Lease `rounds`
/// times (a round reads it once, and is decided before the next begins); returns what that
/// client sent.
async fn rounds_of(sent: &Sent, rounds: usize) -> Vec<String> {
    let deadline = Instant::now() + EVENTUALLY;
    loop {
        let requests = sent.lock().unwrap().clone();
        if requests.iter().filter(|r| r.starts_with("GET ") && r.ends_with("/leases/gitward")).count() >= rounds {
            return requests;
        }
        assert!(Instant::now() < deadline, "fewer than {rounds} reads of the Lease: {requests:?}");
        sleep(Duration::from_millis(20)).await;
    }
}

/// Waits (bounded) until exactly one of `candidates` says leader; returns its index.
async fn one_leader(candidates: &[&Leadership]) -> usize {
    let deadline = Instant::now() + EVENTUALLY;
    loop {
        let leaders: Vec<usize> = (0..candidates.len()).filter(|&i| candidates[i].is_leader()).collect();
        assert!(leaders.len() <= 1, "two leaders at once: {leaders:?}");
        if let [only] = leaders[..] {
            return only;
        }
        assert!(Instant::now() < deadline, "no leader within {EVENTUALLY:?}");
        sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn one_candidate_creates_the_lease_and_becomes_its_holder() {
    let env = common::setup("leader-one").await;
    let cfg = quick(&env.namespace, "alpha");
    let (mut alpha, task) = leader::spawn(env.client.clone(), cfg);
    assert!(!alpha.is_leader(), "a candidate is follower until it holds the Lease");

    becomes_leader(&mut alpha, "alpha").await;
    let spec = lease(&env.client, &env.namespace).await.spec.expect("lease spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("alpha"));
    assert_eq!(spec.lease_duration_seconds, Some(2));
    assert_eq!(spec.lease_transitions, Some(0));
    assert!(spec.acquire_time.is_some());
    let first_renewal = spec.renew_time.expect("renew time");

    // It keeps renewing, and stays leader.
    renewed_after(&env.client, &env.namespace, &first_renewal).await;
    let spec = lease(&env.client, &env.namespace).await.spec.expect("lease spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("alpha"));
    assert!(alpha.is_leader());
    task.abort();
}

#[tokio::test]
async fn two_candidates_in_one_namespace_elect_exactly_one_leader() {
    let env = common::setup("leader-two").await;
    let (alpha, alpha_task) = leader::spawn(env.client.clone(), quick(&env.namespace, "alpha"));
    let (beta, beta_task) = leader::spawn(env.client.clone(), quick(&env.namespace, "beta"));

    let first = one_leader(&[&alpha, &beta]).await;
    let names = ["alpha", "beta"];
    // Over ten renewals (each seen in the Lease), two and a half lease durations: always
    // exactly one leader, always the same, and the Lease says so.
    let mut last = renewed(&env.client, &env.namespace).await.expect("renew time");
    for _ in 0..10 {
        renewed_after(&env.client, &env.namespace, &last).await;
        last = renewed(&env.client, &env.namespace).await.expect("renew time");
        assert_eq!(one_leader(&[&alpha, &beta]).await, first, "leadership moved without a failure");
        assert_eq!(holder(&env.client, &env.namespace).await, names[first]);
    }
    alpha_task.abort();
    beta_task.abort();
}

#[tokio::test]
async fn killed_leader_is_replaced_once_its_lease_expires() {
    let env = common::setup("leader-kill").await;
    let (mut alpha, alpha_task) = leader::spawn(env.client.clone(), quick(&env.namespace, "alpha"));
    becomes_leader(&mut alpha, "alpha").await;
    let (beta_client, beta_sent) = recording_client().await;
    let (mut beta, beta_task) = leader::spawn(beta_client, quick(&env.namespace, "beta"));
    // Two rounds of beta's loop, the first decided: it read a Lease being renewed and left it.
    let sent = rounds_of(&beta_sent, 2).await;
    assert!(sent.iter().all(|r| r.starts_with("GET ")), "beta wrote the Lease: {sent:?}");
    assert!(!beta.is_leader(), "beta must not take a Lease that is being renewed");

    // Kill alpha without releasing: its Lease stays held until it expires.
    alpha_task.abort();
    assert!(alpha_task.await.expect_err("aborted").is_cancelled());
    let killed = Instant::now();
    assert!(!alpha.is_leader(), "a handle whose loop ended never says leader");
    assert!(alpha.changed().await.is_err(), "changed() reports the ended loop");

    let took_over = becomes_leader(&mut beta, "beta").await;
    // Safety: beta waited for the Lease alpha last renewed (at most one renew period before the
    // kill) to expire by its own clock: at least lease_duration - renew_every after the kill.
    let waited = took_over - killed;
    assert!(waited >= Duration::from_millis(1_400), "beta took over after only {waited:?}");
    let spec = lease(&env.client, &env.namespace).await.spec.expect("lease spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("beta"));
    assert_eq!(spec.lease_transitions, Some(1));
    beta_task.abort();
}

#[tokio::test]
async fn released_lease_is_taken_over_at_once() {
    let env = common::setup("leader-release").await;
    // A 60 s lease: without the release beta would wait a minute.
    let alpha_cfg = candidate(&env.namespace, "alpha", 60_000, 300);
    let (mut alpha, alpha_task) = leader::spawn(env.client.clone(), alpha_cfg.clone());
    becomes_leader(&mut alpha, "alpha").await;
    let (beta_client, beta_sent) = recording_client().await;
    let (mut beta, beta_task) = leader::spawn(beta_client, candidate(&env.namespace, "beta", 60_000, 300));
    let sent = rounds_of(&beta_sent, 2).await;
    assert!(sent.iter().all(|r| r.starts_with("GET ")), "beta wrote the Lease: {sent:?}");
    assert!(!beta.is_leader());

    alpha_task.abort();
    let _ = alpha_task.await;
    assert!(leader::release(env.client.clone(), alpha_cfg.clone()).await, "alpha held the Lease");
    let took_over = timeout(Duration::from_secs(10), beta.until_leader()).await;
    assert!(matches!(took_over, Ok(true)), "beta did not take the released Lease within 10 s");
    assert_eq!(holder(&env.client, &env.namespace).await, "beta");

    // Releasing what one does not hold changes nothing.
    assert!(!leader::release(env.client.clone(), alpha_cfg).await);
    assert_eq!(holder(&env.client, &env.namespace).await, "beta");
    beta_task.abort();
}

#[tokio::test]
async fn leader_steps_down_when_another_writer_takes_the_lease() {
    let env = common::setup("leader-conflict").await;
    let (mut alpha, task) = leader::spawn(env.client.clone(), quick(&env.namespace, "alpha"));
    becomes_leader(&mut alpha, "alpha").await;

    // Someone else writes the Lease (its own optimistic-locked replace).
    let api = Api::<Lease>::namespaced(env.client.clone(), &env.namespace);
    let mut taken = api.get("gitward").await.expect("lease");
    taken.spec.as_mut().expect("spec").holder_identity = Some("intruder".into());
    api.replace("gitward", &PostParams::default(), &taken).await.expect("intruder writes the lease");

    // alpha's next renewal conflicts, it re-reads, sees the intruder and steps down at once,
    // without overwriting the intruder's record.
    let lost = timeout(EVENTUALLY, async {
        while alpha.is_leader() {
            alpha.changed().await.expect("loop runs");
        }
    })
    .await;
    assert!(lost.is_ok(), "alpha still leader {EVENTUALLY:?} after losing its Lease");
    assert_eq!(holder(&env.client, &env.namespace).await, "intruder");

    // The intruder never renews: after its lease duration alpha takes the Lease again.
    becomes_leader(&mut alpha, "alpha").await;
    let spec = lease(&env.client, &env.namespace).await.spec.expect("lease spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("alpha"));
    assert_eq!(spec.lease_transitions, Some(1));
    task.abort();
}

#[tokio::test]
async fn leader_cut_off_from_the_apiserver_steps_down_before_its_lease_expires() {
    let env = common::setup("leader-cut").await;
    let proxy = Proxy::start().await;
    let (mut alpha, alpha_task) = leader::spawn(proxy.client().await, quick(&env.namespace, "alpha"));
    becomes_leader(&mut alpha, "alpha").await;
    let (beta, beta_task) = leader::spawn(env.client.clone(), quick(&env.namespace, "beta"));

    proxy.cut();
    // alpha's last renewal that it saw succeed completed before the cut, so it is visible now.
    // A renewal in flight at the cut may still land (later or not at all): either way alpha,
    // which did not see it succeed, must step down before the expiry of the one read here.
    // Its renewTime is alpha's clock.
    let last = lease(&env.client, &env.namespace).await.spec.expect("lease spec");
    assert_eq!(last.holder_identity.as_deref(), Some("alpha"), "nobody took over this early");
    let expiry = last.renew_time.expect("renew time").0 + Duration::from_secs(2);

    // Watch both: alpha must say "not leader" before the Lease it last renewed expires, and
    // beta must never be leader while alpha still is.
    let deadline = Instant::now() + EVENTUALLY;
    let mut stepped_down_at = None;
    while !beta.is_leader() {
        if stepped_down_at.is_none() && !alpha.is_leader() {
            stepped_down_at = Some(k8s_openapi::jiff::Timestamp::now());
        }
        assert!(Instant::now() < deadline, "beta did not take over within {EVENTUALLY:?}");
        sleep(Duration::from_millis(10)).await;
    }
    assert!(!alpha.is_leader(), "two leaders at once");
    let stepped_down_at = stepped_down_at.expect("alpha stepped down before beta took over");

    // alpha let go before its last renewTime + leaseDuration (one machine's clock for both).
    assert_eq!(holder(&env.client, &env.namespace).await, "beta");
    assert!(!alpha_task.is_finished(), "a cut-off leader keeps running as a candidate");
    assert!(stepped_down_at < expiry, "alpha stepped down at {stepped_down_at}, its Lease expired at {expiry}");
    alpha_task.abort();
    beta_task.abort();
}

#[tokio::test]
async fn deploy_role_is_enough_for_leader_election() {
    let env = common::setup("leader-rbac").await;
    let ns = env.namespace.as_str();
    // deploy/kubernetes/rbac.yaml's Role and RoleBinding, moved into this test's namespace,
    // for a ServiceAccount `gitward` there, without the ClusterRole.
    let docs = deploy_documents("rbac.yaml");
    let role = docs.iter().find(|d| d["kind"] == "Role").expect("rbac.yaml has a Role");
    let binding = docs.iter().find(|d| d["kind"] == "RoleBinding").expect("rbac.yaml has a RoleBinding");
    let mut binding = binding.clone();
    binding["subjects"][0]["namespace"] = ns.into();
    let sa = serde_json::json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "gitward"}});
    for doc in [sa, role.clone(), binding] {
        create_in(&env.client, ns, doc).await;
    }
    let sa_client = impersonating(&format!("system:serviceaccount:{ns}:gitward")).await;
    // The Role is all it has: another Lease is out of reach (403, not 404).
    let other = Api::<Lease>::namespaced(sa_client.clone(), ns).get("other").await;
    assert!(matches!(other, Err(kube::Error::Api(ref s)) if s.code == 403), "{other:?}");

    let cfg = quick(ns, "alpha");
    let (mut alpha, task) = leader::spawn(sa_client.clone(), cfg.clone());
    becomes_leader(&mut alpha, "alpha (as the ServiceAccount)").await;
    let acquired = renewed(&env.client, ns).await.expect("renew time");
    renewed_after(&env.client, ns, &acquired).await;
    assert!(alpha.is_leader(), "renewals (update) are allowed");
    task.abort();
    let _ = task.await;
    assert!(leader::release(sa_client, cfg).await, "release (get, update) is allowed");
    assert_eq!(holder(&env.client, ns).await, "");
}

#[test]
fn deploy_config_elects_a_leader_with_the_lease_the_role_names() {
    let configmap = deploy_documents("configmap.yaml").remove(0);
    let text = configmap["data"]["config.toml"].as_str().expect("configmap holds config.toml");
    let config = gitward::config::Config::from_toml(text, std::path::Path::new("/etc/gitward"), "configmap.yaml")
        .expect("the deployed config.toml is valid");
    let election = config.daemon.leader_election.expect("leader election is enabled");
    assert_eq!(election.namespace, "gitward-system");
    let role = deploy_documents("rbac.yaml").into_iter().find(|d| d["kind"] == "Role").expect("Role");
    assert_eq!(role["metadata"]["namespace"], "gitward-system");
    let names: Vec<&serde_json::Value> =
        role["rules"].as_array().expect("rules").iter().filter_map(|r| r.get("resourceNames")).collect();
    assert!(
        names.iter().any(|n| n.as_array().is_some_and(|a| a.iter().any(|x| x == election.name.as_str()))),
        "the Role names the Lease {}",
        election.name
    );
    let deployment = deploy_documents("deployment.yaml").remove(0);
    let env = &deployment["spec"]["template"]["spec"]["containers"][0]["env"];
    assert!(
        env.as_array()
            .expect("env")
            .iter()
            .any(|e| e["name"] == "POD_NAME" && e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"),
        "POD_NAME comes from the downward API"
    );
}

/// The YAML documents of `deploy/kubernetes/<file>`.
fn deploy_documents(file: &str) -> Vec<serde_json::Value> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Creates `doc` in namespace `ns` (its own namespace field is replaced).
async fn create_in(client: &kube::Client, ns: &str, mut doc: serde_json::Value) {
    doc["metadata"]["namespace"] = ns.into();
    let types: kube::api::TypeMeta = serde_json::from_value(doc.clone()).expect("apiVersion and kind");
    let gvk = kube::api::GroupVersionKind::try_from(&types).expect("group version kind");
    let (resource, _) = kube::discovery::pinned_kind(client, &gvk).await.expect("kind is served");
    let api = Api::<kube::api::DynamicObject>::namespaced_with(client.clone(), ns, &resource);
    let object: kube::api::DynamicObject = serde_json::from_value(doc).expect("object");
    api.create(&PostParams::default(), &object).await.expect("create");
}

/// A client of the test cluster's admin, impersonating `user`.
async fn impersonating(user: &str) -> kube::Client {
    let mut config = kube_config().await;
    config.auth_info.impersonate = Some(user.to_string());
    kube::Client::try_from(config).expect("impersonating client")
}

/// A TCP proxy to the apiserver that can be cut, to take one client off the network while the
/// apiserver stays up for the others.
struct Proxy {
    /// Where it listens.
    addr: SocketAddr,
    /// The accept loop; aborting it drops every connection (they live in its `JoinSet`).
    task: JoinHandle<()>,
}

impl Proxy {
    /// Starts a proxy to the test apiserver.
    async fn start() -> Self {
        let upstream = kube_config().await.cluster_url.authority().expect("server address").to_string();
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let task = tokio::spawn(async move {
            let mut connections = JoinSet::new();
            loop {
                let Ok((inbound, _)) = listener.accept().await else { continue };
                let upstream = upstream.clone();
                connections.spawn(async move {
                    if let Ok(outbound) = TcpStream::connect(&upstream).await {
                        // Either direction ending closes both.
                        tokio::select! {
                            () = pump(&inbound, &outbound) => {}
                            () = pump(&outbound, &inbound) => {}
                        }
                    }
                });
                while connections.try_join_next().is_some() {}
            }
        });
        Self { addr, task }
    }

    /// A client that talks to the apiserver through this proxy.
    async fn client(&self) -> kube::Client {
        let mut config = kube_config().await;
        config.cluster_url = format!("https://{}", self.addr).parse().expect("proxy url");
        kube::Client::try_from(config).expect("client through the proxy")
    }

    /// Cuts every connection and refuses new ones.
    fn cut(&self) {
        self.task.abort();
    }
}

/// Copies bytes from `from` to `to` until either fails or `from` ends (readiness-based, as
/// tokio's `io-util` is not enabled for this crate).
async fn pump(from: &TcpStream, to: &TcpStream) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if from.readable().await.is_err() {
            return;
        }
        let n = match from.try_read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(_) => return,
        };
        let mut sent = 0;
        while sent < n {
            if to.writable().await.is_err() {
                return;
            }
            match to.try_write(&buf[sent..n]) {
                Ok(k) => sent += k,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(_) => return,
            }
        }
    }
}

/// The admin kubeconfig of the test cluster.
async fn kube_config() -> kube::Config {
    let path = std::env::var("KUBECONFIG").expect("KUBECONFIG set by tests/cluster/run");
    let kubeconfig = kube::config::Kubeconfig::read_from(&path).expect("readable kubeconfig");
    kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.expect("valid kubeconfig")
}
