//! Parity of gitward's manifest reading with kubectl's own client-side parse.
//!
//! For every YAML fixture under `tests/fixtures` (kustomization files, the kustomize/Helm
//! sources under `render/` and a chart's directory such as `cert-manager/`, which are not
//! manifests until rendered, excepted, and the import fixtures, Flux's and Argo CD's custom
//! resources, which kubectl cannot map without their CRDs) and for a
//! few YAML corner cases written here, the test runs the real
//! `kubectl create --dry-run=client -o json -f FILE` and compares kubectl's objects, in order,
//! with the bodies [`gitward::manifest::parse_file`] returns.
//!
//! Run it through `scripts/test --test integration manifest_parity::`: kubectl needs an
//! apiserver for discovery, and the test fails (never skips) without `KUBECONFIG` and a reachable
//! cluster.
//!
//! kubectl puts the default namespace on every namespaced object that names none; gitward leaves
//! that to a later step, once discovery knows the kind's scope. The test gives kubectl a copy of
//! the kubeconfig whose context namespace is `parity-default` and drops that value where
//! gitward's body names no namespace. (`-n parity-default` would do the same but makes kubectl
//! refuse objects that name another namespace, as the ingress-nginx fixtures do.)
//!
//! gitward refuses `metadata.generateName` without a name, by design. For a file with such an
//! object the test checks that kubectl reads a generated name there, then compares a copy of the
//! file in which `generateName:` is renamed `name:`, so the rest of the file is still proven.

use std::path::{Path, PathBuf};
use std::process::Command;

use gitward::manifest::{self, Error};
use serde_json::Value;

/// The namespace kubectl's context names, recognisable in its output.
const PARITY_NAMESPACE: &str = "parity-default";

#[test]
fn every_fixture_reads_as_kubectl_reads_it() {
    let kubectl = Kubectl::connect();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let files = yaml_files(&root);
    assert!(files.len() >= 10, "expected the fixtures under {}, found {} files", root.display(), files.len());
    let mut report = Report::default();
    for path in &files {
        let name = path.strip_prefix(&root).unwrap_or(path).display().to_string();
        check_file(&kubectl, &name, path, &mut report);
    }
    assert!(report.compared >= files.len(), "only {} objects compared", report.compared);
    report.finish(files.len());
}

#[test]
fn yaml_corner_cases_read_as_kubectl_reads_them() {
    let kubectl = Kubectl::connect();
    let mut report = Report::default();
    for (name, text) in CORNER_CASES {
        let path = kubectl.scratch.path().join(name);
        write(&path, text);
        check_file(&kubectl, name, &path, &mut report);
    }
    report.finish(CORNER_CASES.len());
}

/// Documents whose reading depends on YAML 1.1 rules and kubectl's YAML-to-JSON conversion.
const CORNER_CASES: &[(&str, &str)] = &[
    (
        "scalars.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: scalars\n\
         x:\n  octal: [0644, 0o17, -0644, 0400]\n  hex: 0x1F\n  floats: [1.0, 1.5, 1e3, -0.0, .5, 1.0e+20, 1e21, 6.02e23, 0.1e-7]\n\
         \x20 big: [9223372036854775807, 18446744073709551615, 123456789012345678901234567890]\n\
         \x20 bools: [yes, no, on, off, y, n, Yes, NO, True, FALSE]\n\
         \x20 nulls: [~, null, Null, ]\n  strings: [\"0644\", '1.0', 1:20, 2001-12-14, =, <<, 0.5e, 1e400x]\n\
         \x20 tagged: [!!str 0644, !!binary aGVsbG8=, !!int \"12\"]\n",
    ),
    (
        "keys.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keys\n\
         x:\n  on: a\n  NO: b\n  0x10: c\n  010: d\n  1.0: e\n  2.50: f\n  1e3: g\n  123456789.0: h\n  -7: i\n",
    ),
    (
        "merge.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: merge\n\
         x:\n  base: &base {a: base, b: base}\n  more: &more {a: more, c: more}\n\
         \x20 before: {a: own, <<: *base}\n  after: {<<: *base, a: own}\n\
         \x20 list: {a: own, <<: [*base, *more], d: own}\n  nested: {<<: {<<: *more, e: nested}}\n",
    ),
    (
        "stream.yaml",
        "# header comment\n---\n---\n# comment only\n--- # separator comment\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata: {name: flow, labels: {app: x}}\ndata: {k: \"v\"}\n\
         ...\n---\n~\n---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ServiceAccount, metadata: {name: sa}}\n\
         ---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: blocks\ndata:\n  folded: >-\n    a\n    b\n  kept: |+\n    c\n\n",
    ),
];

