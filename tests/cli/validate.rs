//! `gitward validate` run as a user runs it, on real git repositories: what the API server
//! would refuse (kinds, names, label values, one object in two units) is refused with exit 2
//! and its own words, a namespace no unit creates is only a warning, `-o json` carries the
//! same, and nothing is left in a fresh state directory or the temporary directory.

use std::path::Path;

use serde_json::{Value, json};

use crate::common;

/// What one `gitward validate` printed.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `gitward validate --config <config> <args>` with text logs and `TMPDIR` set to `tmp`.
fn validate(config: &Path, args: &[&str], tmp: &Path) -> Run {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gitward"))
        .args(["validate", "--config"])
        .arg(config)
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("GITWARD_LOG_FORMAT")
        .env("TMPDIR", tmp)
        .output()
        .expect("gitward runs");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    Run { code: out.status.code(), stdout: text(&out.stdout), stderr: text(&out.stderr) }
}

/// The log lines of `stderr` at `level` (`ERROR`, `WARN`), without their timestamps.
fn logged(stderr: &str, level: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|l| l.split_once(' ').map(|(_, rest)| rest.trim_start()))
        .filter(|rest| rest.starts_with(&format!("{level} ")))
        .map(str::to_owned)
        .collect()
}

/// A temporary directory for a test: the config in it, its state under `state/`, `TMPDIR` at
/// `tmp/`.
fn workspace(units: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("tmp")).unwrap();
    let config = common::config_file(dir.path(), units);
    (dir, config)
}

const SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or \
                         '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used \
                         for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_VALUE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or \
                           '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or \
                           'my_value',  or '12345', regex used for validation is \
                           '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

#[test]
fn an_unknown_kind_a_bad_name_and_a_bad_label_value_are_refused_in_the_api_servers_words() {
    let repo = common::GitRepo::new();
    repo.write("app/kind.yaml", "apiVersion: v1\nkind: ConfigMapp\nmetadata:\n  name: web\n");
    repo.write("app/name.yaml", &common::cm("Web_Config", "1"));
    let labelled = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: labelled\n  labels:\n    tier: web server\n";
    repo.write("app/label.yaml", labelled);
    let revision = repo.push(&[("app/fine.yaml", &common::cm("web-config", "1"))], "three the API server refuses");
    let (dir, config) = workspace(&common::unit_toml("app", &repo.bare(), "app", "default", ""));
    let run = validate(&config, &[], &dir.path().join("tmp"));
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert_eq!(run.stdout, format!("app: invalid {} (4 objects, 3 refused)\n", &revision[..7]));
    assert_eq!(
        logged(&run.stderr, "ERROR"),
        [
            "ERROR invalid object unit=app file=\"app/kind.yaml (document 1)\" object=ConfigMapp/default/web \
             reason=\"unknown kind ConfigMapp in v1; install its CRD first or add it to the repository\""
                .to_owned(),
            "ERROR invalid object unit=app file=\"app/label.yaml (document 1)\" object=ConfigMap/default/labelled \
             reason=\"metadata.labels: Invalid value: \\\"web server\\\": "
                .to_owned()
                + LABEL_VALUE
                + "\"",
            "ERROR invalid object unit=app file=\"app/name.yaml (document 1)\" object=ConfigMap/default/Web_Config \
             reason=\"metadata.name: Invalid value: \\\"Web_Config\\\": "
                .to_owned()
                + SUBDOMAIN
                + "\"",
        ],
        "{}",
        run.stderr
    );
    assert!(logged(&run.stderr, "WARN").is_empty(), "{}", run.stderr);
}

#[test]
fn a_custom_resource_is_valid_with_its_crd_in_any_unit_and_refused_without() {
    let repo = common::GitRepo::new();
    let crd = serde_json::to_string(&common::crd("example.com", "Widget", "widgets")).unwrap();
    repo.write("crds/widget.yaml", &crd);
    repo.write("app/widget.yaml", "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\n");
    repo.write("app/gadget.yaml", "apiVersion: other.example.com/v1\nkind: Gadget\nmetadata:\n  name: g1\n");
    let revision = repo.commit_and_push("a Widget, whose CRD is here, and a Gadget, whose CRD is not");
    let short = &revision[..7];
    let units = common::unit_toml("crds", &repo.bare(), "crds", "default", "")
        + &common::unit_toml("app", &repo.bare(), "app", "default", "");
    let (dir, config) = workspace(&units);
    let tmp = dir.path().join("tmp");
    let gadget = "ERROR invalid object unit=app file=\"app/gadget.yaml (document 1)\" object=Gadget/default/g1 \
                  reason=\"unknown kind Gadget in other.example.com/v1; install its CRD first or add it to the \
                  repository\"";
    let run = validate(&config, &[], &tmp);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert_eq!(run.stdout, format!("crds: valid {short} (1 object)\napp: invalid {short} (2 objects, 1 refused)\n"));
    assert_eq!(logged(&run.stderr, "ERROR"), [gadget], "{}", run.stderr);

    // The unit asked for alone still sees the CRD of the other.
    let run = validate(&config, &["--sync", "app"], &tmp);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert_eq!(run.stdout, format!("app: invalid {short} (2 objects, 1 refused)\n"));
    assert_eq!(logged(&run.stderr, "ERROR"), [gadget], "{}", run.stderr);

    repo.remove("app/gadget.yaml");
    let fixed = repo.commit_and_push("only the Widget");
    let run = validate(&config, &["--sync", "app"], &tmp);
    assert_eq!((run.code, run.stdout), (Some(0), format!("app: valid {} (1 object)\n", &fixed[..7])), "{}", run.stderr);
}

