//! `null` means "use the default" (seed 002: optional parameters use `null` rather than
//! absence, and the engine applies the documented default). Two halves (D71):
//!
//! - [`publish`]: the input schema `tools/list` publishes: every optional property (not
//!   in its object's `required`, at any depth of nested objects and of the objects in
//!   lists) also admits `null`, and
//!   the schema's description says what `null` means.
//! - [`drop_nulls`]: before validation, an optional property given as `null` is removed
//!   from the arguments, so the handler sees exactly what an absent field gives: the
//!   default. A required field given as `null` is kept, and the schema refuses it (there
//!   is no default to use); an unknown field given as `null` is kept too, and refused as
//!   unknown (a typo stays an error).

use serde_json::{Map, Value, json};

/// The sentence appended to a published input schema's description.
pub const NULL_NOTE: &str = "Optional fields accept null, meaning: use the default.";

/// The published form of the input schema `schema`: optional properties also admit `null`.
pub fn publish(schema: &Value) -> Value {
    let mut schema = schema.clone();
    nullable_properties(&mut schema);
    if let Some(object) = schema.as_object_mut() {
        let description = match object.get("description").and_then(Value::as_str) {
            Some(text) if !text.contains(NULL_NOTE) => format!("{text} {NULL_NOTE}"),
            Some(text) => text.to_owned(),
            None => NULL_NOTE.to_owned(),
        };
        object.insert("description".into(), Value::String(description));
    }
    schema
}

fn required(schema: &Map<String, Value>) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn nullable_properties(schema: &mut Value) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    // The objects of a list have optional fields too.
    if let Some(items) = object.get_mut("items") {
        nullable_properties(items);
    }
    let required: Vec<String> = required(object).into_iter().map(str::to_owned).collect();
    let Some(Value::Object(properties)) = object.get_mut("properties") else {
        return;
    };
    for (name, property) in properties.iter_mut() {
        nullable_properties(property);
        if !required.iter().any(|r| r == name) {
            admit_null(property);
        }
    }
}

/// Makes `property` admit `null` as well as what it admitted.
fn admit_null(property: &mut Value) {
    let Some(object) = property.as_object_mut() else {
        return;
    };
    let null = json!("null");
    let mut typed = false;
    match object.get_mut("type") {
        Some(Value::String(t)) => {
            let t = std::mem::take(t);
            object.insert("type".into(), json!([t, "null"]));
            typed = true;
        }
        Some(Value::Array(types)) => {
            if !types.contains(&null) {
                types.push(null);
            }
            typed = true;
        }
        _ => {}
    }
    if let Some(Value::Array(values)) = object.get_mut("enum") {
        if !values.contains(&Value::Null) {
            values.push(Value::Null);
        }
        return;
    }
    let has_null_branch = object
        .get("anyOf")
        .and_then(Value::as_array)
        .is_some_and(|branches| branches.iter().any(|b| b == &json!({"type": "null"})));
    if !typed && !has_null_branch {
        // No `type` to widen (`const`, combinators): say it with `anyOf`.
        let description = object.remove("description");
        let inner = Value::Object(std::mem::take(object));
        object.insert("anyOf".into(), json!([inner, {"type": "null"}]));
        if let Some(description) = description {
            object.insert("description".into(), description);
        }
    }
}

/// Removes the optional properties of `args` (per `schema`, at any depth of nested
/// objects and of the objects in lists) whose value is `null`.
pub fn drop_nulls(schema: &Value, args: &mut Map<String, Value>) {
    let Some(object) = schema.as_object() else {
        return;
    };
    let required = required(object);
    let Some(properties) = object.get("properties").and_then(Value::as_object) else {
        return;
    };
    args.retain(|name, value| {
        !(value.is_null() && properties.contains_key(name) && !required.contains(&name.as_str()))
    });
    for (name, value) in args.iter_mut() {
        let Some(property) = properties.get(name) else {
            continue;
        };
        match value {
            Value::Object(inner) => drop_nulls(property, inner),
            Value::Array(list) => {
                if let Some(items) = property.get("items") {
                    for item in list.iter_mut().filter_map(Value::as_object_mut) {
                        drop_nulls(items, item);
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "description": "d", "required": ["layout"], "properties": {
            "layout": {"type": "string"},
            "pixel_nm": {"type": "number"},
            "tag": {"type": ["integer", "string"]},
            "report_level": {"enum": ["aggregate", "detailed"]},
            "odd": {"const": 3, "description": "c"},
            "limits": {"type": "object", "required": ["a"], "properties": {
                "a": {"type": "integer"}, "b": {"type": "integer"}}},
            "layers": {"type": "array", "items": {"type": "object", "required": ["layer"],
                "properties": {"layer": {"type": "integer"}, "name": {"type": "string"}}}},
        }})
    }

    #[test]
    fn optional_properties_admit_null_at_every_depth_and_required_ones_do_not() {
        let published = publish(&schema());
        let p = &published["properties"];
        assert_eq!(p["layout"]["type"], "string");
        assert_eq!(p["pixel_nm"]["type"], json!(["number", "null"]));
        assert_eq!(p["tag"]["type"], json!(["integer", "string", "null"]));
        assert_eq!(
            p["report_level"]["enum"],
            json!(["aggregate", "detailed", null])
        );
        assert_eq!(p["odd"]["anyOf"][1], json!({"type": "null"}));
        assert_eq!(p["odd"]["description"], "c");
        assert_eq!(p["limits"]["type"], json!(["object", "null"]));
        assert_eq!(p["limits"]["properties"]["a"]["type"], "integer");
        assert_eq!(
            p["limits"]["properties"]["b"]["type"],
            json!(["integer", "null"])
        );
        assert!(
            published["description"]
                .as_str()
                .unwrap()
                .ends_with(NULL_NOTE)
        );
        let validator = jsonschema::validator_for(&published).unwrap();
        assert!(validator.is_valid(&json!({"layout": "x", "odd": null, "report_level": null})));
        assert!(!validator.is_valid(&json!({"layout": null})));
        assert_eq!(
            publish(&published),
            published,
            "publishing twice changes nothing"
        );
    }

    #[test]
    fn optional_nulls_are_dropped_required_and_unknown_ones_kept() {
        let Value::Object(mut args) = json!({
            "layout": null, "pixel_nm": null, "typo": null, "tag": 3,
            "limits": {"a": null, "b": null},
            "layers": [{"layer": 1, "name": null}, {"layer": null}],
        }) else {
            unreachable!()
        };
        drop_nulls(&schema(), &mut args);
        assert_eq!(
            Value::Object(args),
            json!({"layout": null, "typo": null, "tag": 3, "limits": {"a": null},
                   "layers": [{"layer": 1}, {"layer": null}]})
        );
    }
}
