//! `run_drc_script` and `extract_markers`: KLayout batch DRC on a copy of the session
//! layout, in `sessions/<id>/drc/<run_id>/`.
//!
//! The host creates the run directory, copies the layout there (checking its sha256
//! against the session's), resolves `KLAYOUT_BIN` to an absolute path and confines the
//! script path; a worker op runs KLayout (argument vector, explicit environment, `-rd`
//! parameters) and parses the `.lyrdb`; the host writes `markers.json` and the crops.

use std::path::{Path, PathBuf};

use libmcp::ReplayContract;
use reticle_protocol::{ErrorCode, SCHEMA_VERSION, ToolError};
use serde_json::{Map, Value, json};

use super::{decode_png, run_op, session, str_arg};
use crate::sessions::write_artifact;
use crate::{PayloadResult, Tool, ToolContext, ToolDef};
use reticle_config::names::KLAYOUT_BIN_ENV;

/// Most markers `extract_markers` lists by default.
const DEFAULT_MAX_MARKERS: u64 = 1000;
/// Most crops one `extract_markers` call renders.
const MAX_CROPS: u64 = 200;

pub(super) fn tools() -> Vec<Tool> {
    vec![
        Tool::new(ToolDef {
            name: "run_drc_script",
            title: "Run a KLayout DRC deck",
            description: "Runs a KLayout DRC deck (absolute script_path inside the allowed roots; \
                          .drc/.lydrc/.rb = ruby, .py = python) in KLayout batch mode on a copy \
                          of the session layout. The deck reads the copy with `source($input)` \
                          and writes its report with `report(\"…\", $report)`; each params entry \
                          NAME: value arrives as the global $NAME (a string). Returns the run_id \
                          (for extract_markers), KLayout's return code, the marker count per \
                          rule and the report artifacts. KLayout missing or failing, or no \
                          report written: DRC_RUN_FAILED.",
            replay: ReplayContract::Convergent,
            read_only: false,
            handler: run_drc_script,
            porcelain: None,
        }),
        Tool::new(ToolDef {
            name: "extract_markers",
            title: "Extract DRC markers",
            description: "Lists the markers of a run_drc_script run (parsed from its .lyrdb): rule, \
                          cell and box in microns, in report order, up to max_markers (default \
                          1000). With include_crops, renders a PNG crop of crop_size_um (default \
                          20x20 um) centred on each marker (at most 200) with the marker outlined, \
                          under the run's crops/ directory.",
            replay: ReplayContract::Convergent,
            read_only: false,
            handler: extract_markers,
            porcelain: None,
        }),
    ]
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    use std::fmt::Write as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .fold(String::with_capacity(64), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

fn drc_failed(message: impl Into<String>, details: Value) -> ToolError {
    ToolError::new(ErrorCode::DrcRunFailed, message).with_details(details)
}

/// `KLAYOUT_BIN` (default `klayout`) as an absolute path: a bare name is looked up on the
/// host's `PATH`.
fn klayout_bin(config: &reticle_config::Config) -> Result<PathBuf, ToolError> {
    let configured = config.tools.klayout_bin.clone();
    let not_found = || {
        drc_failed(
            format!(
                "KLayout is not installed or not found: {configured:?} (install KLayout or set {KLAYOUT_BIN_ENV})"
            ),
            json!({"klayout_bin": configured, "reason": "klayout_not_found"}),
        )
    };
    let candidate = PathBuf::from(&configured);
    if candidate.components().count() > 1 || candidate.is_absolute() {
        return if candidate.is_file() {
            Ok(candidate)
        } else {
            Err(not_found())
        };
    }
    config
        .process
        .path
        .iter()
        .flat_map(|p| std::env::split_paths(p).collect::<Vec<_>>())
        .map(|dir| dir.join(&configured))
        .find(|p| p.is_file())
        .ok_or_else(not_found)
}

fn script_type(path: &Path, given: Option<&str>) -> Result<&'static str, ToolError> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let inferred = match ext.as_str() {
        "drc" | "lydrc" | "rb" => Some("ruby"),
        "py" => Some("python"),
        _ => None,
    };
    match (given, inferred) {
        (Some(g), Some(i)) if g == i => Ok(i),
        (None, Some(i)) => Ok(i),
        (g, i) => Err(ToolError::new(
            ErrorCode::InvalidInput,
            "KLayout picks the interpreter from the script's extension: .drc, .lydrc or .rb for ruby, .py for python",
        )
        .with_details(json!({"script_path": path, "script_type": g, "inferred": i}))),
    }
}

