//! An Argo CD `Application`'s `spec` as a `[[sync]]` table: `source` (`repoURL`,
//! `targetRevision`, `path`, `chart`, `helm`, `kustomize`) → `repo`, `ref`, `path`, `render`,
//! `[sync.helm]`; `destination.namespace` → `namespace`; `destination.server`/`name` →
//! `cluster` (none for the cluster Argo CD runs in); `project` → `service_account` (its
//! `destinationServiceAccounts`); `syncPolicy.automated.prune` → `prune` (false without it,
//! as Argo CD prunes only then), `selfHeal` → `[daemon] self_heal`, `allowEmpty` →
//! `allow_prune_all`; `syncOptions` `CreateNamespace`, `Replace`, `Force`; `ignoreDifferences`
//! → `[[sync.ignore]]`.

use std::collections::BTreeMap;

use serde_json::Value;
use toml_edit::{ArrayOfTables, Item, Table};

use super::super::fields::{Fields, Notes};
use super::super::output::{Output, strings, toml_table};
use super::project::Project;

/// The servers that name the cluster Argo CD runs in.
const IN_CLUSTER: [&str; 2] = ["https://kubernetes.default.svc", "https://kubernetes.default.svc/"];

/// The unit of an Application named `app` (its release name by default) with `spec`; the
/// caller adds `name`.
pub(super) fn convert(
    mut spec: Fields,
    app: &str,
    projects: &BTreeMap<String, Project>,
    out: &mut Output,
    notes: &mut Notes,
) -> Table {
    let mut table = Table::new();
    if let Some(source) = spec.child("source") {
        source_keys(source, app, &mut table, notes);
    } else if spec.take("sources").is_some() {
        notes.warn(
            spec.object(),
            &spec.path("sources"),
            "no equivalent: a unit has one source; make one Application per source",
        );
    }
    let (server, namespace) = destination(&mut spec, &mut table, notes);
    let project = spec.string("project").unwrap_or_else(|| "default".into());
    match projects.get(&project).and_then(|p| p.account(&server, &namespace)) {
        Some(Ok(account)) if !account.is_empty() => {
            table.insert("service_account", toml_edit::value(account));
        }
        Some(Err(account)) => notes.warn(
            spec.object(),
            &spec.path("project"),
            format!(
                "AppProject {project} names ServiceAccount {account} of another namespace: a unit's service_account \
             is of its own namespace"
            ),
        ),
        _ => {}
    }
    sync_policy(&mut spec, &mut table, out, notes);
    ignore_differences(&mut spec, &mut table, notes);
    spec.warn_if_set("revisionHistoryLimit", "no equivalent: the ApplySet parent records the last sync", notes);
    spec.take("info");
    spec.finish(notes);
    table
}

/// `spec.destination`: (server, namespace), with `namespace` and `cluster` written.
fn destination(spec: &mut Fields, table: &mut Table, notes: &mut Notes) -> (String, String) {
    let Some(mut destination) = spec.child("destination") else { return Default::default() };
    let namespace = destination.string("namespace").unwrap_or_default();
    let server = destination.string("server").unwrap_or_default();
    let name = destination.string("name");
    if !namespace.is_empty() {
        table.insert("namespace", toml_edit::value(namespace.as_str()));
    }
    let in_cluster = IN_CLUSTER.contains(&server.as_str()) || name.as_deref() == Some("in-cluster");
    if !in_cluster && (name.is_some() || !server.is_empty()) {
        let cluster = super::super::output::unit_name(name.as_deref().unwrap_or(&server));
        let message =
            format!("cluster = \"{cluster}\": declare a [[cluster]] table of that name whose kubeconfig reaches it");
        notes.warn(destination.object(), &destination.path(if name.is_some() { "name" } else { "server" }), message);
        table.insert("cluster", toml_edit::value(cluster));
    }
    destination.finish(notes);
    (if in_cluster { IN_CLUSTER[0].to_owned() } else { server }, namespace)
}

/// `spec.source`.
fn source_keys(mut source: Fields, app: &str, table: &mut Table, notes: &mut Notes) {
    let url = source.string("repoURL").unwrap_or_default();
    let revision = source.string("targetRevision");
    let path = source.string("path").map(|p| super::super::repo_path(&p));
    let mut helm = Table::new();
    if let Some(chart) = source.string("chart") {
        let url = if url.contains("://") { url } else { format!("oci://{url}") };
        helm.insert("repo_url", toml_edit::value(url));
        helm.insert("chart", toml_edit::value(chart));
        if let Some(version) = revision.filter(|v| v != "*") {
            helm.insert("version", toml_edit::value(version));
        }
    } else {
        table.insert("repo", toml_edit::value(url));
        match revision.as_deref() {
            None | Some("HEAD" | "") => notes.warn(source.object(), &source.path("targetRevision"), "HEAD, the remote's default branch: gitward follows `ref`, default \"main\"; set it if the default branch is another"),
            Some(reference) => {
                table.insert("ref", toml_edit::value(reference));
            }
        }
        if let Some(path) = path.as_ref().filter(|p| !p.is_empty()) {
            table.insert("path", toml_edit::value(path.as_str()));
        }
    }
    if let Some(options) = source.child("helm") {
        helm_options(options, path.as_deref().unwrap_or(""), app, &mut helm, notes);
        table.insert("render", toml_edit::value("helm"));
    }
    if let Some(kustomize) = source.child("kustomize") {
        kustomize.finish(notes);
        table.insert("render", toml_edit::value("kustomize"));
    }
    if let Some(mut directory) = source.child("directory") {
        if directory.boolean("recurse") == Some(false) {
            notes.warn(
                directory.object(),
                &directory.path("recurse"),
                "no equivalent: a plain unit reads its path's subdirectories too",
            );
        }
        directory.finish(notes);
        table.insert("render", toml_edit::value("plain"));
    }
    if helm.contains_key("repo_url") {
        table.remove("render");
    }
    if !helm.is_empty() {
        table.insert("helm", Item::Table(helm));
    }
    source.finish(notes);
}

