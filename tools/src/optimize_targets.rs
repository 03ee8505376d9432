//! `optimize`'s list and job targets (issue 28 item 2; docs/DECISIONS.md D182):
//! `violation_ids` (a list of ids) and `job_id` (the groups of a finished tiled `evaluate`
//! job, optionally only some rules' and inside a sub-region `box_um`).
//!
//! Both become a region: the box covering what they name (each id's location, each group
//! record's marker box, with [`MARGIN_UM`] around), optimized by the tiled region path
//! ([`super::optimize_region::run_region_for`]) with the evaluate call's arguments. The
//! result is a region result whose `target` says what was asked (`mode`
//! `violation_ids` / `job`); its re-evaluation of the region plus one halo says, per rule,
//! which groups are resolved, remaining and new.

use std::str::FromStr;

use reticle_dispatch::Unit;
use reticle_protocol::{ErrorCode, ToolError, ViolationId};
use serde_json::{Map, Value, json};

use super::{ToolContext, ToolResult};

/// Margin (µm) around what a target names: a marker reaches this far from its location
/// for the deck's printed rules, and the region ILT needs the shape around it.
pub const MARGIN_UM: f64 = 0.5;

/// Most ids one call may list.
pub const MAX_IDS: usize = 10_000;

/// The evaluate arguments a target copies into the region optimize (unless the call
/// gives them).
const EVALUATE_KEYS: [&str; 8] = [
    "layout",
    "deck",
    "layer",
    "cell",
    "pixel_nm",
    "model",
    "tile_nm",
    "mask_layer",
];

/// Whether the call names a list or a job target.
#[must_use]
pub(super) fn wants_targets(args: &Map<String, Value>) -> bool {
    args.contains_key("violation_ids") || args.contains_key("job_id")
}

fn invalid(message: impl Into<String>, details: Value) -> ToolError {
    ToolError::new(ErrorCode::InvalidInput, message).with_details(details)
}

/// `[l, b, r, t]` growing to hold `other`.
fn union(a: Option<[f64; 4]>, b: [f64; 4]) -> Option<[f64; 4]> {
    Some(match a {
        None => b,
        Some(a) => [
            a[0].min(b[0]),
            a[1].min(b[1]),
            a[2].max(b[2]),
            a[3].max(b[3]),
        ],
    })
}

fn grown(b: [f64; 4], d: f64) -> [f64; 4] {
    [b[0] - d, b[1] - d, b[2] + d, b[3] + d]
}

fn meet(a: [f64; 4], b: [f64; 4]) -> Option<[f64; 4]> {
    let m = [
        a[0].max(b[0]),
        a[1].max(b[1]),
        a[2].min(b[2]),
        a[3].min(b[3]),
    ];
    (m[0] < m[2] && m[1] < m[3]).then_some(m)
}

fn box_of(v: &Value) -> Option<[f64; 4]> {
    serde_json::from_value(v.clone()).ok()
}

/// Copies the evaluate call's arguments the call does not give.
fn fill(args: &mut Map<String, Value>, from: &Map<String, Value>) {
    for key in EVALUATE_KEYS {
        if let (Some(v), false) = (from.get(key), args.contains_key(key)) {
            args.insert(key.into(), v.clone());
        }
    }
}

