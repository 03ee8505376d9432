//! Whole-layout evaluation (docs/DECISIONS.md D57): the region cut into tiles that any
//! executor can run, each a self-contained unit of work.
//!
//! - `evaluate.plan`: opens the layout and the deck, picks the region (the caller's box,
//!   else the whole evaluated layer; a `.glp` clip's ICCAD window), the model, the grid and
//!   the tiles, and warms the kernel cache. Its `plan` travels with every later op.
//! - `evaluate.tile`: one tile ([`reticle_eval::tile::evaluate_tile`]) written to the job's
//!   artifact directory as `tile_<ix>_<iy>.json`; the answer is a small summary.
//! - `evaluate.merge`: reads the tile files in order and builds the report
//!   ([`reticle_eval::merge::merge`]); every record goes to `violations.jsonl`, the report
//!   holds the summary and, at `report_level: detailed`, the first page.
//! - `evaluate.page`: a page of `violations.jsonl` after a cursor, optionally only the
//!   records meeting a box or of one rule, with the counts in that box.
//!
//! The files are written through a temporary name and a rename, so a tile re-run after its
//! worker died replaces a whole file or nothing.

use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use reticle_eval::merge::{MergeJob, merge};
use reticle_eval::report::{Limits, OnExceeded, ReportLevel, Setup};
use reticle_eval::tile::{LayoutSource, TileJob, TileOutput, evaluate_tile};
use reticle_eval::tiles::{RegionPlan, TileGrid, TileIndex};
use reticle_eval::{ImagedWindow, LayoutWindow};
use reticle_layout::{BBox, Point};
use reticle_protocol::error::{ErrorCode, ToolError};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::deck_job::{DeckArgs, parse_deck_args};
use super::region_source::RegionSource;
use reticle_kernel::model::default_model;

use super::simulate::{DEFAULT_SIDE_NM, check_pixel, image_window};
use super::{Op, artifacts, cancelled, eval_error, parse_args};
use crate::job::JobCtx;

/// Most tiles one evaluation may have (a 1 cm² block at 4 nm pixels is about 10⁸ nm² ÷
/// 1 µm² ≈ 10⁸; this bounds what one job asks of a pool and of its artifact directory).
pub const MAX_TILES: u64 = 4_000_000;
/// Records on one page unless the caller asks for fewer.
pub const DEFAULT_PAGE_RECORDS: usize = 200;
/// Most records on one page.
pub const MAX_PAGE_RECORDS: usize = 1000;
/// Most bytes of records on one page, so a response stays well under the 1 MiB frame.
pub const MAX_PAGE_BYTES: usize = 384 * 1024;
/// The file every record of a merged report goes to.
pub const VIOLATIONS_FILE: &str = "violations.jsonl";
/// The picture of a merged report.
pub const HEATMAP_FILE: &str = "heatmap.png";

/// `evaluate`'s own arguments plus what the host adds for a whole-layout job.
#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct Own {
    box_um: Option<[f64; 4]>,
    tile_nm: Option<f64>,
    report_level: ReportLevel,
    limits: Limits,
    halo_nm: Option<f64>,
    plan: Option<RegionPlan>,
    /// Which tile, as its number in the plan's row-major order (the host knows no geometry).
    tile_number: Option<u64>,
}

fn invalid(message: impl Into<String>, details: Value) -> ToolError {
    ToolError::new(ErrorCode::InvalidInput, message).with_details(details)
}

fn internal(message: impl Into<String>) -> ToolError {
    ToolError::new(ErrorCode::InternalError, message)
}

fn is_glp(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("glp"))
}

/// The deck, the layer and the rules on it, and the opened layout.
struct Opened {
    setup: Setup,
    source: RegionSource,
}

fn open(ctx: &JobCtx<'_>, args: &DeckArgs, own: &Own) -> Result<Opened, ToolError> {
    let setup = args.setup(ctx, own.tile_nm, own.report_level, own.limits, |_| Ok(()))?;
    let context_layers = reticle_eval::deck::context_layers(&setup.deck, setup.target);
    let layer = (!is_glp(&args.layout)).then(|| setup.target.to_string());
    let source = RegionSource::open(
        ctx,
        &args.layout,
        args.cell.as_deref(),
        layer.as_deref(),
        &context_layers,
        own.plan.as_ref().map(|p| p.sha256.as_str()),
        own.plan.as_ref().map(|p| p.extent),
    )?;
    Ok(Opened { setup, source })
}

fn plan_of(own: &Own) -> Result<&RegionPlan, ToolError> {
    own.plan
        .as_ref()
        .ok_or_else(|| invalid("this op needs the evaluation's `plan`", json!({})))
}

