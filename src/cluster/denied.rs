//! A request the API server refused for who sent it — 401 (credentials not accepted) or an
//! RBAC 403 (`… is forbidden: User "u" cannot …`) — gets the API server's URL, the kubeconfig
//! user, context and file, and the next step added to the `message` of its `Status`
//! ([`Denied::message`]). The answer stays the API server's own `Status` with its code, so kube
//! still reads it as `kube::Error::Api` and every caller that tells a 403 from a 409 or a 404
//! (the watches' permanent errors, per-object failures) reads it as before; only the sentence a
//! person reads says more. Without it a 401 printed as `Unauthorized (Unauthorized, 401)` and
//! a 403 named the user but not which kubeconfig entry or server it came from.
//!
//! Other 403s — a namespace being terminated, an admission webhook's denial — are no question
//! of RBAC and pass unchanged.

use http_body_util::BodyExt as _;
use hyper::body::Bytes;
use kube::client::DynBody;
use tower::BoxError;

use super::Origin;

/// The refusal of one answer, when it is one ([`Denied::judge`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    /// 401: the credentials were not accepted.
    Unauthenticated,
    /// 403 with the authorizer's message: the identity may not do this.
    Unauthorized,
}

/// What the authorizer's denial says, in every 403 RBAC (or any authorizer) gives:
/// `<resource> "<name>" is forbidden: User "<user>" cannot <verb> …`.
const AUTHORIZER: &str = "is forbidden: User \"";

/// Where the RBAC gitward's own identity needs is written down.
const RBAC: &str = "deploy/kubernetes/rbac.yaml";

impl Denied {
    /// The refusal of an answer of `status`, `None` when it is not one; a 403 is one only when
    /// its message is the authorizer's (read by [`Denied::message`]).
    pub fn judge(status: http::StatusCode) -> Option<Self> {
        match status.as_u16() {
            401 => Some(Self::Unauthenticated),
            403 => Some(Self::Unauthorized),
            _ => None,
        }
    }

    /// The `Status` message for the API server's `message` (`Unauthorized`, `secrets "x" is
    /// forbidden: User "u" cannot get …`), from `server` with credentials of `origin`; `None`
    /// for a 403 that is not the authorizer's.
    pub fn message(self, message: &str, server: &str, origin: &Origin) -> Option<String> {
        let user = origin.user_in();
        match self {
            Self::Unauthenticated => Some(format!(
                "the API server at {server} did not accept the credentials: check the credentials of {user}"
            )),
            Self::Unauthorized if message.contains(AUTHORIZER) => {
                let as_whom = match &origin.impersonate {
                    Some(impersonated) => format!("{impersonated} impersonated by {user}"),
                    None => user,
                };
                Some(format!("{message}; the API server at {server}, as {as_whom}: grant it RBAC (see {RBAC})"))
            }
            Self::Unauthorized => None,
        }
    }

    /// `response` with its `Status` message replaced by [`Denied::message`]; the response as it
    /// was when that is `None`. The body is read whole (a `Status`, a few hundred bytes); a body
    /// that is no JSON `Status` (a proxy's text page) becomes one that carries the text and the
    /// code.
    ///
    /// Errors: reading the body failed.
    pub async fn rewrite(
        self,
        response: http::Response<Box<DynBody>>,
        server: &str,
        origin: &Origin,
    ) -> Result<http::Response<Box<DynBody>>, BoxError> {
        let (parts, body) = response.into_parts();
        let bytes = body.collect().await?.to_bytes();
        let mut status = match serde_json::from_slice::<serde_json::Value>(&bytes) {
            Ok(value @ serde_json::Value::Object(_)) => value,
            _ => serde_json::json!({
                "kind": "Status", "apiVersion": "v1", "status": "Failure",
                "message": String::from_utf8_lossy(&bytes).trim(),
                "reason": parts.status.canonical_reason().unwrap_or_default(),
                "code": parts.status.as_u16(),
            }),
        };
        let said = status["message"].as_str().unwrap_or_default().to_owned();
        let bytes = match self.message(&said, server, origin) {
            Some(message) => {
                status["message"] = message.into();
                Bytes::from(serde_json::to_vec(&status)?)
            }
            None => bytes,
        };
        let body =
            http_body_util::Full::new(bytes).map_err(|never: std::convert::Infallible| -> BoxError { match never {} });
        let mut parts = parts;
        parts.headers.remove(http::header::CONTENT_LENGTH);
        Ok(http::Response::from_parts(parts, Box::new(body) as Box<DynBody>))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin() -> Origin {
        Origin {
            file: Some("/k".into()),
            context: Some("c".into()),
            user: Some("deploy-bot".into()),
            impersonate: None,
        }
    }

    #[test]
    fn a_401_names_the_server_and_the_kubeconfig_user_to_check() {
        assert_eq!(
            Denied::Unauthenticated.message("Unauthorized", "https://k:6443", &origin()).unwrap(),
            "the API server at https://k:6443 did not accept the credentials: check the credentials of user \
             deploy-bot in context c of /k"
        );
    }

    #[test]
    fn only_the_authorizers_403_gets_the_rbac_step() {
        let forbidden = "secrets \"x\" is forbidden: User \"deploy-bot\" cannot get resource \"secrets\"";
        assert_eq!(
            Denied::Unauthorized.message(forbidden, "https://k:6443", &origin()).unwrap(),
            format!(
                "{forbidden}; the API server at https://k:6443, as user deploy-bot in context c of /k: grant it RBAC \
                 (see deploy/kubernetes/rbac.yaml)"
            )
        );
        let impersonating = Origin { impersonate: Some("system:serviceaccount:t:sa".into()), ..origin() };
        let text = Denied::Unauthorized.message(forbidden, "https://k", &impersonating).unwrap();
        assert!(text.contains("as system:serviceaccount:t:sa impersonated by user deploy-bot in context c"), "{text}");
        let terminating = "configmaps \"x\" is forbidden: unable to create new content in namespace t because it is \
                           being terminated";
        assert_eq!(Denied::Unauthorized.message(terminating, "https://k", &origin()), None);
    }
}
