//! A recording test forge: a loopback HTTP server that answers as the documented REST APIs of
//! GitHub, GitLab and Gitea do for pull request comments, commit statuses, pull requests and
//! the authenticated user, and records every request.
//!
//! As the forges do: GitHub pages comments by `per_page` (at most 100) and `page` with a
//! `Link: <…>; rel="next"` header and refuses a body over 65,536 characters with 422; GitLab
//! pages notes by `per_page` and `page` with `X-Next-Page` and refuses a note over 1,000,000
//! characters; Gitea answers every comment of an issue at once, whatever `page` and `limit`
//! say (as v1.27 does). A request without the token, in the forge's header, gets 401.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use gitward::config::{ForgeAuth, ForgeKind, Preview};
use serde_json::{Value, json};

/// The repository every forge here holds.
pub(crate) const REPO: &str = "acme/deploy";

/// One request the forge got.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub method: String,
    /// The path, without the API base.
    pub path: String,
    pub query: String,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// A comment as the forge keeps it.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    pub pr: u64,
    pub author: String,
    pub body: String,
}

#[derive(Debug, Default)]
pub(crate) struct Forge {
    pub requests: Vec<Recorded>,
    pub comments: BTreeMap<u64, Stored>,
    next_id: u64,
    /// Pull request → (head SHA, from a fork).
    pub pulls: HashMap<u64, (String, bool)>,
    /// Token → login.
    pub tokens: HashMap<String, String>,
    /// (SHA, status body) in the order posted.
    pub statuses: Vec<(String, Value)>,
    /// A GitHub App: its id and public key (PEM), which JWTs are checked against.
    pub app: Option<(u64, Vec<u8>)>,
    /// Installation tokens handed out.
    pub installation_tokens: usize,
}

/// A running test forge of one kind.
pub(crate) struct TestForge {
    pub kind: ForgeKind,
    pub port: u16,
    pub state: Arc<Mutex<Forge>>,
    _token_dir: tempfile::TempDir,
    pub token_file: std::path::PathBuf,
}

struct Shared {
    kind: ForgeKind,
    base: String,
    state: Arc<Mutex<Forge>>,
}

impl TestForge {
    /// A forge of `kind` whose token `token` is the user `gitward-bot`.
    pub async fn start(kind: ForgeKind) -> TestForge {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(Forge { next_id: 1000, ..Forge::default() }));
        state.lock().unwrap().tokens.insert("s3cret".into(), "gitward-bot".into());
        let base = format!("http://127.0.0.1:{port}{}", api_prefix(kind));
        let shared = Arc::new(Shared { kind, base, state: state.clone() });
        let app = axum::Router::new().fallback(handle).with_state(shared);
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let token_dir = tempfile::tempdir().unwrap();
        let token_file = token_dir.path().join("token");
        std::fs::write(&token_file, "s3cret\n").unwrap();
        TestForge { kind, port, state, _token_dir: token_dir, token_file }
    }

    /// The `[[preview]]` of this forge's repository, with its token.
    pub fn preview(&self, allow_forks: bool) -> Preview {
        Preview {
            forge: self.kind,
            api_url: format!("http://127.0.0.1:{}{}", self.port, api_prefix(self.kind)),
            repository: REPO.into(),
            auth: ForgeAuth::Token { token_file: self.token_file.clone() },
            allow_forks,
            sync: Vec::new(),
            interval: gitward::config::DEFAULT_PREVIEW_INTERVAL,
        }
    }

    /// Opens pull request `pr` at `sha`.
    pub fn pull(&self, pr: u64, sha: &str, fork: bool) {
        self.state.lock().unwrap().pulls.insert(pr, (sha.into(), fork));
    }

    /// Adds a comment by `author`, as if someone had posted it.
    pub fn comment(&self, pr: u64, author: &str, body: &str) -> u64 {
        let mut state = self.state.lock().unwrap();
        state.next_id += 1;
        let id = state.next_id;
        state.comments.insert(id, Stored { pr, author: author.into(), body: body.into() });
        id
    }

    /// The requests so far, forgotten.
    pub fn take(&self) -> Vec<Recorded> {
        std::mem::take(&mut self.state.lock().unwrap().requests)
    }

    /// The comments on `pr` by `author`, oldest first: (id, body).
    pub fn comments_of(&self, pr: u64, author: &str) -> Vec<(u64, String)> {
        let state = self.state.lock().unwrap();
        state
            .comments
            .iter()
            .filter(|(_, c)| c.pr == pr && c.author == author)
            .map(|(id, c)| (*id, c.body.clone()))
            .collect()
    }
}

