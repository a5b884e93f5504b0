//! An Argo CD `ApplicationSet`: a git directory generator (`git.repoURL`, `revision`,
//! `directories[].path`) → a `[[sync_set]]` (`repo`, `ref`, `path_glob`) whose template is
//! `spec.template` with `{{path}}` and `{{path.path}}` as `{path}` and `{{path.basename}}` as
//! `{dir}`; its namespace made of the directory bounded by the project's destination
//! namespaces (`namespaces`). A list generator's `elements` → one `[[sync]]` table each, the
//! template filled in.

use std::collections::BTreeMap;

use serde_json::Value;
use toml_edit::Table;

use super::super::Object;
use super::super::fields::{Fields, Notes};
use super::super::output::{Output, Written, strings};
use super::app;
use super::project::Project;

/// Adds the sets and units of `object`'s generators to `out`.
pub(super) fn import(object: &Object, projects: &BTreeMap<String, Project>, out: &mut Output, notes: &mut Notes) {
    let mut spec = Fields::spec(object);
    let go = spec.boolean("goTemplate").unwrap_or(false);
    spec.take("goTemplateOptions");
    let template = spec.take("template").unwrap_or(Value::Null);
    for (i, mut generator) in spec.list("generators").into_iter().enumerate() {
        let origin = format!("{} (generator {i})", object.id());
        if let Some(git) = generator.child("git") {
            git_directories(git, &template, go, &origin, projects, out, notes);
        } else if let Some(mut list) = generator.child("list") {
            let elements = list.take("elements");
            list.finish(notes);
            for (j, element) in elements.and_then(|e| e.as_array().cloned()).unwrap_or_default().iter().enumerate() {
                let filled = fill(&template, &element_params(element), go);
                let at = format!("{origin} (element {j})");
                element_unit(filled, &object.id(), &at, projects, out, notes);
            }
        }
        generator.warn_if_set("template", "no equivalent: a generator's own template is not merged", notes);
        generator.finish(notes);
    }
    spec.warn_if_set(
        "syncPolicy",
        "no equivalent: a [[sync_set]] keeps a removed directory's objects unless prune_removed = true",
        notes,
    );
    spec.finish(notes);
}

/// The parameters of a list element: each key (`{{cluster}}`), and `values.<key>` of its
/// `values` map.
fn element_params(element: &Value) -> Vec<(String, String)> {
    let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
    let mut params = Vec::new();
    for (key, value) in element.as_object().into_iter().flatten() {
        match value {
            Value::Object(values) if key == "values" => {
                params.extend(values.iter().map(|(k, v)| (format!("values.{k}"), text(v))));
            }
            _ => params.push((key.clone(), text(value))),
        }
    }
    params
}

/// `template` with each `{{param}}` (`{{.param}}` in Go templates, spaces inside the braces
/// allowed) replaced in every string.
fn fill(template: &Value, params: &[(String, String)], go: bool) -> Value {
    match template {
        Value::String(text) => {
            let mut text = text.clone();
            for (key, value) in params {
                let key = if go { format!(".{key}") } else { key.clone() };
                for written in [format!("{{{{{key}}}}}"), format!("{{{{ {key} }}}}")] {
                    text = text.replace(&written, value);
                }
            }
            Value::String(text)
        }
        Value::Array(items) => Value::Array(items.iter().map(|i| fill(i, params, go)).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), fill(v, params, go))).collect()),
        other => other.clone(),
    }
}

/// The first `{{…}}` left in `value`, a parameter with no equivalent.
fn unfilled(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => {
            let start = text.find("{{")?;
            let end = text[start..].find("}}").map_or(text.len(), |e| start + e + 2);
            Some(text[start..end].to_owned())
        }
        Value::Array(items) => items.iter().find_map(unfilled),
        Value::Object(map) => map.values().find_map(unfilled),
        _ => None,
    }
}

/// One list element's Application as a `[[sync]]` table.
fn element_unit(
    filled: Value,
    object: &str,
    origin: &str,
    projects: &BTreeMap<String, Project>,
    out: &mut Output,
    notes: &mut Notes,
) {
    if let Some(left) = unfilled(&filled) {
        notes.warn(
            object,
            "spec.template",
            format!("{left}: no parameter of the element fills it; the element is left out"),
        );
        return;
    }
    let name = filled["metadata"]["name"].as_str().unwrap_or_default().to_owned();
    let spec = Fields::of(object, "spec.template.spec", filled.get("spec").cloned().unwrap_or(Value::Null));
    let mut table = app::convert(spec, &name, projects, out, notes);
    let unit = out.claim("", &name);
    table.insert("name", toml_edit::value(unit));
    table.sort_values_by(|a, _, b, _| (a.get() != "name").cmp(&(b.get() != "name")));
    out.units.push(Written { origin: origin.to_owned(), table });
}