/// `box_um` in dbu, checked.
fn region_box(box_um: [f64; 4], dbu_nm: f64) -> Result<BBox, ToolError> {
    let [l, b, r, t] = box_um;
    if !(box_um.iter().all(|v| v.is_finite()) && l < r && b < t) {
        return Err(ToolError::new(
            ErrorCode::InvalidBox,
            "box_um must be [left, bottom, right, top] with left < right and bottom < top",
        )
        .with_details(json!({"box_um": box_um})));
    }
    let to = |um: f64| (um * 1000.0 / dbu_nm).round() as i64;
    Ok(BBox::from_corners(
        Point::new(to(l), to(b)),
        Point::new(to(r), to(t)),
    ))
}

/// The `evaluate.plan` op.
pub struct Plan;

impl Op for Plan {
    fn name(&self) -> &'static str {
        "evaluate.plan"
    }

    fn run(&self, ctx: &JobCtx<'_>, args_json: &str) -> Result<Value, ToolError> {
        let (args, own): (DeckArgs, Own) = parse_deck_args(self.name(), args_json)?;
        let opened = open(ctx, &args, &own)?;
        let source = &opened.source;
        let dbu_nm = source.dbu_nm;
        let (region, region_source) = match own.box_um {
            Some(b) => (region_box(b, dbu_nm)?, "box"),
            None if source.format == "glp" => (reticle_kernel::iccad::window(), "iccad_window"),
            None => (
                source.extent().ok_or_else(|| {
                    ToolError::new(ErrorCode::InvalidLayer, "the evaluated layer has no shapes")
                        .with_details(json!({"layer": opened.setup.target.to_string()}))
                })?,
                "layer_bbox",
            ),
        };
        let model = args
            .model
            .clone()
            .unwrap_or_else(|| default_model(DEFAULT_SIDE_NM));
        let period_nm = model.period_nm();
        let pixel_nm = args.pixel_nm.unwrap_or(1.0);
        check_pixel(&model, pixel_nm)?;
        let halo_nm = match own.halo_nm {
            Some(h) => h,
            None => reticle_kernel::tiling::tile_halo_nm(&model, pixel_nm)
                .map_err(|e| invalid(format!("model: {e}"), json!({})))?,
        };
        let grid = TileGrid::new(period_nm, halo_nm, pixel_nm, dbu_nm)?;
        let window_px = (period_nm / pixel_nm).round();
        if window_px * window_px > ctx.context.limits.max_raster_pixels as f64 {
            return Err(ToolError::new(
                ErrorCode::QueryTooLarge,
                "one tile's window (the model period) at this pixel size is over the raster limit",
            )
            .with_details(json!({"pixels": window_px * window_px, "limit": ctx.context.limits.max_raster_pixels, "pixel_nm": pixel_nm})));
        }
        let range = grid.covering(region);
        if range.count() > MAX_TILES {
            return Err(ToolError::new(
                ErrorCode::QueryTooLarge,
                format!("the region needs {} tiles; one evaluation may have {MAX_TILES}", range.count()),
            )
            .with_details(json!({"tiles": range.count(), "limit": MAX_TILES, "hint": "use a smaller box or coarser pixels"})));
        }
        let kernels = model
            .kernels()
            .map_err(|e| invalid(format!("model: {e}"), json!({})))?;
        let plan = RegionPlan {
            sha256: source.sha256.clone(),
            format: source.format.to_owned(),
            region,
            region_source: region_source.to_owned(),
            extent: source.extent(),
            grid,
            range,
            period_nm,
            pixel_nm,
            model_kind: reticle_eval::report::model_kind(&model).to_owned(),
            focus_kernels: kernels.focus.scales.len(),
        };
        Ok(json!({"plan": plan, "tiles": range.count()}))
    }
}

/// The `evaluate.tile` op.
pub struct Tile;

/// A tile's file name in the job's artifact directory.
fn tile_file(t: TileIndex) -> String {
    format!("tile_{}_{}.json", t.ix, t.iy)
}