/// The real kubectl, pointed at a copy of the test cluster's kubeconfig whose context namespace
/// is [`PARITY_NAMESPACE`].
struct Kubectl {
    kubeconfig: PathBuf,
    scratch: tempfile::TempDir,
}

impl Kubectl {
    /// Checks that kubectl runs and reaches the cluster; panics with what to do otherwise.
    fn connect() -> Self {
        let Some(source) = std::env::var_os("KUBECONFIG") else {
            panic!("KUBECONFIG is not set: run `scripts/test --test integration manifest_parity::`");
        };
        let scratch = match tempfile::tempdir() {
            Ok(dir) => dir,
            Err(err) => panic!("cannot create a temporary directory: {err}"),
        };
        let kubeconfig = scratch.path().join("kubeconfig");
        if let Err(err) = std::fs::copy(&source, &kubeconfig) {
            panic!("cannot copy KUBECONFIG {}: {err}", Path::new(&source).display());
        }
        let kubectl = Self { kubeconfig, scratch };
        kubectl.run(&["version", "-o", "json"]).unwrap_or_else(|err| panic!("the cluster is not reachable: {err}"));
        let namespace = format!("--namespace={PARITY_NAMESPACE}");
        kubectl.run(&["config", "set-context", "--current", &namespace]).unwrap_or_else(|err| panic!("{err}"));
        kubectl
    }

    /// Runs kubectl with this kubeconfig; its stdout, or a message with its stderr.
    fn run(&self, args: &[&str]) -> Result<String, String> {
        let output = Command::new("kubectl").arg("--kubeconfig").arg(&self.kubeconfig).args(args).output();
        let output = match output {
            Ok(output) => output,
            Err(err) => panic!("cannot run kubectl ({err}): is it on PATH? Run through tests/cluster/run"),
        };
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(format!("kubectl {} failed: {}", args.join(" "), stderr.trim()));
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// kubectl's objects for a file, in order: it prints one JSON object per object (older
    /// versions a `List`, flattened here).
    fn read(&self, path: &Path) -> Result<Vec<Value>, String> {
        let file = path.to_string_lossy();
        let stdout = self.run(&["create", "--dry-run=client", "-o", "json", "-f", &file])?;
        let mut objects = Vec::new();
        for value in serde_json::Deserializer::from_str(&stdout).into_iter::<Value>() {
            let value = value.map_err(|err| format!("kubectl printed something that is not JSON: {err}"))?;
            match value {
                Value::Object(mut list) if list.get("kind") == Some(&Value::from("List")) => {
                    if let Some(Value::Array(items)) = list.remove("items") {
                        objects.extend(items);
                    }
                }
                other => objects.push(other),
            }
        }
        Ok(objects)
    }
}

/// Mismatches found so far; the first one's diff is printed in full.
#[derive(Default)]
struct Report {
    failures: Vec<String>,
    /// Objects found equal, to show the comparison did compare something.
    compared: usize,
}

impl Report {
    fn fail(&mut self, message: String) {
        self.failures.push(message);
    }

    fn finish(self, checked: usize) {
        if self.failures.is_empty() {
            return;
        }
        let summary: Vec<&str> = self.failures.iter().map(|f| f.lines().next().unwrap_or("")).collect();
        panic!(
            "{} of {checked} files read differently from kubectl:\n  {}\n\nfirst mismatch:\n{}",
            self.failures.len(),
            summary.join("\n  "),
            self.failures[0]
        );
    }
}

/// Compares one file's reading by gitward and by kubectl.
fn check_file(kubectl: &Kubectl, name: &str, path: &Path, report: &mut Report) {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(err) => return report.fail(format!("{name}: cannot read: {err}")),
    };
    let theirs = match kubectl.read(path) {
        Ok(objects) => objects,
        Err(err) => return report.fail(format!("{name}: {err}")),
    };
    match manifest::parse_file(name, &bytes) {
        Ok(loaded) => {
            let ours: Vec<Value> = loaded.manifests.into_iter().map(|m| m.body.to_value()).collect();
            compare(name, ours, theirs, report);
        }
        Err(Error::GenerateName { .. }) => check_generate_name(kubectl, name, &bytes, &theirs, report),
        Err(err) => report.fail(format!("{name}: gitward refused a file kubectl reads: {err}")),
    }
}

