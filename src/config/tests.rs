//! Tests of the config: parsing, resolution, the errors and their hints.

use std::time::Duration;

use super::*;

/// A config of one unit `shop` with every default: the other config test modules start from it.
pub(super) const MINIMAL: &str = "[[sync]]\nname = \"shop\"\nrepo = \"https://git.example.com/shop.git\"\n";

/// Parses `text` as `/etc/gitward/config.toml`.
pub(super) fn parse(text: &str) -> Result<Config> {
    Config::from_toml(text, Path::new("/etc/gitward"), "config.toml")
}

fn error(text: &str) -> String {
    parse(text).expect_err("config should be refused").to_string()
}

#[test]
fn defaults_are_applied_to_a_minimal_config() {
    let config = parse(MINIMAL).unwrap();
    assert_eq!(config.clusters, vec![ClusterConfig::default()]);
    assert_eq!(config.daemon, DaemonConfig::default());
    assert_eq!(config.units, vec![SyncUnit::new("shop", "https://git.example.com/shop.git")]);
    let unit = config.unit("shop").unwrap();
    assert_eq!(unit.reference, "main");
    assert_eq!(unit.path, "");
    assert_eq!(unit.apply_mode, ApplyMode::ServerSideApply);
    assert_eq!(unit.max_file_bytes, 4 * 1024 * 1024);
    assert_eq!(unit.inventory.name, "gitward-shop");
    assert!(config.unit("cart").is_none());
}

#[test]
fn inventory_namespace_defaults_to_the_units_namespace() {
    let config = parse(&format!("{MINIMAL}namespace = \"shop\"\n[sync.inventory]\nkind = \"ConfigMap\"\n")).unwrap();
    let inventory = &config.units[0].inventory;
    assert_eq!((inventory.kind, inventory.namespace.as_str()), (InventoryKind::ConfigMap, "shop"));
}

#[test]
fn durations_and_sizes_are_parsed() {
    let text = format!(
        "[daemon]\ninterval = \"5m\"\nresync_interval = \"1h 30m\"\nlisten = \"127.0.0.1:9090\"\n\
         {MINIMAL}max_file_bytes = 1024\napply_mode = \"update\"\nhealth_timeout = \"0s\"\n"
    );
    let config = parse(&text).unwrap();
    assert_eq!(config.daemon.interval, Duration::from_secs(300));
    assert_eq!(config.daemon.resync_interval, Duration::from_secs(5400));
    assert_eq!(config.daemon.listen, Some("127.0.0.1:9090".parse().unwrap()));
    assert_eq!(config.units[0].max_file_bytes, 1024);
    assert_eq!(config.units[0].apply_mode.to_string(), "update");
    assert_eq!(config.units[0].health_timeout, Duration::ZERO, "0s disables the health wait");
}

#[test]
fn max_index_age_defaults_to_a_day_and_zero_turns_it_off() {
    assert_eq!(parse(MINIMAL).unwrap().units[0].render_tools.max_index_age, Duration::from_secs(86_400));
    let config = parse(&format!("[render]\nmax_index_age = \"0s\"\n{MINIMAL}")).unwrap();
    assert_eq!(config.units[0].render_tools.max_index_age, Duration::ZERO);
    let config = parse(&format!("[render]\nmax_index_age = \"2h\"\n{MINIMAL}")).unwrap();
    assert_eq!(config.units[0].render_tools.max_index_age, Duration::from_secs(7200));
}

#[test]
fn concurrent_syncs_default_to_four_and_zero_is_refused() {
    assert_eq!(parse(MINIMAL).unwrap().daemon.max_concurrent_syncs, 4);
    let config = parse(&format!("[daemon]\nmax_concurrent_syncs = 1\n{MINIMAL}")).unwrap();
    assert_eq!(config.daemon.max_concurrent_syncs, 1);
    let message = error(&format!("[daemon]\nmax_concurrent_syncs = 0\n{MINIMAL}"));
    assert!(message.contains("daemon.max_concurrent_syncs: must be at least 1"), "{message}");
}