#[test]
fn a_namespace_no_unit_creates_is_a_warning_and_exits_0() {
    let repo = common::GitRepo::new();
    repo.write("app/a.yaml", &common::cm("a", "1"));
    repo.write("app/b.yaml", &common::cm("b", "1"));
    repo.write("app/system.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s\n  namespace: kube-system\n");
    repo.write("made/c.yaml", &common::cm("c", "1"));
    repo.write("ns/namespace.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: declared\n");
    repo.write("ns/d.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: d\n  namespace: declared\n");
    let revision = repo.commit_and_push("objects in four namespaces");
    let short = &revision[..7];
    let units = common::unit_toml("app", &repo.bare(), "app", "shop", "")
        + &common::unit_toml("made", &repo.bare(), "made", "made", "create_namespace = true")
        + &common::unit_toml("ns", &repo.bare(), "ns", "default", "");
    let (dir, config) = workspace(&units);
    let run = validate(&config, &[], &dir.path().join("tmp"));
    assert_eq!(run.code, Some(0), "a warning is no failure: {}", run.stderr);
    assert_eq!(
        run.stdout,
        format!(
            "app: valid {short} (3 objects, 1 warning)\nmade: valid {short} (1 object)\nns: valid {short} (2 objects)\n"
        )
    );
    assert_eq!(
        logged(&run.stderr, "WARN"),
        ["WARN object may fail unit=app file=\"app/a.yaml (document 1)\" object=ConfigMap/shop/a reason=\"namespace \
          shop is created by no unit: declare it as a Namespace object, set create_namespace, or make sure it exists \
          in the cluster\""],
        "one warning per namespace: {}",
        run.stderr
    );
    assert!(logged(&run.stderr, "ERROR").is_empty(), "{}", run.stderr);
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_gitward")).args(["validate", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("A namespace that no unit creates") && help.contains("never\nchange the exit code"),
        "{help}"
    );
}

#[test]
fn the_same_object_in_two_units_is_refused_naming_both_units_and_files() {
    let repo = common::GitRepo::new();
    repo.write("one/cm.yaml", &common::cm("settings", "1"));
    repo.write("two/all.yaml", &format!("{}---\n{}", common::cm("own", "2"), common::cm("settings", "2")));
    repo.write("two/secret.yaml", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: settings\n");
    let revision = repo.commit_and_push("one ConfigMap in two units");
    let short = &revision[..7];
    let units = common::unit_toml("one", &repo.bare(), "one", "default", "")
        + &common::unit_toml("two", &repo.bare(), "two", "default", "");
    let (dir, config) = workspace(&units);
    let run = validate(&config, &[], &dir.path().join("tmp"));
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert_eq!(
        run.stdout,
        format!("one: invalid {short} (1 object, 1 refused)\ntwo: invalid {short} (3 objects, 1 refused)\n")
    );
    let why = "each unit would apply it over the other's and prune it when it leaves; keep it in one unit";
    assert_eq!(
        logged(&run.stderr, "ERROR"),
        [
            format!(
                "ERROR invalid object unit=one file=\"one/cm.yaml (document 1)\" object=ConfigMap/default/settings \
                 reason=\"also declared by unit two in two/all.yaml (document 2): {why}\""
            ),
            format!(
                "ERROR invalid object unit=two file=\"two/all.yaml (document 2)\" object=ConfigMap/default/settings \
                 reason=\"also declared by unit one in one/cm.yaml (document 1): {why}\""
            ),
        ],
        "{}",
        run.stderr
    );
}

#[test]
fn json_output_carries_each_units_revision_objects_problems_and_warnings() {
    let repo = common::GitRepo::new();
    repo.write("app/a.yaml", &common::cm("a", "1"));
    let revision = repo.push(&[("app/bad.yaml", &common::cm("Bad_Name", "1"))], "one bad name");
    let units = common::unit_toml("app", &repo.bare(), "app", "shop", "")
        + &common::unit_toml("gone", &repo.bare(), "no/such/path", "default", "");
    let (dir, config) = workspace(&units);
    let run = validate(&config, &["-o", "json"], &dir.path().join("tmp"));
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    let mut out: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout));
    let error = out["units"][1]["error"].take();
    assert!(error.as_str().is_some_and(|e| e.contains("no/such/path")), "{error}");
    assert_eq!(
        out,
        json!({"units": [
            {"unit": "app", "valid": false, "revision": revision, "objects": 2,
             "problems": [{"origin": "app/bad.yaml (document 1)", "object": "ConfigMap/shop/Bad_Name",
                           "severity": "error",
                           "message": format!("metadata.name: Invalid value: \"Bad_Name\": {}",
                                              SUBDOMAIN.replace("\\\\", "\\"))}],
             "warnings": [{"origin": "app/a.yaml (document 1)", "object": "ConfigMap/shop/a", "severity": "warning",
                           "message": "namespace shop is created by no unit: declare it as a Namespace object, set \
                                       create_namespace, or make sure it exists in the cluster"}]},
            {"unit": "gone", "valid": false, "error": null},
        ]})
    );
}

