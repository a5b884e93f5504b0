//! What of the API server's certificate did not verify, read from rustls's error once, so a
//! failed handshake is one sentence ([`super::server::RequestFailed`]) that says what to fix,
//! not `client error (Connect): invalid peer certificate: UnknownIssuer` read as "cannot reach
//! the API server".
//!
//! rustls's error reaches the client inside an `io::Error` (tokio-rustls), whose `source()`
//! skips it (and hyper-rustls wraps that in another `io::Error`), so [`Untrusted::find`]
//! looks into each `io::Error` of the chain as well.

use rustls::CertificateError;

/// Why the API server's certificate was refused in the TLS handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Untrusted {
    /// Not signed by a CA the client trusts (the kubeconfig's `certificate-authority(-data)`,
    /// else the system's roots): rustls's `UnknownIssuer`.
    UnknownCa,
    /// Valid, but not for the host name (or IP) of the server's URL.
    WrongName {
        /// The host the URL names.
        expected: String,
        /// The names the certificate is for (DNS names and IPs); empty when rustls gave none.
        presented: Vec<String>,
    },
    /// Past its `notAfter`.
    Expired {
        /// `notAfter` (RFC 3339, UTC), when rustls gave it.
        not_after: Option<String>,
    },
    /// Before its `notBefore`: the server's or this machine's clock is off.
    NotYetValid {
        /// `notBefore` (RFC 3339, UTC), when rustls gave it.
        not_before: Option<String>,
    },
    /// Anything else rustls refused, as it puts it (`invalid peer certificate: BadSignature`,
    /// `received fatal alert: HandshakeFailure`).
    Other(String),
}

impl Untrusted {
    /// The first rustls error in `error`'s chain, read; `None` when the failure was not TLS.
    pub fn find(error: &(dyn std::error::Error + 'static)) -> Option<Self> {
        if let Some(tls) = error.downcast_ref::<rustls::Error>() {
            return Some(Self::of(tls));
        }
        // hyper-rustls wraps tokio-rustls's io::Error in another one: look inside each.
        let inner = error.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref());
        if let Some(found) = inner.and_then(|inner| Self::find(inner)) {
            return Some(found);
        }
        error.source().and_then(Self::find)
    }

    /// `error` read.
    pub fn of(error: &rustls::Error) -> Self {
        let time = |t: &rustls::pki_types::UnixTime| {
            let seconds = i64::try_from(t.as_secs()).unwrap_or(i64::MAX);
            jiff::Timestamp::from_second(seconds).ok().map(|t| t.to_string())
        };
        let rustls::Error::InvalidCertificate(certificate) = error else { return Self::Other(error.to_string()) };
        match certificate {
            CertificateError::UnknownIssuer => Self::UnknownCa,
            CertificateError::NotValidForNameContext { expected, presented } => {
                let presented = presented.iter().map(|name| plain_name(name)).collect();
                Self::WrongName { expected: expected.to_str().into_owned(), presented }
            }
            CertificateError::NotValidForName => Self::WrongName { expected: String::new(), presented: Vec::new() },
            CertificateError::ExpiredContext { not_after, .. } => Self::Expired { not_after: time(not_after) },
            CertificateError::Expired => Self::Expired { not_after: None },
            CertificateError::NotValidYetContext { not_before, .. } => {
                Self::NotYetValid { not_before: time(not_before) }
            }
            CertificateError::NotValidYet => Self::NotYetValid { not_before: None },
            _ => Self::Other(error.to_string()),
        }
    }

    /// What did not verify and what to do, after `the API server at <url> ` (`origin`: where
    /// the URL and CA come from, [`super::Origin`]).
    pub fn sentence(&self, origin: &str) -> String {
        match self {
            Self::UnknownCa => format!(
                "presented a certificate of an unknown CA (not signed by the certificate-authority the client \
                 trusts): check certificate-authority-data of the cluster of {origin}"
            ),
            Self::WrongName { expected, presented } => {
                let host = match expected.parse::<std::net::IpAddr>() {
                    _ if expected.is_empty() => "its host name".to_owned(),
                    Ok(_) => format!("the address {expected}"),
                    Err(_) => format!("the host name {expected}"),
                };
                let names =
                    if presented.is_empty() { String::new() } else { format!(" (it is for {})", presented.join(", ")) };
                format!(
                    "presented a certificate not valid for {host}{names}: use a name the certificate is for in the \
                     server of {origin}"
                )
            }
            Self::Expired { not_after } => {
                let at = not_after.as_deref().map(|t| format!(" at {t}")).unwrap_or_default();
                format!(
                    "presented a certificate that expired{at}: renew the API server's serving certificate, or \
                     correct this machine's clock"
                )
            }
            Self::NotYetValid { not_before } => {
                let from = not_before.as_deref().map(|t| format!(" before {t}")).unwrap_or_default();
                format!("presented a certificate not valid{from}: correct this machine's (or the server's) clock")
            }
            Self::Other(cause) => format!("refused the TLS handshake: {cause}: check the cluster of {origin}"),
        }
    }
}

/// A name rustls presents as webpki's `Debug` (`DnsName("localhost")`, `IpAddress(127.0.0.1)`)
/// as the name alone.
fn plain_name(name: &str) -> String {
    let inner = ["DnsName(", "IpAddress(", "URI("]
        .iter()
        .find_map(|prefix| name.strip_prefix(prefix)?.strip_suffix(')'))
        .unwrap_or(name);
    inner.trim_matches('"').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::{ServerName, UnixTime};

    fn wrapped(error: rustls::Error) -> Option<Untrusted> {
        // As hyper-rustls hands it to hyper: inside tokio-rustls's io::Error, inside another
        // io::Error; source() skips both.
        let io = std::io::Error::other(std::io::Error::new(std::io::ErrorKind::InvalidData, error));
        Untrusted::find(&io)
    }

    #[test]
    fn each_certificate_failure_names_what_did_not_verify() {
        let unknown = wrapped(rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer)).unwrap();
        assert_eq!(unknown, Untrusted::UnknownCa);
        assert_eq!(
            unknown.sentence("context c in /k"),
            "presented a certificate of an unknown CA (not signed by the certificate-authority the client trusts): \
             check certificate-authority-data of the cluster of context c in /k"
        );
        let name = rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext {
            expected: ServerName::try_from("localhost").unwrap(),
            presented: vec!["DnsName(\"kubernetes\")".into(), "IpAddress(127.0.0.1)".into()],
        });
        assert_eq!(
            wrapped(name).unwrap().sentence("context c in /k"),
            "presented a certificate not valid for the host name localhost (it is for kubernetes, 127.0.0.1): use a \
             name the certificate is for in the server of context c in /k"
        );
        let expired = rustls::Error::InvalidCertificate(CertificateError::ExpiredContext {
            time: UnixTime::since_unix_epoch(std::time::Duration::from_secs(1_800_000_000)),
            not_after: UnixTime::since_unix_epoch(std::time::Duration::from_secs(1_700_000_000)),
        });
        assert_eq!(
            wrapped(expired).unwrap().sentence("x"),
            "presented a certificate that expired at 2023-11-14T22:13:20Z: renew the API server's serving \
             certificate, or correct this machine's clock"
        );
        assert!(Untrusted::find(&std::io::Error::from(std::io::ErrorKind::ConnectionRefused)).is_none());
    }
}