/// gitward refuses `generateName` by design: kubectl must read one there, and a copy with the
/// object named must read alike.
fn check_generate_name(kubectl: &Kubectl, name: &str, bytes: &[u8], theirs: &[Value], report: &mut Report) {
    let generated =
        |object: &Value| object["metadata"]["name"].is_null() && object["metadata"]["generateName"].is_string();
    if !theirs.iter().any(generated) {
        return report.fail(format!("{name}: gitward reports generateName, kubectl reads none"));
    }
    let renamed = String::from_utf8_lossy(bytes).replace("generateName:", "name:");
    let copy = kubectl.scratch.path().join(format!("named-{}", name.replace('/', "-")));
    write(&copy, &renamed);
    let theirs = match kubectl.read(&copy) {
        Ok(objects) => objects,
        Err(err) => return report.fail(format!("{name} (generateName renamed): {err}")),
    };
    match manifest::parse_file(name, renamed.as_bytes()) {
        Ok(loaded) => compare(name, loaded.manifests.into_iter().map(|m| m.body.to_value()).collect(), theirs, report),
        Err(err) => report.fail(format!("{name} (generateName renamed): gitward refused it: {err}")),
    }
}

/// Compares objects pairwise, after dropping the namespace kubectl defaulted.
fn compare(name: &str, ours: Vec<Value>, theirs: Vec<Value>, report: &mut Report) {
    if ours.len() != theirs.len() {
        let (ours, theirs) = (identities(&ours), identities(&theirs));
        return report.fail(format!("{name}: gitward reads {ours:?}, kubectl reads {theirs:?}"));
    }
    for (position, (ours, mut theirs)) in ours.into_iter().zip(theirs).enumerate() {
        let ours_names_none = ours["metadata"].get("namespace").is_none();
        if let Some(metadata) = theirs.get_mut("metadata").and_then(Value::as_object_mut)
            && ours_names_none
            && metadata.get("namespace") == Some(&Value::from(PARITY_NAMESPACE))
        {
            metadata.remove("namespace");
        }
        if ours != theirs {
            let diff = diff(&theirs, &ours);
            return report.fail(format!("{name}: object {} ({}) differs:\n{diff}", position + 1, identity(&ours)));
        }
        report.compared += 1;
    }
}

/// Unified diff of pretty JSON, kubectl's reading first.
fn diff(theirs: &Value, ours: &Value) -> String {
    let pretty = |value: &Value| serde_json::to_string_pretty(value).unwrap_or_default() + "\n";
    let (theirs, ours) = (pretty(theirs), pretty(ours));
    similar::TextDiff::from_lines(&theirs, &ours).unified_diff().header("kubectl", "gitward").to_string()
}

fn identity(object: &Value) -> String {
    let text = |value: &Value| value.as_str().unwrap_or("?").to_owned();
    format!("{}/{}", text(&object["kind"]), text(&object["metadata"]["name"]))
}

fn identities(objects: &[Value]) -> Vec<String> {
    objects.iter().map(identity).collect()
}

/// Every `*.yaml` and `*.yml` file under `dir`, recursively, in path order, except kustomization
/// files (kustomize inputs, not objects: kubectl cannot read them either).
fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(err) => panic!("cannot list {}: {err}", dir.display()),
        };
        for path in entries.filter_map(|entry| entry.ok().map(|e| e.path())) {
            let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if path.is_dir() {
                // A chart's sources are templates, not manifests, until Helm renders them.
                let chart = ["Chart.yaml", "Chart.template.yaml"].iter().any(|f| path.join(f).is_file());
                // The import fixtures are Flux's and Argo CD's own objects (and v1beta1 CRDs),
                // kinds this cluster does not serve: kubectl cannot map them without their CRDs.
                let import = ["flux2-kustomize-helm-example", "argocd-applicationset"].contains(&file_name.as_str());
                if file_name != "render" && !chart && !import {
                    pending.push(path);
                }
            } else if (file_name.ends_with(".yaml") || file_name.ends_with(".yml"))
                && !file_name.starts_with("kustomization.")
            {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

fn write(path: &Path, text: &str) {
    if let Err(err) = std::fs::write(path, text) {
        panic!("cannot write {}: {err}", path.display());
    }
}