#[test]
fn fetch_bounds_default_and_are_checked() {
    assert_eq!(parse(MINIMAL).unwrap().daemon.fetching, crate::config::Fetching::default());
    let text = "[daemon]\nmax_fetches_per_host = 2\nfetch_connect_timeout = \"3s\"\nfetch_idle_timeout = \"1m\"\n";
    let fetching = parse(&format!("{text}{MINIMAL}")).unwrap().daemon.fetching;
    assert_eq!((fetching.max_per_host, fetching.connect_timeout), (2, Duration::from_secs(3)));
    assert_eq!(fetching.idle_timeout, Duration::from_secs(60));
    for (line, says) in [
        ("max_fetches_per_host = 0", "daemon.max_fetches_per_host: must be at least 1"),
        ("fetch_connect_timeout = \"0s\"", "daemon.fetch_connect_timeout: must be longer than zero"),
        ("fetch_idle_timeout = \"2days\"", "daemon.fetch_idle_timeout: must be at most 24h"),
    ] {
        let message = error(&format!("[daemon]\n{line}\n{MINIMAL}"));
        assert!(message.contains(says), "{message}");
    }
}

#[test]
fn takeover_managers_default_to_client_side_apply_and_can_be_set() {
    let unit = &parse(MINIMAL).unwrap().units[0];
    assert_eq!(unit.takeover_managers, ["kubectl-client-side-apply", "before-first-apply"]);
    let config = parse(&format!("{MINIMAL}takeover_managers = [\"helm\", \"kubectl-edit\"]\n")).unwrap();
    assert_eq!(config.units[0].takeover_managers, ["helm", "kubectl-edit"]);
    assert!(parse(&format!("{MINIMAL}takeover_managers = []\n")).unwrap().units[0].takeover_managers.is_empty());
    let message = error(&format!("{MINIMAL}takeover_managers = [\"ok\", \"\"]\n"));
    assert!(message.starts_with("config.toml: line 4: sync[0].takeover_managers: "), "{message}");
}

#[test]
fn render_settings_are_resolved_and_copied_into_each_unit() {
    let text = format!(
        "[render]\nhelm = \"bin/helm\"\ntimeout = \"5s\"\nmax_output_bytes = \"1MiB\"\n{MINIMAL}\
         render = \"helm\"\n[sync.helm]\nvalues_files = [\"./values//prod.yaml\"]\n\
         [sync.helm.values]\nreplicas = 2\nimage = {{ tag = \"v1\" }}\n\
         [sync.decryption]\nage_key_file = \"age.key\"\n"
    );
    let config = parse(&text).unwrap();
    let unit = &config.units[0];
    assert_eq!(unit.render, RenderMode::Helm);
    assert_eq!(unit.render_tools, config.render);
    assert_eq!(config.render.helm, Some(PathBuf::from("/etc/gitward/bin/helm")));
    assert_eq!(config.render.kustomize, None);
    assert_eq!((config.render.timeout, config.render.max_output_bytes), (Duration::from_secs(5), 1 << 20));
    assert_eq!(unit.helm.values_files, ["values/prod.yaml"]);
    assert_eq!(
        serde_json::Value::Object(unit.helm.values.clone()),
        serde_json::json!({"replicas": 2, "image": {"tag": "v1"}})
    );
    assert_eq!(unit.decryption.as_ref().map(|d| d.age_key_file.clone()), Some(PathBuf::from("/etc/gitward/age.key")));
    let defaults = &parse(MINIMAL).unwrap().units[0];
    assert_eq!(
        (defaults.render, defaults.allow_remote_bases, defaults.create_namespace),
        (RenderMode::Auto, false, false)
    );
    assert_eq!(defaults.render_tools.timeout, Duration::from_secs(60));
}

#[test]
fn helm_renders_for_the_newest_kubernetes_it_knows_unless_told_otherwise() {
    let defaults = parse(MINIMAL).unwrap().render;
    assert_eq!((defaults.kube_version.as_str(), defaults.api_versions.len()), ("v1.37.0", 0));
    let text =
        format!("[render]\nkube_version = \"v1.31.4\"\napi_versions = [\"monitoring.coreos.com/v1\"]\n{MINIMAL}");
    let config = parse(&text).unwrap();
    assert_eq!(config.units[0].render_tools.kube_version, "v1.31.4");
    assert_eq!(config.units[0].render_tools.api_versions, ["monitoring.coreos.com/v1"]);
    let message = error(&format!("[render]\nkube_version = \"latest\"\n{MINIMAL}"));
    assert!(
        message.starts_with("config.toml: line 2: render.kube_version: `latest` is not a Kubernetes version"),
        "{message}"
    );
    let message = error(&format!("[render]\napi_versions = [\"v1\", \"a b/v1\"]\n{MINIMAL}"));
    assert!(message.starts_with("config.toml: line 2: render.api_versions: "), "{message}");
}

