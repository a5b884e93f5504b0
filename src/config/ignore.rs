//! `[[sync.ignore]]`: fields of a unit's objects that gitward leaves to other writers
//! ([`IgnoreRule`]), how a rule selects an object, and the checks of the file's entries.

use std::collections::BTreeMap;

use json_patch::jsonptr::Pointer;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube::core::{Selector, SelectorExt as _};
use toml::Spanned;

use super::raw::{RawIgnore, RawLabelSelector};
use super::resolve::Resolver;
use super::{Result, SyncUnit};

/// One `[[sync.ignore]]` entry: fields of the objects it selects that gitward does not send,
/// so another writer (an HPA, `kubectl scale`, a controller) owns them and self-heal does not
/// fight it (Flux's HelmRelease `spec.driftDetection.ignore`; Argo CD's `ignoreDifferences`
/// — `jsonPointers`, `managedFieldsManagers` — with the sync option `RespectIgnoreDifferences`).
///
/// The fields are taken out of the desired object before it is hashed and before any request
/// body is built: server-side apply then gives up gitward's ownership of them, `gitward diff`
/// does not show them, and `update` mode keeps the live value at each path
/// (ARCHITECTURE.md, "Ignore rules").
#[derive(Debug, Clone, PartialEq)]
pub struct IgnoreRule {
    /// The kind selected (`Deployment`), required: a rule for every kind is more often a
    /// mistake than an intent.
    pub kind: String,
    /// The API group selected (`apps`; `""` the core group). Default `None`: any group.
    pub group: Option<String>,
    /// The object name selected. Default `None`: any name.
    pub name: Option<String>,
    /// The namespace selected, compared with the object's namespace after the unit's
    /// `namespace` is defaulted in. Default `None`: any namespace (and cluster-scoped objects).
    pub namespace: Option<String>,
    /// Labels the object must carry in git (its manifest's `metadata.labels`):
    /// `[sync.ignore.label_selector]` with `match_labels` and `match_expressions`, Kubernetes'
    /// `LabelSelector` (operators `In`, `NotIn`, `Exists`, `DoesNotExist`), matched by kube's
    /// `Selector`. Default `None`: any labels.
    pub label_selector: Option<Selector>,
    /// JSON pointers (RFC 6901: `/spec/replicas`, `~1` for a `/` in a key, `~0` for `~`) of
    /// the fields left out. A pointer into a list by index (`/spec/template/spec/containers/0/image`)
    /// names that element's field; one naming a whole element removes the element. The pointers
    /// `/apiVersion`, `/kind`, `/metadata`, `/metadata/name` and `/metadata/namespace` are
    /// refused: they name the object itself. Default: none.
    pub paths: Vec<String>,
    /// Field managers (`kube-controller-manager`, `kubectl-edit`) whose fields in the live
    /// object are left out, read from its `managedFields`; never the unit's own
    /// `field_manager` nor one of its `takeover_managers` (gitward takes their fields over).
    /// Default: none. At least one of `paths` and `managers` is set.
    pub managers: Vec<String>,
}

/// Pointers that name the object itself, not a field of it.
const IDENTITY: [&str; 5] = ["/apiVersion", "/kind", "/metadata", "/metadata/name", "/metadata/namespace"];

impl IgnoreRule {
    /// Whether the rule selects the object `group`/`kind` `namespace`/`name` (namespace `None`
    /// for cluster-scoped kinds) whose manifest carries `labels`. Pure.
    pub fn selects(
        &self,
        group: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
        labels: &BTreeMap<String, String>,
    ) -> bool {
        self.kind == kind
            && self.group.as_deref().is_none_or(|g| g == group)
            && self.name.as_deref().is_none_or(|n| n == name)
            && self.namespace.as_deref().is_none_or(|n| Some(n) == namespace)
            && self.label_selector.as_ref().is_none_or(|s| s.matches(labels))
    }
}

