//! Published schemas, validation and deterministic diffs (seed 001 §4–§5).
//!
//! The catalogue holds every tool's request and response schema (compiled in
//! from `protocol/schemas/`) plus any `*.json` schema found in
//! `RETICLE_SCHEMAS_DIR`, read once at start.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

/// One published schema.
#[derive(Debug, Clone)]
pub struct SchemaEntry {
    /// Name used by `get_schema` / `validate_asset` (e.g. `health.output`).
    pub name: String,
    /// Version (`x-version` in the file, else the payload schema version).
    pub version: String,
    /// Where it comes from (`protocol/schemas/…` or a file path).
    pub path: String,
    /// The schema document.
    pub schema: Value,
}

/// One example document.
#[derive(Debug, Clone)]
pub struct ExampleEntry {
    /// The schema it follows (its `$schema` member).
    pub component: String,
    /// Where it comes from.
    pub path: String,
    /// The document without its `$schema` member.
    pub document: Value,
}

/// All published schemas (sorted by name, version, path) and examples
/// (sorted by component, path).
#[derive(Debug, Clone, Default)]
pub struct SchemaCatalog {
    entries: Vec<SchemaEntry>,
    examples: Vec<ExampleEntry>,
}

impl SchemaCatalog {
    /// The built-in schemas plus those in `extra_dir` (files that fail to parse are skipped with a warning).
    pub fn load(extra_dir: Option<&Path>) -> Self {
        Self::load_with_examples(extra_dir, None)
    }

    /// Like [`Self::load`], plus examples from `examples_dir` (`RETICLE_EXAMPLES_DIR`).
    pub fn load_with_examples(extra_dir: Option<&Path>, examples_dir: Option<&Path>) -> Self {
        let mut entries = Vec::new();
        for files in reticle_protocol::schemas::TOOL_SCHEMAS {
            for (kind, text) in [("input", files.input), ("output", files.output)] {
                if let Ok(schema) = serde_json::from_str::<Value>(text) {
                    entries.push(entry(
                        format!("{}.{kind}", files.tool),
                        format!("protocol/schemas/{}.{kind}.json", files.tool),
                        schema,
                    ));
                }
            }
        }
        for doc in reticle_protocol::schemas::DOCUMENT_SCHEMAS {
            if let Ok(schema) = serde_json::from_str::<Value>(doc.text) {
                entries.push(entry(doc.name.to_owned(), doc.path.to_owned(), schema));
            }
        }
        if let Some(dir) = extra_dir {
            entries.extend(read_dir_schemas(dir));
        }
        entries.sort_by(|a, b| (&a.name, &a.version, &a.path).cmp(&(&b.name, &b.version, &b.path)));
        let mut examples: Vec<ExampleEntry> = reticle_protocol::schemas::EXAMPLES
            .iter()
            .filter_map(|e| example(e.path.to_owned(), e.text.as_bytes()))
            .collect();
        if let Some(dir) = examples_dir {
            let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
                .map(|r| r.filter_map(Result::ok).map(|e| e.path()).collect())
                .unwrap_or_default();
            paths.sort();
            for path in paths
                .iter()
                .filter(|p| p.extension().is_some_and(|e| e == "json"))
            {
                if let Some(entry) = std::fs::read(path)
                    .ok()
                    .and_then(|b| example(path.display().to_string(), &b))
                {
                    examples.push(entry);
                }
            }
        }
        examples.sort_by(|a, b| (&a.component, &a.path).cmp(&(&b.component, &b.path)));
        Self { entries, examples }
    }

    /// Every example, sorted.
    pub fn examples(&self) -> &[ExampleEntry] {
        &self.examples
    }

    /// Every entry, sorted.
    pub fn entries(&self) -> &[SchemaEntry] {
        &self.entries
    }

    /// Looks a schema up by name (or by its `$id`).
    pub fn get(&self, name: &str) -> Option<&SchemaEntry> {
        self.entries.iter().find(|e| e.name == name).or_else(|| {
            self.entries
                .iter()
                .find(|e| e.schema.get("$id").and_then(Value::as_str) == Some(name))
        })
    }
}

fn example(path: String, bytes: &[u8]) -> Option<ExampleEntry> {
    let mut document: Value = match serde_json::from_slice(bytes) {
        Ok(document) => document,
        Err(e) => {
            tracing::warn!(path, error = %e, "skipping example that is not JSON");
            return None;
        }
    };
    let component = document
        .as_object_mut()?
        .remove("$schema")?
        .as_str()?
        .to_owned();
    Some(ExampleEntry {
        component,
        path,
        document,
    })
}

