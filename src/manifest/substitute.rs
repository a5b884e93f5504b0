//! Post-build variable substitution (`[sync.substitute]`, as Flux's Kustomization
//! `postBuild.substitute`): `${var}` in the string scalars and mapping keys of a desired
//! object replaced by the variable's value.
//!
//! The grammar, over the text of one string:
//!
//! - `${name}` is the value of `name`; `name` is `[_a-zA-Z][_a-zA-Z0-9]*` (Flux's rule);
//! - `${name:=default}` is the value of `name`, or `default` (any text without `}`) when
//!   `name` is not defined;
//! - `$${` is a literal `${`: `$${name}` becomes the text `${name}`;
//! - anything else, a `$` alone, `$name`, `${` not followed by a name and `}` or `:=`, stays
//!   as it is.
//!
//! A reference to an undefined variable without a default is an error naming the file, the
//! document and the variable (strict, as Flux since 2.9). Substitution works inside the parsed
//! object, never on YAML text: a value holding YAML syntax (`a: b`, a newline, `{`) stays one
//! string and cannot add fields or documents. The result of a substitution is always a string.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{Error, HashKey, Manifest, Result};
use crate::config::is_var_name as is_name;
use crate::object::GroupKind;

/// The annotation that leaves an object untouched when its value is `disabled`.
pub const DISABLED: &str = "gitward.dev/substitute";

/// The variables of a unit: name → value, and whether the value came from a Secret.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vars {
    values: BTreeMap<String, Var>,
}

/// One variable's value.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Var {
    value: String,
    /// Read from a Secret: an object it goes into is hashed with a key and masked in diffs.
    secret: bool,
}

impl Vars {
    /// Sets `name` to `value`, replacing an earlier value (a later source wins); `secret` when
    /// it was read from a Secret.
    pub fn set(&mut self, name: impl Into<String>, value: impl Into<String>, secret: bool) {
        self.values.insert(name.into(), Var { value: value.into(), secret });
    }

    /// Whether no variable is defined.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    fn get(&self, name: &str) -> Option<&Var> {
        self.values.get(name)
    }
}

/// What [`expand`] found: the variables it used, and the first one it could not resolve.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Expanded {
    /// Whether a Secret's value went into the text.
    pub secret: bool,
    /// The first variable referenced without a value or default, if any.
    pub undefined: Option<String>,
}