#[test]
fn validate_of_a_fresh_config_leaves_the_state_dir_and_the_temporary_directory_empty() {
    let repo = common::GitRepo::new();
    let revision = repo.push(&[("app/a.yaml", &common::cm("a", "1"))], "one ConfigMap");
    let (dir, config) = workspace(&common::unit_toml("app", &repo.bare(), "app", "default", ""));
    let tmp = dir.path().join("tmp");
    let run = validate(&config, &[], &tmp);
    assert_eq!(
        (run.code, run.stdout),
        (Some(0), format!("app: valid {} (1 object)\n", &revision[..7])),
        "{}",
        run.stderr
    );
    let state = dir.path().join("state");
    assert!(!state.join("mirrors").exists(), "validate made a mirror in the state directory");
    let left = |d: &Path| std::fs::read_dir(d).map(|r| r.count()).unwrap_or(0);
    assert_eq!(left(&state), 0, "validate wrote into the state directory");
    assert_eq!(left(&tmp), 0, "validate left its scratch mirror behind");
}

#[test]
fn units_of_different_clusters_may_declare_the_same_object() {
    let repo = common::GitRepo::new();
    repo.write("east/cm.yaml", &common::cm("settings", "1"));
    let revision = repo.push(&[("west/cm.yaml", &common::cm("settings", "2"))], "one ConfigMap for each cluster");
    let short = &revision[..7];
    let clusters = "[[cluster]]\nname = \"east\"\n\n[[cluster]]\nname = \"west\"\n\n";
    let units = format!(
        "{clusters}{}{}",
        common::unit_toml("east", &repo.bare(), "east", "default", "cluster = \"east\""),
        common::unit_toml("west", &repo.bare(), "west", "default", "cluster = \"west\"")
    );
    let (dir, config) = workspace(&units);
    let run = validate(&config, &[], &dir.path().join("tmp"));
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(run.stdout, format!("east: valid {short} (1 object)\nwest: valid {short} (1 object)\n"));
}

/// A kustomization of two ConfigMaps under `dir`: `cm.yaml` (`web`, value 1), and `patch.yaml`,
/// a patch setting `web`'s value to 2, which a plain read takes for a second `web`.
fn kustomization(repo: &common::GitRepo, dir: &str) {
    let text = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- cm.yaml\npatches:\n- path: patch.yaml\n";
    repo.write(&format!("{dir}/kustomization.yaml"), text);
    repo.write(&format!("{dir}/cm.yaml"), &common::cm("web", "1"));
    repo.write(&format!("{dir}/patch.yaml"), &common::cm("web", "2"));
}

/// The reason a plain unit's kustomization file gets, for one at the unit's own path.
const BUILD_HERE: &str = "a plain unit does not build it, so its patches are applied as objects; set render = \
                          \\\"kustomize\\\" in the unit's [[sync]] table to build it";

#[test]
fn a_kustomization_under_a_plain_units_path_is_a_warning_naming_the_file_and_the_config_that_builds_it() {
    let repo = common::GitRepo::new();
    repo.write("apps/web/kustomization.yaml", "resources:\n- cm.yaml\n");
    let revision = repo.push(&[("apps/web/cm.yaml", &common::cm("web", "1"))], "a kustomization below the unit's path");
    let short = &revision[..7];
    let (dir, config) = workspace(&common::unit_toml("app", &repo.bare(), "apps", "default", ""));
    let run = validate(&config, &[], &dir.path().join("tmp"));
    assert_eq!(run.code, Some(0), "a warning is no failure: {}", run.stderr);
    assert_eq!(run.stdout, format!("app: valid {short} (1 object, 1 warning)\n"));
    let reason = "a plain unit does not build it, so its patches are applied as objects; set path = \\\"apps/web\\\" \
                  and render = \\\"kustomize\\\" in a [[sync]] table to build it";
    assert_eq!(
        logged(&run.stderr, "WARN"),
        [format!(
            "WARN kustomization file in a plain unit unit=app file=apps/web/kustomization.yaml reason=\"{reason}\""
        )],
        "{}",
        run.stderr
    );
    let run = validate(&config, &["-o", "json"], &dir.path().join("tmp"));
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let out: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout));
    assert_eq!(
        out,
        json!({"units": [{"unit": "app", "valid": true, "revision": revision, "objects": 1, "problems": [],
                          "warnings": [{"origin": "apps/web/kustomization.yaml", "object": null,
                                        "severity": "warning", "message": reason.replace("\\\"", "\"")}]}]})
    );
}

