//! The checks of single values, each a rule from the text to the message of what is wrong:
//! unit names, RFC 1123 labels and subdomains, ApplySet ids, git refs, Kubernetes and API
//! versions, field manager names, host paths and paths inside the repository tree.

use crate::config::UnitPath;

type Rule = std::result::Result<(), String>;

pub(super) fn non_empty(value: &str) -> Rule {
    if value.trim().is_empty() { Err("must not be empty".to_owned()) } else { Ok(()) }
}

/// Unit names become directory names under `state_dir`, inventory names and label values, so
/// they follow the strictest of those: an RFC 1123 label.
pub(super) fn unit_name(value: &str) -> Rule {
    dns_label(value).map_err(|m| format!("{m} (a unit name is used in paths and labels)"))
}

/// An `adopt_from` entry: a unit name, or an ApplySet id as KEP-3659 forms it
/// (`applyset-<43 base64url characters>-v1`).
pub(super) fn adopt_source(value: &str) -> Rule {
    if let Some(hash) = value.strip_prefix("applyset-").and_then(|rest| rest.strip_suffix("-v1")) {
        let base64url = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
        return if hash.len() == 43 && hash.chars().all(base64url) {
            Ok(())
        } else {
            Err(format!("`{value}` is not an ApplySet id (`applyset-` + 43 base64url characters + `-v1`)"))
        };
    }
    dns_label(value).map_err(|m| format!("{m} (a unit name, or an ApplySet id `applyset-…-v1`)"))
}

/// An RFC 1123 label, as Kubernetes requires of namespace names: 1–63 characters of `a-z`,
/// `0-9` and `-`, starting and ending with a letter or digit.
pub(in crate::config) fn dns_label(value: &str) -> Rule {
    if value.len() > 63 {
        return Err(format!("`{value}` is longer than 63 characters"));
    }
    label_chars(value)
}

/// An RFC 1123 subdomain, as Kubernetes requires of most object names: at most 253 characters,
/// dot-separated labels.
pub(in crate::config) fn dns_subdomain(value: &str) -> Rule {
    if value.len() > 253 {
        return Err(format!("`{value}` is longer than 253 characters"));
    }
    value.split('.').try_for_each(label_chars).map_err(|_| {
        format!("`{value}` is not a valid object name: lowercase letters, digits, `-` and `.`, starting and ending with a letter or digit")
    })
}

fn label_chars(value: &str) -> Rule {
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    let edge = |c: Option<char>| c.is_some_and(|c| c != '-');
    if value.chars().all(allowed) && edge(value.chars().next()) && edge(value.chars().last()) {
        Ok(())
    } else {
        Err(format!("`{value}` must be lowercase letters, digits and `-`, starting and ending with a letter or digit"))
    }
}

/// Only what git never accepts in a ref is refused here; whether the ref exists is known at
/// fetch time.
pub(super) fn git_ref(value: &str) -> Rule {
    non_empty(value)?;
    if value.starts_with('-') || value.contains("..") || value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("`{value}` is not a valid git ref"));
    }
    Ok(())
}

/// A Kubernetes version as Helm's `--kube-version` takes it: `v1.34.2`, `1.34`, `v1.35.0-rc.1`.
pub(crate) fn kube_version(value: &str) -> Rule {
    let core = value.strip_prefix('v').unwrap_or(value);
    let core = core.split(['-', '+']).next().unwrap_or("");
    let parts: Vec<&str> = core.split('.').collect();
    if (2..=3).contains(&parts.len()) && parts.iter().all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit())) {
        Ok(())
    } else {
        Err(format!("`{value}` is not a Kubernetes version: write it as `v1.34.0` (or `1.34`)"))
    }
}

/// An API version as Helm's `--api-versions` takes it: `group/version`, `v1`, or with a kind,
/// `monitoring.coreos.com/v1/ServiceMonitor`.
pub(super) fn api_version(value: &str) -> Rule {
    let ok = !value.is_empty()
        && value.split('/').count() <= 3
        && value
            .split('/')
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{value}` is not an API version: write `group/version` or `group/version/Kind`, such as `monitoring.coreos.com/v1/ServiceMonitor`"
        ))
    }
}

/// The server caps field manager names at 128 characters.
pub(super) fn field_manager_name(value: &str) -> Rule {
    non_empty(value)?;
    if value.chars().count() > 128 || value.chars().any(char::is_control) {
        return Err("must be at most 128 printable characters".to_owned());
    }
    Ok(())
}

/// A path on this host. `~` is refused rather than silently taken as a directory name.
pub(super) fn host_path(value: &str) -> Rule {
    non_empty(value)?;
    if value.starts_with('~') {
        return Err(format!("`{value}`: `~` is not expanded; write the path out in full"));
    }
    Ok(())
}

/// A `/`-separated path inside the repository tree, normalised as [`UnitPath::parse`] does.
/// Refuses `..` (it could leave the tree) and a leading `/` (tree paths are relative).
pub(super) fn tree_path(value: &str) -> std::result::Result<String, String> {
    UnitPath::parse(value).map(|p| p.as_str().to_owned())
}

#[cfg(test)]
mod tests {
    use super::{dns_label, dns_subdomain, tree_path};

    #[test]
    fn tree_paths_are_normalized() {
        assert_eq!(tree_path("").unwrap(), "");
        assert_eq!(tree_path("./deploy//prod/").unwrap(), "deploy/prod");
        assert!(tree_path("/deploy").is_err());
        assert!(tree_path("deploy/../secrets").is_err());
    }

    #[test]
    fn names_follow_rfc_1123() {
        assert!(dns_label("shop-2").is_ok());
        assert!(dns_label("-shop").is_err());
        assert!(dns_label("Shop").is_err());
        assert!(dns_label(&"a".repeat(64)).is_err());
        assert!(dns_subdomain("gitward-shop.v1").is_ok());
        assert!(dns_subdomain("gitward..shop").is_err());
    }
}