/// `spec.source.helm`: `valueFiles` (relative to the chart's path) → `values_files`,
/// `valuesObject` or `values` (YAML text) → `[sync.helm.values]`, `releaseName` → `release`
/// (the Application's name by default, written out).
fn helm_options(mut options: Fields, path: &str, app: &str, helm: &mut Table, notes: &mut Notes) {
    let files: Vec<String> =
        options.take("valueFiles").and_then(|v| serde_json::from_value(v).ok()).unwrap_or_default();
    let files: Vec<String> = files
        .iter()
        .map(|f| super::super::repo_path(&if path.is_empty() { f.clone() } else { format!("{path}/{f}") }))
        .collect();
    if !files.is_empty() {
        helm.insert("values_files", strings(files));
    }
    let values = match (options.take("valuesObject"), options.string("values")) {
        (Some(object), _) => Some(object),
        (None, Some(text)) => match crate::manifest::documents("values", text.as_bytes()) {
            Ok(mut docs) if !docs.is_empty() => Some(docs.swap_remove(0).1),
            _ => {
                notes.warn(options.object(), &options.path("values"), "not YAML: left out");
                None
            }
        },
        _ => None,
    };
    if let Some(Value::Object(values)) = values {
        helm.insert("values", Item::Table(toml_table(&values, options.object(), &options.path("values"), notes)));
    }
    helm.insert("release", toml_edit::value(options.string("releaseName").unwrap_or_else(|| app.to_owned())));
    options.finish(notes);
}

/// `spec.syncPolicy`.
fn sync_policy(spec: &mut Fields, table: &mut Table, out: &mut Output, notes: &mut Notes) {
    let Some(mut policy) = spec.child("syncPolicy") else {
        notes.warn(
            spec.object(),
            &spec.path("syncPolicy"),
            "not set: Argo CD syncs this Application only when asked; gitward syncs every unit on its own",
        );
        table.insert("prune", toml_edit::value(false));
        return;
    };
    let mut prune = false;
    if let Some(mut automated) = policy.child("automated") {
        prune = automated.boolean("prune").unwrap_or(false);
        if let Some(heal) = automated.boolean("selfHeal") {
            out.self_heal = Some(out.self_heal.unwrap_or(false) || heal);
        }
        if automated.boolean("allowEmpty") == Some(true) {
            table.insert("allow_prune_all", toml_edit::value(true));
        }
        automated.warn_if_set("enabled", "no equivalent: every unit syncs on its own; suspend = true holds one", notes);
        automated.finish(notes);
    }
    table.insert("prune", toml_edit::value(prune));
    let options: Vec<String> =
        policy.take("syncOptions").and_then(|v| serde_json::from_value(v).ok()).unwrap_or_default();
    for (i, option) in options.iter().enumerate() {
        match option.as_str() {
            "CreateNamespace=true" => drop(table.insert("create_namespace", toml_edit::value(true))),
            "Replace=true" => drop(table.insert("apply_mode", toml_edit::value("update"))),
            "Force=true" => drop(table.insert("recreate_on_immutable", toml_edit::value(true))),
            "ServerSideApply=true" | "RespectIgnoreDifferences=true" | "CreateNamespace=false" => {}
            other => notes.warn(
                policy.object(),
                &format!("{}[{i}]", policy.path("syncOptions")),
                format!("{other}: no equivalent"),
            ),
        }
    }
    policy.finish(notes);
}

/// `spec.ignoreDifferences` → `[[sync.ignore]]`: `group`, `kind`, `name`, `namespace`,
/// `jsonPointers` → `paths`, `managedFieldsManagers` → `managers`.
fn ignore_differences(spec: &mut Fields, table: &mut Table, notes: &mut Notes) {
    let mut rules = ArrayOfTables::new();
    for mut item in spec.list("ignoreDifferences") {
        let mut rule = Table::new();
        for key in ["kind", "group", "name", "namespace"] {
            if let Some(value) = item.string(key) {
                rule.insert(key, toml_edit::value(value));
            }
        }
        for (from, to) in [("jsonPointers", "paths"), ("managedFieldsManagers", "managers")] {
            let list: Vec<String> = item.take(from).and_then(|v| serde_json::from_value(v).ok()).unwrap_or_default();
            if !list.is_empty() {
                rule.insert(to, strings(list));
            }
        }
        item.warn_if_set("jqPathExpressions", "no equivalent: write them as JSON pointers (paths)", notes);
        item.finish(notes);
        if rule.contains_key("paths") || rule.contains_key("managers") {
            rules.push(rule);
        }
    }
    if !rules.is_empty() {
        table.insert("ignore", Item::ArrayOfTables(rules));
    }
}
