//! `[daemon.ui]`: the read-only web dashboard on the daemon's listener ([`super::Ui`]).

use std::net::SocketAddr;

use super::raw::RawUi;
use super::resolve::Resolver;
use super::{Result, Ui};

impl Resolver<'_> {
    /// `[daemon.ui]` over `listen`: `None` unless `enabled = true`. Errors: enabled without a
    /// `[daemon] listen` address; enabled without `token_file` on a listen address that is not
    /// loopback (anyone who can reach the port would read every unit's state, so an open
    /// dashboard is only served to this host).
    pub(super) fn ui(&self, raw: Option<RawUi>, listen: Option<SocketAddr>) -> Result<Option<Ui>> {
        let Some(raw) = raw.filter(|raw| raw.enabled.unwrap_or(false)) else {
            return Ok(None);
        };
        let token_file = raw.token_file.map(|p| self.file(p, "daemon.ui.token_file")).transpose()?;
        match listen {
            None => {
                Err(self.invalid(None, "daemon.ui.enabled", "needs [daemon] listen: the dashboard is served there"))
            }
            Some(addr) if token_file.is_none() && !addr.ip().is_loopback() => {
                let message = format!(
                    "needs token_file: [daemon] listen = \"{addr}\" is not a loopback address, and without a token \
                     the dashboard is served only on loopback"
                );
                Err(self.invalid(None, "daemon.ui.token_file", message))
            }
            Some(_) => Ok(Some(Ui { token_file })),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::super::tests::{MINIMAL, parse};
    use super::*;

    fn daemon(lines: &str) -> String {
        format!("[daemon]\n{lines}\n{MINIMAL}")
    }

    #[test]
    fn the_dashboard_is_off_unless_enabled() {
        assert_eq!(parse(&daemon("listen = \"127.0.0.1:9090\"")).unwrap().daemon.ui, None);
        let off = daemon("listen = \"0.0.0.0:9090\"\n[daemon.ui]\nenabled = false");
        assert_eq!(parse(&off).unwrap().daemon.ui, None, "a disabled dashboard needs nothing");
    }

    #[test]
    fn an_open_dashboard_is_served_on_loopback_only() {
        let open = parse(&daemon("listen = \"127.0.0.1:9090\"\n[daemon.ui]\nenabled = true")).unwrap();
        assert_eq!(open.daemon.ui, Some(Ui { token_file: None }));
        let v6 = parse(&daemon("listen = \"[::1]:9090\"\n[daemon.ui]\nenabled = true")).unwrap();
        assert!(v6.daemon.ui.is_some());
        let error = parse(&daemon("listen = \"0.0.0.0:9090\"\n[daemon.ui]\nenabled = true")).unwrap_err().to_string();
        assert!(error.contains("daemon.ui.token_file") && error.contains("not a loopback address"), "{error}");
    }

    #[test]
    fn a_dashboard_with_a_token_may_listen_anywhere_and_needs_a_listener() {
        let text = daemon("listen = \"0.0.0.0:9090\"\n[daemon.ui]\nenabled = true\ntoken_file = \"ui-token\"");
        let ui = parse(&text).unwrap().daemon.ui.unwrap();
        assert_eq!(ui.token_file, Some(PathBuf::from("/etc/gitward/ui-token")), "relative to the config file");
        let error = parse(&daemon("[daemon.ui]\nenabled = true")).unwrap_err().to_string();
        assert!(error.contains("needs [daemon] listen"), "{error}");
    }
}
