//! A Flux `Kustomization` as a `[[sync]]` table: `spec.sourceRef` and `spec.path` → `repo`,
//! `ref`, `path`; `prune`, `targetNamespace` → `namespace`, `dependsOn` → `depends_on`,
//! `postBuild` → `[sync.substitute]`, `serviceAccountName` → `service_account`, `suspend`,
//! `timeout` and `wait` → `health_timeout`, `force` → `recreate_on_immutable`, `decryption`
//! → `[sync.decryption]`, `interval` → `[daemon] resync_interval`.

use toml_edit::{Item, Table};

use super::super::Object;
use super::super::fields::{Fields, Notes};
use super::super::output::{Output, strings};
use super::sources::clean_path;
use super::{Context, shared_keys, verify_table};

/// The unit of `object`.
pub(super) fn unit(object: &Object, context: &Context, out: &mut Output, notes: &mut Notes) -> Table {
    let mut table = Table::new();
    let mut spec = Fields::spec(object);
    let name = context.unit(&object.kind, &object.namespace, &object.name).cloned().unwrap_or_default();
    table.insert("name", toml_edit::value(name));
    let path = clean_path(&spec.string("path").unwrap_or_default());
    let path_field = spec.path("path");
    if let Some(source) = context.source(&mut spec, "sourceRef", &object.namespace, notes) {
        match (&source.repo, &source.unusable) {
            (Some(repo), _) => {
                table.insert("repo", toml_edit::value(repo.as_str()));
                if let Some(reference) = &source.reference {
                    table.insert("ref", toml_edit::value(reference.as_str()));
                }
            }
            (None, why) => {
                notes.warn(&object.id(), "spec.sourceRef", why.clone().unwrap_or_else(|| "no repository".into()))
            }
        }
        match source.repository_path(&path) {
            Some(p) if !p.is_empty() => {
                table.insert("path", toml_edit::value(p));
            }
            Some(_) => {}
            None => notes.warn(&object.id(), &path_field, "no copy of the artifact holds this path"),
        }
        verify_table(source, &mut table);
    }
    if let Some(prune) = spec.boolean("prune") {
        table.insert("prune", toml_edit::value(prune));
    }
    if let Some(namespace) = spec.string("targetNamespace") {
        table.insert("namespace", toml_edit::value(namespace));
    }
    context.depends_on(&mut spec, "Kustomization", &object.namespace, &mut table, notes);
    shared_keys(&mut spec, out, &mut table);
    health(&mut spec, &mut table, notes);
    if spec.boolean("force") == Some(true) {
        table.insert("recreate_on_immutable", toml_edit::value(true));
    }
    if let Some(post_build) = spec.child("postBuild") {
        substitute(post_build, &object.namespace, &mut table, notes);
    }
    decryption(&mut spec, &mut table, notes);
    spec.warn_if_set("retryInterval", "no equivalent: a failed sync is retried with gitward's backoff", notes);
    spec.finish(notes);
    table
}

/// `spec.wait` and `spec.healthChecks`: gitward waits for what a sync changed, so `wait:
/// false` with no health checks is `health_timeout = "0s"`; named health checks have no
/// equivalent.
fn health(spec: &mut Fields, table: &mut Table, notes: &mut Notes) {
    let wait = spec.boolean("wait");
    let checks = spec.take("healthChecks").is_some();
    if checks {
        notes.warn(spec.object(), &spec.path("healthChecks"), "no equivalent");
    }
    if wait == Some(false) && !checks {
        table.insert("health_timeout", toml_edit::value("0s"));
    }
    spec.warn_if_set("healthCheckExprs", "no equivalent: gitward judges health by kstatus", notes);
}

/// `spec.postBuild`: `substitute` → `[sync.substitute] vars`, `substituteFrom` (ConfigMaps
/// and Secrets of the Kustomization's namespace) → `from`: a Secret stays a reference, its
/// values are read from the cluster at each sync.
fn substitute(mut post_build: Fields, namespace: &str, table: &mut Table, notes: &mut Notes) {
    let mut substitute = Table::new();
    let object = post_build.object().to_owned();
    if let Some(serde_json::Value::Object(vars)) = post_build.take("substitute") {
        let mut inline = toml_edit::InlineTable::new();
        for (key, value) in &vars {
            let text = value.as_str().map_or_else(|| value.to_string(), str::to_owned);
            inline.insert(key, text.as_str().into());
        }
        if !inline.is_empty() {
            substitute.insert("vars", Item::Value(inline.into()));
        }
    }
    let mut from = Vec::new();
    for mut item in post_build.list("substituteFrom") {
        let kind = item.string("kind").unwrap_or_default();
        let name = item.string("name").unwrap_or_default();
        if item.boolean("optional") == Some(true) {
            let message = "no equivalent: every `from` object must exist, or the sync fails";
            notes.warn(&object, &item.path("optional"), message);
        }
        from.push(format!("{kind}/{namespace}/{name}"));
        item.finish(notes);
    }
    if !from.is_empty() {
        substitute.insert("from", strings(from));
    }
    post_build.finish(notes);
    if !substitute.is_empty() {
        table.insert("substitute", Item::Table(substitute));
    }
}

/// `spec.decryption` (`provider: sops`, `secretRef`): `[sync.decryption] age_key_file`, a file
/// the Secret's age key is to be written to.
fn decryption(spec: &mut Fields, table: &mut Table, notes: &mut Notes) {
    let Some(mut decryption) = spec.child("decryption") else { return };
    let provider = decryption.string("provider");
    let secret = decryption.child("secretRef").and_then(|mut s| {
        let name = s.string("name");
        s.finish(notes);
        name
    });
    let object = decryption.object().to_owned();
    let path = decryption.path("secretRef");
    decryption.finish(notes);
    if provider.as_deref().is_some_and(|p| p != "sops") {
        notes.warn(&object, &path, "no equivalent: gitward decrypts SOPS files only");
        return;
    }
    let file = format!("keys/{}.agekey", secret.as_deref().unwrap_or("sops"));
    let mut keys = Table::new();
    keys.insert("age_key_file", toml_edit::value(file.as_str()));
    table.insert("decryption", Item::Table(keys));
    let message = format!(
        "[sync.decryption] age_key_file = \"{file}\": gitward reads the age key from a file: write the \
         Secret's key there (a PGP or cloud KMS key has no equivalent)"
    );
    notes.warn(&object, &path, message);
}
