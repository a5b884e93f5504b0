//! The API server's rules for `metadata`: object names per kind, the namespace, label keys and
//! values, annotation keys and their total size — each message in the API server's words
//! (`metadata.name: Invalid value: "Web_Config": a lowercase RFC 1123 subdomain must …`).
//!
//! The rules and texts are apimachinery's (`k8s.io/apimachinery` v0.35: `pkg/util/validation`
//! `IsDNS1123Subdomain`, `IsDNS1123Label`, `IsDNS1035Label`; `pkg/api/validate/content`
//! `IsLabelKey`, `IsLabelValue`; `pkg/api/validation/path` `IsValidPathSegmentName`;
//! `ValidateObjectMetaAccessor`, `ValidateAnnotations`); which rule a kind's name follows is
//! the `ValidateObjectMeta` call of its validation in `kubernetes/pkg/apis/*/validation` (1.35).

use serde_json::Value;

/// The most bytes of a DNS-1123 subdomain (`DNS1123SubdomainMaxLength`).
const SUBDOMAIN_MAX: usize = 253;
/// The most bytes of a DNS label, a label value and a label key's name part.
const LABEL_MAX: usize = 63;
/// The most bytes all annotations of an object may take, keys and values
/// (`TotalAnnotationSizeLimitB`, 256 KiB).
pub const ANNOTATIONS_MAX: usize = 256 << 10;
/// The longest CronJob name: its Jobs are named `<cronjob>-<11 digits>` and must stay DNS-1035
/// labels (63 bytes).
const CRONJOB_NAME_MAX: usize = 52;

const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' \
                             or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex \
                             used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and \
                         must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used \
                         for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1035_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an \
                           alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', \
                           regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const KEY_NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end \
                            with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for \
                            validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or \
                               '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or \
                               'my_value',  or '12345', regex used for validation is \
                               '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// How the API server checks a kind's `metadata.name`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// A DNS-1123 subdomain (`NameIsDNSSubdomain`): most kinds, and every custom resource.
    Subdomain,
    /// A DNS-1123 label (`NameIsDNSLabel`): Namespace, StatefulSet.
    Label,
    /// A DNS-1035 label, starting with a letter (`NameIsDNS1035Label`): Service (while the
    /// alpha `RelaxedServiceNameValidation` gate is off, as it is by default in 1.35).
    Dns1035,
    /// A path segment (`IsValidPathSegmentName`: not `.` or `..`, no `/` or `%`): the RBAC kinds.
    PathSegment,
    /// A subdomain of at most 52 bytes: CronJob.
    CronJob,
    /// Not checked here: IPAddress (an IP address), StorageVersion and the kinds whose name
    /// is derived from their spec (checked by the server against it).
    Unchecked,
}

impl NameRule {
    /// The rule for built-in kind `kind` of API group `group` (`""` the core group); any other
    /// kind (a custom resource) is [`NameRule::Subdomain`].
    pub fn of(group: &str, kind: &str) -> Self {
        match (group, kind) {
            ("", "Namespace") | ("apps", "StatefulSet") => Self::Label,
            ("", "Service") => Self::Dns1035,
            ("rbac.authorization.k8s.io", "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding") => {
                Self::PathSegment
            }
            ("batch", "CronJob") => Self::CronJob,
            ("networking.k8s.io", "IPAddress") | ("internal.apiserver.k8s.io", "StorageVersion") => Self::Unchecked,
            _ => Self::Subdomain,
        }
    }

    /// What is wrong with `name` under this rule, in the API server's words; empty when valid.
    pub fn check(self, name: &str) -> Vec<String> {
        match self {
            Self::Subdomain => subdomain(name),
            Self::Label => dns1123_label(name),
            Self::Dns1035 => dns1035_label(name),
            Self::PathSegment => path_segment(name),
            Self::CronJob if name.len() > CRONJOB_NAME_MAX => {
                let mut errors = subdomain(name);
                errors.push(format!("must be no more than {CRONJOB_NAME_MAX} characters"));
                errors
            }
            Self::CronJob => subdomain(name),
            Self::Unchecked => Vec::new(),
        }
    }
}

/// What is wrong with `namespace` as a namespaced object's `metadata.namespace` (a DNS-1123
/// label, `ValidateNamespaceName`), as [`check_metadata`] words it; empty when valid.
pub fn check_namespace(namespace: &str) -> Vec<String> {
    dns1123_label(namespace)
        .into_iter()
        .map(|e| format!("metadata.namespace: Invalid value: {namespace:?}: {e}"))
        .collect()
}

