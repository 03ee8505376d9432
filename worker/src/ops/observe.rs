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
use reticle_layout::observe::cells::{
    CellDescription, CellEntry, LayoutSummary, cell_by_name, describe_cell, layout_summary,
    list_cells,
};
use reticle_layout::observe::layers::{LayerEntry, list_layers};
use reticle_layout::observe::measure::{
    MeasureMode, MeasurePayload, WaveguidePayload, analyze_waveguide, measure_geometry,
};
use reticle_layout::observe::region::{
    QueryBudget, RegionOutcome, RegionRequest, ShapeLocator, query_region, resolve_ids,
};
use reticle_layout::observe::render::{
    Annotation, RenderSpec, RenderStyle, View, render_view, resolve_annotations, set_view,
};
use reticle_layout::observe::{MicronBox, ObserveError, ObservedLayer};
use reticle_protocol::error::{ErrorCode, ToolError};
use serde::de::DeserializeOwned;
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use crate::attempt::AttemptCtx;
use crate::layouts::{LayoutRef, load, observe_error};
use crate::op::{Op, OpResult, parse_args};

/// The arguments of an observer op: each names the session's layout.
trait OnLayout: DeserializeOwned {
    /// The layout the op reads.
    fn layout(&self) -> &LayoutRef;
}

/// Implements [`OnLayout`] for argument types with a `layout` field.
macro_rules! on_layout {
    ($($args:ty),+) => {
        $(impl OnLayout for $args {
            fn layout(&self) -> &LayoutRef {
                &self.layout
            }
        })+
    };
}

/// One observer op: its name and the query it runs, with arguments `A`, on the parsed
/// layout (and its sha256), answering the Rust type `R` the op's result is serialized from.
struct LayoutOp<A, R> {
    name: &'static str,
    query: fn(Query<'_, A>) -> Result<R, ToolError>,
}

/// What an observer query gets: the attempt, the parsed layout, its sha256, the arguments.
struct Query<'a, A> {
    ctx: &'a AttemptCtx<'a>,
    lib: &'a Library,
    sha256: String,
    args: A,
}

impl<A: OnLayout, R: Serialize + Send + 'static> Op for LayoutOp<A, R> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn run(&self, ctx: &AttemptCtx<'_>, args_json: &str) -> OpResult {
        let args: A = parse_args(self.name, args_json)?;
        let (lib, sha) = load(ctx, args.layout())?;
        let result = (self.query)(Query {
            ctx,
            lib: &lib,
            sha256: sha,
            args,
        })?;
        Ok(Box::new(result))
    }
}