#[test]
fn a_values_file_outside_the_repository_is_refused() {
    let message = error(&format!("{MINIMAL}[sync.helm]\nvalues_files = [\"../secrets.yaml\"]\n"));
    assert!(message.starts_with("config.toml: line 5: sync[0].helm.values_files: "), "{message}");
    assert!(error(&format!("{MINIMAL}render = \"jsonnet\"\n")).contains("render"));
}

#[test]
fn a_bad_duration_names_its_line() {
    let message = error(&format!("[daemon]\ninterval = \"soon\"\n{MINIMAL}"));
    assert!(message.starts_with("config.toml: line 2: daemon.interval: "), "{message}");
    assert!(error(&format!("[daemon]\ninterval = \"0s\"\n{MINIMAL}")).contains("line 2: daemon.interval"));
}

#[test]
fn an_unknown_key_error_names_the_key_and_line() {
    let message = error(&format!("[daemon]\nintervall = \"60s\"\n{MINIMAL}"));
    assert_eq!(
        message,
        "config.toml: line 2: daemon: unknown key `intervall`: did you mean `interval`, as in `interval = \"60s\"`?"
    );
    let message = error(&format!("{MINIMAL}\n[sync.git]\nssh_key = \"id\"\n"));
    assert!(
        message.starts_with("config.toml: line 6: sync.git: unknown key `ssh_key`: did you mean `ssh_key_file`"),
        "{message}"
    );
}

#[test]
fn a_single_sync_table_says_to_write_two_brackets() {
    let message = error("[sync]\nname = \"shop\"\nrepo = \"/r\"\n");
    assert!(message.contains("sync: `[sync]` is a single table"), "{message}");
    assert!(message.contains("write `[[sync]]`"), "{message}");
}

#[test]
fn a_missing_repo_error_names_the_key() {
    let message = error("[[sync]]\nname = \"shop\"\n");
    assert_eq!(
        message,
        "config.toml: line 2: sync[0].repo: is required (or [sync.helm] repo_url, for a chart from a chart repository)"
    );
}

#[test]
fn a_config_without_units_is_refused() {
    assert_eq!(error("[daemon]\n"), "config.toml: sync: at least one [[sync]] unit (or [[sync_set]]) is required");
}

#[test]
fn duplicate_unit_names_are_refused_with_their_line() {
    let message = error(&format!("{MINIMAL}{MINIMAL}"));
    assert_eq!(message, "config.toml: line 5: sync[1].name: duplicate unit name `shop` (also sync[0])");
}

#[test]
fn units_sharing_an_inventory_are_refused() {
    let text = format!(
        "{MINIMAL}[[sync]]\nname = \"cart\"\nrepo = \"/srv/git/cart\"\n[sync.inventory]\nname = \"gitward-shop\"\n"
    );
    let message = error(&text);
    assert!(message.starts_with("config.toml: line 7: sync[1].inventory: Secret/default/gitward-shop"), "{message}");
}

#[test]
fn a_bad_unit_name_is_refused_with_its_line() {
    let message = error("[[sync]]\nname = \"Shop_1\"\nrepo = \"/srv/git/shop\"\n");
    assert!(message.starts_with("config.toml: line 2: sync[0].name: `Shop_1`"), "{message}");
}

#[test]
fn a_prune_fraction_outside_zero_to_one_is_refused() {
    let message = error(&format!("{MINIMAL}max_prune_fraction = 1.5\n"));
    assert!(message.starts_with("config.toml: line 4: sync[0].max_prune_fraction: 1.5 is out of range"), "{message}");
    assert!(error(&format!("{MINIMAL}max_prune_fraction = nan\n")).contains("max_prune_fraction"));
    assert_eq!(parse(&format!("{MINIMAL}max_prune_fraction = 1\n")).unwrap().units[0].max_prune_fraction, 1.0);
}

