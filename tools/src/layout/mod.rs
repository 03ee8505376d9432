//! Seed 003's layout observer tools: sessions (`open_layout`, `close_session`), queries
//! (`list_cells`, `describe_cell`, `list_layers`, `query_region`, `measure_geometry`,
//! `analyze_waveguide`), views (`set_view`, `render_view`) and DRC (`run_drc_script`,
//! `extract_markers`, in [`drc`]).
//!
//! The host owns the sessions ([`crate::sessions`]) and writes every artifact; the layout
//! bytes are parsed by a worker op (`layout.*`, `drc.*`) that receives the session's path
//! and sha256 and keeps parsed layouts in a cache. Calls are synchronous (no job id): they
//! wait for their worker through the dispatcher, under the same replay rules as the job
//! tools (every query is Convergent; a run stopped over a limit is not replayed).

mod drc;

use std::collections::BTreeMap;
use std::path::Path;

use libmcp::ReplayContract;
use reticle_protocol::{ErrorCode, SCHEMA_VERSION, ToolError};
use serde_json::{Map, Value, json};

use super::{PayloadResult, Tool, ToolContext, ToolDef, ToolShared};
use crate::sessions::{SessionInfo, write_artifact};
use reticle_dispatch::ProbeOutcome;
/// Default `render_view` image size (seed 003's example).
const DEFAULT_IMAGE: (u64, u64) = (1200, 800);