fn api_prefix(kind: ForgeKind) -> &'static str {
    match kind {
        ForgeKind::Github => "",
        ForgeKind::Gitlab => "/api/v4",
        ForgeKind::Gitea => "/api/v1",
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().strip_prefix(api_prefix(shared.kind)).unwrap_or(uri.path()).to_owned();
    let query = uri.query().unwrap_or_default().to_owned();
    let json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut state = shared.state.lock().unwrap();
    let record = Recorded { method: method.to_string(), path: path.clone(), query: query.clone(), headers, body: json };
    state.requests.push(record.clone());
    let token = match shared.kind {
        ForgeKind::Github => record.header("authorization").and_then(|a| a.strip_prefix("Bearer ")),
        ForgeKind::Gitlab => record.header("private-token"),
        ForgeKind::Gitea => record.header("authorization").and_then(|a| a.strip_prefix("token ")),
    };
    if path.starts_with("/app") && shared.kind == ForgeKind::Github {
        let jwt = record.header("authorization").and_then(|a| a.strip_prefix("Bearer ")).unwrap_or_default();
        return app(&mut state, &method, &path, jwt);
    }
    let Some(login) = token.and_then(|t| state.tokens.get(t)).cloned() else {
        return (StatusCode::UNAUTHORIZED, axum::Json(json!({"message": "Bad credentials"}))).into_response();
    };
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let answer = route(&shared, &mut state, &method, &parts, &query, &login, &record.body);
    answer.unwrap_or_else(|| (StatusCode::NOT_FOUND, axum::Json(json!({"message": "Not Found"}))).into_response())
}