fn entry(name: String, path: String, schema: Value) -> SchemaEntry {
    let version = schema
        .get("x-version")
        .and_then(Value::as_str)
        .unwrap_or(reticle_protocol::SCHEMA_VERSION)
        .to_owned();
    SchemaEntry {
        name,
        version,
        path,
        schema,
    }
}

fn read_dir_schemas(dir: &Path) -> Vec<SchemaEntry> {
    let mut out = Vec::new();
    let Ok(read) = std::fs::read_dir(dir) else {
        tracing::warn!(dir = %dir.display(), "RETICLE_SCHEMAS_DIR is not readable; no extra schemas");
        return out;
    };
    let mut paths: Vec<PathBuf> = read.filter_map(Result::ok).map(|e| e.path()).collect();
    paths.sort();
    for path in paths {
        let Some(stem) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".json"))
        else {
            continue;
        };
        match std::fs::read(&path)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice::<Value>(&b).map_err(|e| e.to_string()))
        {
            Ok(schema) => out.push(entry(stem.to_owned(), path.display().to_string(), schema)),
            Err(e) => tracing::warn!(path = %path.display(), error = %e, "skipping schema"),
        }
    }
    out
}

/// Validates `instance` against `schema`: `Ok(errors)` sorted by path then
/// message (empty when valid), `Err` when the schema itself is invalid.
pub fn validate(schema: &Value, instance: &Value) -> Result<Vec<(String, String)>, String> {
    let validator = jsonschema::validator_for(schema).map_err(|e| e.to_string())?;
    Ok(violations(&validator, instance))
}

/// Every violation of `validator`'s schema by `instance` as `(pointer, message)`,
/// sorted by path then message, without repeats (seed 001 §5 ordering).
pub fn violations(validator: &jsonschema::Validator, instance: &Value) -> Vec<(String, String)> {
    let mut errors: Vec<(String, String)> = validator
        .iter_errors(instance)
        .map(|e| (e.instance_path().to_string(), e.to_string()))
        .collect();
    errors.sort();
    errors.dedup();
    errors
}

/// Errors as `[{path, msg}]`.
pub fn errors_json(errors: &[(String, String)]) -> Value {
    Value::Array(
        errors
            .iter()
            .map(|(path, msg)| json!({"path": path, "msg": msg}))
            .collect(),
    )
}

/// Escapes one JSON Pointer token (RFC 6901).
fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// An RFC 6902 patch from `base` to `new` under seed 001's rules: object keys
/// in sorted order, arrays replaced whole, ops sorted by path and then
/// `remove` < `add` < `replace`.
pub fn diff(base: &Value, new: &Value) -> Vec<Value> {
    let mut ops = Vec::new();
    diff_at(String::new(), base, new, &mut ops);
    let rank = |op: &Value| match op["op"].as_str() {
        Some("remove") => 0,
        Some("add") => 1,
        _ => 2,
    };
    ops.sort_by(|a, b| {
        let pa = a["path"].as_str().unwrap_or("");
        let pb = b["path"].as_str().unwrap_or("");
        pa.cmp(pb).then(rank(a).cmp(&rank(b)))
    });
    ops
}

fn diff_at(path: String, base: &Value, new: &Value, ops: &mut Vec<Value>) {
    if base == new {
        return;
    }
    match (base, new) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeMap<&String, ()> = a.keys().chain(b.keys()).map(|k| (k, ())).collect();
            for key in keys.keys() {
                let child = format!("{path}/{}", escape(key));
                match (a.get(*key), b.get(*key)) {
                    (Some(_), None) => ops.push(json!({"op": "remove", "path": child})),
                    (None, Some(v)) => ops.push(json!({"op": "add", "path": child, "value": v})),
                    (Some(x), Some(y)) => diff_at(child, x, y, ops),
                    (None, None) => {}
                }
            }
        }
        _ => ops.push(json!({"op": "replace", "path": path, "value": new})),
    }
}

