//! The layout observer ops (seed 003): parse a session's layout (cached by sha256) and run
//! one query of `reticle_layout::observe` on it.
//!
//! The host owns sessions: every op receives the session's layout as `{path, sha256,
//! format}` plus whatever the host remembers for it (the locators of shape ids it handed
//! out), so a fresh worker answers exactly as the one before it did. Nothing here is
//! authoritative; the cache only saves re-parsing.

use std::collections::BTreeMap;

use base64::Engine as _;
use reticle_layout::Library;
use reticle_layout::observe::cells::{cell_by_name, describe_cell, layout_summary, list_cells};
use reticle_layout::observe::layers::list_layers;
use reticle_layout::observe::measure::{MeasureMode, analyze_waveguide, measure_geometry};
use reticle_layout::observe::region::{
    QueryBudget, RegionRequest, ShapeLocator, query_region, resolve_ids,
};
use reticle_layout::observe::render::{
    Annotation, RenderSpec, RenderStyle, render_view, resolve_annotations, set_view,
};
use reticle_layout::observe::{MicronBox, ObserveError, ObservedLayer};
use reticle_protocol::error::{ErrorCode, ToolError};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::attempt::AttemptCtx;
use crate::layouts::{LayoutRef, load, observe_error};
use crate::op::{Op, OpResult, parse_args, payload};

fn ok<T: serde::Serialize>(value: &T) -> Result<Value, ToolError> {
    serde_json::to_value(value)
        .map_err(|e| ToolError::new(ErrorCode::InternalError, format!("serialize: {e}")))
}

/// One observer op: a name and a function.
pub struct LayoutOp {
    name: &'static str,
    run: fn(&AttemptCtx<'_>, &str) -> Result<Value, ToolError>,
}

impl Op for LayoutOp {
    fn name(&self) -> &'static str {
        self.name
    }

    fn run(&self, ctx: &AttemptCtx<'_>, args_json: &str) -> OpResult {
        (self.run)(ctx, args_json).and_then(payload)
    }
}