/// A git directory generator as `[[sync_set]]` tables, one per included directory pattern.
#[allow(clippy::too_many_arguments)]
fn git_directories(
    mut git: Fields,
    template: &Value,
    go: bool,
    origin: &str,
    projects: &BTreeMap<String, Project>,
    out: &mut Output,
    notes: &mut Notes,
) {
    let repo = git.string("repoURL").unwrap_or_default();
    let revision = git.string("revision");
    git.warn_if_set("files", "no equivalent: a [[sync_set]] is made of directories", notes);
    git.warn_if_set("requeueAfterSeconds", "no equivalent: a set is listed again at each fetch", notes);
    git.warn_if_set("pathParamPrefix", "no equivalent", notes);
    let object = git.object().to_owned();
    let mut globs = Vec::new();
    for mut directory in git.list("directories") {
        let path = directory.string("path").unwrap_or_default();
        if directory.boolean("exclude") == Some(true) {
            notes.warn(
                &object,
                &directory.path("exclude"),
                "no equivalent: every directory path_glob matches is a unit",
            );
        } else {
            globs.push(path);
        }
        directory.finish(notes);
    }
    git.finish(notes);
    let params = [("path.basename", "{dir}"), ("path.path", "{path}"), ("path", "{path}")];
    let params: Vec<(String, String)> = params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let filled = fill(template, &params, go);
    if let Some(left) = unfilled(&filled) {
        notes.warn(
            &object,
            "spec.template",
            format!("{left}: no equivalent in a [[sync_set]] template ({{dir}}, {{path}}); the generator is left out"),
        );
        return;
    }
    for glob in globs {
        let spec = Fields::of(&object, "spec.template.spec", filled.get("spec").cloned().unwrap_or(Value::Null));
        let name = filled["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        let mut table = app::convert(spec, &name, projects, out, notes);
        set_keys(&mut table, &name, &repo, revision.as_deref(), &glob, &filled, projects, notes, &object);
        out.sets.push(Written { origin: origin.to_owned(), table });
    }
}

/// The keys a set has beyond its template's: `name`, `repo`, `ref`, `path_glob`, and
/// `namespaces` when a namespace made of the directory needs them.
#[allow(clippy::too_many_arguments)]
fn set_keys(
    table: &mut Table,
    name: &str,
    repo: &str,
    revision: Option<&str>,
    glob: &str,
    filled: &Value,
    projects: &BTreeMap<String, Project>,
    notes: &mut Notes,
    object: &str,
) {
    let name = template_name(name);
    table.insert("name", toml_edit::value(name));
    if table.get("repo").and_then(|r| r.as_str()).is_some_and(|r| r != repo) {
        notes.warn(
            object,
            "spec.template.spec.source.repoURL",
            "not the generator's repository: the set's units follow the generator's",
        );
    }
    table.insert("repo", toml_edit::value(repo));
    match revision {
        Some(r) if r != "HEAD" && !r.is_empty() => drop(table.insert("ref", toml_edit::value(r))),
        _ => drop(table.remove("ref")),
    }
    table.insert("path_glob", toml_edit::value(super::super::repo_path(glob)));
    if table.get("path").and_then(|p| p.as_str()) == Some("{path}") {
        table.remove("path");
    }
    let namespace = table.get("namespace").and_then(|n| n.as_str()).unwrap_or_default();
    if (namespace.contains("{dir}") || namespace.contains("{path}")) && !table.contains_key("service_account") {
        let project = filled["spec"]["project"].as_str().unwrap_or("default");
        let allowed = |p: &&String| {
            !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-*?".contains(c))
        };
        let patterns: Vec<&String> =
            projects.get(project).map(|p| p.namespaces.iter().filter(allowed).collect()).unwrap_or_default();
        if patterns.is_empty() {
            notes.warn(object, "spec.template.spec.destination.namespace", format!("made of the directory: gitward needs the set's namespaces patterns or a service_account, and AppProject {project} gave neither"));
        } else {
            table.insert("namespaces", strings(patterns.into_iter().map(String::as_str)));
        }
    }
    table.sort_values_by(|a, _, b, _| (a.get() != "name").cmp(&(b.get() != "name")));
}

/// A set's `name` template as a unit name template: `{dir}` and `{path}` kept, every other
/// character as [`super::super::output::unit_name`] writes it.
fn template_name(name: &str) -> String {
    let mut written = String::new();
    let mut rest = name;
    while !rest.is_empty() {
        if let Some(placeholder) = ["{dir}", "{path}"].into_iter().find(|p| rest.starts_with(p)) {
            written.push_str(placeholder);
            rest = &rest[placeholder.len()..];
            continue;
        }
        let c = rest.chars().next().unwrap_or('-');
        written.push(if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' });
        rest = &rest[c.len_utf8()..];
    }
    written
}
