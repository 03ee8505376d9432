//! `reticle bench litho`: the host runs the worker's benchmark and passes its exit
//! status through. With the ICCAD-2013 data present it runs the real 2048×2048
//! three-corner simulation once and checks the report: the band-limited path is
//! faster than the naive path of the same run and agrees with it on L2 and PVB.
//! `reticle bench ilt` runs a few ILT iterations on one clip and must lower its L2.
//! `reticle bench output-schema` must find its payloads valid under the current schemas.

use std::path::PathBuf;
use std::process::{Command, Output};

use reticle_tests::binary;
use serde_json::Value;

fn bench(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(binary("reticle"));
    command.arg("bench").args(args);
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().expect("run reticle bench")
}

/// The ICCAD-2013 folder, or `None` after printing why the test that needs it (for
/// `what`) is skipped.
fn iccad_dir_or_skip(what: &str) -> Option<PathBuf> {
    let dir = reticle_tests::data_dir().join("iccad13");
    if dir.join("kernels/focus.npy").is_file() {
        return Some(dir);
    }
    eprintln!("SKIP: ICCAD-2013 data not found (set RETICLE_DATA_DIR); {what}");
    None
}

/// gcd_45nm.gds, or `None` after printing why the test that needs it (for `what`) is
/// skipped.
pub(crate) fn gcd_or_skip(what: &str) -> Option<PathBuf> {
    let gds = reticle_tests::data_dir().join("gds/gcd_45nm.gds");
    if gds.is_file() {
        return Some(gds);
    }
    eprintln!(
        "SKIP: {} not found (set RETICLE_DATA_DIR); {what}",
        gds.display()
    );
    None
}

/// The JSON report a bench printed on stdout; the bench must have exited 0 (its stderr
/// is shown when it did not).
pub(crate) fn json_report(out: &Output) -> Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON report on stdout")
}

/// `reticle bench output-schema` builds its payloads with the tools' shapes and asserts
/// that they pass the schemas before it times anything: when a schema gains a required
/// field, this fails until the benchmark's payloads follow (it had rotted unnoticed once).
#[test]
fn output_schema_bench_payloads_pass_the_current_schemas() {
    let out = bench(&["output-schema", "--iterations", "2", "--json"], &[]);
    let rows = json_report(&out);
    let rows = rows.as_array().expect("an array of rows");
    let payloads: Vec<&str> = rows.iter().filter_map(|r| r["payload"].as_str()).collect();
    assert_eq!(
        payloads,
        [
            "close_session answer",
            "evaluate job handle",
            "evaluate report, 0 violations",
            "evaluate report, 100 violations",
            "evaluate report, 10000 violations"
        ]
    );
    for row in rows {
        assert!(row["bytes"].as_u64() > Some(0), "{row}");
        assert!(row["ratio"].as_f64() > Some(0.0), "{row}");
    }
}

