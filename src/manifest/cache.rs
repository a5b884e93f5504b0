//! A parse cache keyed by (path, blob id), so a new revision re-parses only the files it changed.

use std::collections::HashMap;

use super::error::{Error, Result};
use super::{Loaded, parse_file};
use crate::object::Atom;
use crate::source::{TreeFile, is_kustomization_path, is_manifest_path};

/// Parsed files of the previous load, so [`ParseCache::load`] parses only blobs whose id changed.
///
/// Git names a blob by its content, so an unchanged id means an unchanged parse: the cache keeps,
/// per path, the blob id last parsed and its outcome — errors included, since the same bytes give
/// the same error. Files gone from the tree are dropped on the next load, so the cache holds at
/// most one entry per file of the latest tree. Not shared between sync units: keep one per unit.
#[derive(Debug, Default)]
pub struct ParseCache {
    /// Per path (interned, shared with the manifests' [`super::Manifest::file`]): the blob id
    /// parsed and what [`parse_file`] returned for it.
    files: HashMap<Atom, CachedFile>,
    /// How many blobs the last [`ParseCache::load`] read and parsed (the rest came from the
    /// cache); for tests and metrics.
    parsed_last_load: usize,
}

#[derive(Debug)]
struct CachedFile {
    oid: String,
    outcome: Result<Loaded>,
}

impl ParseCache {
    /// An empty cache: the first load parses every file.
    pub fn new() -> Self {
        Self::default()
    }

    /// Loads the desired objects of a tree: every manifest file of `files` (see
    /// [`is_manifest_path`]; kustomization files are reported as skipped without being
    /// read), in path order (byte order of the `/`-separated paths), then document order.
    ///
    /// `read_blob` returns a file's bytes, or a message saying why it could not; it is called
    /// only for files whose blob id differs from the previous load's. Every file is visited even
    /// after an error, so the cache always matches the latest tree; the error returned is the
    /// first in path order ([`Error::ReadBlob`] when a blob could not be read, else the file's
    /// parse error).
    pub fn load(
        &mut self,
        files: &[TreeFile],
        mut read_blob: impl FnMut(&TreeFile) -> std::result::Result<Vec<u8>, String>,
    ) -> Result<Loaded> {
        let mut files: Vec<&TreeFile> =
            files.iter().filter(|f| is_manifest_path(&f.path) || is_kustomization_path(&f.path)).collect();
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let mut previous = std::mem::take(&mut self.files);
        let keys: Vec<Atom> = files.iter().map(|file| Atom::new(&file.path)).collect();
        // Blobs are read in path order on this thread (`read_blob` may hold a libgit2 handle),
        // then the files to parse are parsed on every core at once.
        let mut slots: Vec<Slot> = files
            .iter()
            .zip(&keys)
            .map(|(file, key)| match previous.remove(key) {
                Some(cached) if cached.oid == file.oid => Slot::Cached(cached),
                _ if is_kustomization_path(&file.path) => Slot::Parse(Vec::new()),
                _ => match read_blob(file) {
                    Ok(bytes) => Slot::Parse(bytes),
                    Err(message) => Slot::Unreadable(Error::ReadBlob { file: file.path.clone(), message }),
                },
            })
            .collect();
        self.parsed_last_load = files
            .iter()
            .zip(&slots)
            .filter(|(f, s)| matches!(s, Slot::Parse(_)) && !is_kustomization_path(&f.path))
            .count();
        parse_all(&files, &mut slots);
        let mut loaded = Loaded::default();
        let mut first_error = None;
        for (key, slot) in keys.into_iter().zip(slots) {
            let cached = match slot {
                Slot::Cached(cached) => cached,
                Slot::Unreadable(err) => {
                    first_error.get_or_insert(err);
                    continue;
                }
                Slot::Parse(_) => unreachable!("parse_all parses every slot"),
            };
            match &cached.outcome {
                Ok(parsed) if first_error.is_none() => {
                    loaded.manifests.extend_from_slice(&parsed.manifests);
                    loaded.skipped.extend_from_slice(&parsed.skipped);
                }
                Ok(_) => {}
                Err(err) => {
                    first_error.get_or_insert_with(|| err.clone());
                }
            }
            self.files.insert(key, cached);
        }
        match first_error {
            Some(err) => Err(err),
            None => Ok(loaded),
        }
    }

    /// How many blobs the last [`ParseCache::load`] read and parsed; the other files of the tree
    /// were served from the cache. Kustomization files, which are never read, do not count.
    pub fn parsed_last_load(&self) -> usize {
        self.parsed_last_load
    }
}

/// One file of a load: served from the cache, to parse (its bytes), or unreadable.
enum Slot {
    Cached(CachedFile),
    Parse(Vec<u8>),
    Unreadable(Error),
}

/// Below this many files to parse, one thread parses them all (a thread costs more than a few
/// documents).
const PARALLEL_FROM: usize = 64;

