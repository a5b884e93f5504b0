//! Chart units (`[sync.helm] repo_url`) end to end: charts made by the real `helm package`,
//! served by an HTTP chart repository on loopback (`index.yaml` from `helm repo index`) or
//! pushed by `helm push` to the real CNCF distribution registry, templated by the real helm,
//! applied to the real apiserver.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

use crate::common;
use crate::common::charts::{ChartServer, HttpsFiles, Registry, chart_unit, package, sha256_hex, tls_files};
use crate::sources::render::{chain, config_text};

/// `[render] chart_repositories` listing `url`: a loopback repository is reached only when
/// listed.
pub(crate) fn listed(url: &str) -> String {
    format!("chart_repositories = [\"{url}\"]\n")
}

fn config(state: &Path, allowed: &str, units: &str) -> gitward::config::Config {
    gitward::config::Config::from_toml(&config_text(state, &listed(allowed), units), state, "test.toml")
        .expect("valid config")
}

/// `data.version` of the ConfigMap the demo chart makes.
async fn live_version(client: &kube::Client, namespace: &str) -> Option<String> {
    common::cm_data(client, namespace, "shop-demo", "version").await
}

#[tokio::test]
async fn http_repository_installs_the_newest_match_and_upgrades_when_one_is_published() {
    let env = common::setup("chart-http").await;
    let work = tempfile::tempdir().unwrap();
    let (server, _) = ChartServer::with_demo(work.path(), "0.1.0");
    let chosen = server.publish(work.path(), "demo", "0.2.0");
    server.publish(work.path(), "demo", "0.3.0-rc.1");
    server.publish(work.path(), "demo", "1.0.0");
    let state = tempfile::tempdir().unwrap();
    let config = config(state.path(), &server.url, &chart_unit("demo", &env.namespace, &server.url, ">=0.1.0 <1.0.0"));
    let mut engine = common::engine(&env.client, &config, "demo").await;

    let report = engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert_eq!(report.revision.0, format!("demo@0.2.0@sha256:{}", sha256_hex(&chosen)), "newest in range, no rc");
    assert_eq!(live_version(&env.client, &env.namespace).await.as_deref(), Some("0.2.0"));
    assert_eq!(common::actions(&report)[&format!("ConfigMap/{}/shop-demo", env.namespace)], "created");

    let newer = server.publish(work.path(), "demo", "0.3.0");
    let report = engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert_eq!(report.revision.0, format!("demo@0.3.0@sha256:{}", sha256_hex(&newer)));
    assert_eq!(live_version(&env.client, &env.namespace).await.as_deref(), Some("0.3.0"));
    let cached = state.path().join(format!("charts/units/demo/{}.tgz", sha256_hex(&newer)));
    assert_eq!(std::fs::read(&cached).unwrap(), std::fs::read(&newer).unwrap(), "the cache holds the archive");

    // The archive two versions back is collected; the previous one stays.
    let newest = server.publish(work.path(), "demo", "0.4.0");
    engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    let mut left: Vec<String> = std::fs::read_dir(state.path().join("charts/units/demo"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    let mut expected = vec![format!("{}.tgz", sha256_hex(&newer)), format!("{}.tgz", sha256_hex(&newest))];
    expected.sort();
    assert_eq!(left, expected, "0.2.0 collected, 0.3.0 and 0.4.0 kept");
}

#[tokio::test]
async fn oci_registry_installs_the_newest_match_and_upgrades_when_one_is_pushed() {
    let env = common::setup("chart-oci").await;
    let registry = Registry::start().await;
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    for version in ["0.1.0", "0.2.0", "0.3.0-rc.1", "1.0.0"] {
        registry.push(work.path(), &package(work.path(), "demo", version, &out), "charts");
    }
    let state = tempfile::tempdir().unwrap();
    let url = format!("oci://{}/charts", registry.host);
    let config = config(state.path(), &url, &chart_unit("demo", &env.namespace, &url, "~0"));
    let mut engine = common::engine(&env.client, &config, "demo").await;

    let report = engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    let chosen = out.join("demo-0.2.0.tgz");
    assert_eq!(report.revision.0, format!("demo@0.2.0@sha256:{}", sha256_hex(&chosen)), "newest in range, no rc");
    assert_eq!(live_version(&env.client, &env.namespace).await.as_deref(), Some("0.2.0"));

    let newer = package(work.path(), "demo", "0.3.0", &out);
    registry.push(work.path(), &newer, "charts");
    let report = engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert_eq!(report.revision.0, format!("demo@0.3.0@sha256:{}", sha256_hex(&newer)));
    assert_eq!(live_version(&env.client, &env.namespace).await.as_deref(), Some("0.3.0"));
}

#[tokio::test]
async fn the_daemon_polls_a_registry_and_applies_a_newer_matching_version() {
    let env = common::setup("chart-poll").await;
    let registry = Registry::start().await;
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    registry.push(work.path(), &package(work.path(), "demo", "1.1.0", &out), "charts");
    let url = format!("oci://{}/charts", registry.host);
    let unit = chart_unit("demo", &env.namespace, &url, ">=1.1 <2");
    let bin = crate::sources::render::tools_bin();
    let render = format!("[render]\nhelm = \"{}\"\n{}", bin.join("helm").display(), listed(&url));
    let daemon = common::polling_daemon(work.path(), &render, &unit);
    let at = |want: &'static str| {
        common::cm_data_becomes(&env.client, &env.namespace, "shop-demo", "version", want, Duration::from_secs(60))
    };
    assert!(at("1.1.0").await, "1.1.0 installed: {}", daemon.log_text());

    registry.push(work.path(), &package(work.path(), "demo", "2.0.0", &out), "charts");
    registry.push(work.path(), &package(work.path(), "demo", "1.2.0", &out), "charts");
    assert!(at("1.2.0").await, "the poll found 1.2.0: {}", daemon.log_text());
    let digest = sha256_hex(&out.join("demo-1.2.0.tgz"));
    // `sync complete` follows the apply by the record's write: the object can be live first.
    let named = || {
        daemon.logged("sync complete").iter().any(|e| e.to_string().contains(&format!("demo@1.2.0@sha256:{digest}")))
    };
    let logged = common::eventually(Duration::from_secs(30), || async { named() }).await;
    assert!(logged, "the sync names the new revision: {:?}", daemon.logged("sync complete"));
}

#[tokio::test]
async fn an_unreachable_repository_keeps_the_last_good_revision_and_a_bad_index_names_its_url() {
    let env = common::setup("chart-down").await;
    let work = tempfile::tempdir().unwrap();
    let (mut server, archive) = ChartServer::with_demo(work.path(), "0.1.0");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gitward.toml");
    let units = chart_unit("demo", &env.namespace, &server.url, "*");
    // No kept index answer stands in for the repository while it is down (`0s`).
    let render = listed(&server.url) + "max_index_age = \"0s\"\n";
    std::fs::write(&config, config_text(&dir.path().join("state"), &render, &units)).unwrap();

    let first = common::gitward(&["sync"], &config, Duration::from_secs(120));
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    assert_eq!(live_version(&env.client, &env.namespace).await.as_deref(), Some("0.1.0"));

    // A bad index is refused with its URL; nothing is applied.
    std::fs::write(server.dir.join("index.yaml"), "entries: [this is: not an index\n").unwrap();
    let bad = common::gitward(&["sync"], &config, Duration::from_secs(120));
    assert_eq!(bad.code, Some(2), "{}", bad.stderr);
    let index_url = format!("{}/index.yaml", server.url);
    assert!(bad.stderr.contains(&format!("{index_url}: the index does not parse")), "{}", bad.stderr);

    server.stop();
    let down = common::gitward(&["sync"], &config, Duration::from_secs(120));
    assert_eq!(down.code, Some(2), "an unreachable repository fails the sync: {}", down.stderr);
    assert!(down.stderr.contains(&index_url), "the error names the URL: {}", down.stderr);
    assert_eq!(live_version(&env.client, &env.namespace).await.as_deref(), Some("0.1.0"), "nothing changed");
    let cached = dir.path().join(format!("state/charts/units/demo/{}.tgz", sha256_hex(&archive)));
    assert!(cached.is_file(), "the last good archive stays cached");
}

#[tokio::test]
async fn the_daemon_keeps_the_last_good_revision_while_the_repository_is_down_and_recovers() {
    let env = common::setup("chart-down-daemon").await;
    let work = tempfile::tempdir().unwrap();
    let (mut server, _) = ChartServer::with_demo(work.path(), "0.1.0");
    let unit = chart_unit("demo", &env.namespace, &server.url, "*");
    let bin = crate::sources::render::tools_bin();
    // No kept index answer stands in for the repository while it is down (`0s`).
    let render =
        format!("[render]\nhelm = \"{}\"\n{}max_index_age = \"0s\"\n", bin.join("helm").display(), listed(&server.url));
    let daemon = common::polling_daemon(work.path(), &render, &unit);
    let at = |want: &'static str| {
        common::cm_data_becomes(&env.client, &env.namespace, "shop-demo", "version", want, Duration::from_secs(60))
    };
    assert!(at("0.1.0").await, "0.1.0 installed: {}", daemon.log_text());

    server.stop();
    let index_url = format!("{}/index.yaml", server.url);
    let failed = common::eventually(Duration::from_secs(60), || {
        let (daemon, index_url) = (&daemon, index_url.clone());
        async move { daemon.logged("sync failed").iter().any(|e| e.to_string().contains(&index_url)) }
    })
    .await;
    assert!(failed, "the failure names the index URL: {}", daemon.log_text());
    assert_eq!(live_version(&env.client, &env.namespace).await.as_deref(), Some("0.1.0"), "the unit stays");

    server.restart();
    server.publish(work.path(), "demo", "0.2.0");
    assert!(at("0.2.0").await, "the repository is back: the poll applies 0.2.0: {}", daemon.log_text());
}

