//! As whom gitward speaks to a forge: a token read from its file at each use, or a GitHub App's
//! installation token, bought with an RS256 JWT the App's key signs
//! (<https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/generating-a-json-web-token-jwt-for-a-github-app>:
//! `iat` a minute back for clock drift, `exp` at most ten minutes on, `iss` the App's id) and
//! `POST /app/installations/{id}/access_tokens`
//! (<https://docs.github.com/en/rest/apps/apps#create-an-installation-access-token-for-an-app>),
//! kept until five minutes before its `expires_at`.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use tokio::sync::Mutex;

use super::Error;
use crate::config::ForgeAuth;

/// An installation token is bought again this long before it expires.
const RENEW_BEFORE: Duration = Duration::from_secs(300);

/// The credentials of one forge repository, and the installation token last bought.
#[derive(Debug)]
pub(super) struct Auth {
    config: ForgeAuth,
    installation: Mutex<Option<(String, SystemTime)>>,
}

#[derive(Debug, serde::Serialize)]
struct Claims {
    iat: u64,
    exp: u64,
    iss: String,
}

#[derive(Debug, Deserialize)]
struct InstallationToken {
    token: String,
    expires_at: Option<String>,
}

impl Auth {
    pub fn new(config: ForgeAuth) -> Auth {
        Auth { config, installation: Mutex::new(None) }
    }

    /// The GitHub App's id, when gitward posts as one.
    pub fn app(&self) -> Option<(u64, u64, &PathBuf)> {
        match &self.config {
            ForgeAuth::GithubApp { app_id, installation_id, private_key_file } => {
                Some((*app_id, *installation_id, private_key_file))
            }
            ForgeAuth::Token { .. } => None,
        }
    }

    /// The token a request carries: the file's, or a fresh enough installation token, bought
    /// with `buy` (the access-token request, given the JWT) when there is none.
    pub async fn token<F, Fut>(&self, buy: F) -> Result<String, Error>
    where
        F: FnOnce(String) -> Fut,
        Fut: Future<Output = Result<(String, Option<String>), Error>>,
    {
        let token_file = match &self.config {
            ForgeAuth::Token { token_file } => token_file,
            ForgeAuth::GithubApp { .. } => return self.installation_token(buy).await,
        };
        let text = tokio::fs::read_to_string(token_file)
            .await
            .map_err(|source| Error::Credentials { path: token_file.clone(), source: source.into() })?;
        Ok(text.trim().to_owned())
    }

    async fn installation_token<F, Fut>(&self, buy: F) -> Result<String, Error>
    where
        F: FnOnce(String) -> Fut,
        Fut: Future<Output = Result<(String, Option<String>), Error>>,
    {
        let mut held = self.installation.lock().await;
        if let Some((token, until)) = held.as_ref()
            && SystemTime::now() + RENEW_BEFORE < *until
        {
            return Ok(token.clone());
        }
        let (token, expires_at) = buy(self.jwt()?).await?;
        let until = expires_at
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            .map(|t| UNIX_EPOCH + Duration::from_secs(t.as_second().max(0) as u64))
            .unwrap_or_else(|| SystemTime::now() + Duration::from_secs(3600));
        *held = Some((token.clone(), until));
        Ok(token)
    }

    /// The App's JWT: RS256 over `iat`, `exp`, `iss` with its private key.
    pub fn jwt(&self) -> Result<String, Error> {
        let Some((app_id, _, key_file)) = self.app() else {
            return Err(Error::Answer("a JWT is only for a GitHub App".into()));
        };
        let pem =
            std::fs::read(key_file).map_err(|e| Error::Credentials { path: key_file.clone(), source: e.into() })?;
        let key = jsonwebtoken::EncodingKey::from_rsa_pem(&pem)
            .map_err(|e| Error::Credentials { path: key_file.clone(), source: e.into() })?;
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        let claims = Claims { iat: now.saturating_sub(60), exp: now + 540, iss: app_id.to_string() };
        jsonwebtoken::encode(&jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256), &claims, &key)
            .map_err(|e| Error::Credentials { path: key_file.clone(), source: e.into() })
    }
}

/// The token and expiry of an access-token answer.
pub(super) fn parse_installation(body: serde_json::Value) -> Result<(String, Option<String>), Error> {
    let answer: InstallationToken =
        serde_json::from_value(body).map_err(|e| Error::Answer(format!("the installation token answer: {e}")))?;
    Ok((answer.token, answer.expires_at))
}