impl Resolver<'_> {
    /// `sync[index].ignore` of `unit` (resolved but for its rules): each entry checked, its
    /// errors naming the entry (`sync[0].ignore[1].paths`) and the unit by name.
    pub(super) fn ignore(
        &self,
        index: usize,
        unit: &SyncUnit,
        raw: Vec<Spanned<RawIgnore>>,
    ) -> Result<Vec<IgnoreRule>> {
        raw.into_iter().enumerate().map(|(entry, raw)| self.ignore_rule(index, entry, unit, raw)).collect()
    }

    fn ignore_rule(&self, index: usize, entry: usize, unit: &SyncUnit, raw: Spanned<RawIgnore>) -> Result<IgnoreRule> {
        let (own, takeover, unit) = (&unit.field_manager, &unit.takeover_managers, unit.name.as_str());
        let key = |field: &str| format!("sync[{index}].ignore[{entry}]{field}");
        let invalid = |span, field: &str, message: &str| {
            self.invalid(Some(span), &key(field), format!("{message} (unit `{unit}`, ignore rule {})", entry + 1))
        };
        let span = raw.span();
        let raw = raw.into_inner();
        let text = |value: Option<Spanned<String>>, field: &str| match value {
            Some(v) if v.get_ref().is_empty() && field != ".group" => {
                Err(invalid(v.span(), field, "must not be empty"))
            }
            v => Ok(v.map(Spanned::into_inner)),
        };
        let Some(kind) = text(raw.kind, ".kind")? else {
            return Err(invalid(span, ".kind", "is required: the kind whose fields are ignored"));
        };
        if raw.paths.is_empty() && raw.managers.is_empty() {
            return Err(invalid(span, "", "names no fields: set `paths`, `managers` or both"));
        }
        let mut paths = Vec::with_capacity(raw.paths.len());
        for path in raw.paths {
            match json_pointer(path.get_ref()) {
                Ok(()) => paths.push(path.into_inner()),
                Err(message) => return Err(invalid(path.span(), ".paths", &message)),
            }
        }
        let mut managers = Vec::with_capacity(raw.managers.len());
        for manager in raw.managers {
            let name = manager.get_ref();
            let refused = if name.is_empty() {
                "a field manager name must not be empty"
            } else if name == own {
                "is the unit's own field_manager: its fields are the ones git declares"
            } else if takeover.contains(name) {
                "is also in takeover_managers, which takes its fields over: name it in one of the two"
            } else {
                managers.push(manager.into_inner());
                continue;
            };
            return Err(invalid(manager.span(), ".managers", refused));
        }
        let label_selector = match raw.label_selector {
            Some(s) => {
                let span = s.span();
                Some(selector(s.into_inner()).map_err(|m| invalid(span, ".label_selector", &m))?)
            }
            None => None,
        };
        Ok(IgnoreRule {
            kind,
            group: text(raw.group, ".group")?,
            name: text(raw.name, ".name")?,
            namespace: text(raw.namespace, ".namespace")?,
            label_selector,
            paths,
            managers,
        })
    }
}

/// Checks a JSON pointer (RFC 6901) as a field of an object: it starts with `/`, each `~` is
/// `~0` or `~1`, and it does not name the object itself ([`IDENTITY`]).
fn json_pointer(path: &str) -> std::result::Result<(), String> {
    if !path.starts_with('/') {
        return Err(format!("`{path}` is not a JSON pointer (RFC 6901): it must start with `/`, as `/spec/replicas`"));
    }
    Pointer::parse(path).map_err(|e| format!("`{path}` is not a JSON pointer (RFC 6901): {e}"))?;
    if IDENTITY.contains(&path) {
        return Err(format!("`{path}` names the object itself, not a field that another writer may own"));
    }
    Ok(())
}

/// The raw selector as kube's [`Selector`], through Kubernetes' own `LabelSelector` type.
fn selector(raw: RawLabelSelector) -> std::result::Result<Selector, String> {
    let requirements = raw
        .match_expressions
        .into_iter()
        .map(|r| LabelSelectorRequirement { key: r.key, operator: r.operator, values: r.values })
        .collect();
    let selector = LabelSelector { match_labels: Some(raw.match_labels), match_expressions: Some(requirements) };
    Selector::try_from(selector).map_err(|e| format!("{e} (operators: In, NotIn, Exists, DoesNotExist)"))
}

#[cfg(test)]
mod tests {
    use crate::config::tests::{MINIMAL, parse};

    fn error(rules: &str) -> String {
        parse(&format!("{MINIMAL}{rules}")).expect_err("config should be refused").to_string()
    }

