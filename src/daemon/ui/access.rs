//! Who may read the dashboard, and the headers every dashboard response carries.
//!
//! With `[daemon.ui] token_file`, a request needs the token: `Authorization: Bearer <token>`
//! (RFC 6750), or the session cookie the login form sets (`POST /login`): `HttpOnly`,
//! `SameSite=Strict` (RFC 6265bis), holding an HMAC of the token, not the token itself. Without a
//! token the config only allows a loopback listen address ([`crate::config::Ui`]), and each
//! request must name a loopback host in `Host`: a page from elsewhere whose DNS name was
//! rebound to 127.0.0.1 (DNS rebinding) is refused with 403.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hmac::{KeyInit, Mac};
use sha2::{Digest, Sha256};

use super::{Dashboard, page};

/// The session cookie's name.
pub const COOKIE: &str = "gitward_ui";

/// The token of `[daemon.ui] token_file`, kept as what requests are compared against.
#[derive(Clone)]
pub struct Token {
    /// SHA-256 of the token: a presented bearer token is hashed and compared in constant time.
    digest: [u8; 32],
    /// The session cookie's value: hex HMAC-SHA256 of a fixed label under the token, so the
    /// cookie changes when the token does and does not reveal it.
    session: String,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Token {
    /// The token `text` (surrounding whitespace trimmed); `None` when it is empty.
    pub fn new(text: &str) -> Option<Self> {
        let token = text.trim();
        if token.is_empty() {
            return None;
        }
        let mut mac = hmac::Hmac::<Sha256>::new_from_slice(token.as_bytes()).expect("HMAC takes any key");
        mac.update(b"gitward dashboard session");
        Some(Self {
            digest: Sha256::digest(token.as_bytes()).into(),
            session: hex::encode(mac.finalize().into_bytes()),
        })
    }

    /// True when `presented` is the token.
    pub fn matches(&self, presented: &str) -> bool {
        let digest: [u8; 32] = Sha256::digest(presented.trim().as_bytes()).into();
        equal(&digest, &self.digest)
    }

    /// The `Set-Cookie` value of a session.
    pub fn set_cookie(&self) -> String {
        format!("{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict", self.session)
    }

    /// True when `headers` carry the token as a bearer or the session cookie.
    fn admits(&self, headers: &HeaderMap) -> bool {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")));
        if bearer.is_some_and(|b| self.matches(b)) {
            return true;
        }
        cookies(headers).any(|(name, value)| name == COOKIE && equal(value.as_bytes(), self.session.as_bytes()))
    }
}

/// Constant-time equality (no early exit on the first differing byte).
fn equal(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The `name=value` pairs of every `Cookie` header.
fn cookies(headers: &HeaderMap) -> impl Iterator<Item = (&str, &str)> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
}

/// True when `host` (a `Host` header: a name or address, maybe with a port) is this machine's
/// loopback: `localhost`, `127.0.0.0/8` or `[::1]`.
pub fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => {
            host.rsplit_once(':').map_or(host, |(name, port)| if port.parse::<u16>().is_ok() { name } else { host })
        }
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The Content-Security-Policy of every dashboard response: only this origin, the page's one
/// script and style sheet by hash (CSP Level 3), no framing, forms only to this origin.
fn policy() -> String {
    format!(
        "default-src 'self'; script-src {}; style-src {}; img-src 'self'; connect-src 'self'; object-src 'none'; \
         base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
        page::script_hash(),
        page::style_hash()
    )
}

/// The middleware of every dashboard route: refuses a request that lacks the token (401 with
/// the login form) or, without a token, names a host that is not loopback (403); then adds the
/// security headers to whatever the route answers, refusals included.
pub async fn guard(State(ui): State<Dashboard>, request: Request, next: Next) -> Response {
    let mut response = match refusal(&ui, &request) {
        None => next.run(request).await,
        Some(refusal) => refusal,
    };
    let headers = response.headers_mut();
    let policy = HeaderValue::from_str(&policy()).expect("the policy is ASCII");
    headers.insert(header::CONTENT_SECURITY_POLICY, policy);
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The answer refusing `request` (401 with the login form, 403), or `None` to serve it.
fn refusal(ui: &Dashboard, request: &Request) -> Option<Response> {
    let headers = request.headers();
    match &ui.token {
        Some(token) if token.admits(headers) || request.uri().path() == "/login" => None,
        Some(_) => {
            let login = page::login("This dashboard needs its token.");
            Some(
                (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer")], axum::response::Html(login))
                    .into_response(),
            )
        }
        None => {
            let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
            let text = "forbidden: without [daemon.ui] token_file the dashboard is served to loopback hosts only\n";
            (!loopback_host(host)).then(|| (StatusCode::FORBIDDEN, text).into_response())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_are_told_from_others() {
        for host in ["localhost", "localhost:8080", "127.0.0.1:9", "127.1.2.3", "[::1]:80", "[::1]", "LOCALHOST"] {
            assert!(loopback_host(host), "{host}");
        }
        for host in ["", "evil.example", "evil.example:80", "10.0.0.1:80", "localhost.evil.example", "[::2]:80"] {
            assert!(!loopback_host(host), "{host}");
        }
    }

    #[test]
    fn a_token_admits_itself_and_its_session_and_nothing_else() {
        let token = Token::new(" s3cret\n").unwrap();
        assert!(token.matches("s3cret"));
        assert!(!token.matches("s3cre"));
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer s3cret"));
        assert!(token.admits(&headers));
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer wrong"));
        assert!(!token.admits(&headers));
        let session = token.set_cookie();
        let pair = session.split(';').next().unwrap().to_owned();
        assert!(!pair.contains("s3cret"), "the cookie does not carry the token");
        headers.insert(header::COOKIE, HeaderValue::from_str(&format!("other=1; {pair}")).unwrap());
        assert!(token.admits(&headers));
        assert!(Token::new("  \n").is_none());
    }
}