/// The repository's part of the path (`repos/acme/deploy`, GitLab's `projects/acme%2Fdeploy`)
/// stripped: the rest, if the path is under it.
fn under_repo<'a>(kind: ForgeKind, parts: &'a [&'a str]) -> Option<&'a [&'a str]> {
    match (kind, parts) {
        (ForgeKind::Gitlab, ["projects", id, rest @ ..]) if *id == "acme%2Fdeploy" => Some(rest),
        (ForgeKind::Github | ForgeKind::Gitea, ["repos", "acme", "deploy", rest @ ..]) => Some(rest),
        _ => None,
    }
}

fn route(
    shared: &Shared,
    state: &mut Forge,
    method: &Method,
    parts: &[&str],
    query: &str,
    login: &str,
    body: &Value,
) -> Option<Response> {
    let kind = shared.kind;
    if parts == ["user"] && method == Method::GET {
        let key = if kind == ForgeKind::Gitlab { "username" } else { "login" };
        return Some(axum::Json(json!({"id": 1, key: login})).into_response());
    }
    let rest = under_repo(kind, parts)?;
    let number = |s: &str| s.parse::<u64>().ok();
    match (kind, method.as_str(), rest) {
        (ForgeKind::Gitlab, "GET", ["merge_requests", n, "notes"]) => Some(list(shared, state, number(n)?, query)),
        (ForgeKind::Gitlab, "POST", ["merge_requests", n, "notes"]) => {
            Some(create(kind, state, number(n)?, login, body))
        }
        (ForgeKind::Gitlab, "PUT", ["merge_requests", _, "notes", id]) => {
            Some(edit(kind, state, number(id)?, login, body))
        }
        (ForgeKind::Gitlab, "DELETE", ["merge_requests", _, "notes", id]) => Some(delete(state, number(id)?, login)),
        (ForgeKind::Gitlab, "GET", ["merge_requests", n]) => {
            let (sha, fork) = state.pulls.get(&number(n)?)?.clone();
            let source = if fork { 99 } else { 1 };
            Some(
                axum::Json(json!({"iid": n, "sha": sha, "state": "opened", "source_project_id": source, "target_project_id": 1}))
                    .into_response(),
            )
        }
        (_, "GET", ["issues", n, "comments"]) => Some(list(shared, state, number(n)?, query)),
        (_, "POST", ["issues", n, "comments"]) => Some(create(kind, state, number(n)?, login, body)),
        (_, "PATCH", ["issues", "comments", id]) => Some(edit(kind, state, number(id)?, login, body)),
        (_, "DELETE", ["issues", "comments", id]) => Some(delete(state, number(id)?, login)),
        (_, "GET", ["pulls", n]) => {
            let (sha, fork) = state.pulls.get(&number(n)?)?.clone();
            let head_repo = if fork { "someone/deploy" } else { REPO };
            let pull = json!({"number": n, "state": "open", "head": {"sha": sha, "repo": {"full_name": head_repo}},
                              "base": {"repo": {"full_name": REPO}}});
            Some(axum::Json(pull).into_response())
        }
        (_, "POST", ["statuses", sha]) => {
            state.statuses.push(((*sha).to_owned(), body.clone()));
            Some((StatusCode::CREATED, axum::Json(json!({"id": state.statuses.len()}))).into_response())
        }
        _ => None,
    }
}

fn param(query: &str, name: &str) -> Option<usize> {
    query.split('&').find_map(|kv| kv.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
}

fn as_json(kind: ForgeKind, id: u64, c: &Stored) -> Value {
    match kind {
        ForgeKind::Gitlab => json!({"id": id, "body": c.body, "author": {"username": c.author}, "system": false}),
        _ => json!({"id": id, "body": c.body, "user": {"login": c.author}}),
    }
}

fn list(shared: &Shared, state: &Forge, pr: u64, query: &str) -> Response {
    let all: Vec<Value> =
        state.comments.iter().filter(|(_, c)| c.pr == pr).map(|(id, c)| as_json(shared.kind, *id, c)).collect();
    if shared.kind == ForgeKind::Gitea {
        return axum::Json(all).into_response();
    }
    let default = if shared.kind == ForgeKind::Github { 30 } else { 20 };
    let per_page = param(query, "per_page").unwrap_or(default).clamp(1, 100);
    let page = param(query, "page").unwrap_or(1).max(1);
    let slice: Vec<Value> = all.iter().skip((page - 1) * per_page).take(per_page).cloned().collect();
    let more = all.len() > page * per_page;
    let mut response = axum::Json(slice).into_response();
    let headers = response.headers_mut();
    match (shared.kind, more) {
        (ForgeKind::Github, true) => {
            let next = format!(
                "<{}/repos/{REPO}/issues/{pr}/comments?per_page={per_page}&page={}>; rel=\"next\"",
                shared.base,
                page + 1
            );
            let last = format!("<{}/repos/{REPO}/issues/{pr}/comments?page=1>; rel=\"first\"", shared.base);
            headers.insert("link", format!("{last}, {next}").parse().unwrap());
        }
        (ForgeKind::Gitlab, more) => {
            let next = if more { (page + 1).to_string() } else { String::new() };
            headers.insert("x-next-page", next.parse().unwrap());
            headers.insert("x-page", page.to_string().parse().unwrap());
        }
        _ => {}
    }
    response
}

fn too_long(kind: ForgeKind, body: &str) -> Option<Response> {
    let limit = match kind {
        ForgeKind::Github => 65_536,
        ForgeKind::Gitlab => 1_000_000,
        ForgeKind::Gitea => return None,
    };
    (body.chars().count() > limit).then(|| {
        let message = json!({"message": "Validation Failed", "errors": [{"field": "body", "code": "custom",
                             "message": "body is too long (maximum is 65536 characters)"}]});
        (StatusCode::UNPROCESSABLE_ENTITY, axum::Json(message)).into_response()
    })
}

fn create(kind: ForgeKind, state: &mut Forge, pr: u64, login: &str, body: &Value) -> Response {
    let text = body["body"].as_str().unwrap_or_default().to_owned();
    if let Some(refused) = too_long(kind, &text) {
        return refused;
    }
    state.next_id += 1;
    let id = state.next_id;
    let stored = Stored { pr, author: login.into(), body: text };
    let answer = as_json(kind, id, &stored);
    state.comments.insert(id, stored);
    (StatusCode::CREATED, axum::Json(answer)).into_response()
}

fn edit(kind: ForgeKind, state: &mut Forge, id: u64, login: &str, body: &Value) -> Response {
    let text = body["body"].as_str().unwrap_or_default().to_owned();
    if let Some(refused) = too_long(kind, &text) {
        return refused;
    }
    match state.comments.get_mut(&id) {
        Some(c) if c.author == login => {
            c.body = text;
            let c = c.clone();
            axum::Json(as_json(kind, id, &c)).into_response()
        }
        Some(_) => StatusCode::FORBIDDEN.into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

fn delete(state: &mut Forge, id: u64, login: &str) -> Response {
    match state.comments.get(&id) {
        Some(c) if c.author == login => {
            state.comments.remove(&id);
            StatusCode::NO_CONTENT.into_response()
        }
        Some(_) => StatusCode::FORBIDDEN.into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// GitHub's App endpoints: `GET /app` and `POST /app/installations/{id}/access_tokens`, each
/// with the App's JWT (RS256, `iss` the App's id), checked against its public key.
fn app(state: &mut Forge, method: &Method, path: &str, jwt: &str) -> Response {
    let Some((app_id, public)) = state.app.clone() else { return StatusCode::NOT_FOUND.into_response() };
    let key = jsonwebtoken::DecodingKey::from_rsa_pem(&public).unwrap();
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
    validation.set_required_spec_claims(&["exp", "iat", "iss"]);
    validation.set_issuer(&[app_id.to_string()]);
    let claims = match jsonwebtoken::decode::<Value>(jwt, &key, &validation) {
        Ok(data) => data.claims,
        Err(e) => return (StatusCode::UNAUTHORIZED, axum::Json(json!({"message": e.to_string()}))).into_response(),
    };
    let (iat, exp) = (claims["iat"].as_u64().unwrap(), claims["exp"].as_u64().unwrap());
    if exp <= iat || exp - iat > 600 {
        return (StatusCode::UNAUTHORIZED, axum::Json(json!({"message": "exp too far"}))).into_response();
    }
    match (method.as_str(), path) {
        ("GET", "/app") => axum::Json(json!({"id": app_id, "slug": "gitward-app"})).into_response(),
        ("POST", "/app/installations/77/access_tokens") => {
            state.installation_tokens += 1;
            let token = format!("ghs_installation{}", state.installation_tokens);
            state.tokens.insert(token.clone(), "gitward-app[bot]".into());
            let answer = json!({"token": token, "expires_at": "2099-01-01T00:00:00Z"});
            (StatusCode::CREATED, axum::Json(answer)).into_response()
        }
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}