/// Applies a patch produced by [`diff`] (add / remove / replace on object
/// members and the root). Used by tests and by callers checking a patch.
///
/// # Errors
/// When an op is malformed or its path does not exist.
pub fn apply(base: &Value, patch: &[Value]) -> Result<Value, String> {
    let mut doc = base.clone();
    for op in patch {
        let kind = op["op"].as_str().ok_or("op without a kind")?;
        let path = op["path"].as_str().ok_or("op without a path")?;
        if path.is_empty() {
            match kind {
                "replace" | "add" => doc = op["value"].clone(),
                _ => return Err("cannot remove the root".into()),
            }
            continue;
        }
        let tokens: Vec<String> = path[1..]
            .split('/')
            .map(|t| t.replace("~1", "/").replace("~0", "~"))
            .collect();
        let (last, parents) = tokens.split_last().ok_or("empty path")?;
        let mut target = &mut doc;
        for token in parents {
            target = target
                .get_mut(token.as_str())
                .ok_or_else(|| format!("no member {token} in {path}"))?;
        }
        let object: &mut Map<String, Value> = target
            .as_object_mut()
            .ok_or_else(|| format!("{path}: parent is not an object"))?;
        match kind {
            "add" | "replace" => {
                object.insert(last.clone(), op["value"].clone());
            }
            "remove" => {
                object
                    .remove(last)
                    .ok_or_else(|| format!("{path}: nothing to remove"))?;
            }
            other => return Err(format!("unsupported op {other}")),
        }
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn diff_rules() {
        let base = json!({"b": 1, "a": {"x": [1, 2], "y": "k"}, "gone": true, "s/l~": 1});
        let new = json!({"b": 2, "a": {"x": [1, 2, 3], "z": null}, "new": {"k": 1}, "s/l~": 2});
        let patch = diff(&base, &new);
        assert_eq!(
            patch,
            vec![
                json!({"op": "replace", "path": "/a/x", "value": [1, 2, 3]}),
                json!({"op": "remove", "path": "/a/y"}),
                json!({"op": "add", "path": "/a/z", "value": null}),
                json!({"op": "replace", "path": "/b", "value": 2}),
                json!({"op": "remove", "path": "/gone"}),
                json!({"op": "add", "path": "/new", "value": {"k": 1}}),
                json!({"op": "replace", "path": "/s~1l~0", "value": 2}),
            ]
        );
        assert_eq!(apply(&base, &patch).unwrap(), new);
        assert!(diff(&base, &base).is_empty());
        assert_eq!(
            diff(&json!(1), &json!([1])),
            vec![json!({"op": "replace", "path": "", "value": [1]})]
        );
    }

    #[test]
    fn validation_errors_are_sorted_pointers() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "string"}}}, "additionalProperties": false});
        let errors = validate(&schema, &json!({"b": ["x", 3], "a": "no", "c": 1})).unwrap();
        let paths: Vec<&str> = errors.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, vec!["", "/a", "/b/1"]);
        assert!(validate(&json!({"type": 12}), &json!(1)).is_err());
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-5i64..5).prop_map(|n| json!(n)),
            "[a-c/~]{0,3}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
                proptest::collection::btree_map("[a-d/~]{1,2}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Applying the patch to the base gives the new document, and the patch is sorted.
        #[test]
        fn patch_round_trips(base in arb_json(), new in arb_json()) {
            let patch = diff(&base, &new);
            prop_assert_eq!(apply(&base, &patch).unwrap(), new.clone());
            let paths: Vec<&str> = patch.iter().map(|op| op["path"].as_str().unwrap()).collect();
            let mut sorted = paths.clone();
            sorted.sort_unstable();
            prop_assert_eq!(paths, sorted);
            prop_assert_eq!(diff(&new, &new).len(), 0);
        }

        /// The same property under RFC 6902's own rules, checked independently of
        /// [`apply`]: parents are found with serde_json's RFC 6901 `pointer_mut`, and each
        /// op's precondition holds (`replace`/`remove` name an existing member, `add` a
        /// missing member of an existing object).
        #[test]
        fn patch_obeys_rfc6902(base in arb_json(), new in arb_json()) {
            let patch = diff(&base, &new);
            let mut doc = base.clone();
            for op in &patch {
                let kind = op["op"].as_str().unwrap();
                let path = op["path"].as_str().unwrap();
                if path.is_empty() {
                    prop_assert_eq!(kind, "replace");
                    doc = op["value"].clone();
                    continue;
                }
                let (parent, token) = path.rsplit_once('/').unwrap();
                let key = token.replace("~1", "/").replace("~0", "~");
                let exists = doc.pointer(path).is_some();
                let object = doc.pointer_mut(parent).and_then(Value::as_object_mut);
                prop_assert!(object.is_some(), "{} has no parent object", path);
                let object = object.unwrap();
                match kind {
                    "replace" => {
                        prop_assert!(exists, "replace of a missing {}", path);
                        object.insert(key, op["value"].clone());
                    }
                    "add" => {
                        prop_assert!(!exists, "add over an existing {}", path);
                        object.insert(key, op["value"].clone());
                    }
                    "remove" => {
                        prop_assert!(exists, "remove of a missing {}", path);
                        object.remove(&key);
                    }
                    other => prop_assert!(false, "unexpected op {}", other),
                }
            }
            prop_assert_eq!(doc, new);
        }
    }
}
