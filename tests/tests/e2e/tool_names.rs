//! Tool names as agents spell them (issue 30 item 6, seed 004 method-token normalization,
//! D134): respellings reach the one tool they fold to, with its name in telemetry; an
//! unknown name is refused as before.

use reticle_tests::Host;
use serde_json::{Value, json};

/// The structured content of a successful `CallToolResult`.
fn structured(result: &Value) -> &Value {
    assert_eq!(result["isError"], false, "{result}");
    &result["structuredContent"]
}

#[test]
fn respelled_tool_names_reach_their_tool_and_count_under_its_name() {
    let mut host = Host::start_initialized(&[]);
    let canonical = host.call_tool("c", "list_schemas", json!({"render": "json"}));
    let schemas = structured(&canonical).clone();
    assert!(
        schemas.as_object().is_some_and(|o| !o.is_empty()),
        "{canonical}"
    );
    for (id, spelling) in [
        ("a", "listSchemas"),
        ("b", "list-schemas"),
        ("d", "List_Schemas"),
        ("e", "LIST SCHEMAS"),
    ] {
        let answer = host.call_tool(id, spelling, json!({"render": "json"}));
        assert_eq!(structured(&answer), &schemas, "{spelling}: {answer}");
    }
    let unknown = host.request(
        json!("u"),
        "tools/call",
        json!({"name": "list_schema", "arguments": {}}),
    );
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert!(
        unknown["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Unknown tool: list_schema")),
        "{unknown}"
    );

    let telemetry = host.call_tool("t", "telemetry", json!({"render": "json"}));
    let methods = structured(&telemetry)["methods"]
        .as_array()
        .unwrap()
        .clone();
    let count = |key: &str| {
        methods
            .iter()
            .find(|m| m["method"] == key)
            .map_or(0, |m| m["count"].as_u64().unwrap())
    };
    assert_eq!(count("tools/call:list_schemas"), 5, "{methods:?}");
    for spelling in [
        "listSchemas",
        "list-schemas",
        "List_Schemas",
        "LIST SCHEMAS",
    ] {
        assert_eq!(count(&format!("tools/call:{spelling}")), 0, "{methods:?}");
    }
    let (status, _) = host.close_and_wait();
    assert!(status.success(), "{status:?}");
}
