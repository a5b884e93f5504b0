//! `[sync.substitute]`: the variables a unit's `${var}` references take ([`Substitute`]).

use std::collections::BTreeMap;
use std::fmt;

use toml::Spanned;

use super::Result;
use super::raw::RawSubstitute;
use super::resolve::Resolver;

/// `[sync.substitute]`: post-build variable substitution, as Flux's Kustomization
/// `postBuild.substitute` and `substituteFrom`. Each desired object of the unit (plain, kustomize
/// or Helm) has its `${var}` references replaced after rendering and before hashing
/// (`manifest::substitute`). Precedence, Flux's: the `from` objects in list order, a later
/// one's key replacing an earlier one's, then `vars` over all of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Substitute {
    /// Inline variables, name → value; they win over every `from` object. Names are
    /// `[_a-zA-Z][_a-zA-Z0-9]*`. Default: none.
    pub vars: BTreeMap<String, String>,
    /// ConfigMaps and Secrets of the unit's cluster whose `data` keys are variables
    /// (`"ConfigMap/<namespace>/<name>"`, `"Secret/<namespace>/<name>"`), read by gitward's own
    /// identity at each sync (the list is the operator's config, not the repository's). A
    /// missing object refuses the revision; a key that is not a variable name is skipped. The daemon
    /// watches them and syncs the unit again when one changes. Secret values are masked in
    /// every line gitward writes. Default: none.
    pub from: Vec<VarSource>,
}

impl Substitute {
    /// Whether any variable can be defined (the table is present with anything in it).
    pub fn is_set(&self) -> bool {
        !self.vars.is_empty() || !self.from.is_empty()
    }
}

/// An object `[sync.substitute] from` reads variables from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VarSource {
    /// `ConfigMap` or `Secret` (whose values are masked).
    pub secret: bool,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl fmt::Display for VarSource {
    /// `ConfigMap/<namespace>/<name>` or `Secret/<namespace>/<name>`, as written in the file.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.secret { "Secret" } else { "ConfigMap" };
        write!(f, "{kind}/{}/{}", self.namespace, self.name)
    }
}

impl VarSource {
    /// Reads `Kind/namespace/name`.
    ///
    /// Errors: the message when the kind is not `ConfigMap` or `Secret`, or a part is not a
    /// valid name.
    pub fn parse(text: &str) -> std::result::Result<Self, String> {
        let parts: Vec<&str> = text.split('/').collect();
        let [kind, namespace, name] = parts[..] else {
            return Err(format!("`{text}` is not `ConfigMap/<namespace>/<name>` or `Secret/<namespace>/<name>`"));
        };
        let secret = match kind {
            "ConfigMap" => false,
            "Secret" => true,
            other => return Err(format!("`{other}`: only a ConfigMap or a Secret can hold variables")),
        };
        super::resolve::dns_label(namespace).map_err(|m| format!("namespace `{namespace}` {m}"))?;
        super::resolve::dns_subdomain(name).map_err(|m| format!("name `{name}` {m}"))?;
        Ok(Self { secret, namespace: namespace.to_owned(), name: name.to_owned() })
    }
}

/// Whether `name` is a variable name `${name}` can reference: `[_a-zA-Z][_a-zA-Z0-9]*`, Flux's
/// rule (and the shell's).
pub fn is_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

impl Resolver<'_> {
    /// `sync[index].substitute`: variable names checked, `from` entries parsed.
    pub(super) fn substitute(&self, index: usize, raw: Option<RawSubstitute>) -> Result<Substitute> {
        let Some(raw) = raw else { return Ok(Substitute::default()) };
        let key = |field: &str| format!("sync[{index}].substitute.{field}");
        let mut vars = BTreeMap::new();
        for (name, value) in raw.vars.unwrap_or_default() {
            if !is_var_name(&name) {
                let message = format!("`{name}` is not a variable name ([_a-zA-Z][_a-zA-Z0-9]*)");
                return Err(self.invalid(Some(value.span()), &key("vars"), message));
            }
            vars.insert(name, value.into_inner());
        }
        let from = raw.from.unwrap_or_default().into_iter().map(|s: Spanned<String>| {
            let span = s.span();
            VarSource::parse(s.get_ref()).map_err(|m| self.invalid(Some(span), &key("from"), m))
        });
        Ok(Substitute { vars, from: from.collect::<Result<_>>()? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_is_a_configmap_or_a_secret_by_namespace_and_name() {
        let s = VarSource::parse("Secret/flux-system/vars").unwrap();
        assert!(s.secret);
        assert_eq!(s.to_string(), "Secret/flux-system/vars");
        assert!(!VarSource::parse("ConfigMap/a/b").unwrap().secret);
        assert!(VarSource::parse("Deployment/a/b").unwrap_err().contains("only a ConfigMap or a Secret"));
        assert!(VarSource::parse("ConfigMap/b").is_err());
        assert!(VarSource::parse("ConfigMap/A_/b").is_err());
    }

    fn parse(table: &str) -> Result<crate::config::Config> {
        let text = format!("[[sync]]\nname = \"a\"\nrepo = \"/r\"\n[sync.substitute]\n{table}");
        crate::config::Config::from_toml(&text, std::path::Path::new("/etc"), "config.toml")
    }

    #[test]
    fn the_table_is_read_and_a_bad_name_or_source_refused_at_its_line() {
        let config = parse("vars = { cluster = \"prod\" }\nfrom = [\"Secret/ns/s\"]\n").unwrap();
        let sub = &config.units[0].substitute;
        assert_eq!(sub.vars.get("cluster").map(String::as_str), Some("prod"));
        assert_eq!(sub.from, [VarSource { secret: true, namespace: "ns".into(), name: "s".into() }]);
        let bad = parse("vars = { \"a-b\" = \"x\" }\n").unwrap_err().to_string();
        assert!(bad.contains("line 5") && bad.contains("`a-b` is not a variable name"), "{bad}");
        let bad = parse("from = [\"Pod/ns/p\"]\n").unwrap_err().to_string();
        assert!(bad.contains("sync[0].substitute.from") && bad.contains("only a ConfigMap"), "{bad}");
        assert!(parse("varz = {}\n").unwrap_err().to_string().contains("unknown"));
    }
}
