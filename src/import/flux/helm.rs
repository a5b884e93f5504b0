//! A Flux `HelmRelease` as a chart unit: `spec.chart.spec` (`chart`, `version`, `sourceRef`
//! a `HelmRepository` or `GitRepository`, `valuesFiles`) or `spec.chartRef` (an
//! `OCIRepository` or `HelmChart`) → `[sync.helm]` `repo_url`, `chart`, `version` (or `repo`,
//! `path`, `values_files`); `values` → `[sync.helm.values]`; `releaseName` → `release`
//! (Flux's default, `[<targetNamespace>-]<name>`, written out); `targetNamespace` (else the
//! release's namespace) → `namespace`; `install.createNamespace` → `create_namespace`;
//! `driftDetection.ignore` → `[[sync.ignore]]`; `dependsOn`, `serviceAccountName`, `suspend`,
//! `timeout`, `interval` as for a `Kustomization`.

use toml_edit::{ArrayOfTables, Item, Table};

use super::super::Object;
use super::super::fields::{Fields, Notes};
use super::super::output::{Output, strings, toml_table};
use super::sources::{Source, clean_path};
use super::{Context, shared_keys, verify_table};

/// The unit of `object`.
pub(super) fn unit(object: &Object, context: &Context, out: &mut Output, notes: &mut Notes) -> Table {
    let mut table = Table::new();
    let mut spec = Fields::spec(object);
    let name = context.unit(&object.kind, &object.namespace, &object.name).cloned().unwrap_or_default();
    table.insert("name", toml_edit::value(name));
    let mut helm = Table::new();
    chart(&mut spec, object, context, &mut table, &mut helm, notes);
    let target = spec.string("targetNamespace");
    let namespace = target.clone().unwrap_or_else(|| object.namespace.clone());
    if !namespace.is_empty() {
        table.insert("namespace", toml_edit::value(namespace));
    }
    let release = spec.string("releaseName").unwrap_or_else(|| match &target {
        Some(target) => format!("{target}-{}", object.name),
        None => object.name.clone(),
    });
    helm.insert("release", toml_edit::value(release));
    if let Some(serde_json::Value::Object(values)) = spec.take("values") {
        helm.insert("values", Item::Table(toml_table(&values, &object.id(), "spec.values", notes)));
    }
    for item in spec.list("valuesFrom") {
        values_from(item, notes);
    }
    context.depends_on(&mut spec, "HelmRelease", &object.namespace, &mut table, notes);
    shared_keys(&mut spec, out, &mut table);
    if let Some(mut install) = spec.child("install") {
        if install.boolean("createNamespace") == Some(true) {
            table.insert("create_namespace", toml_edit::value(true));
        }
        install.finish(notes);
    }
    if let Some(drift) = spec.child("driftDetection") {
        drift_detection(drift, &mut table, notes);
    }
    table.insert("helm", Item::Table(helm));
    spec.finish(notes);
    table
}

/// `spec.chart.spec` or `spec.chartRef`: where the chart comes from.
fn chart(
    spec: &mut Fields,
    object: &Object,
    context: &Context,
    table: &mut Table,
    helm: &mut Table,
    notes: &mut Notes,
) {
    if let Some(source) = context.source(spec, "chartRef", &object.namespace, notes) {
        chart_keys(source, source.chart.clone(), source.version.clone(), table, helm);
        return;
    }
    let Some(mut chart) = spec.child("chart") else {
        notes.warn(&object.id(), "spec.chart", "neither spec.chart nor spec.chartRef: no chart to template");
        return;
    };
    let mut template =
        chart.child("spec").unwrap_or_else(|| Fields::of(&object.id(), "spec.chart.spec", serde_json::Value::Null));
    chart.finish(notes);
    let name = template.string("chart");
    let version = template.string("version");
    let values_files: Vec<String> =
        template.take("valuesFiles").and_then(|v| serde_json::from_value(v).ok()).unwrap_or_default();
    let found = context.source(&mut template, "sourceRef", &object.namespace, notes).cloned();
    template.warn_if_set("reconcileStrategy", "no equivalent: gitward reads the chart at each revision", notes);
    template.warn_if_set("interval", "no equivalent: the chart is read at each sync", notes);
    let values_path = template.path("valuesFiles");
    template.finish(notes);
    let Some(mut source) = found else { return };
    if source.chart_repo.is_some() {
        if !values_files.is_empty() {
            notes.warn(&object.id(), &values_path, "no equivalent: values files of a chart from a chart repository");
        }
        chart_keys(&source, name, version, table, helm);
    } else {
        source.chart = name.map(|c| clean_path(&c));
        source.values_files = values_files.iter().map(|f| clean_path(f)).collect();
        chart_keys(&source, source.chart.clone(), version, table, helm);
    }
}

