//! Input normalization (libmcp doctrine, seed 004): spellings an agent plausibly uses
//! are rewritten to the canonical ones *before* schema validation, and only where the
//! rewrite is unambiguous. What is rewritten (docs/DECISIONS.md D35):
//!
//! - **Field aliases** ([`ALIASES`]): an alias applies to a tool only when the tool's
//!   schema has the canonical field and does not itself define the alias (so `box` is an
//!   alias of `box_um` for `simulate` but stays `query_region`'s own field). Giving an
//!   alias *and* its canonical field is `INVALID_INPUT` naming both: we never guess.
//! - **Integer-like strings** for fields the schema types as `integer` only (`"100"` →
//!   `100`, also inside nested objects): plain decimal digits with an optional `-`, no
//!   spaces, no fractions, no units. Anything else is left for the schema to refuse.
//! - **Paths**: in the fields that name files ([`PATH_FIELDS`]), a `file://` URI becomes
//!   its local path and a leading `~` the home directory. Confinement to the allowed
//!   roots happens afterwards, on the normalized path, as before.
//! - **`null`** for an optional field is removed first: it means "use the default"
//!   (seed 002; [`super::nullable`], D71).

use reticle_protocol::{ErrorCode, ToolError};
use serde_json::{Map, Value, json};

/// `(alias, canonical candidates)`: the first candidate the tool's schema has wins.
pub const ALIASES: &[(&str, &[&str])] = &[
    ("path", &["layout"]),
    ("file", &["layout", "path"]),
    ("layout_path", &["layout", "path"]),
    ("box", &["box_um"]),
    ("level", &["report_level"]),
    ("report", &["report_level"]),
    ("session", &["session_id"]),
    ("job", &["job_id"]),
    ("id", &["job_id"]),
    ("schema_name", &["name"]),
    ("document", &["asset"]),
    ("old", &["base"]),
    ("before", &["base"]),
    ("after", &["new"]),
    ("script", &["script_path"]),
    ("top", &["top_cell"]),
];

/// Fields holding a filesystem path, by tool (`*`: every tool that has the field).
pub const PATH_FIELDS: &[(&str, &str)] = &[
    ("*", "layout"),
    ("*", "script_path"),
    ("evaluate", "deck"),
    ("optimize", "deck"),
    ("open_layout", "path"),
];

/// Normalizes `args` for the tool named `tool` with input schema `schema`.
///
/// # Errors
/// `INVALID_INPUT` when an alias and its canonical field are both given.
/// A leading `~` in a path field becomes `home` (the host's `HOME`, when it has one).
pub fn normalize(
    tool: &str,
    schema: &Value,
    args: &mut Map<String, Value>,
    home: Option<&std::ffi::OsStr>,
) -> Result<(), ToolError> {
    // `null` for an optional field is its absence (seed 002), before anything else.
    super::nullable::drop_nulls(schema, args);
    let properties = schema.get("properties").and_then(Value::as_object);
    if let Some(properties) = properties {
        apply_aliases(properties, args)?;
    }
    integer_strings(schema, args);
    for (owner, field) in PATH_FIELDS {
        if (*owner == "*" || *owner == tool)
            && properties.is_some_and(|p| p.contains_key(*field))
            && let Some(Value::String(raw)) = args.get(*field)
            && let Some(path) = local_path(raw, home)
        {
            args.insert((*field).to_owned(), Value::String(path));
        }
    }
    Ok(())
}

fn apply_aliases(
    properties: &Map<String, Value>,
    args: &mut Map<String, Value>,
) -> Result<(), ToolError> {
    for (alias, candidates) in ALIASES {
        if properties.contains_key(*alias) || !args.contains_key(*alias) {
            continue;
        }
        let Some(canonical) = candidates.iter().find(|c| properties.contains_key(**c)) else {
            continue;
        };
        if args.contains_key(*canonical) {
            return Err(ToolError::new(
                ErrorCode::InvalidInput,
                format!("both `{canonical}` and its alias `{alias}` are given; keep one"),
            )
            .with_details(json!({"field": canonical, "alias": alias}))
            .recoverable(true));
        }
        if let Some(value) = args.remove(*alias) {
            args.insert((*canonical).to_owned(), value);
        }
    }
    Ok(())
}