#[tokio::test]
async fn repository_credentials_size_cap_and_digest_are_enforced() {
    let env = common::setup("chart-guard").await;
    let work = tempfile::tempdir().unwrap();
    let server = ChartServer::start_with_auth(&work.path().join("served"), Some(("reader", "s3cret")));
    let archive = server.publish(work.path(), "demo", "0.1.0");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gitward.toml");
    let (state, password) = (dir.path().join("state"), dir.path().join("password"));
    let run = |render_extra: &str, unit_extra: &str| {
        let units = chart_unit("demo", &env.namespace, &server.url, "*") + unit_extra;
        std::fs::write(&config, config_text(&state, &format!("{render_extra}\n{}", listed(&server.url)), &units))
            .unwrap();
        common::gitward(&["sync"], &config, Duration::from_secs(120))
    };
    let with_password = format!("username = \"reader\"\npassword_file = \"{}\"\n", password.display());

    let anonymous = run("", "");
    assert_eq!(anonymous.code, Some(2), "{}", anonymous.stderr);
    assert!(anonymous.stderr.contains("authentication to"), "{}", anonymous.stderr);
    std::fs::write(&password, "wrong\n").unwrap();
    let wrong = run("", &with_password);
    assert_eq!(wrong.code, Some(2), "{}", wrong.stderr);
    assert!(wrong.stderr.contains("401"), "{}", wrong.stderr);
    assert_eq!(live_version(&env.client, &env.namespace).await, None, "nothing applied without credentials");

    std::fs::write(&password, "s3cret\n").unwrap();
    let capped = run("max_tree_bytes = 100", &with_password);
    assert_eq!(capped.code, Some(2), "{}", capped.stderr);
    assert!(capped.stderr.contains("over the limit of 100 bytes"), "{}", capped.stderr);

    let index = server.dir.join("index.yaml");
    let digest = sha256_hex(&archive);
    let honest = std::fs::read_to_string(&index).unwrap();
    std::fs::write(&index, honest.replace(&digest, &"0".repeat(64))).unwrap();
    let forged = run("", &with_password);
    assert_eq!(forged.code, Some(2), "{}", forged.stderr);
    assert!(forged.stderr.contains("digest mismatch"), "{}", forged.stderr);
    assert_eq!(live_version(&env.client, &env.namespace).await, None, "a forged archive is not applied");

    std::fs::write(&index, honest).unwrap();
    let good = run("", &with_password);
    assert_eq!(good.code, Some(0), "{}", good.stderr);
    assert_eq!(live_version(&env.client, &env.namespace).await.as_deref(), Some("0.1.0"));
    assert!(!good.stderr.contains("s3cret"), "the password is never logged");
}