#[test]
fn dot_dot_in_path_is_refused() {
    let message = error(&format!("{MINIMAL}path = \"deploy/../../etc\"\n"));
    assert!(message.starts_with("config.toml: line 4: sync[0].path: "), "{message}");
    assert!(error(&format!("{MINIMAL}path = \"/deploy\"\n")).contains("sync[0].path"));
    assert_eq!(parse(&format!("{MINIMAL}path = \"./deploy/prod/\"\n")).unwrap().units[0].path, "deploy/prod");
}

#[test]
fn relative_paths_are_resolved_against_the_files_directory() {
    let text = "[cluster]\nkubeconfig = \"kube/config\"\n[daemon]\nstate_dir = \"state\"\n\
                webhook_secret_file = \"/run/secrets/hook\"\n\
                [[sync]]\nname = \"local\"\nrepo = \"repos/shop.git\"\n[sync.git]\nssh_key_file = \"keys/id\"\n\
                [[sync]]\nname = \"remote\"\nrepo = \"git@github.com:acme/shop.git\"\n";
    let config = parse(text).unwrap();
    assert_eq!(config.clusters[0].kubeconfig, Some(PathBuf::from("/etc/gitward/kube/config")));
    assert_eq!(config.daemon.state_dir, PathBuf::from("/etc/gitward/state"));
    assert_eq!(config.daemon.webhook_secret_file, Some(PathBuf::from("/run/secrets/hook")));
    let local = config.unit("local").unwrap();
    assert_eq!(local.repo, "/etc/gitward/repos/shop.git");
    assert_eq!(local.local_repo(), Some(PathBuf::from("/etc/gitward/repos/shop.git")));
    assert_eq!(local.git.ssh_key_file, Some(PathBuf::from("/etc/gitward/keys/id")));
    let remote = config.unit("remote").unwrap();
    assert_eq!(remote.repo, "git@github.com:acme/shop.git");
    assert_eq!(remote.local_repo(), None);
}

#[test]
fn a_tilde_path_is_refused_rather_than_misread() {
    let message = error("[cluster]\nkubeconfig = \"~/.kube/config\"\n[[sync]]\nname = \"a\"\nrepo = \"/r\"\n");
    assert!(message.starts_with("config.toml: line 2: cluster.kubeconfig: "), "{message}");
}

#[test]
fn load_reads_a_file_and_anchors_at_its_directory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gitward.toml");
    std::fs::write(&path, "[[sync]]\nname = \"shop\"\nrepo = \"shop.git\"\n").unwrap();
    let config = Config::load(&path).unwrap();
    assert_eq!(config.units[0].repo, dir.path().join("shop.git").to_str().unwrap());
    let missing = Config::load(&dir.path().join("missing.toml")).unwrap_err();
    assert!(matches!(missing, Error::ReadFailed { .. }), "{missing}");
}

const TWO_CLUSTERS: &str = "[[cluster]]\nname = \"prod\"\nkubeconfig = \"prod.kubeconfig\"\n\
                            [[cluster]]\nname = \"edge\"\ncontext = \"edge-1\"\nmax_in_flight = 8\n";

#[test]
fn a_single_cluster_table_is_the_cluster_named_default() {
    let config = parse(&format!("[cluster]\nmax_in_flight = 4\n{MINIMAL}")).unwrap();
    assert_eq!(config.clusters.len(), 1);
    assert_eq!((config.clusters[0].name.as_str(), config.clusters[0].max_in_flight), ("default", 4));
    assert_eq!(config.units[0].cluster, "default");
    assert_eq!(config.cluster_of(&config.units[0]).max_in_flight, 4);
}

#[test]
fn units_pick_one_of_several_named_clusters() {
    let text = format!(
        "{TWO_CLUSTERS}{MINIMAL}cluster = \"edge\"\n[[sync]]\nname = \"cart\"\nrepo = \"/r\"\ncluster = \"prod\"\n"
    );
    let config = parse(&text).unwrap();
    let names: Vec<_> = config.clusters.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["prod", "edge"]);
    assert_eq!(config.cluster_of(config.unit("shop").unwrap()).context.as_deref(), Some("edge-1"));
    assert_eq!(
        config.cluster_of(config.unit("cart").unwrap()).kubeconfig,
        Some(PathBuf::from("/etc/gitward/prod.kubeconfig"))
    );
    let one = parse(&format!("[[cluster]]\nname = \"prod\"\n{MINIMAL}")).unwrap();
    assert_eq!(one.units[0].cluster, "prod", "the only cluster is the default");
}