/// Whether `schema` admits integers and not strings.
fn integer_only(schema: &Value) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == "integer",
        Some(Value::Array(types)) => {
            types.iter().any(|t| t == "integer") && !types.iter().any(|t| t == "string")
        }
        _ => false,
    }
}

fn integer_strings(schema: &Value, args: &mut Map<String, Value>) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, value) in args.iter_mut() {
        let Some(field) = properties.get(name) else {
            continue;
        };
        match value {
            Value::String(text) if integer_only(field) => {
                if let Some(number) = integer_like(text) {
                    *value = number;
                }
            }
            Value::Object(inner) => integer_strings(field, inner),
            _ => {}
        }
    }
}

/// `"100"` → `100`, `"-3"` → `-3`; `None` for anything else (`" 1"`, `"1.0"`, `"1e3"`).
fn integer_like(text: &str) -> Option<Value> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if let Ok(n) = text.parse::<i64>() {
        return Some(json!(n));
    }
    text.parse::<u64>().ok().map(|n| json!(n))
}

/// A `file://` URI or a `~` path as a local path; `None` when `raw` is neither (or the
/// URI is not a local one: the confinement check then reports the raw value).
fn local_path(raw: &str, home: Option<&std::ffi::OsStr>) -> Option<String> {
    if raw.starts_with("file://") {
        return libmcp::normalize_local_path(raw, None)
            .ok()
            .map(|p| p.display().to_string());
    }
    if raw == "~" || raw.starts_with("~/") {
        let expanded = crate::confine::expand_home(raw, home);
        return (expanded != raw).then_some(expanded);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "layout": {"type": "string"},
            "box_um": {"type": "object"},
            "report_level": {"enum": ["aggregate", "detailed"]},
            "pixel_nm": {"type": "number"},
            "max_shapes": {"type": "integer"},
            "tag": {"type": ["integer", "string"]},
            "limits": {"type": "object", "properties": {"max_violations": {"type": "integer"}}},
        }})
    }

    const HOME: &str = "/home/tester";

    fn run(args: Value) -> Result<Value, ToolError> {
        let Value::Object(mut args) = args else {
            unreachable!()
        };
        // The home directory is handed in (the host's `Config`), never read here.
        let home = std::ffi::OsStr::new(HOME);
        normalize("simulate", &schema(), &mut args, Some(home)).map(|()| Value::Object(args))
    }

    #[test]
    fn aliases_integer_strings_and_paths_are_normalized() {
        let out = run(json!({
            "path": "file:///data/a%20b.gds",
            "box": {"x": 1},
            "level": "detailed",
            "max_shapes": "100",
            "tag": "7",
            "pixel_nm": "8",
            "limits": {"max_violations": "25"},
        }))
        .unwrap();
        assert_eq!(
            out,
            json!({
                "layout": "/data/a b.gds",
                "box_um": {"x": 1},
                "report_level": "detailed",
                "max_shapes": 100,
                "tag": "7",
                "pixel_nm": "8",
                "limits": {"max_violations": 25},
            })
        );
        let out = run(json!({"layout": "~/x.gds"})).unwrap();
        assert_eq!(out["layout"], format!("{HOME}/x.gds"));
    }

    #[test]
    fn ambiguous_input_is_left_alone_or_refused() {
        // Not integer-like: left for the schema to refuse.
        for raw in ["1.5", " 1", "1e3", "", "-", "ten"] {
            assert_eq!(run(json!({"max_shapes": raw})).unwrap()["max_shapes"], raw);
        }
        // An alias next to its canonical field is an error naming both.
        let err = run(json!({"layout": "/a.gds", "path": "/b.gds"})).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidInput);
        assert!(err.message.contains("`layout`") && err.message.contains("`path`"));
        // A field the schema defines is never treated as an alias.
        let query =
            json!({"type": "object", "properties": {"box": {"type": "object"}, "box_um": {}}});
        let mut args = Map::new();
        args.insert("box".into(), json!({"left": 0}));
        normalize("query_region", &query, &mut args, None).unwrap();
        assert!(args.contains_key("box") && !args.contains_key("box_um"));
        // A relative path stays relative (open_layout refuses it by contract).
        assert_eq!(run(json!({"layout": "a.gds"})).unwrap()["layout"], "a.gds");
    }
}