    #[test]
    fn an_ignore_rule_is_read_with_its_target_and_fields() {
        let text = format!(
            "{MINIMAL}[[sync.ignore]]\nkind = \"Deployment\"\ngroup = \"apps\"\npaths = [\"/spec/replicas\"]\n\
             [[sync.ignore]]\nkind = \"ConfigMap\"\ngroup = \"\"\nname = \"conf\"\nnamespace = \"shop\"\n\
             managers = [\"kubectl-edit\"]\n[sync.ignore.label_selector]\nmatch_labels = {{ app = \"web\" }}\n"
        );
        let config = parse(&text).unwrap();
        let rules = &config.units[0].ignore;
        assert_eq!(rules.len(), 2);
        assert_eq!((rules[0].kind.as_str(), rules[0].group.as_deref()), ("Deployment", Some("apps")));
        assert_eq!(rules[0].paths, ["/spec/replicas"]);
        assert_eq!(rules[1].managers, ["kubectl-edit"]);
        let labels = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        assert!(rules[1].selects("", "ConfigMap", Some("shop"), "conf", &labels(&[("app", "web")])));
        assert!(!rules[1].selects("", "ConfigMap", Some("shop"), "conf", &labels(&[("app", "db")])));
        assert!(!rules[1].selects("", "ConfigMap", Some("other"), "conf", &labels(&[("app", "web")])));
        assert!(rules[0].selects("apps", "Deployment", Some("any"), "web", &labels(&[])));
        assert!(!rules[0].selects("extensions", "Deployment", Some("any"), "web", &labels(&[])));
        assert_ne!(
            config.units[0].fingerprint(),
            parse(MINIMAL).unwrap().units[0].fingerprint(),
            "the rules decide what is sent"
        );
    }

    #[test]
    fn a_pointer_without_a_leading_slash_is_refused_naming_the_unit_and_the_entry() {
        let message = error(
            "[[sync.ignore]]\nkind = \"Service\"\npaths = [\"/spec/ports\"]\n\
             [[sync.ignore]]\nkind = \"Deployment\"\npaths = [\"spec/replicas\"]\n",
        );
        assert!(
            message.contains(
                "line 9: sync[0].ignore[1].paths: `spec/replicas` is not a JSON pointer (RFC 6901): it must start \
                 with `/`, as `/spec/replicas` (unit `shop`, ignore rule 2)"
            ),
            "{message}"
        );
    }

    #[test]
    fn a_rule_without_a_kind_or_fields_is_refused() {
        let message = error("[[sync.ignore]]\npaths = [\"/spec/replicas\"]\n");
        assert!(
            message.contains("sync[0].ignore[0].kind: is required: the kind whose fields are ignored (unit `shop`"),
            "{message}"
        );
        let message = error("[[sync.ignore]]\nkind = \"Deployment\"\n");
        assert!(message.contains("sync[0].ignore[0]: names no fields: set `paths`, `managers` or both"), "{message}");
    }

    #[test]
    fn bad_pointers_selectors_and_unknown_keys_are_refused() {
        let rule = |line: &str| format!("[[sync.ignore]]\nkind = \"Deployment\"\n{line}\n");
        let message = error(&rule("paths = [\"/metadata/name\"]"));
        assert!(message.contains("`/metadata/name` names the object itself"), "{message}");
        let message = error(&rule("paths = [\"/a~2b\"]"));
        assert!(message.contains("sync[0].ignore[0].paths: `/a~2b` is not a JSON pointer"), "{message}");
        let message = error(&rule(
            "paths = [\"/spec\"]\n[sync.ignore.label_selector]\nmatch_expressions = [{ key = \"a\", operator = \"Is\" }]",
        ));
        assert!(message.contains("sync[0].ignore[0].label_selector:"), "{message}");
        let message = error(&rule("paths = [\"/spec\"]\npath = \"/x\""));
        assert!(message.contains("unknown key `path`: did you mean `paths`"), "{message}");
        let message = error(&rule("managers = [\"kubectl-client-side-apply\"]"));
        assert!(message.contains("sync[0].ignore[0].managers: is also in takeover_managers"), "{message}");
        let message = error(&rule("managers = [\"gitward\"]"));
        assert!(message.contains("is the unit's own field_manager"), "{message}");
        let message = error(&rule("managers = [\"\"]"));
        assert!(message.contains("sync[0].ignore[0].managers: a field manager name must not be empty"), "{message}");
    }
}