#[test]
fn cluster_mistakes_name_their_line_and_key() {
    let message = error(&format!("{TWO_CLUSTERS}{MINIMAL}"));
    assert!(
        message.starts_with("config.toml: line 9: sync[0].cluster: required: the file declares 2 clusters"),
        "{message}"
    );
    let message = error(&format!("{TWO_CLUSTERS}{MINIMAL}cluster = \"staging\"\n"));
    assert!(message.starts_with("config.toml: line 11: sync[0].cluster: no cluster named `staging`"), "{message}");
    let message = error(&format!("[[cluster]]\nname = \"a\"\n[[cluster]]\nname = \"a\"\n{MINIMAL}"));
    assert_eq!(message, "config.toml: line 4: cluster[1].name: duplicate cluster name `a` (also cluster[0])");
    let message = error(&format!("[[cluster]]\nkubeconfig = \"k\"\n{MINIMAL}"));
    assert!(message.starts_with("config.toml: line 1: cluster[0].name: required"), "{message}");
    let message = error(&format!("[[cluster]]\nname = \"a\"\nmax_in_flight = 0\n{MINIMAL}"));
    assert!(message.starts_with("config.toml: line 3: cluster[0].max_in_flight: "), "{message}");
    let message = error(&format!("[[cluster]]\nname = \"a\"\nkubeconfg = \"k\"\n{MINIMAL}"));
    assert!(
        message.starts_with("config.toml: line 3: cluster: unknown key `kubeconfg`: did you mean `kubeconfig`"),
        "{message}"
    );
    let message = error(&format!("[cluster]\nname = \"A b\"\n{MINIMAL}"));
    assert!(message.starts_with("config.toml: line 2: cluster.name: "), "{message}");
}

#[test]
fn sharding_is_on_when_its_table_is_present() {
    assert_eq!(parse(MINIMAL).unwrap().daemon.sharding, None);
    let config = parse(&format!("[daemon.sharding]\n{MINIMAL}")).unwrap();
    let sharding = config.daemon.sharding.unwrap();
    assert_eq!(sharding.namespace, "gitward-system");
    assert_eq!(sharding.lease_duration, Duration::from_secs(15));
    assert_eq!((sharding.identity, sharding.cluster.as_str()), (None, "default"));
    let text = format!(
        "{TWO_CLUSTERS}[daemon.sharding]\nnamespace = \"ops\"\nlease_duration = \"4s\"\n\
         identity = \"replica-a\"\ncluster = \"edge\"\n{MINIMAL}cluster = \"prod\"\n"
    );
    let sharding = parse(&text).unwrap().daemon.sharding.unwrap();
    assert_eq!(sharding.lease_duration, Duration::from_secs(4));
    assert_eq!((sharding.namespace.as_str(), sharding.cluster.as_str()), ("ops", "edge"));
    assert_eq!(sharding.identity.as_deref(), Some("replica-a"));
}

#[test]
fn sharding_mistakes_name_their_line_and_key() {
    let message = error(&format!("[daemon.sharding]\nlease_duration = \"1s\"\n{MINIMAL}"));
    assert!(message.starts_with("config.toml: line 2: daemon.sharding.lease_duration: "), "{message}");
    let message = error(&format!("[daemon.sharding]\ncluster = \"nope\"\n{MINIMAL}"));
    assert!(message.starts_with("config.toml: line 2: daemon.sharding.cluster: no cluster named `nope`"), "{message}");
    let message = error(&format!("[daemon.sharding]\nidentity = \"Pod_1\"\n{MINIMAL}"));
    assert!(message.starts_with("config.toml: line 2: daemon.sharding.identity: "), "{message}");
    let message = error(&format!("[daemon.leader_election]\n[daemon.sharding]\n{MINIMAL}"));
    assert!(message.contains("daemon.sharding: cannot be combined with [daemon.leader_election]"), "{message}");
    let message = error(&format!("[daemon.sharding]\nnamespce = \"x\"\n{MINIMAL}"));
    assert!(
        message.starts_with("config.toml: line 2: daemon.sharding: unknown key `namespce`: did you mean `namespace`"),
        "{message}"
    );
}