impl Op for Tile {
    fn name(&self) -> &'static str {
        "evaluate.tile"
    }

    fn run(&self, ctx: &JobCtx<'_>, args_json: &str) -> Result<Value, ToolError> {
        let (args, own): (DeckArgs, Own) = parse_deck_args(self.name(), args_json)?;
        let plan = plan_of(&own)?;
        let number = own
            .tile_number
            .ok_or_else(|| invalid("evaluate.tile needs the `tile_number`", json!({})))?;
        let tile = plan.range.nth(number).ok_or_else(|| {
            invalid(
                format!(
                    "the plan has {} tiles; there is no tile {number}",
                    plan.range.count()
                ),
                json!({"tile_number": number}),
            )
        })?;
        let dir = artifacts::dir(ctx)?;
        let mut opened = open(ctx, &args, &own)?;
        let window = plan.grid.window(tile);
        let polygons = opened.source.polygons(window, false)?;
        let empty = polygons.target.is_empty() && polygons.context.values().all(Vec::is_empty);
        let imaged: Option<ImagedWindow> = if empty {
            None
        } else {
            let layout = LayoutWindow {
                format: if plan.format == "glp" {
                    "glp"
                } else {
                    "gds/oasis"
                },
                sha256: plan.sha256.clone(),
                dbu_nm: plan.grid.dbu_nm,
                polygons: polygons.target,
                window,
                context: polygons.context,
            };
            let model = args
                .model
                .clone()
                .unwrap_or_else(|| default_model(plan.period_nm));
            Some(image_window(ctx, layout, model, plan.pixel_nm, |_| {})?.0)
        };
        if ctx.cancel.is_cancelled() {
            return Err(cancelled(ctx.job_id));
        }
        let Opened { setup, mut source } = opened;
        let rules = setup.rules();
        let job = TileJob {
            grid: &plan.grid,
            range: &plan.range,
            region: plan.region,
            tile,
            rules: &rules,
        };
        let out = evaluate_tile(&job, imaged.as_ref(), &mut source, ctx.cancel)
            .map_err(|e| eval_error(e, ctx.job_id))?;
        let bytes = serde_json::to_vec(&out).map_err(|e| internal(format!("tile output: {e}")))?;
        artifacts::write_named(&dir, &tile_file(tile), &bytes)?;
        Ok(json!({
            "tile": tile.id(),
            "found": out.found.len(),
            "pieces": out.pieces.len(),
            "imaged": out.metrics.imaged,
            "l2_px": out.metrics.l2_px,
            "pvb_px": out.metrics.pvb_px,
        }))
    }
}

/// The `evaluate.merge` op.
pub struct Merge;

impl Op for Merge {
    fn name(&self) -> &'static str {
        "evaluate.merge"
    }

    fn run(&self, ctx: &JobCtx<'_>, args_json: &str) -> Result<Value, ToolError> {
        let (args, own): (DeckArgs, Own) = parse_deck_args(self.name(), args_json)?;
        let plan = plan_of(&own)?;
        let dir = artifacts::dir(ctx)?;
        let setup = args.setup(ctx, own.tile_nm, own.report_level, own.limits, |_| Ok(()))?;
        let rules = setup.rules();
        let job = MergeJob {
            setup: &setup,
            rules: &rules,
            grid: &plan.grid,
            range: &plan.range,
            region: plan.region,
            region_source: &plan.region_source,
            sha256: &plan.sha256,
            format: if plan.format == "glp" {
                "glp"
            } else {
                "gds/oasis"
            },
            pixel_nm: plan.pixel_nm,
            model_kind: &plan.model_kind,
            period_nm: plan.period_nm,
            focus_kernels: plan.focus_kernels,
        };
        let total = plan.range.count();
        let tiles = plan.range.iter().enumerate().map(|(n, t)| {
            if n % 64 == 0 {
                ctx.progress.report(n as u64, total, "merging tiles");
            }
            read_tile(&dir, t)
        });
        let merged = merge(&job, tiles, ctx.cancel).map_err(|e| eval_error(e, ctx.job_id))?;
        let mut payload = merged.payload;
        let records = merged.records;
        let file = write_records(&dir, &records)?;
        let mut opened = open(ctx, &args, &own)?;
        let picture = reticle_eval::heatmap::draw(
            plan.region,
            &plan.grid,
            &plan.range,
            reticle_eval::records::tile_dbu(setup.tile_nm, plan.grid.dbu_nm),
            &records,
            &mut opened.source,
        )?;
        let png = artifacts::png_rgba(
            picture.width as usize,
            picture.height as usize,
            &picture.rgba,
        )?;
        let heatmap = artifacts::write(&dir, HEATMAP_FILE, &png)?;
        let total_records = records.len();
        drop(records);
        let limit = setup.limits.max_violations;
        let detailed = setup.report_level == ReportLevel::Detailed;
        let exceeded = total_records > limit;
        let degraded =
            detailed && exceeded && setup.limits.on_exceeded == OnExceeded::DegradeToAggregate;
        payload["degraded_to_aggregate"] = json!(degraded);
        if degraded {
            payload["degraded_reason"] = json!(format!(
                "{total_records} violation records exceed limits.max_violations = {limit}"
            ));
        }
        let mut returned = 0;
        if detailed && !degraded {
            let page = read_page(
                &dir,
                &PageRequest {
                    cursor: None,
                    limit: DEFAULT_PAGE_RECORDS,
                    cap: limit,
                    filter: Filter::default(),
                },
            )?;
            returned = page.records.len();
            let next_cursor = page.next_cursor.map_or(Value::Null, Value::String);
            payload["page"] = json!({"returned": returned, "next_cursor": next_cursor, "page_records": DEFAULT_PAGE_RECORDS});
            payload["violations"] = Value::Array(page.records);
        }
        payload["truncation"] = json!({
            "truncated": detailed && exceeded && !degraded,
            "max_violations": limit,
            "total_records": total_records,
            "returned": returned,
            "on_exceeded": setup.limits.on_exceeded.name(),
            "paged": true,
        });
        payload["artifacts"] = json!({
            "dir": dir,
            "violations": file,
            "heatmap": {
                "png": heatmap,
                "width": picture.width,
                "height": picture.height,
                "nm_per_pixel": reticle_eval::r3(picture.nm_per_pixel),
                "legend": reticle_eval::heatmap::LEGEND.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<Map<String, Value>>(),
            },
        });
        // Keys the report ends with: the summary first, the page last.
        if let Some(v) = payload
            .as_object_mut()
            .and_then(|m| m.shift_remove("violations"))
        {
            payload["violations"] = v;
        }
        ctx.progress.report(total, total, "merged");
        Ok(payload)
    }
}