/// Every layout tool.
pub(super) fn tools() -> Vec<Tool> {
    let mut tools = vec![
        Tool::new(ToolDef {
            name: "open_layout",
            title: "Open a layout",
            description: "Opens a GDSII or OASIS layout (absolute path inside the allowed roots; \
                          format gds, gdsii, oas or oasis, else inferred from the extension) and \
                          returns a session_id for the other layout tools, with the selected top \
                          cell (top_cell, else the alphabetically first top cell), all top cells, \
                          dbu, the bounding box and the artifact directory. Sessions expire after \
                          an idle TTL; close_session frees them.",
            replay: ReplayContract::Convergent,
            read_only: true,
            handler: open_layout,
            porcelain: None,
        }),
        Tool::new(ToolDef {
            name: "close_session",
            title: "Close a layout session",
            description: "Closes a session from open_layout and deletes its artifact directory \
                          (renders, DRC runs). Closing an unknown session answers closed: false.",
            replay: ReplayContract::ProbeRequired,
            read_only: false,
            handler: close_session,
            porcelain: None,
        })
        .with_probe(close_session_probe),
        Tool::new(ToolDef {
            name: "list_cells",
            title: "List cells",
            description: "Lists the session layout's cells sorted by name, each with is_top, \
                          bounding box (um and dbu), child instance count and own shape count. \
                          With max_depth, only cells the session's top cell reaches within that \
                          many levels (0 = the top cell alone). At most max_cells (default \
                          1000) cells; truncation says how many were left out.",
            replay: ReplayContract::Convergent,
            read_only: true,
            handler: list_cells,
            porcelain: None,
        }),
        Tool::new(ToolDef {
            name: "describe_cell",
            title: "Describe a cell",
            description: "Describes one cell (default: the session's top cell): bounding box, \
                          instances down to `depth` levels (name, child_cell, array, transform, \
                          bbox), its texts, and shape counts per layer (own and flattened).",
            replay: ReplayContract::Convergent,
            read_only: true,
            handler: describe_cell,
            porcelain: None,
        }),
        Tool::new(ToolDef {
            name: "list_layers",
            title: "List layers",
            description: "Lists the layout's layers sorted by layer then datatype, with names \
                          (OASIS) and the number of shapes each has in the flattened top cell. \
                          At most max_layers (default 1000); truncation says how many were left \
                          out.",
            replay: ReplayContract::Convergent,
            read_only: true,
            handler: list_layers,
            porcelain: None,
        }),
        Tool::new(ToolDef {
            name: "query_region",
            title: "Query shapes in a box",
            description: "Lists the shapes, instances and texts meeting a box (microns) of a cell \
                          (default: the session's top cell), optionally on some layers. \
                          hierarchy_mode: top (the cell's own shapes), recursive (every level, \
                          with instance paths; default) or flattened. Shape ids (shp_…) are the \
                          targets of measure_geometry, analyze_waveguide and render_view \
                          annotations. Limits: max_shapes (default 200), max_instances (100), \
                          max_texts; `truncation` says what they left out.",
            replay: ReplayContract::Convergent,
            read_only: true,
            handler: query_region,
            porcelain: None,
        }),
        Tool::new(ToolDef {
            name: "measure_geometry",
            title: "Measure shapes",
            description: "Measures shapes by the ids query_region returned in this session. \
                          Modes (targets): path_width (1), segment_length (1), \
                          bend_radius_estimate (1), centerline_distance (2), edge_gap (2), \
                          overlap (2; area in um^2 and dbu^2), label_distance (2; a text and a \
                          shape or text), port_spacing (2). Returns value_um, value_dbu and the \
                          method used.",
            replay: ReplayContract::Convergent,
            read_only: true,
            handler: measure_geometry,
            porcelain: None,
        }),
        Tool::new(ToolDef {
            name: "analyze_waveguide",
            title: "Analyze a waveguide path",
            description: "Analyzes one path shape (an id from query_region in this session): width, \
                          centre-line length, bend radius estimate, orientation, axis alignment, \
                          bbox and centre. Non-path targets are INVALID_TARGET.",
            replay: ReplayContract::Convergent,
            read_only: true,
            handler: analyze_waveguide,
            porcelain: None,
        }),
        Tool::new(ToolDef {
            name: "set_view",
            title: "Set the session view",
            description: "Validates and stores the session's view (cell, box in microns, layers); \
                          render_view uses it for the fields it is not given. Without a box the \
                          view is the cell's bounding box.",
            replay: ReplayContract::Convergent,
            read_only: false,
            handler: set_view,
            porcelain: None,
        }),
        Tool::new(ToolDef {
            name: "render_view",
            title: "Render a view to PNG",
            description: "Renders a box of a cell to a PNG under the session's artifact directory \
                          and returns its absolute path. Fields not given come from set_view, \
                          then from the session's top cell and its bounding box. style: light \
                          (default), dark or mask (binary, white shapes on black). annotations: \
                          {kind: shape_outline, target_ids, color} or {kind: box, box, color}. \
                          Identical requests give byte-identical files (render_id is a hash of \
                          the image).",
            replay: ReplayContract::Convergent,
            read_only: false,
            handler: render_view,
            porcelain: None,
        }),
    ];
    tools.extend(drc::tools());
    tools
}

/// `args[key]` as a string (schemas guarantee types; absent → empty).
pub(crate) fn str_arg<'a>(args: &'a Map<String, Value>, key: &str) -> &'a str {
    args.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// The session named by `session_id`, after sweeping expired sessions.
pub(crate) fn session(
    ctx: &ToolContext,
    args: &Map<String, Value>,
) -> Result<SessionInfo, ToolError> {
    ctx.scope.sessions.get(str_arg(args, "session_id"))
}

/// Runs one worker op for this call (a synchronous unit, ids `lay_<uuid>.<run>`) and
/// returns its JSON result. The dispatcher applies the same replay rules as for the job
/// tools: a worker that died is replaced and the op run again (Convergent, 3 runs at
/// most); a run stopped over a memory or time limit fails once, typed, not replayed.
pub(crate) async fn run_op(
    ctx: &ToolContext,
    op: &str,
    args: Value,
    artifact_dir: Option<&Path>,
) -> PayloadResult {
    let unit = ctx
        .unit(op, &args)
        .with_artifact_dir(artifact_dir.map(|d| d.display().to_string()));
    ctx.dispatcher.run(&ctx.call_scope("lay"), unit).await
}