/// `text` with every reference replaced (the grammar is in the [module docs](self)); borrowed
/// when it holds no `${`. `found` learns whether a Secret's value was used and the first
/// undefined variable (whose reference is then left as it is).
pub fn expand<'t>(text: &'t str, vars: &Vars, found: &mut Expanded) -> Cow<'t, str> {
    if !text.contains("${") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        if let Some(after) = rest.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
            continue;
        }
        match reference(rest) {
            Some((name, default, len)) => {
                match (vars.get(name), default) {
                    (Some(var), _) => {
                        found.secret |= var.secret;
                        out.push_str(&var.value);
                    }
                    (None, Some(default)) => out.push_str(default),
                    (None, None) => {
                        found.undefined.get_or_insert_with(|| name.to_owned());
                        out.push_str(&rest[..len]);
                    }
                }
                rest = &rest[len..];
            }
            None => {
                out.push('$');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// The reference at the start of `text` (which starts with `$`): its name, its default and
/// its length in bytes; `None` when `text` does not start with one.
fn reference(text: &str) -> Option<(&str, Option<&str>, usize)> {
    let body = text.strip_prefix("${")?;
    let end = body.find(['}', ':']).filter(|&end| end > 0)?;
    let name = &body[..end];
    if !is_name(name) {
        return None;
    }
    let after = &body[end..];
    if after.starts_with('}') {
        return Some((name, None, 2 + end + 1));
    }
    let default = after.strip_prefix(":=")?;
    let close = default.find('}')?;
    Some((name, Some(&default[..close]), 2 + end + 2 + close + 1))
}

/// Substitutes `vars` into every manifest but those annotated [`DISABLED`]` = disabled`, in
/// string values and mapping keys; an object whose text has no `${` is not touched. Identity
/// fields (`apiVersion`, `kind`, `metadata.name`, `metadata.namespace`) are read again from the
/// result. An object that took a Secret's value gets `secret_key` as its hash key (its desired
/// hash keyed, its values masked in diffs), unless it has one already (SOPS).
///
/// Errors: [`Error::UndefinedVariable`] for the first reference to a variable that is not
/// defined and has no default, naming the file, document and variable; the manifests are then
/// left in part substituted, and the caller drops them.
pub fn substitute(manifests: &mut [Manifest], vars: &Vars, secret_key: &HashKey) -> Result<()> {
    substitute_as(manifests, vars, Some(secret_key))
}

/// [`substitute`] where some variables are not known (`gitward validate` has no cluster to
/// read `from` objects in): a reference to an undefined variable without default is left as
/// written, and no hash key is set.
///
/// Errors: [`Error::MissingField`] when a substitution emptied an identity field.
pub fn substitute_known(manifests: &mut [Manifest], vars: &Vars) -> Result<()> {
    substitute_as(manifests, vars, None)
}

/// [`substitute`] (strict, with `secret_key`) or [`substitute_known`] (`None`).
fn substitute_as(manifests: &mut [Manifest], vars: &Vars, secret_key: Option<&HashKey>) -> Result<()> {
    for m in manifests.iter_mut().filter(|m| m.body.as_str().contains("${")) {
        let mut body = m.body.to_value();
        let disabled = body.pointer("/metadata/annotations").and_then(|a| a.get(DISABLED)).and_then(Value::as_str);
        if disabled == Some("disabled") {
            continue;
        }
        let mut found = Expanded::default();
        walk(&mut body, vars, &mut found);
        if let (Some(variable), Some(_)) = (found.undefined, secret_key) {
            return Err(Error::UndefinedVariable { file: m.file.to_string(), index: m.index, variable });
        }
        refresh(m, body)?;
        if let (true, None, Some(key)) = (found.secret, &m.hash_key, secret_key) {
            m.hash_key = Some(key.clone());
        }
    }
    Ok(())
}

/// Expands every string and key of `value` in place.
fn walk(value: &mut Value, vars: &Vars, found: &mut Expanded) {
    match value {
        Value::String(s) => {
            if let Cow::Owned(new) = expand(s, vars, found) {
                *s = new;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| walk(v, vars, found)),
        Value::Object(map) if map.keys().any(|k| k.contains("${")) => {
            let old = std::mem::take(map);
            let mut new = Map::with_capacity(old.len());
            for (k, mut v) in old {
                walk(&mut v, vars, found);
                new.insert(expand(&k, vars, found).into_owned(), v);
            }
            *map = new;
        }
        Value::Object(map) => map.values_mut().for_each(|v| walk(v, vars, found)),
        _ => {}
    }
}

/// Sets `m`'s body to `body` and its identity fields to what `body` says now.
///
/// Errors: [`Error::MissingField`] when a substitution emptied one.
fn refresh(m: &mut Manifest, body: Value) -> Result<()> {
    let text = |pointer: &str| body.pointer(pointer).and_then(Value::as_str).filter(|s| !s.is_empty());
    let missing = |field| Error::MissingField { file: m.file.to_string(), index: m.index, item: None, field };
    let api_version = text("/apiVersion").ok_or_else(|| missing("apiVersion"))?;
    let kind = text("/kind").ok_or_else(|| missing("kind"))?;
    let name = text("/metadata/name").ok_or_else(|| missing("metadata.name"))?;
    let (gk, api_version, name) = (GroupKind::from_api_version(api_version, kind), api_version.into(), name.into());
    let namespace = text("/metadata/namespace").map(Into::into);
    *m = Manifest { api_version, gk, name, namespace, body: super::Body::from_value(&body), ..m.clone() };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn vars(pairs: &[(&str, &str)]) -> Vars {
        let mut vars = Vars::default();
        for (k, v) in pairs {
            vars.set(*k, *v, false);
        }
        vars
    }

    fn run(text: &str, vars: &Vars) -> (String, Expanded) {
        let mut found = Expanded::default();
        let out = expand(text, vars, &mut found).into_owned();
        (out, found)
    }

    #[test]
    fn a_reference_takes_the_value_and_a_default_stands_in_for_an_undefined_one() {
        let v = vars(&[("cluster", "prod-eu"), ("empty", "")]);
        assert_eq!(run("c-${cluster}-x", &v).0, "c-prod-eu-x");
        assert_eq!(run("${region:=eu-west-1}", &v).0, "eu-west-1");
        assert_eq!(run("${cluster:=other}", &v).0, "prod-eu", "a defined variable beats its default");
        assert_eq!(run("${empty:=d}", &v).0, "", "an empty value is a value");
        assert_eq!(run("${a:=}", &v).0, "", "an empty default");
        assert_eq!(run("${cluster}${cluster}", &v).0, "prod-euprod-eu");
    }

    #[test]
    fn a_doubled_dollar_escapes_a_reference() {
        let v = vars(&[("x", "1")]);
        assert_eq!(run("$${x}", &v).0, "${x}");
        assert_eq!(run("$$${x}", &v).0, "$${x}", "read from the left: `$`, then an escape");
        assert_eq!(run("$${undefined}", &v), ("${undefined}".into(), Expanded::default()));
    }

    #[test]
    fn text_that_is_no_reference_stays() {
        let v = vars(&[("x", "1")]);
        for text in ["$x", "$", "a$", "${", "${}", "${1x}", "${x", "${x:-d}", "${x.y}", "${ x }", "$$", "${x:=d"] {
            assert_eq!(run(text, &v), (text.to_owned(), Expanded::default()), "{text}");
        }
    }

    #[test]
    fn an_undefined_variable_without_default_is_reported_and_left() {
        let (out, found) = run("a ${missing} ${also}", &vars(&[]));
        assert_eq!(out, "a ${missing} ${also}");
        assert_eq!(found.undefined.as_deref(), Some("missing"), "the first one");
    }

    #[test]
    fn a_value_is_inserted_as_it_is_and_never_read_again() {
        let v = vars(&[("x", "${y}"), ("y", "no")]);
        assert_eq!(run("${x}", &v).0, "${y}");
    }

    #[test]
    fn a_secret_value_is_noted() {
        let mut v = vars(&[("plain", "p")]);
        v.set("token", "t", true);
        assert!(!run("${plain}", &v).1.secret);
        assert!(run("${token}", &v).1.secret);
        assert!(!run("${token:=x} $${token}", &vars(&[])).1.secret);
    }

    fn manifest(body: Value) -> Manifest {
        Manifest {
            file: "app.yaml".into(),
            index: 1,
            api_version: "v1".into(),
            gk: GroupKind::from_api_version("v1", "ConfigMap"),
            name: "placeholder".into(),
            namespace: None,
            body: super::super::Body::from_value(&body),
            hash_key: None,
        }
    }

    #[test]
    fn objects_are_substituted_in_values_and_keys_and_their_identity_read_again() {
        let v = vars(&[("env", "prod"), ("ns", "shop")]);
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "conf-${env}", "namespace": "${ns}", "labels": {"${env}-tier": "web"}},
            "data": {"a": "${env}", "n": 3, "list": ["${ns}", true]}});
        let mut ms = [manifest(body)];
        substitute(&mut ms, &v, &HashKey::derive(b"k")).unwrap();
        let out = ms[0].body.to_value();
        assert_eq!(out["data"], json!({"a": "prod", "n": 3, "list": ["shop", true]}));
        assert_eq!(out["metadata"]["labels"], json!({"prod-tier": "web"}));
        assert_eq!((ms[0].name.as_str(), ms[0].namespace.as_ref().map(|n| n.as_str())), ("conf-prod", Some("shop")));
        assert!(ms[0].hash_key.is_none());
    }

    #[test]
    fn a_value_holding_yaml_stays_one_string() {
        let v = vars(&[("evil", "x\n---\nkind: Secret\nmetadata: {name: e}")]);
        let mut ms = [manifest(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "data": {"a": "${evil}"}}))];
        substitute(&mut ms, &v, &HashKey::derive(b"k")).unwrap();
        let out = ms[0].body.to_value();
        assert_eq!(out["data"], json!({"a": "x\n---\nkind: Secret\nmetadata: {name: e}"}));
        assert_eq!(out.as_object().unwrap().len(), 4);
    }

    #[test]
    fn a_disabled_object_is_left_and_an_undefined_variable_names_file_and_document() {
        let annotations = json!({DISABLED: "disabled"});
        let disabled = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "annotations": annotations}, "data": {"a": "${nothing}"}});
        let mut ms = [manifest(disabled.clone())];
        substitute(&mut ms, &vars(&[]), &HashKey::derive(b"k")).unwrap();
        assert_eq!(ms[0].body.to_value(), disabled);
        let mut ms = [manifest(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "data": {"a": "${nothing}"}}))];
        let err = substitute(&mut ms, &vars(&[]), &HashKey::derive(b"k")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "app.yaml: document 2: variable `nothing` is not defined and has no default \
             (`${nothing:=default}`); define it in [sync.substitute] or escape it as `$${nothing}`"
        );
    }

    #[test]
    fn without_every_variable_known_an_undefined_one_is_left() {
        let mut ms = [manifest(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c-${env}"},
            "data": {"a": "${unknown}"}}))];
        substitute_known(&mut ms, &vars(&[("env", "prod")])).unwrap();
        assert_eq!(ms[0].name.as_str(), "c-prod");
        assert_eq!(ms[0].body.to_value()["data"]["a"], "${unknown}");
    }

    #[test]
    fn an_object_that_took_a_secret_value_is_keyed() {
        let mut v = Vars::default();
        v.set("token", "s3cret", true);
        let key = HashKey::derive(b"k");
        let mut ms = [manifest(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "data": {"a": "${token}"}}))];
        substitute(&mut ms, &v, &key).unwrap();
        assert_eq!(ms[0].hash_key.as_ref().map(HashKey::id), Some(key.id()));
    }

    proptest! {
        #[test]
        fn text_without_a_dollar_brace_is_unchanged(text in "[^$]*|[a-z$ {}:=]{0,12}") {
            prop_assume!(!text.contains("${"));
            let (out, found) = run(&text, &vars(&[("a", "X")]));
            prop_assert_eq!(out, text);
            prop_assert_eq!(found, Expanded::default());
        }

        #[test]
        fn an_escaped_text_comes_back_as_written(text in "[a-z${}:=_ ]{0,24}") {
            // Escaping every `${` as `$${` gives back the text itself, whatever it holds.
            let escaped = text.replace("${", "$${");
            let (out, found) = run(&escaped, &vars(&[("a", "X"), ("b", "")]));
            prop_assert_eq!(out, text);
            prop_assert!(found.undefined.is_none());
        }

        #[test]
        fn every_defined_reference_is_replaced(
            parts in proptest::collection::vec(("[a-z ]{0,4}", "[ab]", proptest::option::of("[a-z]{0,3}")), 0..6),
        ) {
            let v = vars(&[("a", "<A>"), ("b", "<B>")]);
            let mut text = String::new();
            let mut expected = String::new();
            for (lit, name, default) in &parts {
                text.push_str(lit);
                expected.push_str(lit);
                match default {
                    Some(d) => text.push_str(&format!("${{{name}:={d}}}")),
                    None => text.push_str(&format!("${{{name}}}")),
                }
                expected.push_str(if name == "a" { "<A>" } else { "<B>" });
            }
            prop_assert_eq!(run(&text, &v).0, expected);
        }
    }
}
