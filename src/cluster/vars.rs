//! The ConfigMaps and Secrets `[sync.substitute] from` names: their data read as variables
//! ([`read`]), and watched so that a change syncs the unit again ([`changes`]).

use std::collections::BTreeMap;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use kube::runtime::watcher;

use super::{Error, Result};
use crate::config::{VarSource, is_var_name};

/// The variables `source` holds: each `data` key that is a variable name
/// ([`is_var_name`]) with its value (a Secret's decoded). Other keys cannot be referenced and
/// are left out, so one ConfigMap may also serve other readers; `binaryData` is not read.
///
/// Errors: [`Error::VariablesUnreadable`] when the object cannot be read (missing: 404,
/// forbidden) or a Secret's value is not UTF-8.
pub async fn read(client: &kube::Client, source: &VarSource) -> Result<BTreeMap<String, String>> {
    let failed = |message: String| Error::VariablesUnreadable { object: source.to_string(), message };
    let read = |e: kube::Error| failed(super::api_message(&e));
    let pairs: Vec<(String, String)> = if source.secret {
        let secret =
            Api::<Secret>::namespaced(client.clone(), &source.namespace).get(&source.name).await.map_err(read)?;
        let data = secret.data.unwrap_or_default();
        let text = |(k, v): (String, k8s_openapi::ByteString)| match String::from_utf8(v.0) {
            Ok(v) => Ok((k, v)),
            Err(_) => Err(failed(format!("the value of {k} is not UTF-8 text"))),
        };
        data.into_iter().map(text).collect::<Result<_>>()?
    } else {
        let map =
            Api::<ConfigMap>::namespaced(client.clone(), &source.namespace).get(&source.name).await.map_err(read)?;
        map.data.unwrap_or_default().into_iter().collect()
    };
    Ok(pairs.into_iter().filter(|(k, _)| is_var_name(k)).collect())
}

/// A stream that yields once each time one of `sources` is changed, created or deleted after
/// the watch started (the first list of each is not a change): a watch per object, selected
/// by `metadata.name`, restarted with kube's default backoff when it fails. Yields `source`
/// that changed.
pub fn changes(client: &kube::Client, sources: &[VarSource]) -> impl Stream<Item = VarSource> + Send + 'static {
    let streams = sources.iter().map(|source| {
        let config = watcher::Config::default().fields(&format!("metadata.name={}", source.name));
        let source = source.clone();
        let events = if source.secret {
            let api = Api::<Secret>::namespaced(client.clone(), &source.namespace);
            watcher::watcher(api, config).map(|e| e.map(|e| version_of(&e, |s: &Secret| &s.metadata))).boxed()
        } else {
            let api = Api::<ConfigMap>::namespaced(client.clone(), &source.namespace);
            watcher::watcher(api, config).map(|e| e.map(|e| version_of(&e, |c: &ConfigMap| &c.metadata))).boxed()
        };
        let mut versions = Versions::default();
        events.filter_map(move |event| {
            // A failed watch is retried by the watcher's backoff: nothing known changed.
            let changed = event.ok().is_some_and(|seen| versions.saw(seen));
            futures::future::ready(changed.then(|| source.clone()))
        })
    });
    futures::stream::select_all(streams.map(|s| s.boxed()))
}

/// What a watch event says of the one object it selects.
#[derive(Debug)]
enum Seen {
    /// A relist begins.
    Init,
    /// The relist found the object at this resourceVersion.
    Listed(Option<String>),
    /// The relist ended.
    Done,
    /// The object is now at this resourceVersion; `None`: deleted.
    Now(Option<String>),
}

fn version_of<K>(event: &watcher::Event<K>, meta: fn(&K) -> &kube::api::ObjectMeta) -> Seen {
    match event {
        watcher::Event::Init => Seen::Init,
        watcher::Event::InitApply(o) => Seen::Listed(meta(o).resource_version.clone()),
        watcher::Event::InitDone => Seen::Done,
        watcher::Event::Apply(o) => Seen::Now(meta(o).resource_version.clone()),
        watcher::Event::Delete(_) => Seen::Now(None),
    }
}

/// The versions one watch has seen of its object.
#[derive(Debug, Default)]
struct Versions {
    /// The version last known; `None` before the first list ended (`Some(None)`: absent).
    known: Option<Option<String>>,
    /// What the relist under way found.
    listing: Option<String>,
}

impl Versions {
    /// Takes in one event; whether the object changed from a version known before.
    fn saw(&mut self, seen: Seen) -> bool {
        let now = match seen {
            Seen::Init => {
                self.listing = None;
                return false;
            }
            Seen::Listed(version) => {
                self.listing = version;
                return false;
            }
            Seen::Done => self.listing.take(),
            Seen::Now(version) => version,
        };
        let changed = self.known.as_ref().is_some_and(|before| *before != now);
        self.known = Some(now);
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_version_other_than_the_one_known_is_a_change() {
        let mut v = Versions::default();
        let v1 = || Some("1".to_owned());
        assert!(!v.saw(Seen::Init) && !v.saw(Seen::Listed(v1())) && !v.saw(Seen::Done), "the first list");
        assert!(!v.saw(Seen::Init) && !v.saw(Seen::Listed(v1())) && !v.saw(Seen::Done), "a relist, unchanged");
        assert!(v.saw(Seen::Now(Some("2".into()))), "an update");
        assert!(v.saw(Seen::Now(None)), "a delete");
        assert!(!v.saw(Seen::Init) && !v.saw(Seen::Done), "a relist finds it still gone");
        assert!(v.saw(Seen::Now(v1())), "created again");
    }

    #[test]
    fn an_object_missing_at_the_first_list_changes_when_created() {
        let mut v = Versions::default();
        assert!(!v.saw(Seen::Init) && !v.saw(Seen::Done));
        assert!(v.saw(Seen::Now(Some("5".into()))));
    }
}