fn read_tile(dir: &Path, t: TileIndex) -> Result<TileOutput, ToolError> {
    let path = dir.join(tile_file(t));
    let bytes = std::fs::read(&path).map_err(|e| {
        internal(format!(
            "tile {} has no output ({}): {e}",
            t.id(),
            path.display()
        ))
    })?;
    serde_json::from_slice(&bytes)
        .map_err(|e| internal(format!("tile {} output is corrupt: {e}", t.id())))
}

/// Writes every record to `violations.jsonl`, one JSON object per line.
fn write_records(dir: &Path, records: &[Value]) -> Result<Value, ToolError> {
    let mut bytes = Vec::new();
    for r in records {
        serde_json::to_writer(&mut bytes, r).map_err(|e| internal(format!("record: {e}")))?;
        bytes.push(b'\n');
    }
    artifacts::write(dir, VIOLATIONS_FILE, &bytes)
}

/// Which records a page holds.
#[derive(Debug, Default, Clone)]
struct Filter {
    /// Only records whose box meets this box (nm).
    box_nm: Option<[f64; 4]>,
    /// Only records of this rule.
    rule_id: Option<String>,
}

impl Filter {
    fn keeps(&self, record: &Value) -> bool {
        if let Some(rule) = &self.rule_id
            && record["rule_id"].as_str() != Some(rule.as_str())
        {
            return false;
        }
        if let Some([l, b, r, t]) = self.box_nm {
            let c = |i: usize| record["bbox_nm"][i].as_f64().unwrap_or(f64::NAN);
            return c(0) <= r && c(2) >= l && c(1) <= t && c(3) >= b;
        }
        true
    }
}

struct PageRequest {
    cursor: Option<String>,
    limit: usize,
    /// Most records returned over every page of this listing.
    cap: usize,
    filter: Filter,
}

struct Page {
    records: Vec<Value>,
    next_cursor: Option<String>,
}

/// A cursor: the byte offset of the next line and how many records were returned before.
fn parse_cursor(cursor: &str, len: u64) -> Result<(u64, usize), ToolError> {
    let bad = || {
        ToolError::new(
            ErrorCode::InvalidInput,
            "not a cursor of this job's violations",
        )
        .with_details(json!({"cursor": cursor}))
    };
    let rest = cursor.strip_prefix("v1.").ok_or_else(bad)?;
    let (offset, index) = rest.split_once('.').ok_or_else(bad)?;
    let offset: u64 = offset.parse().map_err(|_| bad())?;
    let index: usize = index.parse().map_err(|_| bad())?;
    if offset > len {
        return Err(bad());
    }
    Ok((offset, index))
}

