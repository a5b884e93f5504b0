//! `service_account` and `[daemon] default_service_account`: the ServiceAccount a unit writes
//! as ([`super::SyncUnit::service_account`]).

use toml::Spanned;

use super::resolve::Resolver;
use super::{DaemonConfig, Result};

impl Resolver<'_> {
    /// `[daemon] default_service_account`, checked as a ServiceAccount name.
    pub(super) fn default_service_account(&self, raw: Option<Spanned<String>>) -> Result<Option<String>> {
        raw.map(|sa| self.check(sa, "daemon.default_service_account", service_account_name)).transpose()
    }

    /// The ServiceAccount unit `index` writes as: its own `service_account`, else the daemon's
    /// `default_service_account`, else none. `service_account = ""` says "gitward's own
    /// identity", refused when a default is set (the default is a lockdown, not a suggestion).
    pub(super) fn unit_service_account(
        &self,
        index: usize,
        raw: Option<Spanned<String>>,
        daemon: &DaemonConfig,
    ) -> Result<Option<String>> {
        let key = format!("sync[{index}].service_account");
        match (raw, &daemon.default_service_account) {
            (Some(empty), Some(default)) if empty.get_ref().is_empty() => {
                let message = format!(
                    "may not be empty: [daemon] default_service_account = \"{default}\" applies to every unit; name a \
                     ServiceAccount of the unit's namespace"
                );
                Err(self.invalid(Some(empty.span()), &key, message))
            }
            (Some(empty), None) if empty.get_ref().is_empty() => Ok(None),
            (Some(name), _) => self.check(name, &key, service_account_name).map(Some),
            (None, default) => Ok(default.clone()),
        }
    }
}

/// A ServiceAccount name: an RFC 1123 subdomain (lowercase alphanumerics, `-` and `.`, at most
/// 253 characters), as the API server requires.
pub(super) fn service_account_name(value: &str) -> std::result::Result<(), String> {
    let ok = !value.is_empty()
        && value.len() <= 253
        && value.split('.').all(|label| {
            !label.is_empty()
                && label.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    if ok { Ok(()) } else { Err(format!("`{value}` is not a valid ServiceAccount name (an RFC 1123 subdomain)")) }
}

#[cfg(test)]
mod tests {
    use crate::config::tests::{MINIMAL as UNIT, parse};

    #[test]
    fn a_unit_writes_as_its_own_service_account_else_the_default_and_may_not_opt_out_of_it() {
        let own = parse(&format!("{UNIT}service_account = \"shop-deployer\"\n")).unwrap();
        assert_eq!(own.units[0].service_account.as_deref(), Some("shop-deployer"));
        assert_eq!(parse(UNIT).unwrap().units[0].service_account, None);
        let default = "[daemon]\ndefault_service_account = \"tenant\"\n";
        assert_eq!(parse(&format!("{default}{UNIT}")).unwrap().units[0].service_account.as_deref(), Some("tenant"));
        let opt_out = format!("{UNIT}service_account = \"\"\n");
        assert_eq!(parse(&opt_out).unwrap().units[0].service_account, None);
        let err = parse(&format!("{default}{opt_out}")).unwrap_err().to_string();
        assert!(err.contains("sync[0].service_account") && err.contains("default_service_account"), "{err}");
        let err = parse(&format!("{UNIT}service_account = \"Shop_Deployer\"\n")).unwrap_err().to_string();
        assert!(err.contains("not a valid ServiceAccount name"), "{err}");
    }
}