/// The keys of a chart from `source`: `[sync.helm] repo_url`, `chart`, `version` from a chart
/// repository, or `repo`, `ref`, `path` and `values_files` from git.
fn chart_keys(source: &Source, chart: Option<String>, version: Option<String>, table: &mut Table, helm: &mut Table) {
    if let Some(url) = &source.chart_repo {
        helm.insert("repo_url", toml_edit::value(url.as_str()));
        if let Some(chart) = chart {
            helm.insert("chart", toml_edit::value(chart));
        }
        if let Some(version) = version.filter(|v| v != "*") {
            helm.insert("version", toml_edit::value(version));
        }
    } else if let Some(repo) = &source.repo {
        table.insert("repo", toml_edit::value(repo.as_str()));
        if let Some(reference) = &source.reference {
            table.insert("ref", toml_edit::value(reference.as_str()));
        }
        if let Some(path) = chart.filter(|p| !p.is_empty()) {
            table.insert("path", toml_edit::value(path));
        }
        if !source.values_files.is_empty() {
            helm.insert("values_files", strings(source.values_files.iter().map(String::as_str)));
        }
    }
    verify_table(source, table);
}

/// One of `spec.valuesFrom`: a ConfigMap's or Secret's key read from the cluster, which
/// gitward's values (files in git, inline values) have no equivalent of.
fn values_from(mut item: Fields, notes: &mut Notes) {
    let kind = item.string("kind").unwrap_or_default();
    let name = item.string("name").unwrap_or_default();
    let key = item.string("valuesKey").unwrap_or_else(|| "values.yaml".to_owned());
    item.take("targetPath");
    item.take("optional");
    let object = item.object().to_owned();
    let path = item.path("name");
    item.finish(notes);
    let message = format!(
        "{kind} {name} (key {key}) is read from the cluster: gitward takes values from git only; put its \
         values in a file of the repository and name it in [sync.helm] values_files, or in [sync.helm.values]"
    );
    notes.warn(&object, &path, message);
}

/// `spec.driftDetection`: `ignore` rules → `[[sync.ignore]]` (`paths`, `target` `group`,
/// `kind`, `name`, `namespace`, `labelSelector`); `mode` has no per-unit equivalent.
fn drift_detection(mut drift: Fields, table: &mut Table, notes: &mut Notes) {
    drift.warn_if_set("mode", "no per-unit equivalent: drift is corrected when [daemon] self_heal is on", notes);
    let mut rules = ArrayOfTables::new();
    for mut rule in drift.list("ignore") {
        let mut ignore = Table::new();
        let paths: Vec<String> = rule.take("paths").and_then(|v| serde_json::from_value(v).ok()).unwrap_or_default();
        if let Some(mut target) = rule.child("target") {
            for (from, to) in [("kind", "kind"), ("group", "group"), ("name", "name"), ("namespace", "namespace")] {
                if let Some(value) = target.string(from) {
                    ignore.insert(to, toml_edit::value(value));
                }
            }
            target.warn_if_set("version", "no equivalent: a rule selects every version of its kind", notes);
            if let Some(selector) = target.string("labelSelector") {
                super::super::output::label_selector(
                    &selector,
                    &mut ignore,
                    target.object(),
                    &target.path("labelSelector"),
                    notes,
                );
            }
            target.finish(notes);
        }
        if !ignore.contains_key("kind") {
            notes.warn(rule.object(), &rule.path("target"), "no equivalent: a gitward ignore rule names its kind");
            rule.finish(notes);
            continue;
        }
        ignore.insert("paths", strings(paths));
        rule.finish(notes);
        rules.push(ignore);
    }
    drift.finish(notes);
    if !rules.is_empty() {
        table.insert("ignore", Item::ArrayOfTables(rules));
    }
}
