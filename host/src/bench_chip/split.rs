//! Where a tiled run's time goes (issue 29 item 6): the same plan, tiles and merge as
//! [`reticle_dispatch::FanOut`], run one unit at a time on one worker so that each tile's
//! answer can be read: its `timing` (what the worker spent opening the layout, imaging the
//! window, in each phase of the evaluation and writing the tile's file) and the unit's wall
//! time on the host (the difference is the dispatch: the request, the answer and the
//! queue). The merge is timed as a unit of its own.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value, json};

use reticle_dispatch::{Dispatcher, Unit};
use reticle_tools::evaluate::OP;

use super::{Failure, Runs, round_to};

/// The phases a tile answers, in the order they run (`phases.*` are
/// `reticle_eval::tile::TileTiming`'s).
const PHASES: [&str; 8] = [
    "open_s",
    "imaging_s",
    "phases.mask_rules_s",
    "phases.contours_s",
    "phases.printed_rules_s",
    "phases.epe_s",
    "phases.pixels_s",
    "write_s",
];

/// The value at `path` (`a.b`) of a tile's `timing`.
fn seconds(timing: &Value, path: &str) -> f64 {
    path.split('.')
        .fold(timing, |v, k| &v[k])
        .as_f64()
        .unwrap_or(0.0)
}

/// Runs `args` as plan, tiles and merge units one after the other (in folder `label`) and
/// returns the split: the mean milliseconds per tile of each phase, the dispatch, the
/// merge, and the run's report (to compare with the fan-out's).
pub(super) async fn split(
    runs: &Runs,
    dispatcher: &Arc<Dispatcher>,
    label: &str,
    args: Map<String, Value>,
) -> Result<(Value, Value), Failure> {
    let scope = runs.scope(label);
    let dir = runs.fresh_dir(label)?;
    let fail = |what: &str, e: reticle_protocol::ToolError| {
        (1, format!("{label}: {what}: {}: {}", e.code, e.message))
    };
    let unit = |op: &str, args: &Map<String, Value>, index: u32| {
        Unit::new(format!("{OP}.{op}"), &Value::Object(args.clone()))
            .indexed(index)
            .with_artifact_dir(Some(dir.clone()))
            .on_progress(|_| {})
    };
    let started = Instant::now();
    let planned = dispatcher
        .run(&scope, unit("plan", &args, 0))
        .await
        .map_err(|e| fail("plan", e))?;
    let plan_s = started.elapsed().as_secs_f64();
    let total = planned["tiles"].as_u64().unwrap_or(0);
    let mut args = args;
    args.insert("plan".into(), planned["plan"].clone());
    let mut sums: BTreeMap<&str, f64> = BTreeMap::new();
    let (mut unit_s, mut imaged) = (0.0, 0u64);
    for n in 0..total {
        let mut tile_args = args.clone();
        tile_args.insert("tile_number".into(), json!(n));
        let index = u32::try_from(n + 1).unwrap_or(u32::MAX);
        let clock = Instant::now();
        let summary = dispatcher
            .run(&scope, unit("tile", &tile_args, index))
            .await
            .map_err(|e| fail("tile", e))?;
        unit_s += clock.elapsed().as_secs_f64();
        imaged += u64::from(summary["imaged"] == json!(true));
        for phase in PHASES {
            *sums.entry(phase).or_default() += seconds(&summary["timing"], phase);
        }
    }
    let clock = Instant::now();
    let index = u32::try_from(total + 1).unwrap_or(u32::MAX);
    let report = dispatcher
        .run(&scope, unit("merge", &args, index))
        .await
        .map_err(|e| fail("merge", e))?;
    let merge_s = clock.elapsed().as_secs_f64();
    let seconds = started.elapsed().as_secs_f64();
    eprintln!("  {label}: {seconds:.2} s (one unit at a time)");
    let per_tile = |s: f64| round_to(s * 1e3 / total.max(1) as f64, 3);
    let worker_s: f64 = sums.values().sum();
    let mut ms = Map::new();
    for phase in PHASES {
        let name = phase.trim_start_matches("phases.").trim_end_matches("_s");
        ms.insert(name.to_owned(), json!(per_tile(sums[phase])));
    }
    ms.insert("dispatch".into(), json!(per_tile(unit_s - worker_s)));
    ms.insert("merge".into(), json!(per_tile(merge_s)));
    Ok((
        json!({
            "tiles": total,
            "imaged_tiles": imaged,
            "seconds": round_to(seconds, 6),
            "plan_s": round_to(plan_s, 6),
            "tiles_s": round_to(unit_s, 6),
            "merge_s": round_to(merge_s, 6),
            "ms_per_tile": ms,
            "note": "one worker, one unit at a time; ms per tile are means over every tile \
                     (empty tiles are not imaged); dispatch is the unit's wall time on the \
                     host less what the worker timed",
        }),
        report,
    ))
}