/// Runs a `violation_ids` or `job_id` target (paths not yet resolved, `wait` taken).
pub(super) async fn run_targets(
    ctx: &ToolContext,
    mut args: Map<String, Value>,
    wait: bool,
) -> ToolResult {
    if args.contains_key("violation_ids") && args.contains_key("job_id") {
        return Err(invalid(
            "violation_ids and job_id are two targets: give one",
            json!({}),
        ));
    }
    for other in ["violation_id", "whole_layer", "clip_um"] {
        if args.contains_key(other) {
            return Err(invalid(
                format!("{other} cannot be combined with violation_ids or job_id"),
                json!({"argument": other}),
            ));
        }
    }
    let (box_um, target) = match args.remove("violation_ids") {
        Some(ids) => ids_target(ctx, &mut args, &ids)?,
        None => job_target(ctx, &mut args).await?,
    };
    args.insert("box_um".into(), json!(box_um));
    for key in ["job_id", "rule_ids", "tiling"] {
        args.remove(key);
    }
    let missing: Vec<&str> = ["layout", "deck"]
        .into_iter()
        .filter(|k| !args.contains_key(*k))
        .collect();
    if !missing.is_empty() {
        return Err(ToolError::new(
            ErrorCode::NotFound,
            format!(
                "the target was not evaluated on this connection; pass {}",
                missing.join(" and ")
            ),
        )
        .with_details(json!({"missing_arguments": missing}))
        .recoverable(true)
        .with_hint(
            "pass the layout and deck (and pixel_nm, model, tile_nm, layer) of the evaluate call",
        ));
    }
    let layout = args["layout"].as_str().unwrap_or_default().to_owned();
    let path = ctx.scope.roots.resolve_read(&layout)?;
    args.insert("layout".into(), json!(path.display().to_string()));
    let deck = args["deck"].as_str().unwrap_or_default().to_owned();
    if super::evaluate::deck_is_path(&deck) {
        let path = ctx.scope.roots.resolve_read(&deck)?;
        args.insert("deck".into(), json!(path.display().to_string()));
    }
    super::optimize_region::run_region_for(ctx, args, wait, target).await
}

/// The box of a list of ids (their locations, grown by [`MARGIN_UM`]) and the target
/// description; the evaluate arguments of the first cached id fill the call's.
fn ids_target(
    ctx: &ToolContext,
    args: &mut Map<String, Value>,
    ids: &Value,
) -> Result<([f64; 4], Map<String, Value>), ToolError> {
    let texts: Vec<String> = ids
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    if texts.is_empty() || texts.len() > MAX_IDS {
        return Err(invalid(
            format!("violation_ids must list 1 to {MAX_IDS} ids"),
            json!({"count": texts.len()}),
        ));
    }
    let mut parsed = Vec::with_capacity(texts.len());
    for text in &texts {
        parsed.push(ViolationId::from_str(text).map_err(|_| {
            invalid(
                "not a reticle violation_id (rv1:…)",
                json!({"violation_id": text}),
            )
        })?);
    }
    let first = &parsed[0];
    if let Some(other) = parsed
        .iter()
        .find(|p| p.layout_sha16 != first.layout_sha16 || p.deck16 != first.deck16)
    {
        return Err(invalid(
            "violation_ids must come from one layout and one deck",
            json!({"first": texts[0], "other": other.to_string()}),
        ));
    }
    let cache = &ctx.scope.violations;
    let evaluation = texts
        .iter()
        .find_map(|t| cache.get(t).map(|(e, _)| e))
        .or_else(|| cache.region_for(&first.layout_sha16, &first.deck16));
    let resolved_from = match &evaluation {
        Some(e) => {
            // A window's arguments name its clip `box_um`: not the region here.
            let mut from = e.args.clone();
            from.remove("box_um");
            fill(args, &from);
            "session_cache"
        }
        None => "violation_ids",
    };
    let mut b = None;
    for p in &parsed {
        let [x, y] = p.location_nm();
        b = union(b, [x, y, x, y].map(|v| v / 1000.0));
    }
    let b = grown(b.unwrap_or_default(), MARGIN_UM);
    let mut target = Map::new();
    target.insert("mode".into(), json!("violation_ids"));
    target.insert("violation_ids".into(), json!(texts));
    target.insert("box_um".into(), json!(b));
    target.insert("resolved_from".into(), json!(resolved_from));
    Ok((b, target))
}

