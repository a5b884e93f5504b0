//! Request bodies spliced from the manifest's text: where gitward's namespace, `part-of` label
//! and desired-hash annotation go into the source's compact JSON is found once, when the
//! desired object is built (a few offsets kept with it), and each request copies the source
//! with those fields written in at those offsets — no parse into a `Value` tree and no
//! serialization per request, and no body held between syncs.

use serde_json::Value;

use crate::cluster::inventory::{DESIRED_HASH, PART_OF};

/// Byte offsets into a source's text just after the `{` of its top-level `metadata` object and
/// of that object's `labels` and `annotations` maps (0 when that map is absent and is written
/// whole after `metadata`'s `{`), and whether the namespace is written in too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Splice {
    metadata: u32,
    labels: u32,
    annotations: u32,
    namespace: bool,
}

impl Splice {
    /// The splice of `source` (its text and the same parsed as `value`) for an object that has
    /// `namespace` (`None`: cluster-scoped). `None` when gitward's body cannot be made by
    /// inserting alone — the source names another namespace or one for a cluster-scoped kind,
    /// or already holds the `part-of` label or desired-hash annotation, or its `metadata`,
    /// `labels` or `annotations` is not an object — or when the text is not as the value says;
    /// such a body is built by a parse instead.
    pub fn find(text: &str, value: &Value, namespace: Option<&str>) -> Option<Splice> {
        let meta = value.get("metadata")?.as_object()?;
        let has_namespace = match (meta.get("namespace"), namespace) {
            (None, _) => false,
            (Some(Value::String(ns)), Some(want)) if ns == want => true,
            _ => return None,
        };
        let without = |map: &str, key: &str| match meta.get(map) {
            None => Some(false),
            Some(Value::Object(m)) if !m.contains_key(key) => Some(true),
            _ => None,
        };
        let (has_labels, has_annotations) = (without("labels", PART_OF)?, without("annotations", DESIRED_HASH)?);
        let bytes = text.as_bytes();
        let metadata = member_object(bytes, skip_ws(bytes, 0), "metadata")?;
        let labels = member_object(bytes, metadata - 1, "labels");
        let annotations = member_object(bytes, metadata - 1, "annotations");
        if labels.is_some() != has_labels || annotations.is_some() != has_annotations {
            return None;
        }
        let offset = |o: Option<usize>| u32::try_from(o.unwrap_or(0)).ok();
        Some(Splice {
            metadata: u32::try_from(metadata).ok()?,
            labels: offset(labels)?,
            annotations: offset(annotations)?,
            namespace: namespace.is_some() && !has_namespace,
        })
    }

    /// The body: `source` with `"namespace":namespace` (when the source lacks it), the
    /// `part-of` label `part_of` and the desired-hash annotation `hash` written in.
    pub fn apply(&self, source: &str, namespace: Option<&str>, part_of: &str, hash: &str) -> String {
        let quoted = |s: &str| serde_json::to_string(s).expect("a string always serializes");
        let label = format!("{}:{}", quoted(PART_OF), quoted(part_of));
        let annotation = format!("{}:{}", quoted(DESIRED_HASH), quoted(hash));
        let mut inserts: Vec<(usize, String)> = Vec::with_capacity(3);
        let mut at_metadata = Vec::new();
        if self.namespace {
            at_metadata.push(format!("\"namespace\":{}", quoted(namespace.unwrap_or_default())));
        }
        match self.labels {
            0 => at_metadata.push(format!("\"labels\":{{{label}}}")),
            at => inserts.push((at as usize, entry(source, at as usize, label))),
        }
        match self.annotations {
            0 => at_metadata.push(format!("\"annotations\":{{{annotation}}}")),
            at => inserts.push((at as usize, entry(source, at as usize, annotation))),
        }
        if !at_metadata.is_empty() {
            let at = self.metadata as usize;
            inserts.push((at, entry(source, at, at_metadata.join(","))));
        }
        inserts.sort_by_key(|(at, _)| *at);
        let mut out = String::with_capacity(source.len() + inserts.iter().map(|(_, s)| s.len()).sum::<usize>());
        let mut from = 0;
        for (at, text) in inserts {
            out.push_str(&source[from..at]);
            out.push_str(&text);
            from = at;
        }
        out.push_str(&source[from..]);
        out
    }
}