/// `layout.open`: parse, hash, apply the top-cell rule, summarize.
pub static OPEN: LayoutOp = LayoutOp {
    name: "layout.open",
    run: open,
};
/// `layout.list_cells`.
pub static LIST_CELLS: LayoutOp = LayoutOp {
    name: "layout.list_cells",
    run: op_list_cells,
};
/// `layout.describe_cell`.
pub static DESCRIBE_CELL: LayoutOp = LayoutOp {
    name: "layout.describe_cell",
    run: op_describe_cell,
};
/// `layout.list_layers`.
pub static LIST_LAYERS: LayoutOp = LayoutOp {
    name: "layout.list_layers",
    run: op_list_layers,
};
/// `layout.query_region`: the payload plus a locator per listed id.
pub static QUERY_REGION: LayoutOp = LayoutOp {
    name: "layout.query_region",
    run: op_query_region,
};
/// `layout.measure`.
pub static MEASURE: LayoutOp = LayoutOp {
    name: "layout.measure",
    run: op_measure,
};
/// `layout.analyze_waveguide`.
pub static ANALYZE_WAVEGUIDE: LayoutOp = LayoutOp {
    name: "layout.analyze_waveguide",
    run: op_analyze,
};
/// `layout.set_view`.
pub static SET_VIEW: LayoutOp = LayoutOp {
    name: "layout.set_view",
    run: op_set_view,
};
/// `layout.render`: PNG bytes (base64) for the host to store.
pub static RENDER: LayoutOp = LayoutOp {
    name: "layout.render",
    run: op_render,
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OpenArgs {
    layout: LayoutRef,
    #[serde(default)]
    top_cell: Option<String>,
}

fn open(ctx: &AttemptCtx<'_>, args_json: &str) -> Result<Value, ToolError> {
    let args: OpenArgs = parse_args("layout.open", args_json)?;
    let (lib, sha) = load(ctx, &args.layout)?;
    let summary = layout_summary(&lib, args.top_cell.as_deref()).map_err(|e| observe_error(&e))?;
    let mut out = ok(&summary)?;
    out["sha256"] = json!(sha);
    Ok(out)
}

/// Default `max_cells` / `max_layers` of `list_cells` / `list_layers`.
pub const DEFAULT_MAX_LIST: usize = 1000;
/// Most `max_cells` / `max_layers` a call may ask for (above: `TOOL_LIMIT_EXCEEDED`).
pub const MAX_LIST: usize = 10_000;

/// `items` cut to `max` (default [`DEFAULT_MAX_LIST`]), with seed 003's truncation
/// metadata (always present, zero drops included): `(kept, truncation)`.
fn bounded<T>(
    mut items: Vec<T>,
    max: Option<usize>,
    what: &'static str,
) -> Result<(Vec<T>, Value), ToolError> {
    let max = max.unwrap_or(DEFAULT_MAX_LIST);
    if max > MAX_LIST {
        return Err(observe_error(&ObserveError::ToolLimitExceeded {
            what,
            requested: max as u64,
            max: MAX_LIST as u64,
        }));
    }
    let total = items.len();
    items.truncate(max);
    let dropped = total - items.len();
    let truncation = json!({
        format!("{what}_dropped"): dropped,
        "truncated": dropped > 0,
        "returned": items.len(),
        "total": total,
        format!("max_{what}"): max,
    });
    Ok((items, truncation))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CellsArgs {
    layout: LayoutRef,
    cell: String,
    #[serde(default)]
    max_depth: Option<u32>,
    #[serde(default)]
    max_cells: Option<usize>,
}

fn op_list_cells(ctx: &AttemptCtx<'_>, args_json: &str) -> Result<Value, ToolError> {
    let args: CellsArgs = parse_args("layout.list_cells", args_json)?;
    let (lib, _) = load(ctx, &args.layout)?;
    let root = cell_by_name(&lib, &args.cell).map_err(|e| observe_error(&e))?;
    let cells = list_cells(&lib, root, args.max_depth).map_err(|e| observe_error(&e))?;
    let (cells, truncation) = bounded(cells, args.max_cells, "cells")?;
    Ok(json!({"dbu": lib.dbu_um(), "cells": ok(&cells)?, "truncation": truncation}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DescribeArgs {
    layout: LayoutRef,
    cell: String,
    #[serde(default)]
    depth: Option<u32>,
}

fn op_describe_cell(ctx: &AttemptCtx<'_>, args_json: &str) -> Result<Value, ToolError> {
    let args: DescribeArgs = parse_args("layout.describe_cell", args_json)?;
    let (lib, _) = load(ctx, &args.layout)?;
    let d = describe_cell(&lib, &args.cell, args.depth).map_err(|e| observe_error(&e))?;
    let mut out = ok(&d)?;
    out["dbu"] = json!(lib.dbu_um());
    Ok(out)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LayersArgs {
    layout: LayoutRef,
    cell: String,
    #[serde(default)]
    max_layers: Option<usize>,
}

fn op_list_layers(ctx: &AttemptCtx<'_>, args_json: &str) -> Result<Value, ToolError> {
    let args: LayersArgs = parse_args("layout.list_layers", args_json)?;
    let (lib, _) = load(ctx, &args.layout)?;
    let root = cell_by_name(&lib, &args.cell).map_err(|e| observe_error(&e))?;
    let layers = list_layers(&lib, root).map_err(|e| observe_error(&e))?;
    let (layers, truncation) = bounded(layers, args.max_layers, "layers")?;
    Ok(json!({"dbu": lib.dbu_um(), "layers": ok(&layers)?, "truncation": truncation}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QueryRegionArgs {
    layout: LayoutRef,
    request: Value,
}

fn op_query_region(ctx: &AttemptCtx<'_>, args_json: &str) -> Result<Value, ToolError> {
    let args: QueryRegionArgs = parse_args("layout.query_region", args_json)?;
    let request: RegionRequest = serde_json::from_value(args.request).map_err(|e| {
        ToolError::new(
            ErrorCode::InvalidInput,
            format!("invalid query_region request: {e}"),
        )
    })?;
    let (lib, _) = load(ctx, &args.layout)?;
    let out =
        query_region(&lib, &request, &QueryBudget::default()).map_err(|e| observe_error(&e))?;
    Ok(json!({"payload": ok(&out.payload)?, "locators": ok(&out.locators)?}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MeasureArgs {
    layout: LayoutRef,
    mode: MeasureMode,
    target_ids: Vec<String>,
    locators: BTreeMap<String, ShapeLocator>,
}

fn op_measure(ctx: &AttemptCtx<'_>, args_json: &str) -> Result<Value, ToolError> {
    let args: MeasureArgs = parse_args("layout.measure", args_json)?;
    let (lib, _) = load(ctx, &args.layout)?;
    let targets =
        resolve_ids(&lib, &args.target_ids, &args.locators).map_err(|e| observe_error(&e))?;
    let m = measure_geometry(&lib, args.mode, &targets).map_err(|e| observe_error(&e))?;
    ok(&m)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AnalyzeArgs {
    layout: LayoutRef,
    target_id: String,
    locators: BTreeMap<String, ShapeLocator>,
}

fn op_analyze(ctx: &AttemptCtx<'_>, args_json: &str) -> Result<Value, ToolError> {
    let args: AnalyzeArgs = parse_args("layout.analyze_waveguide", args_json)?;
    let (lib, _) = load(ctx, &args.layout)?;
    let targets = resolve_ids(&lib, std::slice::from_ref(&args.target_id), &args.locators)
        .map_err(|e| observe_error(&e))?;
    let w = analyze_waveguide(&lib, &targets[0]).map_err(|e| observe_error(&e))?;
    ok(&w)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ViewArgs {
    layout: LayoutRef,
    cell: String,
    #[serde(rename = "box")]
    box_um: Option<MicronBox>,
    #[serde(default)]
    layers: Option<Vec<ObservedLayer>>,
}

/// The box of a view: the caller's, else the cell's bounding box.
fn view_box(lib: &Library, cell: &str, b: Option<MicronBox>) -> Result<MicronBox, ToolError> {
    if let Some(b) = b {
        return Ok(b);
    }
    let ci = cell_by_name(lib, cell).map_err(|e| observe_error(&e))?;
    let boxes =
        reticle_layout::observe::boxes::CellBoxes::new(lib).map_err(|e| observe_error(&e))?;
    let bb = boxes.cell(ci).ok_or_else(|| {
        ToolError::new(
            ErrorCode::InvalidBox,
            format!("cell {cell:?} is empty; give a box"),
        )
    })?;
    Ok(MicronBox::from_dbu(&bb, lib.dbu_um()))
}

fn op_set_view(ctx: &AttemptCtx<'_>, args_json: &str) -> Result<Value, ToolError> {
    let args: ViewArgs = parse_args("layout.set_view", args_json)?;
    let (lib, _) = load(ctx, &args.layout)?;
    let b = view_box(&lib, &args.cell, args.box_um)?;
    let v =
        set_view(&lib, &args.cell, &b, args.layers.as_deref()).map_err(|e| observe_error(&e))?;
    ok(&v)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RenderArgs {
    layout: LayoutRef,
    cell: String,
    #[serde(rename = "box")]
    box_um: Option<MicronBox>,
    #[serde(default)]
    layers: Option<Vec<ObservedLayer>>,
    width: u32,
    height: u32,
    #[serde(default)]
    style: RenderStyle,
    #[serde(default)]
    annotations: Vec<Annotation>,
    #[serde(default)]
    locators: BTreeMap<String, ShapeLocator>,
}

fn op_render(ctx: &AttemptCtx<'_>, args_json: &str) -> Result<Value, ToolError> {
    let args: RenderArgs = parse_args("layout.render", args_json)?;
    let (lib, _) = load(ctx, &args.layout)?;
    let b = view_box(&lib, &args.cell, args.box_um)?;
    let notes = resolve_annotations(&lib, &args.annotations, &args.locators)
        .map_err(|e| observe_error(&e))?;
    let spec = RenderSpec {
        cell: args.cell.clone(),
        box_um: b,
        layers: args.layers,
        width: args.width,
        height: args.height,
        style: args.style,
        max_shapes: ctx.context.limits.max_shapes,
    };
    let r = render_view(&lib, &spec, &notes).map_err(|e| observe_error(&e))?;
    let grid = b.to_dbu(lib.dbu_um()).map_err(|e| observe_error(&e))?;
    Ok(json!({
        "render_id": r.render_id,
        "box_um": MicronBox::from_dbu(&grid, lib.dbu_um()),
        "width": r.width,
        "height": r.height,
        "style": args.style,
        "png_base64": base64::engine::general_purpose::STANDARD.encode(&r.png),
    }))
}