/// `payload` as an object with `schema_version` and `session_id` first.
pub(crate) fn with_session(session_id: &str, payload: Value) -> Value {
    let mut out = Map::new();
    out.insert("schema_version".into(), json!(SCHEMA_VERSION));
    out.insert("session_id".into(), json!(session_id));
    if let Value::Object(m) = payload {
        for (k, v) in m {
            out.entry(k).or_insert(v);
        }
    }
    Value::Object(out)
}

/// The seed's format names → the canonical one.
fn format_name(name: &str) -> Option<&'static str> {
    match name.to_ascii_lowercase().as_str() {
        "gds" | "gdsii" => Some("gds"),
        "oas" | "oasis" => Some("oasis"),
        _ => None,
    }
}

async fn open_layout(ctx: ToolContext, args: Map<String, Value>) -> PayloadResult {
    ctx.scope.sessions.sweep();
    ctx.scope.sessions.check_capacity()?;
    let raw = str_arg(&args, "path");
    if !Path::new(raw).is_absolute() {
        return Err(ToolError::new(
            ErrorCode::InvalidInput,
            format!("path must be absolute, got {raw:?}"),
        )
        .with_details(json!({"path": raw})));
    }
    let path = ctx.scope.roots.resolve_read(raw)?;
    let format = match args.get("format").and_then(Value::as_str) {
        Some(f) => format_name(f).ok_or_else(|| {
            ToolError::new(
                ErrorCode::UnsupportedFormat,
                format!("unsupported format {f:?}: use gds, gdsii, oas or oasis"),
            )
            .with_details(json!({"format": f, "supported": ["gds", "gdsii", "oas", "oasis"]}))
        })?,
        None => path
            .extension()
            .and_then(|e| e.to_str())
            .and_then(format_name)
            .ok_or_else(|| {
                ToolError::new(
                    ErrorCode::UnsupportedFormat,
                    "cannot infer the format from the extension (.gds, .gdsii, .oas, .oasis); give `format`",
                )
                .with_details(json!({"path": path, "supported": ["gds", "gdsii", "oas", "oasis"]}))
            })?,
    };
    let mut op_args = json!({"layout": {"path": path, "format": format}});
    if let Some(top) = args.get("top_cell") {
        op_args["top_cell"] = top.clone();
    }
    let summary = run_op(&ctx, "layout.open", op_args, None).await?;
    let sha256 = summary["sha256"].as_str().unwrap_or_default().to_owned();
    let top_cell = summary["selected_top_cell"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let source = json!({"path": path, "format": format, "sha256": sha256});
    let record = json!({
        "source": source,
        "selected_top_cell": top_cell,
        "top_cells": summary["top_cells"],
        "dbu": summary["dbu"],
    });
    let info = ctx
        .scope
        .sessions
        .create(path.clone(), format, sha256, top_cell, &record)?;
    Ok(json!({
        "schema_version": SCHEMA_VERSION,
        "session_id": info.id,
        "source": source,
        "selected_top_cell": summary["selected_top_cell"],
        "top_cells": summary["top_cells"],
        "dbu": summary["dbu"],
        "bbox_um": summary["bbox_um"],
        "bbox_dbu": summary["bbox_dbu"],
        "layer_count": summary["layer_count"],
        "artifact_root": info.dir,
        "ttl_seconds": ctx.scope.sessions.ttl().as_secs(),
    }))
}

async fn close_session(ctx: ToolContext, args: Map<String, Value>) -> PayloadResult {
    let id = str_arg(&args, "session_id");
    let (closed, deleted) = ctx.scope.sessions.close(id);
    Ok(json!({
        "schema_version": SCHEMA_VERSION,
        "session_id": id,
        "closed": closed,
        "artifact_dir_deleted": deleted,
        "state_after": ctx.scope.sessions.state(id),
    }))
}

/// The probe of `close_session` (ProbeRequired, seed 004): after a call was interrupted
/// (a reexec took it in flight), did its close take effect? A session this host (or the
/// image before) closed: yes, and this is the call's answer. A live session: no, closing
/// it again is safe. An id never known: running the call again answers `closed: false`,
/// the right answer, so that is safe too.
pub(crate) fn close_session_probe(shared: &ToolShared, args: &Map<String, Value>) -> ProbeOutcome {
    let sessions = &shared.scope.sessions;
    let id = str_arg(args, "session_id");
    if sessions.is_live(id) || !sessions.was_closed(id) {
        return ProbeOutcome::SafeToReplay;
    }
    let deleted = sessions
        .root()
        .map(|root| !root.join("sessions").join(id).exists())
        .unwrap_or(true);
    ProbeOutcome::AlreadyCompleted(json!({
        "schema_version": SCHEMA_VERSION,
        "session_id": id,
        "closed": true,
        "artifact_dir_deleted": deleted,
        "state_after": sessions.state(id),
    }))
}

async fn list_cells(ctx: ToolContext, args: Map<String, Value>) -> PayloadResult {
    let s = session(&ctx, &args)?;
    let mut op = json!({"layout": s.layout_ref(), "cell": s.top_cell});
    if let Some(d) = args.get("max_depth") {
        op["max_depth"] = d.clone();
    }
    if let Some(max) = args.get("max_cells") {
        op["max_cells"] = max.clone();
    }
    let out = run_op(&ctx, "layout.list_cells", op, None).await?;
    Ok(with_session(&s.id, out))
}

async fn describe_cell(ctx: ToolContext, args: Map<String, Value>) -> PayloadResult {
    let s = session(&ctx, &args)?;
    let cell = args
        .get("cell")
        .and_then(Value::as_str)
        .unwrap_or(&s.top_cell);
    let mut op = json!({"layout": s.layout_ref(), "cell": cell});
    if let Some(d) = args.get("depth") {
        op["depth"] = d.clone();
    }
    let out = run_op(&ctx, "layout.describe_cell", op, None).await?;
    Ok(with_session(&s.id, out))
}

async fn list_layers(ctx: ToolContext, args: Map<String, Value>) -> PayloadResult {
    let s = session(&ctx, &args)?;
    let mut op = json!({"layout": s.layout_ref(), "cell": s.top_cell});
    if let Some(max) = args.get("max_layers") {
        op["max_layers"] = max.clone();
    }
    let out = run_op(&ctx, "layout.list_layers", op, None).await?;
    Ok(with_session(&s.id, out))
}

async fn query_region(ctx: ToolContext, mut args: Map<String, Value>) -> PayloadResult {
    let s = session(&ctx, &args)?;
    args.remove("session_id");
    args.entry("cell").or_insert_with(|| json!(s.top_cell));
    let op = json!({"layout": s.layout_ref(), "request": args});
    let mut out = run_op(&ctx, "layout.query_region", op, None).await?;
    let locators: BTreeMap<String, Value> = match out["locators"].take() {
        Value::Object(m) => m.into_iter().collect(),
        _ => BTreeMap::new(),
    };
    ctx.scope.sessions.record_locators(&s.id, locators);
    Ok(with_session(&s.id, out["payload"].take()))
}

fn id_list(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

async fn measure_geometry(ctx: ToolContext, args: Map<String, Value>) -> PayloadResult {
    let s = session(&ctx, &args)?;
    let ids = id_list(args.get("target_ids"));
    let locators = ctx.scope.sessions.locators(&s.id, &ids)?;
    let op = json!({
        "layout": s.layout_ref(),
        "mode": args.get("mode"),
        "target_ids": ids,
        "locators": locators,
    });
    let out = run_op(&ctx, "layout.measure", op, None).await?;
    Ok(with_session(&s.id, out))
}

async fn analyze_waveguide(ctx: ToolContext, args: Map<String, Value>) -> PayloadResult {
    let s = session(&ctx, &args)?;
    let id = str_arg(&args, "target_id").to_owned();
    let locators = ctx
        .scope
        .sessions
        .locators(&s.id, std::slice::from_ref(&id))?;
    let op = json!({"layout": s.layout_ref(), "target_id": id, "locators": locators});
    let out = run_op(&ctx, "layout.analyze_waveguide", op, None).await?;
    Ok(with_session(&s.id, out))
}

/// The view fields of a call, completed from the stored view and the session's top cell.
fn view_fields(s: &SessionInfo, args: &Map<String, Value>) -> (Value, Value, Value) {
    let stored = s.view.clone().unwrap_or(Value::Null);
    let cell = args
        .get("cell")
        .cloned()
        .or_else(|| stored.get("cell").cloned())
        .unwrap_or_else(|| json!(s.top_cell));
    let same_cell = stored.get("cell") == Some(&cell);
    let pick = |key: &str, stored_key: &str| {
        args.get(key).cloned().unwrap_or_else(|| {
            if same_cell {
                stored.get(stored_key).cloned().unwrap_or(Value::Null)
            } else {
                Value::Null
            }
        })
    };
    (cell, pick("box", "box_um"), pick("layers", "layers"))
}

async fn set_view(ctx: ToolContext, args: Map<String, Value>) -> PayloadResult {
    let s = session(&ctx, &args)?;
    let cell = args
        .get("cell")
        .cloned()
        .unwrap_or_else(|| json!(s.top_cell));
    let op = json!({
        "layout": s.layout_ref(),
        "cell": cell,
        "box": args.get("box").cloned().unwrap_or(Value::Null),
        "layers": args.get("layers").cloned().unwrap_or(Value::Null),
    });
    let view = run_op(&ctx, "layout.set_view", op, None).await?;
    ctx.scope.sessions.set_view(&s.id, view.clone());
    Ok(
        json!({"schema_version": SCHEMA_VERSION, "session_id": s.id, "view": view,
              "state_after": ctx.scope.sessions.state(&s.id)}),
    )
}

async fn render_view(ctx: ToolContext, args: Map<String, Value>) -> PayloadResult {
    let s = session(&ctx, &args)?;
    let (cell, box_um, layers) = view_fields(&s, &args);
    let annotations = args
        .get("annotations")
        .cloned()
        .unwrap_or_else(|| json!([]));
    let ids: Vec<String> = annotations
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|a| id_list(a.get("target_ids")))
        .collect();
    let locators = ctx.scope.sessions.locators(&s.id, &ids)?;
    let size = args.get("image_size");
    let dim = |k: &str, d: u64| {
        size.and_then(|v| v.get(k))
            .and_then(Value::as_u64)
            .unwrap_or(d)
    };
    let op = json!({
        "layout": s.layout_ref(),
        "cell": cell,
        "box": box_um,
        "layers": layers,
        "width": dim("width", DEFAULT_IMAGE.0),
        "height": dim("height", DEFAULT_IMAGE.1),
        "style": args.get("style").cloned().unwrap_or_else(|| json!("light")),
        "annotations": annotations,
        "locators": locators,
    });
    let out = run_op(&ctx, "layout.render", op, None).await?;
    let png = decode_png(&out["png_base64"])?;
    let render_id = out["render_id"].as_str().unwrap_or_default();
    let path = write_artifact(&s.dir.join("renders"), &format!("{render_id}.png"), &png)
        .map_err(|e| ToolError::new(ErrorCode::RenderFailed, e.message))?;
    Ok(json!({
        "schema_version": SCHEMA_VERSION,
        "session_id": s.id,
        "render_id": render_id,
        "cell": cell,
        "box_um": out["box_um"],
        "image": {"kind": "render", "path": path, "media_type": "image/png"},
        "width": out["width"],
        "height": out["height"],
        "style": out["style"],
        "bytes": png.len(),
    }))
}

/// Decodes a PNG a worker sent as base64, checking the signature.
pub(crate) fn decode_png(v: &Value) -> Result<Vec<u8>, ToolError> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(v.as_str().unwrap_or_default())
        .map_err(|e| {
            ToolError::new(
                ErrorCode::RenderFailed,
                format!("bad image from the worker: {e}"),
            )
        })?;
    if !bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Err(ToolError::new(
            ErrorCode::RenderFailed,
            "the worker's image is not a PNG",
        ));
    }
    Ok(bytes)
}
