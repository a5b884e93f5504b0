//! Argo CD's objects (`argoproj.io`) as gitward units: each `Application` a `[[sync]]` table
//! (`app`), each `ApplicationSet` git directory generator a `[[sync_set]]` and each list
//! generator's element a `[[sync]]` table (`appset`), with what their `AppProject` says
//! (`project`).

mod app;
mod appset;
mod project;

use super::Object;
use super::fields::{Fields, Notes};
use super::output::{Output, Written};

/// Adds the units and sets of `objects` to `out`.
pub(super) fn import(objects: &[Object], out: &mut Output, notes: &mut Notes) {
    let projects = project::index(objects, notes);
    for object in objects.iter().filter(|o| o.group() == "argoproj.io") {
        match object.kind.as_str() {
            "Application" => {
                let name = out.claim(&object.namespace, &object.name);
                let spec = Fields::spec(object);
                let mut table = app::convert(spec, &object.name, &projects, out, notes);
                table.insert("name", toml_edit::value(name));
                table.sort_values_by(|a, _, b, _| (a.get() != "name").cmp(&(b.get() != "name")));
                out.units.push(Written { origin: object.id(), table });
            }
            "ApplicationSet" => appset::import(object, &projects, out, notes),
            "AppProject" => {}
            _ => notes.warn(&object.id(), "", "no equivalent"),
        }
    }
}