/// `members` followed by the comma that separates them from what already follows `at` (the
/// first byte after a `{`), unless the object is empty.
fn entry(source: &str, at: usize, members: String) -> String {
    let bytes = source.as_bytes();
    if bytes.get(skip_ws(bytes, at)) == Some(&b'}') { members } else { members + "," }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// In the object whose `{` is at `open`, the member `key` whose value is an object: the offset
/// just after that value's `{`. `None` when it is absent, not an object, or the text is not
/// JSON as expected.
fn member_object(b: &[u8], open: usize, key: &str) -> Option<usize> {
    if b.get(open) != Some(&b'{') {
        return None;
    }
    let mut i = skip_ws(b, open + 1);
    if b.get(i) == Some(&b'}') {
        return None;
    }
    loop {
        let (start, end) = string(b, i)?;
        i = skip_ws(b, end + 1);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(b, i + 1);
        if &b[start..end] == key.as_bytes() {
            return (b.get(i) == Some(&b'{')).then_some(i + 1);
        }
        i = skip_ws(b, skip_value(b, i)?);
        match b.get(i)? {
            b',' => i = skip_ws(b, i + 1),
            _ => return None,
        }
    }
}

/// The string whose opening quote is at `i`: the range of its contents (escapes kept).
fn string(b: &[u8], mut i: usize) -> Option<(usize, usize)> {
    if b.get(i) != Some(&b'"') {
        return None;
    }
    i += 1;
    let start = i;
    loop {
        match b.get(i)? {
            b'\\' => i += 2,
            b'"' => return Some((start, i)),
            _ => i += 1,
        }
    }
}

/// The offset just after the value that starts at `i`.
fn skip_value(b: &[u8], mut i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => string(b, i).map(|(_, end)| end + 1),
        b'{' | b'[' => {
            let mut depth = 0usize;
            loop {
                match b.get(i)? {
                    b'"' => {
                        i = string(b, i)?.1 + 1;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            while !matches!(b.get(i)?, b',' | b'}' | b']') {
                i += 1;
            }
            Some(i)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What the parse path sends: the value with namespace, label and annotation set.
    fn parsed(mut v: Value, ns: Option<&str>, part_of: &str, hash: &str) -> Value {
        let meta = v["metadata"].as_object_mut().unwrap();
        match ns {
            Some(ns) => meta.insert("namespace".into(), json!(ns)),
            None => meta.remove("namespace"),
        };
        meta.entry("labels").or_insert(json!({}))[PART_OF] = json!(part_of);
        meta.entry("annotations").or_insert(json!({}))[DESIRED_HASH] = json!(hash);
        v
    }

    fn spliced(v: &Value, ns: Option<&str>) -> Option<Value> {
        let text = serde_json::to_string(v).unwrap();
        let splice = Splice::find(&text, v, ns)?;
        Some(serde_json::from_str(&splice.apply(&text, ns, "applyset-x-v1", &"a".repeat(64))).unwrap())
    }

    #[test]
    fn a_spliced_body_is_the_parsed_body() {
        let sources = [
            (json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}), Some("shop")),
            (
                json!({"kind": "ConfigMap", "metadata": {"name": "a", "namespace": "shop"}, "data": {"k": "v"}}),
                Some("shop"),
            ),
            (json!({"metadata": {"annotations": {}, "labels": {"app": "x"}, "name": "a"}}), Some("shop")),
            (json!({"metadata": {"annotations": {"note": "\"metadata\":{"}, "labels": {}, "name": "n"}}), None),
            (
                json!({"a": {"metadata": {"labels": {}}}, "metadata": {"name": "n"}, "spec": {"template": {"metadata": {"labels": {"x": "y"}}}}}),
                Some("ns"),
            ),
            (json!({"data": ["{", "}", "\\"], "metadata": {"name": "n", "labels": {"a\"b": "c"}}}), Some("ns")),
        ];
        for (source, ns) in sources {
            let want = parsed(source.clone(), ns, "applyset-x-v1", &"a".repeat(64));
            assert_eq!(spliced(&source, ns), Some(want), "{source}");
        }
    }

    #[test]
    fn sources_that_need_more_than_an_insert_take_the_parse() {
        let cases = [
            (json!({"metadata": {"name": "a", "namespace": "other"}}), Some("shop")),
            (json!({"metadata": {"name": "a", "namespace": "shop"}}), None),
            (json!({"metadata": {"name": "a", "labels": {PART_OF: "old"}}}), Some("shop")),
            (json!({"metadata": {"name": "a", "annotations": {DESIRED_HASH: "old"}}}), Some("shop")),
            (json!({"metadata": {"name": "a", "labels": []}}), Some("shop")),
            (json!({"metadata": "x"}), Some("shop")),
        ];
        for (source, ns) in cases {
            assert_eq!(spliced(&source, ns), None, "{source}");
        }
    }

    #[test]
    fn a_source_with_whitespace_is_spliced_too() {
        let text = "{ \"metadata\" : { \"labels\" : { } , \"name\" : \"a\" } }";
        let value: Value = serde_json::from_str(text).unwrap();
        let splice = Splice::find(text, &value, Some("shop")).unwrap();
        let body: Value = serde_json::from_str(&splice.apply(text, Some("shop"), "id", "h")).unwrap();
        assert_eq!(body, parsed(value, Some("shop"), "id", "h"));
    }
}
