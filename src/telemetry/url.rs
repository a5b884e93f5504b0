//! Secrets in URLs: the userinfo of `scheme://user:password@host/…` and the values of query
//! parameters that carry credentials (`?private_token=…`), replaced by `***` wherever a URL is
//! displayed — errors, log fields, `status`, what is recorded on an ApplySet parent. Every
//! place gitward shows a repository, registry, index or archive URL goes through [`redact`]
//! (or [`redact_in`] / [`redact_text`] for a message that may quote one), and [`register`]
//! adds a configured URL's secrets to the process's mask set ([`super::mask`]) as a second
//! line of defence for text gitward does not build itself (a library's error message).
//!
//! The URL is read with the `url` crate (WHATWG URL, as browsers and reqwest read it); the
//! secrets are replaced as written in the text (the parser percent-encodes what it stores).
//! scp-like `git@host:path` carries a user name only, never a secret, and is left as it is.

/// `url` with its secrets replaced by `***`: the userinfo (`https://***@host/…`) and the values
/// of credential query parameters; other forms unchanged, and the text unchanged when it holds
/// no secret.
pub fn redact(url: &str) -> String {
    let (info, values) = secrets(url);
    let mut out = url.to_string();
    if let Some(info) = info {
        out = out.replacen(&format!("{info}@"), "***@", 1);
    }
    for value in values {
        out = out.replace(&format!("={value}"), "=***");
    }
    out
}

/// `message` (about `url`) with every occurrence of the URL's secrets replaced by `***`, and
/// any other URL in it redacted as [`redact_text`] does.
pub fn redact_in(url: &str, message: &str) -> String {
    let (info, values) = secrets(url);
    let message =
        info.into_iter().chain(values).fold(message.to_string(), |m, secret| m.replace(secret.as_str(), "***"));
    redact_text(&message)
}

/// `text` with the userinfo of every `scheme://user[:password]@host` in it replaced by `***`
/// (the authority ends at `/`, `?`, `#`, whitespace, a quote, `)` or `>`): for messages of
/// libraries that quote the URL they were given (reqwest's `error sending request for url
/// (…)`).
pub fn redact_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let end = tail.find(|c: char| "/?#\"'`)>".contains(c) || c.is_whitespace()).unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(sign) if sign > 0 => {
                out.push_str("***");
                out.push_str(&authority[sign..]);
            }
            _ => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// Adds the secrets of `url` (its password, or a user name given alone as a token, the whole
/// userinfo, and credential query values) to the process's mask set ([`super::mask::register`]).
/// A user name that has a password beside it is not a secret and is not masked.
pub fn register(url: &str) {
    let (info, values) = secrets(url);
    let mut found = values;
    if let Some(info) = info {
        if let Some((_, password)) = info.split_once(':') {
            found.push(password.to_owned());
        }
        found.push(info);
    }
    if !found.is_empty() {
        super::mask::register(found);
    }
}

/// Query parameter names that carry credentials (GitLab's `private_token`, OAuth's
/// `access_token`, …), compared case-insensitively.
fn is_secret_param(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["token", "password", "secret", "signature", "sig", "key"].iter().any(|s| name.contains(s))
}

/// The secret substrings of a `scheme://…` URL as written: its userinfo (`user:password`, or a
/// bare token) and the values of credential query parameters. Nothing for other forms.
fn secrets(url: &str) -> (Option<String>, Vec<String>) {
    if !url.contains("://") {
        return (None, Vec::new());
    }
    let Ok(parsed) = url::Url::parse(url) else { return (None, Vec::new()) };
    let mut info_text = None;
    if !parsed.username().is_empty() || parsed.password().is_some() {
        // As written in the text (the parser percent-encodes what it stores).
        let rest = url.split_once("://").map_or("", |(_, rest)| rest);
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        if let Some((info, _)) = authority.rsplit_once('@')
            && !info.is_empty()
        {
            info_text = Some(info.to_string());
        }
    }
    let mut out = Vec::new();
    let raw_query = url.split_once('?').map_or("", |(_, q)| q.split('#').next().unwrap_or_default());
    for pair in raw_query.split('&') {
        if let Some((name, value)) = pair.split_once('=')
            && is_secret_param(name)
            && !value.is_empty()
        {
            out.push(value.to_string());
        }
    }
    (info_text, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_is_redacted_from_urls_and_messages() {
        let url = "https://bot:s3cr3t@git.example.com/o/r.git";
        assert_eq!(redact(url), "https://***@git.example.com/o/r.git");
        let message = redact_in(url, "failed to reach bot:s3cr3t@git.example.com");
        assert!(!message.contains("s3cr3t"), "{message}");
        assert_eq!(redact("https://tok@h/r"), "https://***@h/r");
        assert_eq!(redact("https://t@h/r"), "https://***@h/r");
        assert_eq!(redact("https://h/r@v1"), "https://h/r@v1");
        assert_eq!(redact("git@h:o/r.git"), "git@h:o/r.git");
        assert_eq!(redact("oci://u:p4ss@r.example:5000/charts"), "oci://***@r.example:5000/charts");
    }

    #[test]
    fn credential_query_parameters_are_redacted() {
        let url = "https://git.example.com/o/r.git?private_token=glpat-abc&ref=main";
        assert_eq!(redact(url), "https://git.example.com/o/r.git?private_token=***&ref=main");
        let message = redact_in(url, "401 for https://git.example.com/o/r.git?private_token=glpat-abc");
        assert!(!message.contains("glpat-abc"), "{message}");
        assert_eq!(redact("https://h/r.git?ref=main"), "https://h/r.git?ref=main");
    }

    #[test]
    fn every_url_quoted_in_a_message_loses_its_userinfo() {
        let text = "error sending request for url (http://reader:pa55@127.0.0.1:8080/index.yaml): refused; \
                    then oci://tok@r/x and https://h/a@b";
        assert_eq!(
            redact_text(text),
            "error sending request for url (http://***@127.0.0.1:8080/index.yaml): refused; \
             then oci://***@r/x and https://h/a@b"
        );
        assert_eq!(redact_text("no url here"), "no url here");
    }
}