#[tokio::test]
async fn registry_credentials_come_from_a_docker_config_or_a_password_file() {
    let env = common::setup("chart-oci-auth").await;
    let creds = ("pusher", "t0ps3cret");
    let registry = Registry::start_with_auth(Some(creds)).await;
    let work = tempfile::tempdir().unwrap();
    let archive = package(work.path(), "demo", "0.4.0", &work.path().join("out"));
    registry.push_as(work.path(), &archive, "charts", Some(creds));
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gitward.toml");
    let url = format!("oci://{}/charts", registry.host);
    let run = |unit_extra: &str| {
        let units = chart_unit("demo", &env.namespace, &url, "*") + unit_extra;
        std::fs::write(&config, config_text(&dir.path().join("state"), &listed(&url), &units)).unwrap();
        common::gitward(&["sync"], &config, Duration::from_secs(120))
    };

    let anonymous = run("");
    assert_eq!(anonymous.code, Some(2), "{}", anonymous.stderr);
    let password = dir.path().join("password");
    std::fs::write(&password, "not-it\n").unwrap();
    let wrong = run(&format!("username = \"pusher\"\npassword_file = \"{}\"\n", password.display()));
    assert_eq!(wrong.code, Some(2), "{}", wrong.stderr);
    assert_eq!(live_version(&env.client, &env.namespace).await, None, "nothing applied without credentials");

    use base64::Engine as _;
    let auth = base64::engine::general_purpose::STANDARD.encode("pusher:t0ps3cret");
    let docker = dir.path().join("config.json");
    let entry = serde_json::json!({"auths": {registry.host.clone(): {"auth": auth}}});
    std::fs::write(&docker, entry.to_string()).unwrap();
    let good = run(&format!("docker_config_file = \"{}\"\n", docker.display()));
    assert_eq!(good.code, Some(0), "{}", good.stderr);
    assert_eq!(live_version(&env.client, &env.namespace).await.as_deref(), Some("0.4.0"));
    assert!(!good.stderr.contains("t0ps3cret"), "the password is never logged");
}

