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
use reticle_protocol::args::OptimizeArgs;
use reticle_protocol::optimize_result::RegionTarget;
use reticle_protocol::{ErrorCode, ToolError, ViolationId};
use serde_json::{Value, json};

use super::violation_cache::{Evaluation, ViolationCache};
use super::{ToolContext, ToolResult};

/// Margin (µm) around what a target names: a marker reaches this far from its location
/// for the deck's printed rules, and the region ILT needs the shape around it.
pub const MARGIN_UM: f64 = 0.5;

/// Most ids one call may list.
pub const MAX_IDS: usize = 10_000;

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

/// `b` grown by `d` on every side, outward to whole nm (µm with three decimals), so the
/// box prints as the short decimal it is and reads back exactly.
fn grown(b: [f64; 4], d: f64) -> [f64; 4] {
    let down = |v: f64| (v * 1000.0 + 1e-6).floor() / 1000.0;
    let up = |v: f64| (v * 1000.0 - 1e-6).ceil() / 1000.0;
    [down(b[0] - d), down(b[1] - d), up(b[2] + d), up(b[3] + d)]
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

/// Copies the arguments of a remembered evaluate call the call does not give (its box is
/// not carried: it is not the region).
fn fill(call: &mut OptimizeArgs, evaluation: &Evaluation) -> Result<(), ToolError> {
    let evaluate = &evaluation.args;
    call.fill_from_evaluate(evaluate, false);
    Ok(())
}

/// Refuses what cannot be combined with a list or a job target.
fn check_combination(call: &OptimizeArgs) -> Result<(), ToolError> {
    if call.violation_ids.is_some() && call.job_id.is_some() {
        return Err(invalid(
            "violation_ids and job_id are two targets: give one",
            json!({}),
        ));
    }
    let others = [
        ("violation_id", call.violation_id.is_some()),
        ("whole_layer", call.whole_layer.is_some()),
        ("clip_um", call.clip_um.is_some()),
    ];
    if let Some((other, _)) = others.into_iter().find(|(_, given)| *given) {
        return Err(invalid(
            format!("{other} cannot be combined with violation_ids or job_id"),
            json!({"argument": other}),
        ));
    }
    Ok(())
}

/// `NOT_FOUND` (recoverable) when the call, filled from this connection's memory, still
/// has no layout. The deck may stay absent: the worker takes the shipped deck whose layers
/// the layout has (D185).
fn require_layout(call: &OptimizeArgs) -> Result<(), ToolError> {
    if call.layout.is_some() {
        return Ok(());
    }
    Err(ToolError::new(
        ErrorCode::NotFound,
        "the target was not evaluated on this connection; pass layout",
    )
    .with_details(json!({"missing_arguments": ["layout"]}))
    .recoverable(true)
    .with_hint(
        "pass the layout (and the deck unless shipped, pixel_nm, model, tile_nm, layer) of the evaluate call",
    ))
}

/// Runs a `violation_ids` or `job_id` target (paths not yet resolved, `wait` taken).
pub(super) async fn run_targets(
    ctx: &ToolContext,
    mut call: OptimizeArgs,
    wait: bool,
) -> ToolResult {
    check_combination(&call)?;
    let target = match call.violation_ids.take() {
        Some(ids) => ids_target(Some(&ctx.scope.violations), &mut call, ids)?,
        None => job_target(ctx, &mut call).await?,
    };
    call.box_um = target.box_um;
    call.job_id = None;
    call.rule_ids = None;
    call.tiling = None;
    require_layout(&call)?;
    let layout = call.layout.clone().unwrap_or_default();
    call.layout = Some(ctx.scope.roots.resolve_read(&layout)?.display().to_string());
    if let Some(deck) = call.deck.clone()
        && super::evaluate::deck_is_path(&deck)
    {
        call.deck = Some(ctx.scope.roots.resolve_read(&deck)?.display().to_string());
    }
    super::optimize_region::run_region_for(ctx, call, wait, target).await
}

/// The region of a list of ids for a caller without a connection's memory (`reticle
/// optimize --violation-ids`): the call's own arguments, `layout` required.
///
/// # Errors
/// As the tool: malformed ids, ids of several layouts or decks, no layout.
pub(crate) fn ids_region(call: &mut OptimizeArgs) -> Result<RegionTarget, ToolError> {
    check_combination(call)?;
    let ids = call.violation_ids.take().unwrap_or_default();
    let target = ids_target(None, call, ids)?;
    call.box_um = target.box_um;
    call.tiling = None;
    require_layout(call)?;
    Ok(target)
}

/// The box of a list of ids (their locations, grown by [`MARGIN_UM`]) and the target
/// description; the evaluate arguments of the first id `cache` knows fill the call's.
fn ids_target(
    cache: Option<&ViolationCache>,
    call: &mut OptimizeArgs,
    texts: Vec<String>,
) -> Result<RegionTarget, ToolError> {
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
    let evaluation = cache.and_then(|cache| {
        texts
            .iter()
            .find_map(|t| cache.get(t).map(|(e, _)| e))
            .or_else(|| cache.region_for(&first.layout_sha16, &first.deck16))
    });
    let resolved_from = match &evaluation {
        Some(e) => {
            fill(call, e)?;
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
    Ok(RegionTarget {
        mode: "violation_ids".into(),
        resolved_from: resolved_from.into(),
        violation_ids: Some(texts),
        box_um: Some(b),
        ..RegionTarget::default()
    })
}

/// The box of a finished tiled evaluate job's groups (its region; with `rule_ids`, the box
/// of those rules' records; inside the call's `box_um` when given) and the target
/// description; the job's evaluate arguments fill the call's.
async fn job_target(ctx: &ToolContext, call: &mut OptimizeArgs) -> Result<RegionTarget, ToolError> {
    let job_id = call.job_id.clone().unwrap_or_default();
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
    fill(call, &evaluation)?;
    let region = box_of(&report["region"]["box_nm"])
        .map(|b| b.map(|v| v / 1000.0))
        .ok_or_else(|| {
            ToolError::new(
                ErrorCode::InternalError,
                format!("job {job_id}'s report has no region"),
            )
        })?;
    let sub = call.box_um.take();
    let mut b = match sub {
        Some(s) => meet(region, s).ok_or_else(|| {
            invalid(
                "box_um does not meet the job's region",
                json!({"box_um": s, "region_um": region}),
            )
        })?,
        None => region,
    };
    let rules: Vec<String> = call.rule_ids.clone().unwrap_or_default();
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
    Ok(RegionTarget {
        mode: "job".into(),
        resolved_from: "session_cache".into(),
        job_id: Some(job_id),
        rule_ids: (!rules.is_empty()).then_some(rules),
        sub_region_um: sub,
        box_um: Some(b),
        ..RegionTarget::default()
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_box_grows_outward_to_whole_nm() {
        // 0.51 - 0.5 is 0.010000000000000009 in binary: the box says 0.01.
        assert_eq!(
            grown([0.51, 0.6, 0.6, 0.6], MARGIN_UM),
            [0.01, 0.1, 1.1, 1.1]
        );
        assert_eq!(grown([0.0, 0.0, 1.0, 1.0], 0.0), [0.0, 0.0, 1.0, 1.0]);
        let b = grown([0.1234, 0.0, 0.5678, 1.0], 0.0);
        assert_eq!(b, [0.123, 0.0, 0.568, 1.0]);
    }
}