/// Every problem of an object's `metadata` but its namespace (whose rule depends on the kind's
/// scope: [`check_namespace`]), each as `<field>: Invalid value: "<value>": <why>`: the name
/// under `rule`, each label key as a qualified name and value as a label value, each
/// annotation key as a qualified name (case aside) and the annotations' total size.
pub fn check_metadata(metadata: &Value, rule: NameRule) -> Vec<String> {
    let meta = Some(metadata);
    let text = |field: &str| meta.and_then(|m| m.get(field)).and_then(Value::as_str);
    let mut problems = Vec::new();
    let mut invalid = |field: &str, value: &str, errors: Vec<String>| {
        problems.extend(errors.into_iter().map(|e| format!("metadata.{field}: Invalid value: {value:?}: {e}")))
    };
    if let Some(name) = text("name") {
        invalid("name", name, rule.check(name));
    }
    for (key, value) in map(meta, "labels") {
        invalid("labels", key, qualified_name(key));
        invalid("labels", value.as_str().unwrap_or_default(), label_value(value.as_str().unwrap_or_default()));
    }
    let mut size = 0;
    for (key, value) in map(meta, "annotations") {
        invalid("annotations", key, qualified_name(&key.to_lowercase()));
        size += key.len() + value.as_str().map_or(0, str::len);
    }
    if size > ANNOTATIONS_MAX {
        problems.push(format!("metadata.annotations: Too long: may not be more than {ANNOTATIONS_MAX} bytes"));
    }
    problems
}

/// The entries of `meta.<field>`, none when absent or not a map.
fn map<'a>(meta: Option<&'a Value>, field: &str) -> impl Iterator<Item = (&'a String, &'a Value)> {
    meta.and_then(|m| m.get(field)).and_then(Value::as_object).into_iter().flatten()
}

/// `IsDNS1123Subdomain`: at most 253 bytes of dot-separated DNS-1123 labels.
pub fn subdomain(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > SUBDOMAIN_MAX {
        errors.push(format!("must be no more than {SUBDOMAIN_MAX} characters"));
    }
    if !value.split('.').all(is_label) {
        errors.push(SUBDOMAIN_MSG.to_owned());
    }
    errors
}

/// `IsDNS1123Label`: at most 63 bytes of `[a-z0-9]`, `-` inside.
pub fn dns1123_label(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > LABEL_MAX {
        errors.push(format!("must be no more than {LABEL_MAX} characters"));
    }
    if !is_label(value) {
        // A valid subdomain is no label only for its dots; the API server says so.
        let dots = value.split('.').all(is_label);
        errors.push(if dots { "must not contain dots".to_owned() } else { LABEL_MSG.to_owned() });
    }
    errors
}

/// `IsDNS1035Label`: a DNS-1123 label that starts with a letter.
pub fn dns1035_label(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > LABEL_MAX {
        errors.push(format!("must be no more than {LABEL_MAX} characters"));
    }
    if !(is_label(value) && value.starts_with(|c: char| c.is_ascii_lowercase())) {
        errors.push(DNS1035_MSG.to_owned());
    }
    errors
}

/// `IsValidPathSegmentName`: not `.` or `..`, and neither `/` nor `%` in it.
pub fn path_segment(value: &str) -> Vec<String> {
    if value == "." || value == ".." {
        return vec![format!("may not be '{value}'")];
    }
    ["/", "%"].iter().filter(|c| value.contains(*c)).map(|c| format!("may not contain '{c}'")).collect()
}

/// `IsQualifiedName` (`IsLabelKey`): an optional DNS-1123 subdomain prefix and `/`, then a
/// name part of at most 63 bytes of `[A-Za-z0-9]`, with `-`, `_` and `.` inside.
pub fn qualified_name(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let name = match value.split('/').collect::<Vec<_>>()[..] {
        [name] => name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_owned());
            } else {
                // apimachinery's `content` package, which checks the prefix, counts in bytes.
                let bytes = |e: String| e.replace("more than 253 characters", "more than 253 bytes");
                errors.extend(subdomain(prefix).into_iter().map(|e| format!("prefix part {}", bytes(e))));
            }
            name
        }
        _ => {
            return vec![format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                KEY_NAME_MSG.trim_start_matches("name part ")
            )];
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_owned());
    } else if name.len() > LABEL_MAX {
        errors.push(format!("name part must be no more than {LABEL_MAX} bytes"));
    }
    if !is_label_text(name) {
        errors.push(KEY_NAME_MSG.to_owned());
    }
    errors
}