#[test]
fn adopt_from_names_units_or_applyset_ids_and_marks_the_units_it_names() {
    let id = format!("applyset-{}-v1", "A".repeat(43));
    let text = format!(
        "{MINIMAL}[[sync]]\nname = \"shop-db\"\nrepo = \"https://git.example.com/shop.git\"\n\
         adopt_from = [\"shop\", \"{id}\"]\n"
    );
    let config = parse(&text).unwrap();
    assert_eq!(config.unit("shop-db").unwrap().adopt_from, ["shop".to_string(), id]);
    assert_eq!(config.unit("shop").unwrap().adopted_by, ["shop-db"]);
    assert!(config.unit("shop-db").unwrap().adopted_by.is_empty());
    let message = error(&format!("{MINIMAL}adopt_from = [\"Shop_1\"]\n"));
    assert!(message.starts_with("config.toml: line 4: sync[0].adopt_from: "), "{message}");
    let message = error(&format!("{MINIMAL}adopt_from = [\"applyset-short-v1\"]\n"));
    assert!(message.contains("not an ApplySet id"), "{message}");
}

#[test]
fn the_sharded_deployments_config_parses() {
    let yaml = include_str!("../../deploy/kubernetes-sharded/configmap.yaml");
    let (_, body) = yaml.split_once("config.toml: |\n").expect("a config.toml key");
    let text: Vec<&str> = body.lines().map(|l| l.strip_prefix("    ").unwrap_or(l)).collect();
    let config =
        Config::from_toml(&text.join("\n"), Path::new("/"), "configmap.yaml").unwrap_or_else(|e| panic!("{e}"));
    let sharding = config.daemon.sharding.expect("[daemon.sharding]");
    assert_eq!((sharding.namespace.as_str(), sharding.lease_duration), ("gitward-system", Duration::from_secs(15)));
    assert_eq!(config.units.len(), 3);
}

#[test]
fn the_multi_cluster_example_parses() {
    let text = include_str!("../../examples/multi-cluster.toml");
    let config = Config::from_toml(text, Path::new("/src"), "multi-cluster.toml").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.clusters.len(), 2);
    assert_eq!(config.cluster_of(config.unit("platform-edge").unwrap()).context.as_deref(), Some("edge-eu-1"));
}

#[test]
fn the_example_config_toml_parses() {
    let config = Config::from_toml(include_str!("../../config.toml"), Path::new("/src/gitward"), "config.toml")
        .unwrap_or_else(|e| panic!("{e}"));
    let unit = config.unit("example").unwrap();
    assert_eq!(unit.repo, "/src/gitward/target/example-repo.git");
    let helm = config.unit("example-helm").unwrap();
    assert_eq!(helm.helm.values_files, ["helm/values/demo.yaml"]);
    assert_eq!(helm.helm.release.as_deref(), Some("hello"));
    assert!(helm.create_namespace);
    assert_eq!(helm.render_tools.helm, Some(PathBuf::from("/src/gitward/target/tools/bin/helm")));
    assert_eq!(config.daemon.state_dir, PathBuf::from("/src/gitward/target/gitward-state"));
    assert_eq!(config.clusters[0].kubeconfig, None);
}

#[test]
fn a_ref_on_an_oci_artifact_unit_is_refused_with_its_line() {
    let artifact = "[[sync]]\nname = \"app\"\nrepo = \"oci://registry.example/manifests/app:v1\"\n";
    assert_eq!(parse(artifact).unwrap().unit("app").unwrap().repo, "oci://registry.example/manifests/app:v1");
    let message = error(&format!("{artifact}ref = \"v2\"\n"));
    assert!(message.contains("line 4: sync[0].ref:"), "{message}");
    assert!(message.contains("does not apply to an OCI artifact"), "{message}");
}

#[test]
fn record_chunk_bytes_is_a_size_between_one_kib_and_768_kib() {
    let ok = parse(&format!("{MINIMAL}[sync.inventory]\nrecord_chunk_bytes = \"4KiB\"\n")).unwrap();
    assert_eq!(ok.units[0].inventory.record_chunk_bytes, 4096);
    let err = parse(&format!("{MINIMAL}[sync.inventory]\nrecord_chunk_bytes = \"1MiB\"\n")).unwrap_err().to_string();
    assert!(err.contains("inventory.record_chunk_bytes") && err.contains("768KiB"), "{err}");
}
