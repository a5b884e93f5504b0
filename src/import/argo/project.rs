//! Argo CD's `AppProject`: `spec.destinationServiceAccounts` (the account an Application's
//! sync impersonates, by destination) → `service_account`; `spec.destinations` namespaces →
//! a `[[sync_set]]`'s `namespaces`. What else a project restricts has no equivalent: gitward's
//! bound is the RBAC of the unit's ServiceAccount.

use std::collections::BTreeMap;

use super::super::Object;
use super::super::fields::{Fields, Notes};

/// What units take from a project.
#[derive(Debug, Default)]
pub(super) struct Project {
    /// `destinationServiceAccounts`: (server, namespace pattern, account).
    accounts: Vec<(String, String, String)>,
    /// `destinations[].namespace`, as written.
    pub namespaces: Vec<String>,
}

/// The projects among `objects`, by name (a project lives in Argo CD's namespace; its name is
/// what Applications name).
pub(super) fn index(objects: &[Object], notes: &mut Notes) -> BTreeMap<String, Project> {
    let mut projects = BTreeMap::new();
    for object in objects.iter().filter(|o| o.is("argoproj.io", "AppProject")) {
        let mut spec = Fields::spec(object);
        let mut project = Project::default();
        for mut item in spec.list("destinationServiceAccounts") {
            let server = item.string("server").unwrap_or_else(|| "*".into());
            let namespace = item.string("namespace").unwrap_or_else(|| "*".into());
            let account = item.string("defaultServiceAccount").unwrap_or_default();
            project.accounts.push((server, namespace, account));
            item.finish(notes);
        }
        for mut item in spec.list("destinations") {
            if let Some(namespace) = item.string("namespace") {
                project.namespaces.push(namespace);
            }
            item.take("server");
            item.take("name");
            item.finish(notes);
        }
        spec.take("description");
        let message = "no equivalent: gitward bounds a unit by the RBAC of its service_account";
        for field in [
            "sourceRepos",
            "clusterResourceWhitelist",
            "clusterResourceBlacklist",
            "namespaceResourceWhitelist",
            "namespaceResourceBlacklist",
            "roles",
            "sourceNamespaces",
        ] {
            spec.warn_if_set(field, message, notes);
        }
        spec.finish(notes);
        projects.insert(object.name.clone(), project);
    }
    projects
}

impl Project {
    /// The account a sync to `server` and `namespace` impersonates: the first entry whose
    /// server and namespace patterns match; an account of another namespace (`ns:name`) is
    /// `Err` with its text, since a unit's account lives in the unit's namespace.
    pub fn account(&self, server: &str, namespace: &str) -> Option<Result<String, String>> {
        let (_, _, account) = self.accounts.iter().find(|(s, n, _)| glob(s, server) && glob(n, namespace))?;
        Some(match account.split_once(':') {
            Some((ns, name)) if ns == namespace => Ok(name.to_owned()),
            Some(_) => Err(account.clone()),
            None => Ok(account.clone()),
        })
    }
}

/// Whether `text` matches `pattern` (`*` any run, `?` one character); `!` patterns never.
pub(super) fn glob(pattern: &str, text: &str) -> bool {
    fn matches(p: &[u8], t: &[u8]) -> bool {
        match (p.first(), t.first()) {
            (None, None) => true,
            (Some(b'*'), _) => matches(&p[1..], t) || (!t.is_empty() && matches(p, &t[1..])),
            (Some(b'?'), Some(_)) => matches(&p[1..], &t[1..]),
            (Some(a), Some(b)) if a == b => matches(&p[1..], &t[1..]),
            _ => false,
        }
    }
    !pattern.starts_with('!') && matches(pattern.as_bytes(), text.as_bytes())
}
