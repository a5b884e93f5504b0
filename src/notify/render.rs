//! The request each kind of notifier sends for a [`Notice`] (pure): its URL, headers and JSON
//! body. The secrets it needs are read by the caller and handed in.
//!
//! - `webhook`: `POST url`, the notice as JSON; with a key, `X-Gitward-Signature-256:
//!   sha256=<hex HMAC-SHA256 of the body>` (RFC 2104; the header GitHub's webhooks use).
//! - `slack`: `POST url`, an incoming-webhook message: `blocks` (Block Kit `section`s in
//!   `mrkdwn`) and the `text` fallback notifications show (Slack API, "Sending messages using
//!   incoming webhooks").
//! - `github`: `POST {url}/repos/{owner}/{repo}/statuses/{sha}`, `Authorization: Bearer`,
//!   `Accept: application/vnd.github+json`, body `state` (`pending`, `success`, `failure`),
//!   `context`, `description` (GitHub REST, "Create a commit status").
//! - `gitlab`: `POST {url}/projects/{url-encoded path}/statuses/{sha}`, `PRIVATE-TOKEN`, body
//!   `state` (`running`, `success`, `failed`), `name`, `context`, `description` (GitLab REST,
//!   "Set the pipeline status of a commit").
//! - `gitea`: `POST {url}/repos/{owner}/{repo}/statuses/{sha}`, `Authorization: token`, body
//!   `state` (`pending`, `success`, `failure`), `context`, `description` (Gitea API,
//!   `CreateStatusOption`).

use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use super::{Notice, State};
use crate::config::{Notify, NotifyKind};

/// The header that carries a webhook body's signature.
pub const SIGNATURE_HEADER: &str = "X-Gitward-Signature-256";
/// The longest `description` GitHub accepts, in characters (and the one all forges get).
const DESCRIPTION_CHARS: usize = 140;

/// One request to send.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Request {
    /// The full URL.
    pub url: String,
    /// Headers besides `Content-Type: application/json` and `User-Agent`.
    pub headers: Vec<(&'static str, String)>,
    /// The JSON body.
    pub body: Vec<u8>,
}

/// The request `notify` sends for `notice`; `secret` is the token of a forge or the key of a
/// webhook, when it has one.
///
/// Errors: a forge's repository that is neither configured nor readable from the unit's
/// `repo`, or a revision that is not a git commit id.
pub(super) fn request(notify: &Notify, notice: &Notice, secret: Option<&str>) -> Result<Request, String> {
    match notify.kind {
        NotifyKind::Webhook => Ok(webhook(notify, notice, secret)),
        NotifyKind::Slack => Ok(Request { url: notify.url.clone(), headers: Vec::new(), body: to_vec(&slack(notice)) }),
        NotifyKind::Github | NotifyKind::Gitlab | NotifyKind::Gitea => forge(notify, notice, secret.unwrap_or("")),
    }
}

fn to_vec(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).expect("a JSON value serialises")
}

/// The webhook body: the notice's fields.
pub(super) fn webhook_body(notice: &Notice) -> Value {
    json!({
        "unit": notice.unit,
        "cluster": notice.cluster,
        "revision": notice.revision,
        "event": notice.event.as_str(),
        "result": notice.result,
        "trigger": notice.trigger,
        "counts": notice.counts,
        "errors": notice.errors,
        "unhealthy": notice.unhealthy,
        "time": notice.time.to_string(),
    })
}

fn webhook(notify: &Notify, notice: &Notice, key: Option<&str>) -> Request {
    let body = to_vec(&webhook_body(notice));
    let headers = key.map(|k| vec![(SIGNATURE_HEADER, format!("sha256={}", sign(k.as_bytes(), &body)))]);
    Request { url: notify.url.clone(), headers: headers.unwrap_or_default(), body }
}