#[test]
fn an_object_defined_twice_by_a_patch_a_plain_unit_reads_names_the_kustomization() {
    let repo = common::GitRepo::new();
    kustomization(&repo, "app");
    let revision = repo.commit_and_push("a kustomization with a patch, read as plain manifests");
    let units = common::unit_toml("app", &repo.bare(), "app", "default", "render = \"plain\"");
    let (dir, config) = workspace(&units);
    let run = validate(&config, &[], &dir.path().join("tmp"));
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert_eq!(run.stdout, format!("app: invalid {} (2 objects, 1 refused, 1 warning)\n", &revision[..7]));
    assert_eq!(
        logged(&run.stderr, "ERROR"),
        [format!(
            "ERROR invalid object unit=app file=\"app/patch.yaml (document 1)\" object=ConfigMap/default/web \
             reason=\"defined twice, first in app/cm.yaml (document 1): keep one of them; app/kustomization.yaml is a \
             kustomization: {BUILD_HERE}\""
        )],
        "{}",
        run.stderr
    );
    assert_eq!(
        logged(&run.stderr, "WARN"),
        [format!(
            "WARN kustomization file in a plain unit unit=app file=app/kustomization.yaml reason=\"{BUILD_HERE}\""
        )],
        "{}",
        run.stderr
    );
}

/// `[sync.substitute]` without a cluster: inline variables and defaults are substituted before
/// names are checked; a reference a `from` object may define is left; one nothing can define
/// refuses the unit as the sync would, naming the file, the document and the variable.
#[test]
fn validate_substitutes_inline_variables_and_refuses_one_nothing_can_define() {
    let repo = common::GitRepo::new();
    let templated = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf-${env}\n  namespace: ${ns:=default}\n";
    repo.write("inline/a.yaml", templated);
    let other = templated.replace("conf-", "other-");
    repo.write("from/a.yaml", &format!("{other}data:\n  color: ${{color}}\n"));
    repo.write("missing/a.yaml", &format!("{}---\n{templated}data:\n  color: ${{color}}\n", common::cm("b", "1")));
    repo.commit_and_push("templated objects");
    let table = "[sync.substitute]\nvars = { env = \"prod\" }";
    let units = common::unit_toml("inline", &repo.bare(), "inline", "default", table)
        + &common::unit_toml("from", &repo.bare(), "from", "default", &format!("{table}\nfrom = [\"ConfigMap/x/y\"]"))
        + &common::unit_toml("missing", &repo.bare(), "missing", "default", table);
    let (dir, config) = workspace(&units);
    let run = validate(&config, &[], &dir.path().join("tmp"));
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(
        lines[0].starts_with("inline: valid") && lines[1].starts_with("from: valid"),
        "{}{}",
        run.stdout,
        run.stderr
    );
    assert!(
        run.stderr.contains("missing/a.yaml: document 2: variable `color` is not defined"),
        "names file, document and variable: {}",
        run.stderr
    );
}

#[test]
fn a_ready_expr_reading_a_key_the_status_lacks_is_refused_naming_unit_and_key() {
    let repo = common::GitRepo::new();
    repo.push(&[("a/cm.yaml", &common::cm("a", "1")), ("b/cm.yaml", &common::cm("b", "1"))], "two units");
    let units = |expr: &str| {
        let depends = format!("depends_on = [{{ unit = \"b\", ready_expr = \"{expr}\" }}]");
        [
            common::unit_toml("a", &repo.bare(), "a", "default", &depends),
            common::unit_toml("b", &repo.bare(), "b", "default", ""),
        ]
        .concat()
    };
    let (dir, config) = workspace(&units("status.helth == 'healthy'"));
    let run = validate(&config, &[], &dir.path().join("tmp"));
    assert_eq!(run.code, Some(2), "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("unit a: depends_on b: ready_expr") && run.stderr.contains("helth"), "{}", run.stderr);
    let (dir, config) = workspace(&units("status.health == 'healthy' && !status.waiting"));
    let run = validate(&config, &[], &dir.path().join("tmp"));
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
}
