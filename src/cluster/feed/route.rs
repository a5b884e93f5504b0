//! The shared watch's loop: each event of kube-runtime's `watcher` routed to the subscribers
//! of the object's label value — a list built for each subscriber present at its start and
//! handed out when it completes, a watch event delivered or held for one whose own list is in
//! flight, an object no subscriber holds noted among the unclaimed ones.

use std::collections::HashSet;
use std::sync::{Arc, Weak};

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};

use super::join::join;
use super::permanent::is_permanent;
use super::{Feed, Held, Meta, Phase, Sink, State, note, serve};

/// The label value that routes `object`, if it carries the label.
fn value_of<'a>(object: &'a Meta, label: &str) -> Option<&'a str> {
    object.metadata.labels.as_ref()?.get(label).map(String::as_str)
}

/// The shared watch's loop: routes each event to the subscribers of the object's label value.
/// Without `keep_watching` it ends after its first complete list (kube-runtime's `watcher`
/// opens the watch only when polled after `InitDone`, so none is ever opened).
pub(super) async fn run<S: Sink>(feed: Weak<Feed<S>>, api: Api<Meta>, config: watcher::Config, keep_watching: bool) {
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    while let Some(event) = stream.next().await {
        let Some(feed) = feed.upgrade() else { return };
        let label = feed.label;
        let mut state = feed.state.lock().expect("feed lock");
        let state = &mut *state;
        match event {
            Ok(Event::Init) => {
                state.phase = Phase::Listing;
                state.lists += 1;
                for sub in state.subs.values_mut() {
                    sub.listing = Some(S::Listing::default());
                }
                if let Some(unclaimed) = state.unclaimed.as_mut() {
                    unclaimed.listing.clear();
                }
                if let Some(names) = state.names.as_mut() {
                    names.list_begun();
                }
            }
            Ok(Event::InitApply(object)) => {
                let Some(value) = value_of(&object, label) else { continue };
                if let Some(names) = state.names.as_mut() {
                    names.list_item(&object, value);
                }
                let mut listed = false;
                for id in state.by_value.get(value).into_iter().flatten() {
                    if let Some(sub) = state.subs.get_mut(id)
                        && let Some(listing) = sub.listing.as_mut()
                    {
                        sub.sink.list_item(listing, &object);
                        listed = true;
                    }
                }
                if !listed && let Some(unclaimed) = state.unclaimed.as_mut() {
                    note(&mut unclaimed.listing, value.to_owned(), object, label, false);
                }
            }
            Ok(Event::InitDone) => {
                state.phase = Phase::Watching;
                listed(&feed, state);
                if !keep_watching {
                    return;
                }
            }
            Ok(Event::Apply(object)) => route(state, label, object, false),
            Ok(Event::Delete(object)) => route(state, label, object, true),
            Err(e) => {
                let message = crate::telemetry::error_chain(&e);
                let permanent = is_permanent(&e);
                tracing::warn!(resource = %feed.what, subscribers = state.subs.len(), error = %message, "metadata watch failed; retrying");
                for sub in state.subs.values() {
                    sub.sink.failed(&message, permanent);
                }
            }
        }
    }
}

/// A complete list (`InitDone`): each subscriber that was present at its start gets its
/// listing; one that came while it ran gets its objects from the unclaimed ones when no other
/// subscriber of its value took them from the list, else lists its own. The unclaimed objects
/// are now those of the list; what a subscriber got, it holds.
fn listed<S: Sink>(feed: &Arc<Feed<S>>, state: &mut State<S>) {
    let State { subs, by_value, unclaimed, names, .. } = state;
    if let Some(names) = names.as_mut() {
        names.listed();
    }
    let taken: HashSet<String> = subs.values().filter(|s| s.listing.is_some()).map(|s| s.value.clone()).collect();
    if let Some(unclaimed) = unclaimed.as_mut() {
        unclaimed.kept = std::mem::take(&mut unclaimed.listing);
        unclaimed.lost.clear();
    }
    for (id, sub) in subs.iter_mut() {
        match sub.listing.take() {
            Some(listing) => {
                sub.joining = None;
                sub.sink.listed(listing);
            }
            None if sub.joining.is_none() => {}
            None => match unclaimed.as_ref().filter(|_| !taken.contains(&sub.value)) {
                Some(unclaimed) => serve(sub, unclaimed.kept.get(&sub.value)),
                // Subscribed while the list ran: it lists its own objects now.
                None => drop(tokio::spawn(join(feed.clone(), *id))),
            },
        }
    }
    if let Some(unclaimed) = unclaimed.as_mut() {
        unclaimed.kept.retain(|value, _| !by_value.contains_key(value));
    }
}

/// Hands a watch event (`deleted`, else added or changed) to the subscribers of the object's
/// label value, or holds it for one whose own list is in flight; the object of a value no
/// subscriber holds is noted among the unclaimed ones (unless the feed lost that value).
fn route<S: Sink>(state: &mut State<S>, label: &str, object: Meta, deleted: bool) {
    let State { subs, by_value, unclaimed, names, .. } = state;
    let Some(value) = value_of(&object, label) else { return };
    if let Some(names) = names.as_mut() {
        names.event(&object, value, deleted);
    }
    let Some(ids) = by_value.get(value) else {
        if let Some(unclaimed) = unclaimed.as_mut().filter(|u| !u.lost.contains(value)) {
            note(&mut unclaimed.kept, value.to_owned(), object, label, deleted);
        }
        return;
    };
    for id in ids {
        let Some(sub) = subs.get_mut(id) else { continue };
        match (sub.joining.as_mut(), deleted) {
            (Some(buffer), false) => buffer.push(Held::Applied(object.clone())),
            (Some(buffer), true) => buffer.push(Held::Deleted(object.clone())),
            (None, false) => sub.sink.applied(&object),
            (None, true) => sub.sink.deleted(&object),
        }
    }
}
