//! The typed arguments and results against the schemas the server publishes (issue 27
//! item 4, D150, D152): the recorded reports (the seed-000 acceptance fixture, a detailed
//! report with records; the golden aggregate report) read into the types and written back
//! byte for byte, a representative `simulate` result of each kind (no simulate payload is
//! recorded), and every value the types write passes the published schema.

mod units;

use std::path::PathBuf;

use reticle_eval::payload::{
    BackendSummary, CornerPrint, EpeSummary, GridSize, ImageFile, ImageFiles, MinMaxMean,
    ModelSummary, ResistSummary, SimulatedEpe, SimulatedLayout, SimulatedRegion, SimulationMetrics,
    SimulationResult, SimulationTiming, Statistics, TiledImaging, ViolationRecord, ViolationReport,
    WindowEpe, WindowNm,
};
use reticle_protocol::args::{EvaluateArgs, OptimizeArgs, SimulateArgs};
use reticle_protocol::files::FileRef;
use reticle_protocol::optimize_result::{
    ArtifactsDir, EvaluationSummary, Evaluations, IdResolution, IdStatus, RegionResult,
    RegionStateAfter, RegionTarget, Seams,
};
use reticle_protocol::schemas::{DOCUMENT_SCHEMAS, TOOL_SCHEMAS};
use serde_json::{Value, json};

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path)
}