/// Declares observer ops as statics: `NAME = "op.name" => query;`.
macro_rules! layout_ops {
    ($($(#[$doc:meta])* $id:ident = $name:literal => $query:ident;)+) => {
        $($(#[$doc])* pub static $id: &dyn Op = &LayoutOp { name: $name, query: $query };)+
    };
}

layout_ops! {
    /// `layout.open`: parse, hash, apply the top-cell rule, summarize.
    OPEN = "layout.open" => open;
    /// `layout.list_cells`.
    LIST_CELLS = "layout.list_cells" => op_list_cells;
    /// `layout.describe_cell`.
    DESCRIBE_CELL = "layout.describe_cell" => op_describe_cell;
    /// `layout.list_layers`.
    LIST_LAYERS = "layout.list_layers" => op_list_layers;
    /// `layout.query_region`: the payload plus a locator per listed id.
    QUERY_REGION = "layout.query_region" => op_query_region;
    /// `layout.measure`.
    MEASURE = "layout.measure" => op_measure;
    /// `layout.analyze_waveguide`.
    ANALYZE_WAVEGUIDE = "layout.analyze_waveguide" => op_analyze;
    /// `layout.set_view`.
    SET_VIEW = "layout.set_view" => op_set_view;
    /// `layout.render`: PNG bytes (base64) for the host to store.
    RENDER = "layout.render" => op_render;
}

on_layout!(
    OpenArgs,
    CellsArgs,
    DescribeArgs,
    LayersArgs,
    QueryRegionArgs,
    MeasureArgs,
    AnalyzeArgs,
    ViewArgs,
    RenderArgs
);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OpenArgs {
    layout: LayoutRef,
    #[serde(default)]
    top_cell: Option<String>,
}

/// `layout.open`'s answer: the summary, then the file's sha256.
#[derive(Serialize)]
struct Opened {
    #[serde(flatten)]
    summary: LayoutSummary,
    sha256: String,
}

fn open(
    Query {
        lib, args, sha256, ..
    }: Query<'_, OpenArgs>,
) -> Result<Opened, ToolError> {
    let summary = layout_summary(lib, args.top_cell.as_deref()).map_err(|e| observe_error(&e))?;
    Ok(Opened { summary, sha256 })
}

/// Default `max_cells` / `max_layers` of `list_cells` / `list_layers`.
pub const DEFAULT_MAX_LIST: usize = 1000;
/// Most `max_cells` / `max_layers` a call may ask for (above: `TOOL_LIMIT_EXCEEDED`).
pub const MAX_LIST: usize = 10_000;

/// Seed 003's truncation metadata of a list (always present, zero drops included),
/// written as `{<what>_dropped, truncated, returned, total, max_<what>}`.
pub struct Truncation {
    what: &'static str,
    dropped: usize,
    returned: usize,
    total: usize,
    max: usize,
}

impl Serialize for Truncation {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(5))?;
        map.serialize_entry(&format!("{}_dropped", self.what), &self.dropped)?;
        map.serialize_entry("truncated", &(self.dropped > 0))?;
        map.serialize_entry("returned", &self.returned)?;
        map.serialize_entry("total", &self.total)?;
        map.serialize_entry(&format!("max_{}", self.what), &self.max)?;
        map.end()
    }
}

/// `items` cut to `max` (default [`DEFAULT_MAX_LIST`]), with their truncation.
pub fn bounded<T>(
    mut items: Vec<T>,
    max: Option<usize>,
    what: &'static str,
) -> Result<(Vec<T>, Truncation), ToolError> {
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
    let truncation = Truncation {
        what,
        dropped: total - items.len(),
        returned: items.len(),
        total,
        max,
    };
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

/// `layout.list_cells`'s answer.
#[derive(Serialize)]
struct CellListing {
    dbu: f64,
    cells: Vec<CellEntry>,
    truncation: Truncation,
}

fn op_list_cells(Query { lib, args, .. }: Query<'_, CellsArgs>) -> Result<CellListing, ToolError> {
    let root = cell_by_name(lib, &args.cell).map_err(|e| observe_error(&e))?;
    let cells = list_cells(lib, root, args.max_depth).map_err(|e| observe_error(&e))?;
    let (cells, truncation) = bounded(cells, args.max_cells, "cells")?;
    Ok(CellListing {
        dbu: lib.dbu_um(),
        cells,
        truncation,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DescribeArgs {
    layout: LayoutRef,
    cell: String,
    #[serde(default)]
    depth: Option<u32>,
}

/// `layout.describe_cell`'s answer: the description, then the database unit.
#[derive(Serialize)]
struct Described {
    #[serde(flatten)]
    description: CellDescription,
    dbu: f64,
}

fn op_describe_cell(
    Query { lib, args, .. }: Query<'_, DescribeArgs>,
) -> Result<Described, ToolError> {
    let description = describe_cell(lib, &args.cell, args.depth).map_err(|e| observe_error(&e))?;
    Ok(Described {
        description,
        dbu: lib.dbu_um(),
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LayersArgs {
    layout: LayoutRef,
    cell: String,
    #[serde(default)]
    max_layers: Option<usize>,
}

/// `layout.list_layers`'s answer.
#[derive(Serialize)]
struct LayerListing {
    dbu: f64,
    layers: Vec<LayerEntry>,
    truncation: Truncation,
}

fn op_list_layers(
    Query { lib, args, .. }: Query<'_, LayersArgs>,
) -> Result<LayerListing, ToolError> {
    let root = cell_by_name(lib, &args.cell).map_err(|e| observe_error(&e))?;
    let layers = list_layers(lib, root).map_err(|e| observe_error(&e))?;
    let (layers, truncation) = bounded(layers, args.max_layers, "layers")?;
    Ok(LayerListing {
        dbu: lib.dbu_um(),
        layers,
        truncation,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QueryRegionArgs {
    layout: LayoutRef,
    request: Value,
}

fn op_query_region(
    Query { lib, args, .. }: Query<'_, QueryRegionArgs>,
) -> Result<RegionOutcome, ToolError> {
    let request: RegionRequest = serde_json::from_value(args.request).map_err(|e| {
        ToolError::new(
            ErrorCode::InvalidInput,
            format!("invalid query_region request: {e}"),
        )
    })?;
    query_region(lib, &request, &QueryBudget::default()).map_err(|e| observe_error(&e))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MeasureArgs {
    layout: LayoutRef,
    mode: MeasureMode,
    target_ids: Vec<String>,
    locators: BTreeMap<String, ShapeLocator>,
}

fn op_measure(
    Query { lib, args, .. }: Query<'_, MeasureArgs>,
) -> Result<MeasurePayload, ToolError> {
    let targets =
        resolve_ids(lib, &args.target_ids, &args.locators).map_err(|e| observe_error(&e))?;
    measure_geometry(lib, args.mode, &targets).map_err(|e| observe_error(&e))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AnalyzeArgs {
    layout: LayoutRef,
    target_id: String,
    locators: BTreeMap<String, ShapeLocator>,
}

fn op_analyze(
    Query { lib, args, .. }: Query<'_, AnalyzeArgs>,
) -> Result<WaveguidePayload, ToolError> {
    let targets = resolve_ids(lib, std::slice::from_ref(&args.target_id), &args.locators)
        .map_err(|e| observe_error(&e))?;
    analyze_waveguide(lib, &targets[0]).map_err(|e| observe_error(&e))
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

fn op_set_view(Query { lib, args, .. }: Query<'_, ViewArgs>) -> Result<View, ToolError> {
    let b = view_box(lib, &args.cell, args.box_um)?;
    set_view(lib, &args.cell, &b, args.layers.as_deref()).map_err(|e| observe_error(&e))
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

/// `layout.render`'s answer: the image's id, the box on the layout's grid, its size and
/// style, and the PNG as base64 (the host stores it as an artifact).
#[derive(Serialize)]
struct RenderAnswer {
    render_id: String,
    box_um: MicronBox,
    width: u32,
    height: u32,
    style: RenderStyle,
    png_base64: String,
}

fn op_render(
    Query { lib, args, ctx, .. }: Query<'_, RenderArgs>,
) -> Result<RenderAnswer, ToolError> {
    let b = view_box(lib, &args.cell, args.box_um)?;
    let notes = resolve_annotations(lib, &args.annotations, &args.locators)
        .map_err(|e| observe_error(&e))?;
    let spec = RenderSpec {
        cell: args.cell,
        box_um: b,
        layers: args.layers,
        width: args.width,
        height: args.height,
        style: args.style,
        max_shapes: ctx.context.limits.max_shapes,
    };
    let r = render_view(lib, &spec, &notes).map_err(|e| observe_error(&e))?;
    let grid = b.to_dbu(lib.dbu_um()).map_err(|e| observe_error(&e))?;
    Ok(RenderAnswer {
        render_id: r.render_id,
        box_um: MicronBox::from_dbu(&grid, lib.dbu_um()),
        width: r.width,
        height: r.height,
        style: args.style,
        png_base64: base64::engine::general_purpose::STANDARD.encode(&r.png),
    })
}