#[tokio::test]
async fn an_umbrella_chart_in_git_renders_with_its_dependency_from_the_repository() {
    let env = common::setup("chart-deps").await;
    let work = tempfile::tempdir().unwrap();
    let server = ChartServer::start(&work.path().join("served"));
    for version in ["0.1.0", "0.1.5", "0.2.0"] {
        server.publish(work.path(), "demo", version);
    }
    let repo = common::GitRepo::new();
    let chart = format!(
        "apiVersion: v2\nname: umbrella\nversion: 1.0.0\ndependencies:\n- name: demo\n  version: \"~0.1\"\n  repository: \"{}/\"\n",
        server.url
    );
    repo.write("charts/umbrella/Chart.yaml", &chart);
    let lock = format!("dependencies:\n- name: demo\n  version: 0.1.0\n  repository: \"{}/\"\n", server.url);
    repo.write("charts/umbrella/Chart.lock", &lock);
    repo.write(
        "charts/umbrella/templates/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-umbrella\ndata:\n  umbrella: \"yes\"\n",
    );
    repo.commit_and_push("umbrella chart with a dependency from the chart repository");
    let state = tempfile::tempdir().unwrap();
    let extra = "[sync.helm]\nrelease = \"shop\"\n";
    let other = common::unique("chart-deps-b");
    common::create_namespace(&env.client, &other).await;
    let units = common::unit_toml("umbrella", &repo.bare(), "charts/umbrella", &env.namespace, extra)
        + &common::unit_toml("umbrella-b", &repo.bare(), "charts/umbrella", &other, extra);
    let config = config(state.path(), &server.url, &units);
    let mut engine = common::engine(&env.client, &config, "umbrella").await;

    engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    let umbrella = Api::<ConfigMap>::namespaced(env.client.clone(), &env.namespace).get("shop-umbrella").await.unwrap();
    assert_eq!(umbrella.data.unwrap()["umbrella"], "yes");
    assert_eq!(live_version(&env.client, &env.namespace).await.as_deref(), Some("0.1.0"), "Chart.lock pins 0.1.0");

    // A second unit with the same dependency uses the archive already downloaded.
    let mut second = common::engine(&env.client, &config, "umbrella-b").await;
    second.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert_eq!(live_version(&env.client, &other).await.as_deref(), Some("0.1.0"));
    let domains: Vec<_> = std::fs::read_dir(state.path().join("charts/dependencies")).unwrap().flatten().collect();
    assert_eq!(domains.len(), 1, "both units write as gitward to one cluster: one trust domain: {domains:?}");
    let cached: Vec<_> = std::fs::read_dir(domains[0].path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tgz"))
        .collect();
    assert_eq!(cached.len(), 1, "one archive, shared: {cached:?}");

    // Without the lock, the newest version in range.
    repo.remove("charts/umbrella/Chart.lock");
    repo.commit_and_push("drop the lock");
    engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert_eq!(live_version(&env.client, &env.namespace).await.as_deref(), Some("0.1.5"), "~0.1 without a lock");
}

#[tokio::test]
async fn an_https_repository_is_trusted_through_ca_file() {
    let env = common::setup("chart-tls").await;
    let work = tempfile::tempdir().unwrap();
    let (ca, cert, key) = tls_files(work.path());
    let served = work.path().join("served");
    package(work.path(), "demo", "0.5.0", &served);
    crate::common::charts::helm(
        &work.path().join("helm-home"),
        &["repo", "index", served.to_str().unwrap()],
        work.path(),
    );
    let https = HttpsFiles::start(&served, &cert, &key).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gitward.toml");
    let run = |unit_extra: &str| {
        let units = chart_unit("demo", &env.namespace, &https.url, "*") + unit_extra;
        std::fs::write(&config, config_text(&dir.path().join("state"), &listed(&https.url), &units)).unwrap();
        common::gitward(&["sync"], &config, Duration::from_secs(120))
    };

    let untrusted = run("");
    assert_eq!(untrusted.code, Some(2), "{}", untrusted.stderr);
    assert!(untrusted.stderr.contains(&format!("{}/index.yaml", https.url)), "{}", untrusted.stderr);
    assert_eq!(live_version(&env.client, &env.namespace).await, None);
    let trusted = run(&format!("ca_file = \"{}\"\n", ca.display()));
    assert_eq!(trusted.code, Some(0), "{}", trusted.stderr);
    assert_eq!(live_version(&env.client, &env.namespace).await.as_deref(), Some("0.5.0"));
}

#[tokio::test]
async fn a_chart_unit_reads_its_values_files_from_git() {
    let env = common::setup("chart-values").await;
    let work = tempfile::tempdir().unwrap();
    let (server, _) = ChartServer::with_demo(work.path(), "0.1.0");
    let repo = common::GitRepo::new();
    let first = repo.push(&[("values/prod.yaml", "greeting: from git\n")], "values for the chart");
    let state = tempfile::tempdir().unwrap();
    // The unit's own keys first, then its [sync.helm] table with the values file from git.
    let unit = chart_unit("demo", &env.namespace, &server.url, "*").replacen(
        "[sync.helm]\n",
        &format!("repo = \"{}\"\n[sync.helm]\n", repo.bare().display()),
        1,
    ) + "values_files = [\"values/prod.yaml\"]\n";
    let config = config(state.path(), &server.url, &unit);
    let mut engine = common::engine(&env.client, &config, "demo").await;
    let greeting = |client: kube::Client, ns: String| async move {
        let cm = Api::<ConfigMap>::namespaced(client, &ns).get("shop-demo").await.unwrap();
        cm.data.unwrap()["greeting"].clone()
    };

    let report = engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert!(report.revision.0.starts_with("demo@0.1.0@sha256:"), "{}", report.revision);
    assert!(report.revision.0.ends_with(&format!("+git:{first}")), "{}", report.revision);
    assert_eq!(greeting(env.client.clone(), env.namespace.clone()).await, "from git");

    repo.push(&[("values/prod.yaml", "greeting: changed in git\n")], "new values");
    engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    assert_eq!(
        greeting(env.client.clone(), env.namespace.clone()).await,
        "changed in git",
        "a values commit is a new revision"
    );
}

/// A SOPS-encrypted values file of a chart unit reaches helm decrypted with the unit's age key,
/// as a chart in git's does; without `[sync.decryption]` the revision is refused, naming the
/// file, instead of rendering the chart with ciphertext as its configuration.
#[tokio::test]
async fn a_chart_units_sops_encrypted_values_file_is_decrypted_before_helm_reads_it() {
    let env = common::setup("chart-sops").await;
    let work = tempfile::tempdir().unwrap();
    let (server, _) = ChartServer::with_demo(work.path(), "0.1.0");
    let keys = tempfile::tempdir().unwrap();
    let (key, public) = crate::sources::render::age_key(keys.path(), "key");
    let greeting = format!("sealed-{}", common::unique("g"));
    let plain = keys.path().join("prod.yaml");
    std::fs::write(&plain, format!("greeting: {greeting}\n")).unwrap();
    let sealed =
        crate::sources::render::tool("sops", &["encrypt", "--age", &public, plain.to_str().unwrap()], keys.path());
    assert!(!sealed.contains(&greeting) && sealed.contains("ENC[AES256_GCM"), "{sealed}");
    let repo = common::GitRepo::new();
    repo.push(&[("values/prod.yaml", &sealed)], "sealed values for the chart");
    let unit = |decryption: &str| {
        chart_unit("demo", &env.namespace, &server.url, "*").replacen(
            "[sync.helm]\n",
            &format!("repo = \"{}\"\n{decryption}[sync.helm]\n", repo.bare().display()),
            1,
        ) + "values_files = [\"values/prod.yaml\"]\n"
    };

    // Without a key: refused, nothing applied.
    let state = tempfile::tempdir().unwrap();
    let mut engine = common::engine(&env.client, &config(state.path(), &server.url, &unit("")), "demo").await;
    let e = engine.sync().await.expect_err("an encrypted values file without a key is refused");
    let message = chain(&e);
    assert!(message.contains("values/prod.yaml") && message.contains("[sync.decryption]"), "{message}");
    let configmaps = Api::<ConfigMap>::namespaced(env.client.clone(), &env.namespace);
    assert!(configmaps.get_opt("shop-demo").await.unwrap().is_none());

    // With the age key: helm reads the plaintext.
    let decryption = format!("[sync.decryption]\nage_key_file = \"{}\"\n", key.display());
    let state = tempfile::tempdir().unwrap();
    let mut engine = common::engine(&env.client, &config(state.path(), &server.url, &unit(&decryption)), "demo").await;
    engine.sync().await.unwrap_or_else(|e| panic!("{}", chain(&e)));
    let live = configmaps.get("shop-demo").await.unwrap();
    assert_eq!(live.data.unwrap()["greeting"], greeting);
}