/// `IsLabelValue`: empty, or at most 63 bytes of `[A-Za-z0-9]` with `-`, `_` and `.` inside.
pub fn label_value(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > LABEL_MAX {
        errors.push(format!("must be no more than {LABEL_MAX} bytes"));
    }
    if !value.is_empty() && !is_label_text(value) {
        errors.push(LABEL_VALUE_MSG.to_owned());
    }
    errors
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?` (length aside).
fn is_label(s: &str) -> bool {
    let edge = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    s.starts_with(edge) && s.ends_with(edge) && s.chars().all(|c| edge(c) || c == '-')
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]` (length aside).
fn is_label_text(s: &str) -> bool {
    let edge = |c: char| c.is_ascii_alphanumeric();
    s.starts_with(edge) && s.ends_with(edge) && s.chars().all(|c| edge(c) || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names_follow_the_rule_of_their_kind() {
        assert!(NameRule::of("", "ConfigMap").check("web.config-1").is_empty());
        assert_eq!(NameRule::of("", "ConfigMap").check("Web_Config"), [SUBDOMAIN_MSG]);
        assert_eq!(NameRule::of("", "Namespace").check("shop.prod"), ["must not contain dots"]);
        assert!(NameRule::of("apps", "StatefulSet").check("db.0").len() == 1);
        assert_eq!(NameRule::of("", "Service").check("1web"), [DNS1035_MSG]);
        assert!(NameRule::of("", "Pod").check("1web").is_empty());
        assert!(NameRule::of("rbac.authorization.k8s.io", "ClusterRole").check("system:aggregate-to-view").is_empty());
        assert_eq!(NameRule::of("rbac.authorization.k8s.io", "Role").check(".."), ["may not be '..'"]);
        assert_eq!(NameRule::of("batch", "CronJob").check(&"a".repeat(53)), ["must be no more than 52 characters"]);
        assert!(NameRule::of("example.com", "Widget").check(&"a".repeat(254)).len() == 1);
    }

    #[test]
    fn metadata_problems_are_in_the_api_servers_words() {
        let body = serde_json::json!({"name": "Web_Config", "namespace": "Shop",
            "labels": {"app": "web server", "example.com/tier": "", "bad//key": "x"},
            "annotations": {"Example.com/Note": "fine", "-no": "x"}});
        let found = check_metadata(&body, NameRule::Subdomain);
        assert_eq!(found[0], format!("metadata.name: Invalid value: \"Web_Config\": {SUBDOMAIN_MSG}"));
        assert_eq!(check_namespace("Shop"), [format!("metadata.namespace: Invalid value: \"Shop\": {LABEL_MSG}")]);
        assert!(found.contains(&format!("metadata.labels: Invalid value: \"web server\": {LABEL_VALUE_MSG}")));
        assert!(found.iter().any(|p| p.starts_with("metadata.labels: Invalid value: \"bad//key\": a valid label key")));
        assert!(found.contains(&format!("metadata.annotations: Invalid value: \"-no\": {KEY_NAME_MSG}")));
        assert_eq!(found.len(), 4, "{found:#?}");
    }

    #[test]
    fn annotations_over_256_kib_are_refused() {
        let big = serde_json::json!({"name": "n", "annotations": {"a": "x".repeat(ANNOTATIONS_MAX)}});
        let found = check_metadata(&big, NameRule::Subdomain);
        assert_eq!(found, ["metadata.annotations: Too long: may not be more than 262144 bytes"]);
    }

    /// Every verdict of apimachinery v0.35.4 on the strings of
    /// `tests/fixtures/apimachinery-names/cases.json` (its `main.go` made them), message for
    /// message.
    #[test]
    fn every_verdict_and_message_is_apimachinerys() {
        let cases: Vec<Value> =
            serde_json::from_str(include_str!("../../tests/fixtures/apimachinery-names/cases.json")).unwrap();
        type Rule = fn(&str) -> Vec<String>;
        let rules: [(&str, Rule); 5] = [
            ("subdomain", subdomain),
            ("label", dns1123_label),
            ("dns1035", dns1035_label),
            ("label_value", label_value),
            ("qualified_name", qualified_name),
        ];
        assert!(cases.len() > 40);
        for case in &cases {
            let input = case["input"].as_str().unwrap();
            for (rule, check) in rules {
                let expected: Vec<String> = serde_json::from_value(case[rule].clone()).unwrap();
                assert_eq!(check(input), expected, "{rule} of {input:?}");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn a_label_is_a_subdomain_and_a_dns1035_label_a_label(s in "[a-z0-9.\\-_A-Z]{0,70}") {
            if dns1035_label(&s).is_empty() { prop_assert!(dns1123_label(&s).is_empty()); }
            if dns1123_label(&s).is_empty() { prop_assert!(subdomain(&s).is_empty()); }
            if dns1123_label(&s).is_empty() { prop_assert!(label_value(&s).is_empty() && qualified_name(&s).is_empty()); }
        }

        #[test]
        fn label_values_match_the_api_servers_pattern(s in "[A-Za-z0-9._\\-/ ]{0,70}") {
            let pattern = s.is_empty() || (s.len() <= 63 && is_label_text(&s));
            prop_assert_eq!(label_value(&s).is_empty(), pattern);
        }

        #[test]
        fn generated_qualified_names_pass(prefix in "([a-z0-9]{1,10}\\.){0,3}[a-z0-9]{1,10}", name in "[A-Za-z0-9]([A-Za-z0-9._\\-]{0,61}[A-Za-z0-9])?") {
            prop_assert!(qualified_name(&name).is_empty());
            let key = format!("{prefix}/{name}");
            prop_assert!(qualified_name(&key).is_empty(), "{}", key);
            let bad = format!("{prefix}/{name}/x");
            prop_assert!(!qualified_name(&bad).is_empty());
        }

        #[test]
        fn anything_outside_the_charset_is_refused(s in "[a-z]{0,5}[^A-Za-z0-9._\\-/][a-z]{0,5}") {
            prop_assert!(!label_value(&s).is_empty());
            prop_assert!(!qualified_name(&s).is_empty());
            prop_assert!(!subdomain(&s).is_empty());
            prop_assert!(!path_segment(&s).is_empty() || !s.contains(['/', '%']));
        }
    }
}
