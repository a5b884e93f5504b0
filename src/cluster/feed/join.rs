//! A subscriber's own list, for one that joins a shared watch whose objects of its label
//! value the feed does not hold ([`super::Feed::add`]).

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DynamicObject, ListParams};

use super::permanent::permanent_code;
use super::{Feed, Phase, Sink};

/// A subscriber's own list: one paged LIST with its exact selector while the shared watch is
/// watching, swapped in with the events held meanwhile replayed after it. Retried with
/// backoff on transient errors; ends without effect when the subscriber is gone or a list of
/// the shared watch began meanwhile (that list includes it).
pub(super) async fn join<S: Sink>(feed: Arc<Feed<S>>, id: u64) {
    let mut delay = Duration::from_millis(200);
    loop {
        let (lists, sink, value) = {
            let state = feed.state.lock().expect("feed lock");
            let Some(sub) = state.subs.get(&id) else { return };
            if state.phase != Phase::Watching || sub.joining.is_none() {
                return;
            }
            (state.lists, sub.sink.clone(), sub.value.clone())
        };
        let selector = format!("{}={value}", feed.label);
        match list_all(&feed.api, &selector, &*sink).await {
            Ok(listing) => {
                let mut state = feed.state.lock().expect("feed lock");
                if state.lists != lists {
                    return;
                }
                let Some(sub) = state.subs.get_mut(&id) else { return };
                let Some(held) = sub.joining.take() else { return };
                sub.sink.listed(listing);
                for event in held {
                    event.deliver(&*sub.sink);
                }
                return;
            }
            Err(e) => {
                let permanent = matches!(&e, kube::Error::Api(s) if permanent_code(s.code));
                sink.failed(&crate::telemetry::error_chain(&e), permanent);
                if permanent {
                    return;
                }
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(30));
            }
        }
    }
}

/// Every object the selector matches, reduced into a listing, 500 per page.
async fn list_all<S: Sink>(api: &Api<DynamicObject>, selector: &str, sink: &S) -> kube::Result<S::Listing> {
    let mut listing = S::Listing::default();
    let mut params = ListParams::default().labels(selector).limit(500);
    loop {
        let page = api.list_metadata(&params).await?;
        for object in &page.items {
            sink.list_item(&mut listing, object);
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(listing),
        }
    }
}