fn read_json(path: &str) -> Value {
    let text = std::fs::read_to_string(repo(path)).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn tool_schema(tool: &str, output: bool) -> Value {
    let files = TOOL_SCHEMAS.iter().find(|s| s.tool == tool).unwrap();
    serde_json::from_str(if output { files.output } else { files.input }).unwrap()
}

fn document_schema(name: &str) -> Value {
    let file = DOCUMENT_SCHEMAS.iter().find(|s| s.name == name).unwrap();
    serde_json::from_str(file.text).unwrap()
}

/// `schema` with its root replaced by a reference to `$defs/<def>` (its other `$defs` kept).
fn def_of(schema: &Value, def: &str) -> Value {
    let mut root = schema.clone();
    let map = root.as_object_mut().unwrap();
    map.retain(|k, _| k == "$schema" || k == "$id" || k == "$defs");
    map.insert("$ref".into(), json!(format!("#/$defs/{def}")));
    root
}

fn assert_valid(schema: &Value, instance: &Value, what: &str) {
    let validator = jsonschema::validator_for(schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{what}: {errors:#?}");
}

/// The recorded reports: the acceptance fixture's (detailed, 100 records) and the golden
/// aggregate one.
fn recorded_reports() -> Vec<(&'static str, Value)> {
    let fixture = read_json("fixtures/mcp_acceptance/100x4tiles_12collisions.json");
    vec![
        ("acceptance fixture", fixture["evaluate"].clone()),
        (
            "golden aggregate",
            read_json("tests/golden/evaluate_lines_and_pad_iccad13_m1.aggregate.json"),
        ),
    ]
}

#[test]
fn recorded_reports_read_into_the_types_and_write_back_byte_for_byte() {
    for (what, recorded) in recorded_reports() {
        let report: ViolationReport = serde_json::from_value(recorded.clone())
            .unwrap_or_else(|e| panic!("{what} does not read as a ViolationReport: {e}"));
        assert_eq!(
            serde_json::to_string(&report).unwrap(),
            serde_json::to_string(&recorded).unwrap(),
            "{what}: the type writes other bytes than the recorded report"
        );
    }
}

#[test]
fn reports_and_records_pass_the_published_schemas() {
    let result = def_of(&tool_schema("evaluate", true), "result");
    let document = document_schema("violation_report");
    let violation = def_of(&document, "violation");
    let mut records = 0;
    for (what, recorded) in recorded_reports() {
        let report: ViolationReport = serde_json::from_value(recorded).unwrap();
        let written = serde_json::to_value(&report).unwrap();
        assert_valid(&result, &written, what);
        assert_valid(&document, &written, what);
        for record in report.violations.iter().flatten() {
            let written: Value = serde_json::to_value(record).unwrap();
            assert_valid(&violation, &written, what);
            let back: ViolationRecord = serde_json::from_value(written).unwrap();
            assert_eq!(&back, record);
            records += 1;
        }
    }
    assert!(records > 0, "the fixture's detailed report has records");
}

#[test]
fn typed_arguments_pass_the_input_schemas() {
    let evaluate: EvaluateArgs = serde_json::from_value(json!({
        "layout": "/data/chip.gds",
        "deck": "iccad13_m1",
        "layer": "1/0",
        "cell": "TOP",
        "box_um": [0.0, 0.0, 2.048, 2.048],
        "pixel_nm": 4,
        "model": {"period_nm": 2048},
        "report_level": "detailed",
        "tile_nm": 1024,
        "limits": {"max_violations": 10, "on_exceeded": "degrade_to_aggregate"},
        "tiling": "window",
        "wait": true,
    }))
    .unwrap();
    assert_valid(
        &tool_schema("evaluate", false),
        &serde_json::to_value(&evaluate).unwrap(),
        "evaluate arguments",
    );
    let minimal: EvaluateArgs =
        serde_json::from_value(json!({"layout": "a.glp", "deck": "iccad13_m1"})).unwrap();
    assert_eq!(
        serde_json::to_value(&minimal).unwrap(),
        json!({"layout": "a.glp", "deck": "iccad13_m1"})
    );
    let simulate: SimulateArgs = serde_json::from_value(json!({
        "layout": "/data/clip.glp",
        "layer": "1/0",
        "box_um": [0.0, 0.0, 2.048, 2.048],
        "pixel_nm": 2,
        "images": true,
        "tiling": "auto",
        "wait": false,
    }))
    .unwrap();
    assert_valid(
        &tool_schema("simulate", false),
        &serde_json::to_value(&simulate).unwrap(),
        "simulate arguments",
    );
}

/// A file as the worker describes one.
fn file_ref(path: &str) -> FileRef {
    FileRef {
        path: path.into(),
        sha256: "9e27c82b".repeat(8),
        bytes: 4096,
    }
}

/// `images` as `artifacts::image_files` writes them.
fn image_files(origin_px: Option<[i64; 2]>) -> ImageFiles {
    let image = |name: &str| ImageFile {
        npy: file_ref(&format!("/jobs/sim_1/{name}_nominal.npy")),
        png: file_ref(&format!("/jobs/sim_1/{name}_nominal.png")),
        png_scale: "grey = resist response 0..1".into(),
    };
    ImageFiles {
        corner: "nominal".into(),
        orientation: "row 0 of the .npy and the bottom row of the PNG are the bottom of the window"
            .into(),
        aerial: image("aerial"),
        resist: image("resist"),
        printed: image("printed"),
        origin_px,
    }
}

/// A representative one-window `simulate` result and a tiled one, with their images, and
/// one without.
fn simulation_results() -> Vec<(&'static str, SimulationResult)> {
    let statistics = Statistics {
        corner: "nominal".into(),
        aerial_intensity: Some(MinMaxMean {
            min: 0.01,
            max: 0.52,
            mean: 0.2,
        }),
        resist_response: Some(MinMaxMean {
            min: 0.0,
            max: 1.0,
            mean: 0.3,
        }),
        resist: ResistSummary {
            steepness: 50.0,
            threshold: 0.225,
        },
        printed_px: 1200,
        printed_area_nm2: 19200.0,
        target_px: 1250,
        target_area_nm2: 20000.0,
        pixel_area_nm2: 16.0,
        corners: ["nominal", "max", "min"]
            .iter()
            .map(|c| CornerPrint {
                corner: (*c).into(),
                printed_px: 1200,
                printed_area_nm2: 19200.0,
            })
            .collect(),
    };
    let window = SimulationResult {
        statistics: Some(statistics.clone()),
        images: Some(image_files(None)),
        schema_version: reticle_protocol::SCHEMA_VERSION.into(),
        layout: SimulatedLayout {
            path: "/data/clip.glp".into(),
            sha256: "9e27c82b".into(),
            format: "glp".into(),
            polygons_in_window: 6,
        },
        window_nm: WindowNm {
            left: -512.0,
            bottom: -512.0,
            right: 1536.0,
            top: 1536.0,
        },
        pixel_nm: 4.0,
        grid: GridSize {
            width: 512,
            height: 512,
        },
        model: ModelSummary {
            kind: "hopkins".into(),
            period_nm: 2048.0,
            focus_kernels: 24,
        },
        backend: BackendSummary {
            kind: "cpu".into(),
            adapter: "cpu (rayon, 2 threads)".into(),
        },
        metrics: SimulationMetrics {
            l2_px: Some(120),
            pvb_px: Some(300),
            epe: Some(SimulatedEpe::Window(WindowEpe {
                checkpoints: 40,
                violations: 2,
                max_abs_nm: Some(7.5),
            })),
        },
        timing_ms: SimulationTiming {
            imaging: Some(12.5),
            total: Some(20.1),
            merge: None,
        },
        region: None,
        imaging: None,
    };
    let tiled = SimulationResult {
        statistics: Some(statistics),
        images: Some(image_files(Some([-128, 0]))),
        metrics: SimulationMetrics {
            l2_px: Some(120),
            pvb_px: Some(300),
            epe: Some(SimulatedEpe::Tiled(EpeSummary {
                checkpoints: 40,
                violations: 2,
                mean_abs_nm: None,
                max_abs_nm: Some(7.5),
            })),
        },
        timing_ms: SimulationTiming {
            imaging: None,
            total: None,
            merge: Some(3.0),
        },
        region: Some(SimulatedRegion {
            source: "layer_bbox".into(),
            box_nm: [0.0, 0.0, 4096.0, 2048.0],
            pixels: 524_288,
        }),
        imaging: Some(TiledImaging {
            mode: "tiled".into(),
            period_nm: 2048.0,
            core_nm: 1536.0,
            halo_nm: 256.0,
            tiles: 6,
        }),
        ..window.clone()
    };
    let no_images = SimulationResult {
        images: None,
        ..window.clone()
    };
    vec![
        ("one window", window),
        ("tiled", tiled),
        ("no images", no_images),
    ]
}

#[test]
fn simulation_results_pass_the_published_schema_and_read_back() {
    let result = def_of(&tool_schema("simulate", true), "result");
    let validator = jsonschema::validator_for(&result).unwrap();
    for (what, value) in simulation_results() {
        let written = serde_json::to_value(&value).unwrap();
        assert_valid(&result, &written, what);
        if written["images"].is_object() {
            // The schema checks the files: a size that is not a number fails.
            let mut broken = written.clone();
            broken["images"]["printed"]["png"]["bytes"] = json!("4096");
            assert!(
                !validator.is_valid(&broken),
                "{what}: a malformed file passed"
            );
        }
        let back: SimulationResult = serde_json::from_value(written.clone()).unwrap();
        assert_eq!(back, value, "{what}");
        assert_eq!(
            serde_json::to_string(&back).unwrap(),
            serde_json::to_string(&written).unwrap(),
            "{what}"
        );
    }
}

#[test]
fn optimize_arguments_pass_the_input_schema() {
    let call: OptimizeArgs = serde_json::from_value(json!({
        "violation_ids": ["rv1:0123456789abcdef:fedcba9876543210:M1.W:1500:-2000:T_1_0:00112233aabbccdd:3"],
        "layout": "/data/gcd_45nm.gds",
        "deck": "nangate45_m1_litho",
        "layer": "11/0",
        "pixel_nm": 4,
        "mask_layer": "11/1",
        "iterations": 20,
        "mask_style": "manhattan",
        "scope": "group",
        "wait": true,
    }))
    .unwrap();
    assert_valid(
        &tool_schema("optimize", false),
        &serde_json::to_value(&call).unwrap(),
        "optimize arguments",
    );
}

/// A region result as the host builds it (the worker's parts as they answer them).
fn region_result() -> RegionResult {
    let file = |name: &str| json!({"path": format!("/jobs/opt_1/{name}"), "sha256": "ab12", "bytes": 1234});
    let summary = |dir: &str| EvaluationSummary {
        dir: dir.into(),
        counts: json!({"records": 40, "groups": 12}),
        metrics: json!({"l2_px": 100}),
        window_nm: json!({"left": 0, "bottom": 0, "right": 6000, "top": 6000}),
        layout: json!({"path": "/data/gcd_45nm.gds", "sha256": "9e27"}),
    };
    RegionResult {
        schema_version: reticle_protocol::SCHEMA_VERSION.into(),
        target: RegionTarget {
            mode: "violation_ids".into(),
            resolved_from: "session_cache".into(),
            violation_ids: Some(vec!["rv1:a".into(), "rv1:b".into()]),
            ids: Some(vec![
                IdStatus {
                    violation_id: "rv1:a".into(),
                    rule_id: "M1.W.1".into(),
                    status: IdResolution::Resolved,
                    resolved: Some(true),
                    group_id_before: Some("00112233aabbccdd".into()),
                },
                IdStatus {
                    violation_id: "rv1:b".into(),
                    rule_id: "M1.S.1".into(),
                    status: IdResolution::NotFound,
                    resolved: None,
                    group_id_before: None,
                },
            ]),
            box_um: Some([5.0, 5.0, 7.0, 7.0]),
            ..RegionTarget::default()
        },
        region_nm: json!([5000.0, 5000.0, 7000.0, 7000.0]),
        region_source: json!("box"),
        tiles: json!({"total": 4, "optimized": 4, "waves": [1, 1, 1, 1]}),
        ilt: json!({"l2_px": {"before": 10, "after": 5}, "mask_rule_violations_left": 0}),
        layout_out: json!({"path": "/jobs/opt_1/optimized.gds", "sha256": "ab12", "bytes": 1234,
                            "format": "gds", "mask_layer": "11/1"}),
        pictures: json!({"before": file("region_before.png"), "after": file("region_after.png")}),
        state_after: RegionStateAfter {
            layout: file_ref("/jobs/opt_1/optimized.gds"),
            mask_layer: json!("11/1"),
            region_before_png: file("region_before.png"),
            region_after_png: file("region_after.png"),
        },
        evaluated_box_um: [4.5, 4.5, 7.5, 7.5],
        evaluation: Evaluations {
            before: summary("/jobs/opt_1/before"),
            after: summary("/jobs/opt_1/after"),
        },
        changes: json!({"totals": {"before": 12, "after": 3, "resolved": 9, "remaining": 3,
                                   "new": 0, "new_near_seams": 0}}),
        seams: Seams {
            guarantee: "four waves".into(),
            new_near_seams: json!(0),
            put_back: json!({"reach_nm": 60.0, "squares_nm": [[5000.0, 5000.0, 5200.0, 5200.0]],
                             "rounds": [{"round": 1, "reach_nm": 60.0, "squares": 1, "dropped": 0,
                                         "new_near_seams": 0, "new": 0,
                                         "mask_rule_records_after": 0, "kept": true}]}),
        },
        artifacts: ArtifactsDir {
            dir: "/jobs/opt_1".into(),
        },
    }
}

#[test]
fn a_region_result_passes_the_published_schema_and_reads_back() {
    let schema = tool_schema("optimize", true);
    let value = region_result();
    let written = serde_json::to_value(&value).unwrap();
    assert_valid(&def_of(&schema, "region_result"), &written, "region result");
    assert_valid(&def_of(&schema, "result"), &written, "optimize result");
    let back: RegionResult = serde_json::from_value(written.clone()).unwrap();
    assert_eq!(back, value);
    assert_eq!(
        serde_json::to_string(&back).unwrap(),
        serde_json::to_string(&written).unwrap()
    );
    // The schema checks the ids' statuses: a status that is not a boolean or null fails.
    let mut broken = written;
    broken["target"]["ids"][0]["resolved"] = json!("yes");
    let validator = jsonschema::validator_for(&def_of(&schema, "region_result")).unwrap();
    assert!(
        !validator.is_valid(&broken),
        "a malformed id status passed the schema"
    );
}