/// The box of a finished tiled evaluate job's groups (its region; with `rule_ids`, the box
/// of those rules' records; inside the call's `box_um` when given) and the target
/// description; the job's evaluate arguments fill the call's.
async fn job_target(
    ctx: &ToolContext,
    args: &mut Map<String, Value>,
) -> Result<([f64; 4], Map<String, Value>), ToolError> {
    let job_id = args
        .get("job_id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let view = ctx.jobs.poll(&job_id)?;
    let report = view.result.clone().unwrap_or(Value::Null);
    let dir = report["artifacts"]["dir"].as_str().map(str::to_owned);
    let (true, Some(dir)) = (
        view.tool == "evaluate" && view.status == reticle_dispatch::jobs::JobStatus::Completed,
        dir,
    ) else {
        return Err(invalid(
            format!("job {job_id} is not a completed tiled evaluate job: optimize(job_id) repairs the groups of one"),
            json!({"job_id": job_id, "tool": view.tool, "status": view.status}),
        )
        .recoverable(!view.status.is_terminal()));
    };
    let evaluation = ctx.scope.violations.region_in(&dir).ok_or_else(|| {
        invalid(
            format!("the arguments of job {job_id} are not known to this connection"),
            json!({"job_id": job_id}),
        )
    })?;
    let mut from = evaluation.args.clone();
    from.remove("box_um");
    fill(args, &from);
    let region = box_of(&report["region"]["box_nm"])
        .map(|b| b.map(|v| v / 1000.0))
        .ok_or_else(|| {
            ToolError::new(
                ErrorCode::InternalError,
                format!("job {job_id}'s report has no region"),
            )
        })?;
    let sub = match args.remove("box_um") {
        Some(v) => Some(box_of(&v).ok_or_else(|| invalid("box_um must be 4 numbers", json!({})))?),
        None => None,
    };
    let mut b = match sub {
        Some(s) => meet(region, s).ok_or_else(|| {
            invalid(
                "box_um does not meet the job's region",
                json!({"box_um": s, "region_um": region}),
            )
        })?,
        None => region,
    };
    let rules: Vec<String> = args
        .get("rule_ids")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    if !rules.is_empty() {
        let mut covered = None;
        for rule in &rules {
            covered = rule_box(ctx, &dir, rule, b, covered).await?;
        }
        let found = covered.ok_or_else(|| {
            ToolError::new(
                ErrorCode::NotFound,
                "the job has no record of these rules in this box: nothing to optimize",
            )
            .with_details(json!({"job_id": job_id, "rule_ids": rules, "box_um": b}))
        })?;
        b = meet(grown(found, MARGIN_UM), b).unwrap_or(found);
    }
    let mut target = Map::new();
    target.insert("mode".into(), json!("job"));
    target.insert("job_id".into(), json!(job_id));
    if !rules.is_empty() {
        target.insert("rule_ids".into(), json!(rules));
    }
    if let Some(s) = sub {
        target.insert("sub_region_um".into(), json!(s));
    }
    target.insert("box_um".into(), json!(b));
    target.insert("resolved_from".into(), json!("session_cache"));
    Ok((b, target))
}

/// `covered` grown by the markers of every record of `rule` in `b` of the job whose
/// records are in `dir` (paged with the `violations` tool's op).
async fn rule_box(
    ctx: &ToolContext,
    dir: &str,
    rule: &str,
    b: [f64; 4],
    mut covered: Option<[f64; 4]>,
) -> Result<Option<[f64; 4]>, ToolError> {
    let mut cursor: Option<String> = None;
    loop {
        let mut op = json!({"rule_id": rule, "box_um": b, "limit": 1000});
        if let Some(c) = &cursor {
            op["cursor"] = json!(c);
        }
        let unit = Unit::new("evaluate.page", &op).with_artifact_dir(Some(dir.to_owned()));
        let page = ctx.dispatcher.run(&ctx.call_scope("opt"), unit).await?;
        for r in page["violations"].as_array().into_iter().flatten() {
            if let Some(m) = box_of(&r["bbox_nm"]) {
                covered = union(covered, m.map(|v| v / 1000.0));
            }
        }
        match page["next_cursor"].as_str() {
            Some(c) if !c.is_empty() => cursor = Some(c.to_owned()),
            _ => return Ok(covered),
        }
    }
}
