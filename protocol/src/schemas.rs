//! The JSON Schemas of every public tool, compiled into the binary.
//!
//! The files live in `protocol/schemas/` so that reviewers, clients and the
//! `get_schema` tool all read the same bytes. Request schemas set
//! `additionalProperties: false` (a typo is an error); response schemas allow
//! unknown properties so that minor versions can add fields.

/// The input and output schema of one tool, as JSON text.
#[derive(Debug, Clone, Copy)]
pub struct ToolSchemaFiles {
    /// Tool name, as listed in `tools/list`.
    pub tool: &'static str,
    /// JSON Schema (draft 2020-12) of the tool's arguments.
    pub input: &'static str,
    /// JSON Schema (draft 2020-12) of the tool's successful `structuredContent`.
    pub output: &'static str,
}

macro_rules! tool_schemas {
    ($($tool:literal),* $(,)?) => {
        /// Every tool's schema files, sorted by tool name.
        pub const TOOL_SCHEMAS: &[ToolSchemaFiles] = &[
            $(ToolSchemaFiles {
                tool: $tool,
                input: include_str!(concat!("../schemas/", $tool, ".input.json")),
                output: include_str!(concat!("../schemas/", $tool, ".output.json")),
            }),*
        ];
    };
}

tool_schemas![
    "analyze_waveguide",
    "cancel",
    "close_session",
    "describe_cell",
    "diff_assets",
    "evaluate",
    "extract_markers",
    "get_example",
    "get_schema",
    "health",
    "list_cells",
    "list_examples",
    "list_layers",
    "list_schemas",
    "measure_geometry",
    "open_layout",
    "optimize",
    "poll",
    "populate_backend",
    "query_region",
    "render_view",
    "run_drc_script",
    "set_view",
    "simulate",
    "telemetry",
    "validate_asset",
    "violations",
];

/// A published schema of a document (not a tool's arguments or result).
#[derive(Debug, Clone, Copy)]
pub struct DocumentSchemaFile {
    /// Catalogue name (`get_schema`).
    pub name: &'static str,
    /// Path relative to the repository root.
    pub path: &'static str,
    /// The JSON text.
    pub text: &'static str,
}

/// Document schemas: the violation report (seed 000 §2), the rule deck, and the seed 000
/// acceptance fixture.
pub const DOCUMENT_SCHEMAS: &[DocumentSchemaFile] = &[
    DocumentSchemaFile {
        name: "acceptance_fixture",
        path: "protocol/schemas/acceptance_fixture.json",
        text: include_str!("../schemas/acceptance_fixture.json"),
    },
    DocumentSchemaFile {
        name: "rule_deck",
        path: "protocol/schemas/rule_deck.json",
        text: include_str!("../schemas/rule_deck.json"),
    },
    DocumentSchemaFile {
        name: "violation_report",
        path: "protocol/schemas/violation_report.json",
        text: include_str!("../schemas/violation_report.json"),
    },
];

/// One shipped example document: `$schema` names the schema it follows.
#[derive(Debug, Clone, Copy)]
pub struct ExampleFile {
    /// Path relative to the repository root.
    pub path: &'static str,
    /// The JSON text.
    pub text: &'static str,
}

macro_rules! examples {
    ($($file:literal),* $(,)?) => {
        /// Every shipped example, sorted by path.
        pub const EXAMPLES: &[ExampleFile] = &[
            $(ExampleFile {
                path: concat!("protocol/examples/", $file),
                text: include_str!(concat!("../examples/", $file)),
            }),*
        ];
    };
}

examples!["health-request.json", "poll-request.json"];

/// The schema files of `tool`, if it exists.
#[must_use]
pub fn tool_schemas(tool: &str) -> Option<&'static ToolSchemaFiles> {
    TOOL_SCHEMAS.iter().find(|files| files.tool == tool)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_is_json_and_requests_are_closed() {
        let mut names: Vec<&str> = TOOL_SCHEMAS.iter().map(|f| f.tool).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted, "TOOL_SCHEMAS must stay sorted by name");
        names.dedup();
        assert_eq!(names.len(), TOOL_SCHEMAS.len(), "duplicate tool");
        for files in TOOL_SCHEMAS {
            let input: serde_json::Value = serde_json::from_str(files.input)
                .unwrap_or_else(|e| panic!("{}.input.json: {e}", files.tool));
            let output: serde_json::Value = serde_json::from_str(files.output)
                .unwrap_or_else(|e| panic!("{}.output.json: {e}", files.tool));
            assert_eq!(input["type"], "object", "{}", files.tool);
            assert_eq!(
                input["additionalProperties"], false,
                "{}: request schemas must be closed",
                files.tool
            );
            assert_eq!(output["type"], "object", "{}", files.tool);
            assert!(
                output["required"]
                    .as_array()
                    .is_some_and(|r| r.iter().any(|v| v == "schema_version")),
                "{}: every payload carries schema_version",
                files.tool
            );
        }
    }

    #[test]
    fn a_job_tool_output_schema_lists_the_finished_payload_at_the_top_level() {
        for tool in ["evaluate", "optimize", "simulate"] {
            let files = tool_schemas(tool).unwrap();
            let output: serde_json::Value = serde_json::from_str(files.output).unwrap();
            let result = &output["$defs"]["result"];
            // One shape, or a choice of shapes (optimize: one window's or a region's).
            let shapes: Vec<&serde_json::Value> = match result["anyOf"].as_array() {
                Some(choices) => choices
                    .iter()
                    .map(|c| {
                        let at = c["$ref"].as_str().expect("a choice is a $ref");
                        output.pointer(&at[1..]).expect("the $ref resolves")
                    })
                    .collect(),
                None => vec![result],
            };
            for shape in shapes {
                let required = shape["required"].as_array().unwrap();
                assert!(required.len() > 3, "{tool}: a finished payload has fields");
                for (name, schema) in shape["properties"].as_object().unwrap() {
                    let top = &output["properties"][name];
                    let listed = top == schema
                        || top["anyOf"]
                            .as_array()
                            .is_some_and(|choices| choices.contains(schema));
                    assert!(
                        listed,
                        "{tool}: top-level property {name} must be (one of) the finished payload's"
                    );
                }
            }
            let finished = output["anyOf"].as_array().unwrap();
            assert!(
                finished.iter().any(|v| v["$ref"] == "#/$defs/finished"),
                "{tool}"
            );
        }
    }
}
