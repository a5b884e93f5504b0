//! Flux's objects as gitward units: each `Kustomization` (`kustomize.toolkit.fluxcd.io`) and
//! each `HelmRelease` (`helm.toolkit.fluxcd.io`) a `[[sync]]` table, its source's keys
//! (`sources`, `artifacts`) and its own (`kustomization`, `helm`).

mod artifacts;
mod helm;
mod kustomization;
mod sources;

use std::collections::BTreeMap;

use toml_edit::{Item, Table, Value};

use super::Object;
use super::fields::{Fields, Notes};
use super::output::Output;
use sources::{Key, Source};

/// What every unit's mapping reads: the sources, and the unit name of each `Kustomization`
/// and `HelmRelease`.
pub(super) struct Context {
    sources: BTreeMap<Key, Source>,
    names: BTreeMap<Key, String>,
}

/// Adds the units of `objects` to `out`.
pub(super) fn import(objects: &[Object], out: &mut Output, notes: &mut Notes) {
    let mut sources = sources::index(objects, out, notes);
    for generator in objects.iter().filter(|o| o.is("source.extensions.fluxcd.io", "ArtifactGenerator")) {
        for (name, source) in artifacts::generator(generator, &sources, notes) {
            sources.insert(sources::key("ExternalArtifact", &generator.namespace, &name), source);
        }
    }
    let mut names = BTreeMap::new();
    for object in objects.iter().filter(|o| is_unit(o)) {
        let name = out.claim(&object.namespace, &object.name);
        names.insert(sources::key(&object.kind, &object.namespace, &object.name), name);
    }
    let context = Context { sources, names };
    for object in objects {
        let made = if object.is("kustomize.toolkit.fluxcd.io", "Kustomization") {
            kustomization::unit(object, &context, out, notes)
        } else if object.is("helm.toolkit.fluxcd.io", "HelmRelease") {
            helm::unit(object, &context, out, notes)
        } else {
            if object.group().ends_with("toolkit.fluxcd.io") && !object.group().starts_with("source.") {
                notes.warn(&object.id(), "", "no equivalent");
            }
            continue;
        };
        out.units.push(super::output::Written { origin: object.id(), table: made });
    }
}

/// Whether `object` becomes a unit.
fn is_unit(object: &Object) -> bool {
    object.is("kustomize.toolkit.fluxcd.io", "Kustomization") || object.is("helm.toolkit.fluxcd.io", "HelmRelease")
}

impl Context {
    /// The unit name of `kind` `namespace/name`.
    fn unit(&self, kind: &str, namespace: &str, name: &str) -> Option<&String> {
        self.names.get(&sources::key(kind, namespace, name))
    }

    /// `depends_on` from `spec.dependsOn` (`name`, `namespace`) of units of `kind`.
    fn depends_on(&self, spec: &mut Fields, kind: &str, namespace: &str, table: &mut Table, notes: &mut Notes) {
        let mut units: Vec<Value> = Vec::new();
        for mut item in spec.list("dependsOn") {
            let name = item.string("name").unwrap_or_default();
            let ns = item.string("namespace").unwrap_or_else(|| namespace.to_owned());
            if let Some(expr) = item.string("readyExpr") {
                let message = format!("CEL over Flux's status: rewrite `{expr}` as a ready_expr over gitward's");
                notes.warn(item.object(), &item.path("readyExpr"), message);
            }
            match self.unit(kind, &ns, &name) {
                Some(unit) => units.push(unit.as_str().into()),
                None => notes.warn(
                    item.object(),
                    &item.path("name"),
                    format!("{kind} {ns}/{name} was not among the objects read"),
                ),
            }
            item.finish(notes);
        }
        if !units.is_empty() {
            table.insert("depends_on", Item::Value(Value::Array(units.into_iter().collect())));
        }
    }

    /// The source `spec.<field>` names, with a warning when it was not read.
    fn source(&self, spec: &mut Fields, field: &str, namespace: &str, notes: &mut Notes) -> Option<&Source> {
        let mut fields = spec.child(field)?;
        let path = fields.path("name");
        let object = fields.object().to_owned();
        fields.take("apiVersion");
        let key = sources::reference(fields, namespace, notes);
        let found = self.sources.get(&key);
        if found.is_none() {
            let (kind, ns, name) = key;
            notes.warn(
                &object,
                &path,
                format!("{kind} {ns}/{name} was not among the objects read: set the unit's source by hand"),
            );
        }
        found
    }
}

/// `[sync.verify]` of a source, when it has one.
fn verify_table(source: &Source, table: &mut Table) {
    if let Some((key, file)) = &source.verify {
        let mut verify = Table::new();
        verify.insert(key, toml_edit::value(file.as_str()));
        table.insert("verify", Item::Table(verify));
    }
}

/// Maps `spec.serviceAccountName`, `spec.suspend`, `spec.interval` and `spec.timeout`,
/// which both kinds have.
fn shared_keys(spec: &mut Fields, out: &mut Output, table: &mut Table) {
    if let Some(account) = spec.string("serviceAccountName") {
        table.insert("service_account", toml_edit::value(account));
    }
    if let Some(suspend) = spec.boolean("suspend") {
        table.insert("suspend", toml_edit::value(suspend));
    }
    if let Some(interval) = spec.string("interval") {
        out.interval(super::output::Interval::Resync, &interval, spec.object());
    }
    if let Some(timeout) = spec.string("timeout").and_then(|t| super::fields::duration(&t)) {
        table.insert("health_timeout", toml_edit::value(timeout));
    }
}
