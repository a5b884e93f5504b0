//! The requests to one forge repository ([`Client`]): each with the forge's headers and token,
//! its answer checked, listings followed page by page. Redirects are not followed: a token goes
//! to the configured API only, and so does a `Link` to a next page.

use std::collections::HashSet;
use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use super::Error;
use super::api::{Comment, Head, Routes, StatusState, next_link};
use super::auth::{Auth, parse_installation};
use crate::config::{ForgeKind, Preview};

/// How long one request may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// The most pages a listing follows (10,000 comments at GitHub's 100).
const MAX_PAGES: usize = 100;

/// A forge repository's API, as one identity.
#[derive(Debug)]
pub struct Client {
    http: reqwest::Client,
    pub(super) routes: Routes,
    auth: Auth,
}

impl Client {
    /// The client of `preview`'s repository (no request is sent yet).
    pub fn new(preview: &Preview) -> Result<Client, Error> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .user_agent(concat!("gitward/", env!("CARGO_PKG_VERSION")))
            .timeout(TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| Error::Http { request: "the HTTP client".into(), source: e })?;
        let routes =
            Routes { kind: preview.forge, base: preview.api_url.clone(), repository: preview.repository.clone() };
        Ok(Client { http, routes, auth: Auth::new(preview.auth.clone()) })
    }

    /// Sends one request with the forge's headers and token; the answer's headers and JSON
    /// body (`Null` when empty), or [`Error::Status`] for an answer other than 2xx.
    async fn send(
        &self,
        method: Method,
        url: &str,
        body: Option<&Value>,
    ) -> Result<(reqwest::header::HeaderMap, Value), Error> {
        let token = self.auth.token(|jwt| self.buy_installation_token(jwt)).await?;
        let (name, value) = self.routes.token_header(&token);
        self.send_as(method, url, body, (name, value)).await
    }

    async fn send_as(
        &self,
        method: Method,
        url: &str,
        body: Option<&Value>,
        (name, value): (&str, String),
    ) -> Result<(reqwest::header::HeaderMap, Value), Error> {
        let request = format!("{method} {}", url.split('?').next().unwrap_or(url));
        let mut builder = self.http.request(method, url).header(name, value);
        for (name, value) in self.routes.headers() {
            builder = builder.header(*name, *value);
        }
        if let Some(body) = body {
            // reqwest's `json` feature is not enabled: the body is serialised here.
            builder = builder.header("Content-Type", "application/json").body(body.to_string());
        }
        let answer = builder.send().await.map_err(|source| Error::Http { request: request.clone(), source })?;
        let (status, headers) = (answer.status(), answer.headers().clone());
        let bytes = answer.bytes().await.map_err(|source| Error::Http { request: request.clone(), source })?;
        if !status.is_success() {
            let message = String::from_utf8_lossy(&bytes[..bytes.len().min(500)]).into_owned();
            return Err(Error::Status { request, status: status.as_u16(), message });
        }
        let json = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap_or(Value::Null) };
        Ok((headers, json))
    }

    /// `POST /app/installations/{id}/access_tokens` with the App's JWT.
    async fn buy_installation_token(&self, jwt: String) -> Result<(String, Option<String>), Error> {
        let Some((_, installation, _)) = self.auth.app() else {
            return Err(Error::Answer("an installation token is only for a GitHub App".into()));
        };
        let url = format!("{}/app/installations/{installation}/access_tokens", self.routes.base);
        let (_, body) = self.send_as(Method::POST, &url, None, ("Authorization", format!("Bearer {jwt}"))).await?;
        parse_installation(body)
    }

    /// The login gitward's comments carry: the token's user, or a GitHub App's bot
    /// (`GET /app` with its JWT: `<slug>[bot]`).
    pub async fn identity(&self) -> Result<String, Error> {
        if self.auth.app().is_some() {
            let url = format!("{}/app", self.routes.base);
            let header = ("Authorization", format!("Bearer {}", self.auth.jwt()?));
            let (_, app) = self.send_as(Method::GET, &url, None, header).await?;
            let slug = app["slug"].as_str().ok_or_else(|| Error::Answer("GET /app named no slug".into()))?;
            return Ok(format!("{slug}[bot]"));
        }
        let (_, user) = self.send(Method::GET, &self.routes.user(), None).await?;
        self.routes.parse_login(&user).ok_or_else(|| Error::Answer("GET /user named no login".into()))
    }

    /// Every comment on pull request `pr`, oldest first, page after page.
    pub async fn comments(&self, pr: u64) -> Result<Vec<Comment>, Error> {
        let (mut all, mut seen) = (Vec::new(), HashSet::new());
        let mut url = self.routes.comments(pr, 1);
        for _ in 0..MAX_PAGES {
            let (headers, page) = self.send(Method::GET, &url, None).await?;
            let comments =
                self.routes.parse_comments(&page).ok_or_else(|| Error::Answer(format!("GET {url}: not a list")))?;
            let count = comments.len();
            // A server that ignores `page` answers the same comments again: never counted twice.
            let fresh: Vec<Comment> = comments.into_iter().filter(|c| seen.insert(c.id)).collect();
            let any_fresh = !fresh.is_empty();
            all.extend(fresh);
            let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
            let next = match self.routes.kind {
                ForgeKind::Gitlab => header("x-next-page")
                    .filter(|p| !p.trim().is_empty())
                    .and_then(|p| p.trim().parse::<usize>().ok())
                    .map(|page| self.routes.comments(pr, page)),
                ForgeKind::Github | ForgeKind::Gitea => header("link").as_deref().and_then(next_link),
            };
            match next {
                Some(next) if any_fresh && count > 0 => {
                    if !next.starts_with(&format!("{}/", self.routes.base)) {
                        return Err(Error::Answer(format!("a next page outside the API: {next}")));
                    }
                    url = next;
                }
                _ => break,
            }
        }
        all.sort_by_key(|c| c.id);
        Ok(all)
    }

    /// Posts a comment on `pr`; its id.
    pub async fn create_comment(&self, pr: u64, body: &str) -> Result<u64, Error> {
        let url = self.routes.new_comment(pr);
        let (_, created) = self.send(Method::POST, &url, Some(&self.routes.comment_body(body))).await?;
        self.routes.parse_id(&created).ok_or_else(|| Error::Answer(format!("POST {url} answered no id")))
    }

    /// Replaces the body of comment `id` on `pr`.
    pub async fn edit_comment(&self, pr: u64, id: u64, body: &str) -> Result<(), Error> {
        let body = self.routes.comment_body(body);
        self.send(self.routes.edit_method(), &self.routes.comment(pr, id), Some(&body)).await.map(drop)
    }

    /// Deletes comment `id` on `pr`.
    pub async fn delete_comment(&self, pr: u64, id: u64) -> Result<(), Error> {
        self.send(Method::DELETE, &self.routes.comment(pr, id), None).await.map(drop)
    }

    /// Sets the `gitward/preview` status of commit `sha`.
    pub async fn set_status(&self, sha: &str, state: StatusState, description: &str) -> Result<(), Error> {
        let body = self.routes.status_body(state, description);
        self.send(Method::POST, &self.routes.status(sha), Some(&body)).await.map(drop)
    }

    /// Pull request `pr`'s head: its SHA and whether a fork holds it.
    pub async fn head(&self, pr: u64) -> Result<Head, Error> {
        let url = self.routes.pull(pr);
        let (_, pull) = self.send(Method::GET, &url, None).await?;
        self.routes.parse_head(&pull).ok_or_else(|| Error::Answer(format!("GET {url} named no head SHA")))
    }
}