#[test]
fn usage_errors_and_missing_data_exit_2() {
    let out = bench(&["litho", "--repeats", "0"], &[]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let out = bench(&["nothing"], &[]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let out = bench(&["litho"], &[("RETICLE_DATA_DIR", "/nonexistent")]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("RETICLE_DATA_DIR"), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing on stdout on failure");
    let help = bench(&["--help"], &[]);
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("litho"));
}

#[test]
fn litho_bench_reports_a_ratio_against_the_naive_path() {
    let Some(dir) = iccad_dir_or_skip("the bench needs its kernels") else {
        return;
    };
    let out = bench(
        &[
            "litho",
            "--repeats",
            "1",
            "--json",
            "--iccad-dir",
            dir.to_str().unwrap(),
        ],
        &[],
    );
    let report = json_report(&out);
    let cpu = &report["cpu"];
    eprintln!("{cpu}");
    assert_eq!(cpu["grid"], 2048);
    assert_eq!(cpu["corners"], 3);
    let fast_s = cpu["fast_s"].as_f64().unwrap();
    let naive_s = cpu["naive_s"].as_f64().unwrap();
    assert!(fast_s > 0.0 && naive_s > fast_s, "{cpu}");
    assert!((cpu["speedup"].as_f64().unwrap() - naive_s / fast_s).abs() < 1e-9);
    for i in 0..2 {
        let fast = cpu["fast_l2_pvb"][i].as_f64().unwrap();
        let naive = cpu["naive_l2_pvb"][i].as_f64().unwrap();
        assert!(fast > 0.0, "{cpu}");
        assert!((fast - naive).abs() <= 0.001 * naive + 10.0, "{cpu}");
    }
    assert!(report["gpu"].is_null(), "no --gpu, no GPU figures");
}

/// `--backend gpu` times the wgpu path on whatever adapter exists (lavapipe in CI), a
/// batch of different clips, and the ratio to the CPU path of the same run; the GPU
/// path must agree with the CPU path on L2 and PVB.
#[test]
fn litho_bench_backend_gpu_reports_batch_throughput_and_the_cpu_ratio() {
    let Some(dir) = iccad_dir_or_skip("the bench needs its kernels") else {
        return;
    };
    let out = bench(
        &[
            "litho",
            "--backend",
            "gpu",
            "--batch",
            "2",
            "--repeats",
            "1",
            "--json",
            "--iccad-dir",
            dir.to_str().unwrap(),
        ],
        &[],
    );
    let report = json_report(&out);
    let (cpu, gpu) = (&report["cpu"], &report["gpu"]);
    eprintln!("{gpu}");
    let median = gpu["report"]["ms_per_sim_median"].as_f64().unwrap();
    let cpu_ms = cpu["fast_s"].as_f64().unwrap() * 1e3;
    assert!(median > 0.0);
    assert!((gpu["gpu_over_cpu"].as_f64().unwrap() - median / cpu_ms).abs() < 1e-9);
    // Issue 4's agreement criterion: at most 0.01 % of the 2048² printed pixels differ.
    for i in 0..2 {
        let (g, c) = (
            gpu["l2_pvb"][i].as_f64().unwrap(),
            cpu["fast_l2_pvb"][i].as_f64().unwrap(),
        );
        assert!(
            c > 0.0 && (g - c).abs() <= 1e-4 * 2048.0 * 2048.0,
            "{gpu} vs {cpu}"
        );
    }
    let batch = &gpu["batch"];
    assert_eq!(batch["clips"], 2);
    let (clips, seconds) = (2.0, batch["seconds"].as_f64().unwrap());
    assert!((batch["clips_per_s"].as_f64().unwrap() - clips / seconds).abs() < 1e-9);
    let l2 = batch["l2"].as_array().unwrap();
    assert_eq!(
        l2[0], gpu["l2_pvb"][0],
        "the batch starts with the same clip"
    );
    assert_ne!(l2[0], l2[1], "two different clips");
}

/// `reticle bench tiling` needs no data: it images a generated canvas tiled and untiled.
/// The error in the tile cores must fall as the halo grows, and the two untiled
/// references (different zero borders) must disagree measurably, which is the point the
/// benchmark documents: with a hard-edged pupil the untiled image of a finite canvas is
/// itself defined only to about 1e-4 of the open frame.
#[test]
fn ilt_bench_improves_l2_on_one_clip_with_legal_masks() {
    let Some(dir) = iccad_dir_or_skip("the ILT bench needs its clips") else {
        return;
    };
    let out = bench(
        &[
            "ilt",
            "--clips",
            "1",
            "--iterations",
            "8",
            "--refine-iterations",
            "2",
            "--json",
            "--iccad-dir",
            dir.to_str().expect("utf-8 path"),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    let clips = report["clips"].as_array().expect("clips");
    // The default: both legal styles.
    let styles: Vec<&str> = clips.iter().filter_map(|c| c["style"].as_str()).collect();
    assert_eq!(styles, ["curvilinear", "manhattan"]);
    let l2 = |m: &Value| m["l2"].as_u64().expect("l2");
    for clip in clips {
        assert_eq!(clip["clip"], "M1_test1");
        assert_eq!(clip["iterations"], 10);
        let (before, after) = (&clip["before"], &clip["after"]);
        // Mask = target on M1_test1 (see docs/PERFORMANCE.md).
        assert_eq!(before["l2"], 116_661);
        assert_eq!(before["pvb"], 42_918);
        assert!(l2(after) < l2(before), "{before} -> {after}");
        assert_eq!(clip["mask_rule_records"], 0, "{clip}");
        assert!(clip["polygons"].as_u64().unwrap() > 0 && clip["vertices"].as_u64().is_some());
        assert!(after["epe"].as_u64().is_some() && clip["seconds"].as_f64().is_some());
    }
    let averages = report["averages"].as_array().expect("averages");
    assert_eq!(averages.len(), 2);
    for (avg, clip) in averages.iter().zip(clips) {
        let ratios = avg["ratios"].as_array().expect("ratios");
        let names: Vec<&str> = ratios.iter().filter_map(|r| r[0].as_str()).collect();
        assert_eq!(names, ["OpenILT", "curvyILT"]);
        let expected = l2(&clip["after"]) as f64 / 33_850.0;
        let got = ratios[0][1].as_f64().expect("ratio");
        assert!((got - expected).abs() < 1e-9, "{got} vs {expected}");
    }
    // Usage errors exit 2 without running anything.
    let out = bench(&["ilt", "--clips", "0"], &[]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

#[test]
fn tiling_bench_shows_the_error_falling_with_the_halo() {
    let out = bench(&["tiling", "--canvas", "64", "--json"], &[]);
    let report = json_report(&out);
    eprintln!("{report}");
    let errors: Vec<f64> = report["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["max_error"].as_f64().unwrap())
        .collect();
    assert_eq!(errors.len(), 4);
    assert!(
        errors.iter().all(|e| e.is_finite() && *e > 0.0),
        "{errors:?}"
    );
    assert!(errors[3] < errors[0] / 2.0, "{errors:?}");
    let spread = report["reference_spread"].as_f64().unwrap();
    assert!(spread > 1e-6 && spread < 1e-2, "{spread}");
    let out = bench(&["tiling", "--canvas", "8"], &[]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "canvas below 16 px is a usage error"
    );
}

/// `reticle bench chip` runs in the host, over the host's own path (supervisor,
/// dispatcher, fan-out), on a real GDSII layout: throughput at 1 nm and 4 nm by one
/// worker and by the pool, whose reports must be identical, and tiled against untiled
/// imaging on one window. `--quick` keeps the regions small (3 µm and 8 µm squares).
#[test]
fn chip_bench_reports_throughput_efficiency_and_tiled_against_untiled() {
    let out = bench(&["chip"], &[("RETICLE_DATA_DIR", "/nonexistent")]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("RETICLE_DATA_DIR"), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing on stdout on failure");
    let out = bench(&["chip", "--box-1nm", "3,0,1,4"], &[]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a box with left > right: {out:?}"
    );

    let Some(gds) = gcd_or_skip("the chip bench needs a real layout") else {
        return;
    };
    let out = bench(
        &[
            "chip",
            "--quick",
            "--workers",
            "2",
            "--json",
            "--layout",
            gds.to_str().expect("utf-8 path"),
        ],
        &[],
    );
    let report = json_report(&out);
    eprintln!("{report}");
    assert_eq!(report["deck"], "nangate45_m1v1");
    assert_eq!(report["layer"], "11/0");
    assert_eq!(report["workers"], 2);
    assert_eq!(report["deterministic"], true);
    let throughput = report["throughput"].as_array().expect("throughput");
    let pixels: Vec<f64> = throughput
        .iter()
        .map(|t| t["pixel_nm"].as_f64().unwrap())
        .collect();
    assert_eq!(pixels, [1.0, 4.0]);
    for t in throughput {
        assert_eq!(t["same_report"], true, "{t}");
        assert_eq!(t["same_artifacts"], true, "{t}");
        let area = t["area_um2"].as_f64().unwrap();
        assert!(area > 0.0 && t["tiles"].as_u64().unwrap() > 0, "{t}");
        assert!(t["l2_px"].as_u64().unwrap() > 0, "{t}");
        // One worker on one core (the scaling reference, D198), one worker on every core,
        // the pool of two on its shares.
        let runs = t["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 3);
        let cores = report["cores"].as_u64().unwrap();
        let shape: Vec<(u64, u64)> = runs
            .iter()
            .map(|r| {
                (
                    r["workers"].as_u64().unwrap(),
                    r["threads_per_worker"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(shape, [(1, 1), (1, cores), (2, (cores / 2).max(1))], "{t}");
        let secs: Vec<f64> = runs
            .iter()
            .map(|r| r["seconds"].as_f64().unwrap())
            .collect();
        assert!(secs.iter().all(|s| *s > 0.0), "{t}");
        for (r, s) in runs.iter().zip(&secs) {
            let rate = r["um2_per_s"].as_f64().unwrap();
            assert!((rate - area / s).abs() <= 0.01 * rate + 0.01, "{t}");
        }
        let speedup = t["speedup"].as_f64().unwrap();
        assert!(
            (speedup - secs[0] / secs[2]).abs() <= 0.01 * speedup + 0.002,
            "{t}"
        );
        let threads = t["threads_speedup"].as_f64().unwrap();
        assert!(
            (threads - secs[0] / secs[1]).abs() <= 0.01 * threads + 0.002,
            "{t}"
        );
        let efficiency = t["parallel_efficiency"].as_f64().unwrap();
        assert!((efficiency - speedup / 2.0).abs() < 0.002, "{t}");
    }
    // --quick: 1 nm on a 3 µm square.
    assert!((throughput[0]["area_um2"].as_f64().unwrap() - 9.0).abs() < 1e-6);
    // The per-tile split (issue 29 item 6): the same regions unit by unit, the same
    // reports, every phase a mean over the tiles that adds up to the run.
    let split = report["split"].as_array().expect("split");
    assert_eq!(split.len(), 2, "{split:?}");
    for (s, t) in split.iter().zip(throughput) {
        assert_eq!(s["pixel_nm"], t["pixel_nm"], "{s}");
        assert_eq!(s["same_report"], true, "{s}");
        assert_eq!(s["tiles"], t["tiles"], "{s}");
        let tiles = s["tiles"].as_f64().unwrap();
        let ms = &s["ms_per_tile"];
        for phase in [
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
        ] {
            assert!(ms[phase].as_f64().is_some_and(|v| v >= 0.0), "{phase}: {s}");
        }
        assert!(ms["imaging"].as_f64().unwrap() > 0.0, "{s}");
        // The tiles' phases and dispatch add up to the tiles' wall time on the host.
        let tiles_ms: f64 = [
            "open",
            "imaging",
            "mask_rules",
            "contours",
            "printed_rules",
            "epe",
            "pixels",
            "write",
            "dispatch",
        ]
        .iter()
        .map(|p| ms[*p].as_f64().unwrap())
        .sum();
        let wall_ms = s["tiles_s"].as_f64().unwrap() * 1e3 / tiles;
        assert!((tiles_ms - wall_ms).abs() <= 0.01 * wall_ms + 0.05, "{s}");
        let merge_ms = s["merge_s"].as_f64().unwrap() * 1e3 / tiles;
        assert!(
            (ms["merge"].as_f64().unwrap() - merge_ms).abs() <= 0.01,
            "{s}"
        );
    }
    let window = &report["window"];
    let b: Vec<f64> = window["box_um"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert!((b[2] - b[0] - 2.048).abs() < 1e-9 && (b[3] - b[1] - 2.048).abs() < 1e-9);
    let runs = window["runs"].as_array().expect("window runs");
    assert_eq!(runs[0]["tiling"], "window");
    assert_eq!(runs[0]["units"], 1);
    assert_eq!(runs[1]["tiling"], "tiles");
    assert!(runs[1]["units"].as_u64().unwrap() >= 4, "{window}");
    for r in runs {
        assert!(r["seconds"].as_f64().unwrap() > 0.0, "{window}");
        assert!(r["l2_px"].as_u64().unwrap() > 0, "{window}");
    }
    let ratio = window["tiles_over_window"].as_f64().unwrap();
    let expected = runs[1]["seconds"].as_f64().unwrap() / runs[0]["seconds"].as_f64().unwrap();
    assert!(
        (ratio - expected).abs() <= 0.02 * expected + 0.01,
        "{window}"
    );
    assert!(window["note"].as_str().unwrap().contains("halo"));
}