/// The hex HMAC-SHA256 of `body` under `key`.
pub(super) fn sign(key: &[u8], body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

/// Slack's `mrkdwn` control characters escaped (Slack API, "Formatting text for app surfaces").
fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// The Slack message: a headline, the counts, and the first errors or unhealthy objects.
pub(super) fn slack(notice: &Notice) -> Value {
    let short = notice.revision.get(..12).unwrap_or(&notice.revision);
    let unit = escape(&notice.unit);
    let text = format!("gitward: {unit} revision {short} {}", notice.event.as_str());
    let headline = format!(
        "*{}* · unit `{unit}` · cluster `{}` · revision `{short}`",
        notice.event.as_str(),
        escape(&notice.cluster)
    );
    let mut blocks = vec![
        json!({"type": "section", "text": {"type": "mrkdwn", "text": headline}}),
        json!({"type": "context", "elements": [{"type": "mrkdwn", "text": escape(&counts_line(notice))}]}),
    ];
    let listed: Vec<String> =
        notice.errors.iter().chain(&notice.unhealthy).map(|l| format!("• {}", escape(l))).collect();
    if !listed.is_empty() {
        blocks.push(json!({"type": "section", "text": {"type": "mrkdwn", "text": listed.join("\n")}}));
    }
    json!({"text": text, "blocks": blocks})
}

/// `failed: 1 created, 0 configured, 0 pruned, 2 failed`.
fn counts_line(notice: &Notice) -> String {
    let c = notice.counts;
    format!(
        "{}: {} created, {} configured, {} pruned, {} unchanged, {} failed",
        notice.result, c.created, c.configured, c.pruned, c.unchanged, c.failed
    )
}

/// A forge's `description`: the counts, or why the sync failed as a whole; at most
/// [`DESCRIPTION_CHARS`] characters.
pub(super) fn description(notice: &Notice) -> String {
    let text = match notice.errors.first() {
        Some(error) if notice.counts == Default::default() => format!("{}: {error}", notice.result),
        _ => counts_line(notice),
    };
    if text.chars().count() <= DESCRIPTION_CHARS {
        return text;
    }
    let cut: String = text.chars().take(DESCRIPTION_CHARS - 3).collect();
    format!("{cut}...")
}

fn forge(notify: &Notify, notice: &Notice, token: &str) -> Result<Request, String> {
    let sha = &notice.revision;
    if !(sha.len() == 40 || sha.len() == 64) || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("revision {sha} is not a git commit id: no commit status to set"));
    }
    let path = match &notify.repository {
        Some(r) => r.clone(),
        None => crate::config::repository_path(&notice.repo)
            .ok_or_else(|| format!("no owner/name in the repository URL of unit {}: set repository", notice.unit))?,
    };
    let context = format!("gitward/{}", notice.unit);
    let description = description(notice);
    let (url, headers, body) = match notify.kind {
        NotifyKind::Gitlab => {
            let id: String = url::form_urlencoded::byte_serialize(path.as_bytes()).collect();
            let state = match notice.state {
                State::Pending => "running",
                State::Success => "success",
                State::Failure => "failed",
                State::Cancelled => "canceled",
            };
            let body = json!({"state": state, "name": context, "context": context, "description": description});
            (format!("{}/projects/{id}/statuses/{sha}", notify.url), vec![("PRIVATE-TOKEN", token.to_owned())], body)
        }
        kind => {
            let owner_name = last_two(&path).ok_or_else(|| format!("repository `{path}` is not owner/name"))?;
            let url = format!("{}/repos/{owner_name}/statuses/{sha}", notify.url);
            let headers = if kind == NotifyKind::Github {
                vec![("Authorization", format!("Bearer {token}")), ("Accept", "application/vnd.github+json".into())]
            } else {
                vec![("Authorization", format!("token {token}")), ("Accept", "application/json".into())]
            };
            let state = match notice.state {
                State::Pending => "pending",
                State::Success => "success",
                State::Failure => "failure",
                State::Cancelled => "error",
            };
            (url, headers, json!({"state": state, "context": context, "description": description}))
        }
    };
    Ok(Request { url, headers, body: to_vec(&body) })
}

