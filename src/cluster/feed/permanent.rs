//! Which errors of a watch or a list will not go away by themselves: those the shared watch's
//! subscribers are told are permanent, and after which a subscriber's own list stops.

use kube::runtime::watcher;

pub(super) fn permanent_code(code: u16) -> bool {
    (400..500).contains(&code) && code != 408 && code != 429 && code != 410
}

/// True when a watch error will not go away by itself: the API server refused the list
/// (401, 403, 404, 400 …). Anything else — 429 `storage is (re)initializing` right after a CRD
/// is Established, 5xx, a dropped connection — leaves the subscriber pending while the watcher
/// backs off and lists again, bounded by the caller's timeout.
pub(super) fn is_permanent(err: &watcher::Error) -> bool {
    let api_code = match err {
        watcher::Error::InitialListFailed(e) | watcher::Error::WatchStartFailed(e) | watcher::Error::WatchFailed(e) => {
            match e {
                kube::Error::Api(status) => Some(status.code),
                _ => None,
            }
        }
        watcher::Error::WatchError(status) => Some(status.code),
        _ => None,
    };
    api_code.is_some_and(permanent_code)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list_failed(code: u16) -> watcher::Error {
        let status = kube::core::Status { code, ..Default::default() };
        watcher::Error::InitialListFailed(kube::Error::Api(Box::new(status)))
    }

    #[test]
    fn storage_reinitializing_is_retried_but_forbidden_fails_the_kind() {
        assert!(!is_permanent(&list_failed(429)), "429 storage is (re)initializing");
        assert!(!is_permanent(&list_failed(503)));
        assert!(!is_permanent(&list_failed(410)), "410 Gone: relist");
        assert!(is_permanent(&list_failed(403)));
        assert!(is_permanent(&list_failed(404)));
    }
}