fn read_page(dir: &Path, req: &PageRequest) -> Result<Page, ToolError> {
    let path = dir.join(VIOLATIONS_FILE);
    let mut file = std::fs::File::open(&path).map_err(|e| {
        ToolError::new(
            ErrorCode::NotFound,
            format!("the job's violations are gone: {e}"),
        )
    })?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let (mut offset, mut index) = match &req.cursor {
        Some(c) => parse_cursor(c, len)?,
        None => (0, 0),
    };
    if offset > 0 {
        // A cursor points at the start of a line.
        let mut prev = [0u8; 1];
        file.seek(SeekFrom::Start(offset - 1))
            .map_err(|e| internal(e.to_string()))?;
        std::io::Read::read_exact(&mut file, &mut prev).map_err(|e| internal(e.to_string()))?;
        if prev[0] != b'\n' {
            return Err(ToolError::new(
                ErrorCode::InvalidInput,
                "not a cursor of this job's violations",
            ));
        }
    }
    file.seek(SeekFrom::Start(offset))
        .map_err(|e| internal(e.to_string()))?;
    let mut reader = BufReader::new(file);
    let mut records = Vec::new();
    let mut bytes = 0usize;
    let mut line = String::new();
    loop {
        if records.len() >= req.limit || index >= req.cap || bytes >= MAX_PAGE_BYTES {
            break;
        }
        line.clear();
        let n = reader
            .read_line(&mut line)
            .map_err(|e| internal(e.to_string()))?;
        if n == 0 {
            return Ok(Page {
                records,
                next_cursor: None,
            });
        }
        offset += n as u64;
        let record: Value = serde_json::from_str(line.trim_end())
            .map_err(|e| internal(format!("violations file: {e}")))?;
        if req.filter.keeps(&record) {
            bytes += n;
            index += 1;
            records.push(record);
        }
    }
    let more = offset < len && index < req.cap;
    Ok(Page {
        records,
        next_cursor: more.then(|| format!("v1.{offset}.{index}")),
    })
}

/// Counts of the records meeting `filter`, by rule and in all.
fn counts(dir: &Path, filter: &Filter) -> Result<Value, ToolError> {
    let file = std::fs::File::open(dir.join(VIOLATIONS_FILE)).map_err(|e| {
        ToolError::new(
            ErrorCode::NotFound,
            format!("the job's violations are gone: {e}"),
        )
    })?;
    let mut by_rule: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
    let (mut records, mut groups) = (0u64, 0u64);
    for line in BufReader::new(file).lines() {
        let line = line.map_err(|e| internal(e.to_string()))?;
        let record: Value =
            serde_json::from_str(&line).map_err(|e| internal(format!("violations file: {e}")))?;
        if !filter.keeps(&record) {
            continue;
        }
        let canonical = record["dedup_strategy"] == "canonical";
        let entry = by_rule
            .entry(record["rule_id"].as_str().unwrap_or("?").to_owned())
            .or_default();
        entry.0 += 1;
        entry.1 += u64::from(canonical);
        records += 1;
        groups += u64::from(canonical);
    }
    let by_rule: Vec<Value> = by_rule
        .into_iter()
        .map(|(rule, (r, g))| json!({"rule_id": rule, "records": r, "groups": g}))
        .collect();
    Ok(json!({"records": records, "groups": groups, "by_rule": by_rule}))
}

/// `evaluate.page`'s arguments.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PageArgs {
    #[serde(default)]
    cursor: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    box_um: Option<[f64; 4]>,
    #[serde(default)]
    rule_id: Option<String>,
    #[serde(default)]
    max_records: Option<usize>,
}

/// The `evaluate.page` op.
pub struct PageOp;

impl Op for PageOp {
    fn name(&self) -> &'static str {
        "evaluate.page"
    }

    fn run(&self, ctx: &JobCtx<'_>, args_json: &str) -> Result<Value, ToolError> {
        let args: PageArgs = parse_args(self.name(), args_json)?;
        let dir: PathBuf = artifacts::dir(ctx)?;
        if let Some(b) = args.box_um {
            region_box(b, 1.0)?;
        }
        let filter = Filter {
            box_nm: args.box_um.map(|b| b.map(|v| v * 1000.0)),
            rule_id: args.rule_id,
        };
        let limit = args
            .limit
            .unwrap_or(DEFAULT_PAGE_RECORDS)
            .clamp(1, MAX_PAGE_RECORDS);
        let page = read_page(
            &dir,
            &PageRequest {
                cursor: args.cursor.clone(),
                limit,
                cap: args.max_records.unwrap_or(usize::MAX),
                filter: filter.clone(),
            },
        )?;
        let mut out = Map::new();
        if args.cursor.is_none() {
            out.insert("counts".into(), counts(&dir, &filter)?);
        }
        out.insert("returned".into(), json!(page.records.len()));
        out.insert(
            "next_cursor".into(),
            page.next_cursor.map_or(Value::Null, Value::String),
        );
        out.insert("violations".into(), Value::Array(page.records));
        Ok(Value::Object(out))
    }
}
