//! The bench's report for people (`reticle bench chip` without `--json`).

use serde_json::{Value, json};

/// The per-tile time split: one row per pixel size, ms per tile in each phase.
fn split(s: &mut String, r: &Value) {
    use std::fmt::Write as _;
    const COLUMNS: [&str; 11] = [
        "open",
        "imaging",
        "mask_rules",
        "contours",
        "printed_rules",
        "epe",
        "pixels",
        "write",
        "dispatch",
        "merge",
        "total",
    ];
    let _ = writeln!(
        s,
        "time per tile, ms (one worker, one unit at a time; merge = the merge's time / tiles)"
    );
    let _ = write!(s, "{:<6} {:>6} {:>7}", "pixel", "tiles", "imaged");
    for c in COLUMNS {
        let _ = write!(s, " {:>9}", c.replace("_rules", " rules"));
    }
    let _ = writeln!(s);
    for t in r["split"].as_array().into_iter().flatten() {
        let ms = &t["ms_per_tile"];
        let _ = write!(
            s,
            "{:<6} {:>6} {:>7}",
            format!("{} nm", t["pixel_nm"].as_f64().unwrap_or(f64::NAN)),
            t["tiles"].as_u64().unwrap_or(0),
            t["imaged_tiles"].as_u64().unwrap_or(0),
        );
        let mut total = 0.0;
        for c in &COLUMNS[..COLUMNS.len() - 1] {
            let v = ms[*c].as_f64().unwrap_or(0.0);
            total += v;
            let _ = write!(s, " {v:>9.1}");
        }
        let _ = writeln!(
            s,
            " {total:>9.1}{}",
            if t["same_report"] == json!(true) {
                ""
            } else {
                "  (report DIFFERENT from the fan-out's)"
            }
        );
    }
    let _ = writeln!(s);
}

/// The report for people.
pub(super) fn text(r: &Value) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let f = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    let load = |v: &Value| {
        v.as_f64()
            .map_or_else(|| "?".to_owned(), |l| format!("{l:.2}"))
    };
    let workers = r["workers"].as_u64().unwrap_or(0);
    let _ = writeln!(
        s,
        "reticle bench chip: {}, layer {}, deck {}",
        r["layout"].as_str().unwrap_or("?"),
        r["layer"].as_str().unwrap_or("?"),
        r["deck"].as_str().unwrap_or("?"),
    );
    let _ = writeln!(
        s,
        "{} cores, pool of {workers} workers; load average {} at the start, {} at the end\n",
        r["cores"],
        load(&r["load_average"]["start"]),
        load(&r["load_average"]["end"]),
    );
    let _ = writeln!(
        s,
        "throughput (plan + tiles + merge; workers started and warmed before the clock;\n\
         t1/tN and the efficiency against one worker on one core)"
    );
    let _ = writeln!(
        s,
        "{:<6} {:<34} {:>10} {:>6} {:>7} {:>7} {:>8} {:>9} {:>7} {:>10}",
        "pixel",
        "region µm",
        "area µm²",
        "tiles",
        "workers",
        "threads",
        "wall s",
        "µm²/s",
        "t1/tN",
        "efficiency"
    );
    for t in r["throughput"].as_array().into_iter().flatten() {
        let region = t["region_um"]
            .as_array()
            .map(|b| {
                b.iter()
                    .map(|v| format!("{}", f(v)))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default();
        let region = if t["region_source"] == json!("layer_bbox") {
            format!("{region} (layer)")
        } else {
            region
        };
        for (i, run) in t["runs"].as_array().into_iter().flatten().enumerate() {
            // Against the first run, one worker on one core (D198); the efficiency is the
            // pool's only.
            let (ratio, efficiency) = match i {
                0 => ("1.00×".to_owned(), String::new()),
                1 => (format!("{:.2}×", f(&t["threads_speedup"])), String::new()),
                _ => (
                    format!("{:.2}×", f(&t["speedup"])),
                    format!("{:.2}", f(&t["parallel_efficiency"])),
                ),
            };
            let _ = writeln!(
                s,
                "{:<6} {:<34} {:>10.1} {:>6} {:>7} {:>7} {:>8.2} {:>9.1} {:>7} {:>10}",
                format!("{} nm", f(&t["pixel_nm"])),
                if i == 0 { region.as_str() } else { "" },
                f(&t["area_um2"]),
                t["tiles"].as_u64().unwrap_or(0),
                run["workers"].as_u64().unwrap_or(0),
                run["threads_per_worker"].as_u64().unwrap_or(0),
                f(&run["seconds"]),
                f(&run["um2_per_s"]),
                ratio,
                efficiency,
            );
        }
    }
    let same: Vec<String> = r["throughput"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            let ok = t["same_report"] == json!(true) && t["same_artifacts"] == json!(true);
            format!(
                "{} nm {}",
                f(&t["pixel_nm"]),
                if ok { "identical" } else { "DIFFERENT" }
            )
        })
        .collect();
    let _ = writeln!(
        s,
        "determinism, 1 worker (1 and all threads) against {workers} (report without artifacts, artifact hashes): {}\n",
        same.join(", ")
    );
    split(&mut s, r);
    let w = &r["window"];
    let b: Vec<String> = w["box_um"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| format!("{}", f(v)))
        .collect();
    let _ = writeln!(
        s,
        "tiled against untiled imaging: box {} µm (one model period), 4 nm, median of {} run(s)",
        b.join(","),
        w["repeats"],
    );
    let _ = writeln!(
        s,
        "{:<44} {:>9} {:>8} {:>7} {:>9} {:>9}",
        "imaging", "units", "wall s", "ratio", "L2 px", "PVB px"
    );
    let runs = w["runs"].as_array().cloned().unwrap_or_default();
    let window_s = runs.first().map_or(f64::NAN, |r| f(&r["seconds"]));
    for run in &runs {
        let (name, units) = if run["tiling"] == json!("window") {
            (
                "window (periodic, layout outside ignored)".to_owned(),
                "1 window".to_owned(),
            )
        } else {
            (
                format!(
                    "tiles (halo {} nm, core {} nm)",
                    f(&run["halo_nm"]),
                    f(&run["core_nm"])
                ),
                format!("{} tiles", run["units"]),
            )
        };
        let _ = writeln!(
            s,
            "{:<44} {:>9} {:>8.3} {:>6.2}× {:>9} {:>9}",
            name,
            units,
            f(&run["seconds"]),
            f(&run["seconds"]) / window_s,
            run["l2_px"].as_u64().unwrap_or(0),
            run["pvb_px"].as_u64().unwrap_or(0),
        );
    }
    let pct = |v: &Value| {
        v.as_f64()
            .map_or_else(|| "-".to_owned(), |d| format!("{:+.1} %", d * 100.0))
    };
    let _ = writeln!(
        s,
        "tiles against the window: L2 {}, PVB {}; {}",
        pct(&w["l2_relative_difference"]),
        pct(&w["pvb_relative_difference"]),
        w["note"].as_str().unwrap_or(""),
    );
    s
}