async fn run_drc_script(ctx: ToolContext, args: Map<String, Value>) -> PayloadResult {
    let s = session(&ctx, &args)?;
    let raw = str_arg(&args, "script_path");
    if !Path::new(raw).is_absolute() {
        return Err(ToolError::new(
            ErrorCode::InvalidInput,
            format!("script_path must be absolute, got {raw:?}"),
        ));
    }
    let script = ctx.scope.roots.resolve_read(raw)?;
    let kind = script_type(&script, args.get("script_type").and_then(Value::as_str))?;
    let bin = klayout_bin(ctx.state.config())?;
    let (run_id, dir) = ctx.scope.sessions.new_drc_run(&s)?;
    let copy_name = if s.format == "oasis" {
        "layout.oas"
    } else {
        "layout.gds"
    };
    let bytes = tokio::fs::read(&s.path).await.map_err(|e| {
        ToolError::new(
            ErrorCode::FileNotFound,
            format!("cannot read the session layout: {e}"),
        )
    })?;
    if sha256_hex(&bytes) != s.sha256 {
        return Err(ToolError::new(
            ErrorCode::FileNotFound,
            "the layout file changed since open_layout (its sha256 differs); open it again",
        )
        .with_details(json!({"path": s.path})));
    }
    let copy = write_artifact(&dir, copy_name, &bytes)?;
    let timeout_s = ctx.state.config().tools.drc_timeout.as_secs();
    let op = json!({
        "klayout_bin": bin,
        "script_path": script,
        "layout_copy": copy,
        "params": args.get("params").cloned().unwrap_or_else(|| json!({})),
        "timeout_s": timeout_s,
    });
    let out = run_op(&ctx, "drc.run", op, Some(&dir)).await?;
    let markers_json = json!({
        "schema_version": SCHEMA_VERSION,
        "session_id": s.id,
        "run_id": run_id,
        "marker_count": out["marker_count"],
        "rule_counts": out["rule_counts"],
        "markers": out["markers"],
    });
    let markers_path = write_artifact(
        &dir,
        "markers.json",
        &serde_json::to_vec_pretty(&markers_json).unwrap_or_default(),
    )?;
    let artifact = |kind: &str, path: PathBuf, media: &str| json!({"kind": kind, "path": path, "media_type": media});
    Ok(json!({
        "schema_version": SCHEMA_VERSION,
        "session_id": s.id,
        "run_id": run_id,
        "script_path": script,
        "script_type": kind,
        "return_code": out["return_code"],
        "marker_count": out["marker_count"],
        "rule_counts": out["rule_counts"],
        "artifacts": [
            artifact("drc_report", dir.join("report.lyrdb"), "application/octet-stream"),
            artifact("markers", markers_path, "application/json"),
            artifact("layout", copy, "application/octet-stream"),
            artifact("stdout", dir.join("stdout.txt"), "text/plain"),
            artifact("stderr", dir.join("stderr.txt"), "text/plain"),
        ],
        "state_after": ctx.scope.sessions.state(&s.id),
    }))
}

async fn extract_markers(ctx: ToolContext, args: Map<String, Value>) -> PayloadResult {
    let s = session(&ctx, &args)?;
    let run_id = str_arg(&args, "run_id").to_owned();
    let dir = ctx.scope.sessions.drc_run(&s, &run_id)?;
    let include_crops = args
        .get("include_crops")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let crop = args.get("crop_size_um");
    let side = |k: &str| {
        crop.and_then(|c| c.get(k))
            .and_then(Value::as_f64)
            .unwrap_or(20.0)
    };
    let max_markers = args
        .get("max_markers")
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_MAX_MARKERS);
    let op = json!({
        "layout": s.layout_ref(),
        "cell": s.top_cell,
        "report": dir.join("report.lyrdb"),
        "include_crops": include_crops,
        "crop_size_um": [side("x"), side("y")],
        "max_markers": max_markers,
        "max_crops": MAX_CROPS,
    });
    let mut out = run_op(&ctx, "drc.markers", op, Some(&dir)).await?;
    let mut markers = Vec::new();
    for mut m in out["markers"]
        .as_array_mut()
        .map(std::mem::take)
        .unwrap_or_default()
    {
        let index = m["index"].as_u64().unwrap_or(0);
        if let Some(b64) = m.get_mut("crop_png_base64").map(Value::take) {
            let png = decode_png(&b64)?;
            let path = write_artifact(&dir.join("crops"), &format!("marker_{index:04}.png"), &png)?;
            m["crop"] = json!({"kind": "render", "path": path, "media_type": "image/png"});
        }
        if let Value::Object(o) = &mut m {
            o.remove("crop_png_base64");
        }
        markers.push(m);
    }
    Ok(json!({
        "schema_version": SCHEMA_VERSION,
        "session_id": s.id,
        "run_id": run_id,
        "marker_count": out["marker_count"],
        "markers": markers,
        "truncation": out["truncation"],
    }))
}