/// `owner/name` of a path's last two segments.
fn last_two(path: &str) -> Option<String> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    (parts.len() >= 2).then(|| parts[parts.len() - 2..].join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::NotifyEvent;
    use crate::telemetry::Masked;

    fn notice() -> Notice {
        Notice {
            unit: "shop".into(),
            cluster: "prod".into(),
            repo: "git@github.com:acme/deploy.git".into(),
            revision: "0123456789abcdef0123456789abcdef01234567".into(),
            event: NotifyEvent::Failed,
            state: State::Failure,
            result: "failed",
            trigger: Some("push"),
            counts: super::super::NoticeCounts { created: 1, failed: 1, ..Default::default() },
            errors: vec![Masked::new("ConfigMap/shop/bad failed: <invalid>")],
            unhealthy: Vec::new(),
            time: jiff::Timestamp::UNIX_EPOCH,
        }
    }

    fn notify(kind: NotifyKind, url: &str) -> Notify {
        Notify {
            kind,
            url: url.into(),
            token_file: None,
            secret_file: None,
            units: Vec::new(),
            on: vec![NotifyEvent::Failed],
            repository: None,
        }
    }

    #[test]
    fn repository_paths_are_read_from_https_ssh_and_scp_urls() {
        use crate::config::repository_path;
        assert_eq!(repository_path("https://github.com/acme/deploy.git").as_deref(), Some("acme/deploy"));
        assert_eq!(repository_path("https://tok@gitlab.com/g/sub/app").as_deref(), Some("g/sub/app"));
        assert_eq!(repository_path("ssh://git@host:2222/acme/deploy.git").as_deref(), Some("acme/deploy"));
        assert_eq!(repository_path("git@github.com:acme/deploy.git").as_deref(), Some("acme/deploy"));
        assert_eq!(repository_path("/srv/git/deploy.git"), None);
        assert_eq!(repository_path("file:///srv/git/acme/deploy.git"), None);
        assert_eq!(repository_path("https://host/deploy.git"), None);
    }

    #[test]
    fn a_webhook_body_is_signed_with_the_key() {
        let r = request(&notify(NotifyKind::Webhook, "http://h/hook"), &notice(), Some("k")).unwrap();
        assert_eq!(r.headers, [(SIGNATURE_HEADER, format!("sha256={}", sign(b"k", &r.body)))]);
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(body["result"], "failed");
        assert_eq!(body["time"], "1970-01-01T00:00:00Z");
        let unsigned = request(&notify(NotifyKind::Webhook, "http://h/hook"), &notice(), None).unwrap();
        assert!(unsigned.headers.is_empty());
    }

    #[test]
    fn each_forge_gets_its_own_path_header_and_state() {
        let n = notice();
        let gh = request(&notify(NotifyKind::Github, "https://api.github.com"), &n, Some("t")).unwrap();
        assert_eq!(gh.url, format!("https://api.github.com/repos/acme/deploy/statuses/{}", n.revision));
        assert!(gh.headers.contains(&("Authorization", "Bearer t".into())));
        let gl = request(&notify(NotifyKind::Gitlab, "https://gitlab.com/api/v4"), &n, Some("t")).unwrap();
        assert_eq!(gl.url, format!("https://gitlab.com/api/v4/projects/acme%2Fdeploy/statuses/{}", n.revision));
        assert_eq!(serde_json::from_slice::<Value>(&gl.body).unwrap()["state"], "failed");
        let gt = request(&notify(NotifyKind::Gitea, "https://gitea.host/api/v1"), &n, Some("t")).unwrap();
        assert!(gt.headers.contains(&("Authorization", "token t".into())));
        assert_eq!(serde_json::from_slice::<Value>(&gt.body).unwrap()["state"], "failure");
    }

    #[test]
    fn a_chart_revision_sets_no_commit_status() {
        let mut n = notice();
        n.revision = "app-1.2.3@sha256:00".into();
        assert!(request(&notify(NotifyKind::Github, "https://api.github.com"), &n, Some("t")).is_err());
    }

    #[test]
    fn descriptions_stay_within_140_characters() {
        let mut n = notice();
        n.counts = Default::default();
        n.errors = vec![Masked::new("é".repeat(300))];
        let d = description(&n);
        assert_eq!(d.chars().count(), 140);
        assert!(d.starts_with("failed: éé") && d.ends_with("..."));
    }

    #[test]
    fn slack_text_is_escaped() {
        let message = slack(&notice());
        assert_eq!(message["text"], "gitward: shop revision 0123456789ab failed");
        assert!(message["blocks"][2]["text"]["text"].as_str().unwrap().contains("&lt;invalid&gt;"));
    }
}