/// Parses every [`Slot::Parse`] of `slots` (one per file of `files`) into [`Slot::Cached`]: on
/// one thread started for all of them ([`super::stream::spawn_parse_thread`], rather than one per
/// file), or, from [`PARALLEL_FROM`] files on, spread over the available cores
/// ([`std::thread::available_parallelism`]): a first load of a 10,000-file tree is mostly YAML
/// parsing, and nothing else runs meanwhile.
fn parse_all(files: &[&TreeFile], slots: &mut [Slot]) {
    let parse = |files: &[&TreeFile], slots: &mut [Slot]| {
        for (file, slot) in files.iter().zip(slots.iter_mut()) {
            if let Slot::Parse(bytes) = slot {
                let mut outcome = parse_file(&file.path, bytes);
                if let Ok(parsed) = &mut outcome {
                    // Held until the file changes: no spare capacity (a one-object file's Vec
                    // would otherwise keep room for four).
                    parsed.manifests.shrink_to_fit();
                    parsed.skipped.shrink_to_fit();
                }
                *slot = Slot::Cached(CachedFile { oid: file.oid.clone(), outcome });
            }
        }
    };
    let to_parse = slots.iter().filter(|s| matches!(s, Slot::Parse(_))).count();
    if to_parse == 0 {
        return;
    }
    let threads = if to_parse < PARALLEL_FROM {
        1
    } else {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    };
    let chunk = files.len().div_ceil(threads);
    type Chunk<'a, 'f> = std::sync::Mutex<Option<(&'a [&'f TreeFile], &'a mut [Slot])>>;
    let chunks: Vec<Chunk<'_, '_>> =
        files.chunks(chunk).zip(slots.chunks_mut(chunk)).map(|c| std::sync::Mutex::new(Some(c))).collect();
    let run = |c: &Chunk<'_, '_>| {
        if let Some((files, slots)) = c.lock().expect("parse chunk").take() {
            parse(files, slots);
        }
    };
    std::thread::scope(|scope| {
        for c in &chunks {
            // No thread to be had (resource limits): parse here, each file then on a thread of
            // its own.
            if super::stream::spawn_parse_thread(scope, move || run(c)).is_err() {
                run(c);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> Vec<TreeFile> {
        files
            .iter()
            .map(|(path, text)| TreeFile { path: (*path).into(), oid: oid(text), size: text.len() as u64 })
            .collect()
    }

    /// A stand-in blob id: the text itself, so equal content means equal id, as in git.
    fn oid(text: &str) -> String {
        hex::encode(text)
    }

    fn read(file: &TreeFile) -> std::result::Result<Vec<u8>, String> {
        hex::decode(&file.oid).map_err(|e| e.to_string())
    }

    fn names(loaded: &Loaded) -> Vec<&str> {
        loaded.manifests.iter().map(|m| m.name.as_str()).collect()
    }

    const A: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n";
    const B: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n";
    const BAD: &str = "apiVersion: v1\nkind: ConfigMap\n";

    #[test]
    fn only_changed_blobs_are_parsed_again() {
        let mut cache = ParseCache::new();
        let first = cache.load(&tree(&[("z/b.yaml", B), ("a.yaml", A), ("README.md", "x")]), read);
        assert_eq!(first.as_ref().map(names).ok(), Some(vec!["a", "b", "c"]));
        assert_eq!(cache.parsed_last_load(), 2);
        let changed = A.replace("name: a", "name: a2");
        let second = cache.load(&tree(&[("a.yaml", &changed), ("z/b.yaml", B)]), read);
        assert_eq!(second.as_ref().map(names).ok(), Some(vec!["a2", "b", "c"]));
        assert_eq!(cache.parsed_last_load(), 1);
    }

    #[test]
    fn removed_files_leave_the_cache() {
        let mut cache = ParseCache::new();
        let _ = cache.load(&tree(&[("a.yaml", A), ("b.yaml", B)]), read);
        let loaded = cache.load(&tree(&[("a.yaml", A)]), read);
        assert_eq!(loaded.as_ref().map(names).ok(), Some(vec!["a"]));
        assert_eq!(cache.files.len(), 1);
        // Coming back, the file is parsed again.
        let _ = cache.load(&tree(&[("a.yaml", A), ("b.yaml", B)]), read);
        assert_eq!(cache.parsed_last_load(), 1);
    }

    #[test]
    fn errors_are_cached_and_the_first_in_path_order_is_returned() {
        let mut cache = ParseCache::new();
        let files = tree(&[("c.yaml", BAD), ("b.yaml", BAD), ("a.yaml", A)]);
        let err = cache.load(&files, read).err();
        assert!(matches!(&err, Some(Error::MissingField { file, .. }) if file == "b.yaml"), "{err:?}");
        assert_eq!(cache.parsed_last_load(), 3);
        let again = cache.load(&files, read).err();
        assert_eq!(again, err);
        assert_eq!(cache.parsed_last_load(), 0);
    }

    #[test]
    fn unreadable_blob_is_reported_and_retried_next_load() {
        let mut cache = ParseCache::new();
        let files = tree(&[("a.yaml", A)]);
        let err = cache.load(&files, |_| Err("object not found".into())).err();
        assert_eq!(err.map(|e| e.to_string()).as_deref(), Some("a.yaml: reading blob: object not found"));
        assert!(cache.load(&files, read).is_ok());
        assert_eq!(cache.parsed_last_load(), 1);
    }

    #[test]
    fn kustomization_files_are_skipped_without_reading() {
        let mut cache = ParseCache::new();
        let files = tree(&[("app/Kustomization", "x"), ("app/kustomization.yaml", "resources: []"), ("a.yaml", A)]);
        let loaded = cache.load(&files, |f| if f.path == "a.yaml" { read(f) } else { Err("read".into()) });
        let skipped: Vec<_> = loaded.iter().flat_map(|l| &l.skipped).map(|s| s.file.as_str()).collect();
        assert_eq!(skipped, vec!["app/Kustomization", "app/kustomization.yaml"]);
        assert_eq!(cache.parsed_last_load(), 1);
    }
}
