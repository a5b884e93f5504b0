//! Flux's `ArtifactGenerator` (`source.extensions.fluxcd.io`): each artifact of
//! `spec.artifacts` is an `ExternalArtifact` made by copying directories of the sources of
//! `spec.sources`. An artifact made only of whole directories (`@alias/dir/**` to
//! `@artifact/dir/`) from one git source is that repository seen through a path mapping, so
//! a `Kustomization` of it becomes a unit of the repository at the mapped path.

use std::collections::BTreeMap;

use super::super::Object;
use super::super::fields::{Fields, Notes};
use super::sources::{Key, Source, clean_path, reference};

/// The artifacts of `generator` that can be read as a repository path, by name.
pub(super) fn generator(
    generator: &Object,
    sources: &BTreeMap<Key, Source>,
    notes: &mut Notes,
) -> Vec<(String, Source)> {
    let mut spec = Fields::spec(generator);
    let mut aliases = BTreeMap::new();
    for mut item in spec.list("sources") {
        let alias = item.string("alias").unwrap_or_default();
        aliases.insert(alias, reference(item, &generator.namespace, notes));
    }
    let mut made = Vec::new();
    for mut artifact in spec.list("artifacts") {
        let name = artifact.string("name").unwrap_or_default();
        artifact.warn_if_set("revision", "no equivalent: the unit's revision is its repository's", notes);
        artifact.string("originRevision");
        let mut alias_of = None;
        let mut copies = Vec::new();
        for mut copy in artifact.list("copy") {
            let (from, to) = (copy.string("from").unwrap_or_default(), copy.string("to").unwrap_or_default());
            match directory_copy(&from, &to) {
                Some((alias, from, to)) if alias_of.as_ref().is_none_or(|a| a == &alias) => {
                    alias_of = Some(alias);
                    copies.push((to, from));
                }
                _ => notes.warn(
                    copy.object(),
                    &copy.path("from"),
                    "no equivalent: only whole directories of one source (`@alias/dir/**` to `@artifact/dir/`) \
                     map to a repository path",
                ),
            }
            copy.finish(notes);
        }
        artifact.finish(notes);
        let source = alias_of.and_then(|a| aliases.get(&a)).and_then(|k| sources.get(k));
        match source {
            Some(source) if source.repo.is_some() => made.push((name, Source { copies, ..source.clone() })),
            _ => notes.warn(
                &generator.id(),
                "spec.artifacts",
                format!("artifact {name}: its source was not among the objects read"),
            ),
        }
    }
    spec.finish(notes);
    made
}

/// `@alias/dir/**` and `@artifact/dir/` (or `@artifact/`): (alias, `dir` of the source,
/// `dir` of the artifact).
fn directory_copy(from: &str, to: &str) -> Option<(String, String, String)> {
    let (alias, rest) = from.strip_prefix('@')?.split_once('/')?;
    let dir = rest.strip_suffix("**")?;
    let to = to.strip_prefix("@artifact/").or_else(|| (to == "@artifact").then_some(""))?;
    if dir.contains('*') || to.contains('*') {
        return None;
    }
    Some((alias.to_owned(), clean_path(dir), clean_path(to)))
}
