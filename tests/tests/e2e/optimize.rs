//! `optimize` and `simulate` images end to end on real worker processes (issue 7 items
//! 5, 6; seed 000 §2c, §5; docs/DECISIONS.md D44–D48), and seed 000's falsifiable
//! acceptance fixture `fixtures/mcp_acceptance/100x4tiles_12collisions.json`: 100 violation
//! records across 4 tiles, 12 violation groups, 2 scopes = 24 assertions, regenerated
//! through the MCP server and compared with the committed file
//! (`RETICLE_UPDATE_GOLDEN=1` rewrites it).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use reticle_tests::{Host, SEED000_RECORD_FIELDS, fixtures_dir, repo_root};
use serde_json::{Value, json};

fn acceptance_layout() -> String {
    fixtures_dir()
        .join("layouts/acceptance_100x4tiles.gds")
        .display()
        .to_string()
}

fn acceptance_deck() -> String {
    fixtures_dir()
        .join("decks/acceptance_width.json")
        .display()
        .to_string()
}

/// The evaluate arguments of the fixture (paths filled in by the caller).
fn fixture_args(layout: &str) -> Value {
    json!({
        "layout": layout,
        "deck": acceptance_deck(),
        "box_um": [0.0, 0.0, 2.048, 2.048],
        "pixel_nm": 8,
        "tile_nm": 1024,
        "report_level": "detailed",
    })
}

/// A host whose roots are the fixtures and `extra`, with its artifact root in `artifacts`.
fn start(extra: &Path, artifacts: &Path) -> Host {
    let roots = std::env::join_paths([fixtures_dir(), extra.to_path_buf()])
        .unwrap()
        .to_string_lossy()
        .into_owned();
    Host::start_initialized(&[
        ("RETICLE_ALLOWED_ROOTS", roots.as_str()),
        ("RETICLE_BACKEND", "cpu"),
        ("KLAYOUT_MCP_ARTIFACT_ROOT", artifacts.to_str().unwrap()),
    ])
}

/// A waited call: (isError, structuredContent).
fn call(host: &mut Host, tool: &str, mut arguments: Value) -> (bool, Value) {
    arguments["wait"] = json!(true);
    arguments["render"] = json!("json");
    let id = format!("{tool}-{}", uuid_like());
    let r = host.request(
        json!(id),
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    );
    let result = &r["result"];
    (
        result["isError"] == true,
        result["structuredContent"].clone(),
    )
}

fn uuid_like() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

fn ok(host: &mut Host, tool: &str, arguments: Value) -> Value {
    let (err, v) = call(host, tool, arguments);
    assert!(!err, "{tool} failed: {v}");
    v
}

fn err(host: &mut Host, tool: &str, arguments: Value) -> Value {
    let (err, v) = call(host, tool, arguments);
    assert!(err, "{tool} should fail: {v}");
    v["error"].clone()
}

/// The report without the job envelope.
fn report_only(mut v: Value) -> Value {
    let m = v.as_object_mut().unwrap();
    m.remove("job_id");
    m.remove("status");
    v
}

fn fixture_path() -> PathBuf {
    repo_root().join("fixtures/mcp_acceptance/100x4tiles_12collisions.json")
}

/// What one optimize call resolved, in a form the fixture pins.
fn resolution(out: &Value) -> Value {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for m in out["group_members"].as_array().unwrap() {
        *counts
            .entry(m["resolution"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    json!({
        "resolved_violation_id": out["target"]["resolved_violation_id"],
        "violation_group_id": out["target"]["violation_group_id"],
        "resolved_from": out["target"]["resolved_from"],
        "members": out["group_members"].as_array().unwrap().iter().map(|m| m["violation_id"].clone()).collect::<Vec<_>>(),
        "resolutions": counts,
        "window_nm": out["window_nm"],
    })
}

#[test]
fn acceptance_fixture_100_records_4_tiles_12_groups_24_assertions() {
    let tmp = tempfile::tempdir().unwrap();
    let artifacts = tmp.path().join("artifacts");
    let mut host = start(tmp.path(), &artifacts);
    let report = report_only(ok(
        &mut host,
        "evaluate",
        fixture_args(&acceptance_layout()),
    ));
    let records = report["violations"].as_array().unwrap().clone();

    // The fixture's shape: 100 records, 4 tiles, 12 groups, 12 canonical, 88 shadows.
    assert_eq!(records.len(), 100, "records");
    let tiles: BTreeSet<&str> = records
        .iter()
        .map(|r| r["context"]["tile_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        tiles,
        BTreeSet::from(["T_0_0", "T_0_1", "T_1_0", "T_1_1"]),
        "4 tiles"
    );
    let mut groups: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for r in &records {
        groups
            .entry(r["violation_group_id"].as_str().unwrap().to_owned())
            .or_default()
            .push(r.clone());
    }
    assert_eq!(groups.len(), 12, "12 violation groups");
    let canonical = records
        .iter()
        .filter(|r| r["dedup_strategy"] == "canonical")
        .count();
    assert_eq!((canonical, records.len() - canonical), (12, 88));
    for (gid, list) in &groups {
        let c: Vec<&Value> = list
            .iter()
            .filter(|r| r["dedup_strategy"] == "canonical")
            .collect();
        assert_eq!(c.len(), 1, "one canonical record in group {gid}");
        for r in list {
            assert_eq!(
                r["dedup_provenance"]["canonical_violation_id"],
                c[0]["violation_id"]
            );
            assert_eq!(r["dedup_provenance"]["group_size"], list.len());
        }
    }
    // Every §2 field on every record, with the pinned enum values.
    for r in &records {
        for f in SEED000_RECORD_FIELDS {
            assert!(r.get(f).is_some(), "record lacks {f}: {r}");
        }
        assert_eq!(r["coordinate_frame"], "input_layout_native");
        assert_eq!(r["transforms"], json!([]));
        assert!(r["context"]["tile_origin_nm"].is_array());
        assert!(r["context"]["tile_local_nm"].is_array());
        let p = &r["dedup_provenance"];
        assert!(p["rule_deck_hash"].as_str().unwrap().starts_with("sha256:"));
        assert_eq!(p["radius_nm"], 100.0);
        assert_eq!(p["rule_id"], "ACC.W.MIN");
        assert!(r["violation_id"].as_str().unwrap().starts_with("rv1:"));
        assert_eq!(r["violation_group_id"].as_str().unwrap().len(), 16);
    }

    // The 24 assertions: for each group, optimize(shadow) with scope=group resolves to the
    // group's canonical record and lists every member as resolved by the group fix;
    // scope=record_only opts out (the record itself is the target, nobody else is fixed).
    let mut assertions = Vec::new();
    for (gid, list) in &groups {
        let canonical = list
            .iter()
            .find(|r| r["dedup_strategy"] == "canonical")
            .unwrap();
        let shadow = list
            .iter()
            .find(|r| r["dedup_strategy"] == "shadow")
            .expect("every fixture group has a shadow");
        let member_ids: BTreeSet<&str> = list
            .iter()
            .map(|r| r["violation_id"].as_str().unwrap())
            .collect();
        for scope in ["group", "record_only"] {
            let out = ok(
                &mut host,
                "optimize",
                json!({"violation_id": shadow["violation_id"], "scope": scope, "iterations": 2, "refine_iterations": 0}),
            );
            let t = &out["target"];
            assert_eq!(t["violation_group_id"], gid.as_str());
            assert_eq!(t["resolved_from"], "session_cache", "fast path");
            let members = out["group_members"].as_array().unwrap();
            let got: BTreeSet<&str> = members
                .iter()
                .map(|m| m["violation_id"].as_str().unwrap())
                .collect();
            assert_eq!(got, member_ids, "every group member is listed");
            let by = |res: &str| {
                members
                    .iter()
                    .filter(|m| m["resolution"] == res)
                    .map(|m| m["violation_id"].as_str().unwrap())
                    .collect::<Vec<_>>()
            };
            if scope == "group" {
                assert_eq!(t["resolved_violation_id"], canonical["violation_id"]);
                assert_eq!(
                    by("target"),
                    vec![canonical["violation_id"].as_str().unwrap()]
                );
                assert_eq!(by("resolved_by_group_fix").len(), list.len() - 1);
            } else {
                assert_eq!(t["resolved_violation_id"], shadow["violation_id"]);
                assert_eq!(by("target"), vec![shadow["violation_id"].as_str().unwrap()]);
                assert!(
                    by("resolved_by_group_fix").is_empty(),
                    "record_only opts out"
                );
            }
            // The window holds the targeted marker(s).
            let w = &out["window_nm"];
            let chosen: Vec<&Value> = if scope == "group" {
                list.iter().collect()
            } else {
                vec![shadow]
            };
            for r in chosen {
                let b = r["bbox_nm"].as_array().unwrap();
                assert!(
                    w["left"].as_f64() <= b[0].as_f64()
                        && w["bottom"].as_f64() <= b[1].as_f64()
                        && w["right"].as_f64() >= b[2].as_f64()
                        && w["top"].as_f64() >= b[3].as_f64(),
                    "window {w} holds {b:?}"
                );
            }
            assert_eq!(out["metrics"]["before"]["violation_records"], 100);
            assert!(out["metrics"]["after"]["l2_px"].is_u64());
            assert!(
                Path::new(out["state_after"]["mask_gds"]["path"].as_str().unwrap())
                    .starts_with(artifacts.canonicalize().unwrap())
            );
            assertions.push(json!({
                "violation_group_id": gid,
                "scope": scope,
                "violation_id": shadow["violation_id"],
                "expect": resolution(&out),
            }));
        }
    }
    assert_eq!(assertions.len(), 24);

    let fixture = json!({
        "$schema": "acceptance_fixture",
        "schema_version": report["schema_version"],
        "description": "Seed 000 falsifiable acceptance fixture, produced by reticle: evaluate(report_level=detailed) of fixtures/layouts/acceptance_100x4tiles.gds (scripts/make_acceptance_layout.py) with fixtures/decks/acceptance_width.json -> 100 violation records across 4 tiles in 12 violation groups (12 canonical, 88 shadows); then optimize(violation_id=<a shadow of each group>) with scope=group and scope=record_only = 24 assertions. Regenerated and compared by tests/tests/e2e/optimize.rs (RETICLE_UPDATE_GOLDEN=1 rewrites it). Paths are relative to the repository root.",
        "arguments": {
            "evaluate": {"layout": "fixtures/layouts/acceptance_100x4tiles.gds", "deck": "fixtures/decks/acceptance_width.json", "box_um": [0.0, 0.0, 2.048, 2.048], "pixel_nm": 8, "tile_nm": 1024, "report_level": "detailed"},
            "optimize": {"iterations": 2, "refine_iterations": 0},
        },
        "counts": {"records": 100, "tiles": 4, "groups": 12, "canonical": 12, "shadows": 88, "assertions": 24},
        "evaluate": report,
        "assertions": assertions,
    });
    let text = serde_json::to_string_pretty(&fixture).unwrap() + "\n";
    if std::env::var_os("RETICLE_UPDATE_GOLDEN").is_some() {
        std::fs::write(fixture_path(), &text).unwrap();
    }
    let canned = std::fs::read_to_string(fixture_path())
        .expect("the fixture (RETICLE_UPDATE_GOLDEN=1 writes it)");
    let canned: Value = serde_json::from_str(&canned).unwrap();
    // Group ids (and everything else) are deterministic across runs and processes.
    assert_eq!(
        canned["evaluate"], fixture["evaluate"],
        "the evaluate report changed"
    );
    assert_eq!(
        canned["assertions"], fixture["assertions"],
        "an optimize resolution changed"
    );
}

#[test]
fn cache_miss_pinning_and_state_after() {
    let tmp = tempfile::tempdir().unwrap();
    let artifacts = tmp.path().join("artifacts");
    let copy = tmp.path().join("acc.gds");
    std::fs::copy(acceptance_layout(), &copy).unwrap();
    let copy_s = copy.display().to_string();

    // Connection 1: evaluate fills the cache; an optimize of a canonical record works
    // from the id alone and returns state_after.
    let mut host = start(tmp.path(), &artifacts);
    let report = ok(&mut host, "evaluate", fixture_args(&copy_s));
    let records = report["violations"].as_array().unwrap();
    let canonical = records
        .iter()
        .find(|r| r["dedup_strategy"] == "canonical")
        .unwrap();
    let shadow = records
        .iter()
        .find(|r| {
            r["dedup_strategy"] == "shadow"
                && r["violation_group_id"] == canonical["violation_group_id"]
        })
        .unwrap();
    let vid = shadow["violation_id"].as_str().unwrap().to_owned();
    let out = ok(
        &mut host,
        "optimize",
        json!({"violation_id": vid, "iterations": 3, "refine_iterations": 0}),
    );
    assert_eq!(out["target"]["resolved_from"], "session_cache");
    assert_eq!(
        out["target"]["resolved_violation_id"],
        canonical["violation_id"]
    );
    let s = &out["state_after"];
    let gds = std::fs::read(s["mask_gds"]["path"].as_str().unwrap()).unwrap();
    assert_eq!(&gds[..4], &[0, 6, 0, 2], "a GDSII HEADER record");
    assert_eq!(s["mask_gds"]["bytes"], gds.len());
    let png = std::fs::read(s["mask_png"]["path"].as_str().unwrap()).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert!(s["polygons"]["gds_polygons"].as_u64().unwrap() > 0);
    assert_eq!(s["polygons"]["layer"], "1/0");
    for k in ["l2_px", "pvb_px", "epe_violations", "violation_records"] {
        assert!(out["metrics"]["before"][k].is_u64(), "{k}: {out}");
        assert!(out["metrics"]["after"][k].is_u64(), "{k}: {out}");
    }
    assert!(out["ilt"]["iterations_run"].as_u64() == Some(3));
    // Nothing outside the window changed: the mask outside is the drawn one, so the
    // groups far from the window keep their records.
    assert!(!out["groups_in_window"].as_array().unwrap().is_empty());

    // Whole-clip optimize: no violation_id, no box.
    let whole = ok(
        &mut host,
        "optimize",
        json!({"layout": copy_s, "deck": acceptance_deck(), "clip_um": [0.0, 0.0, 2.048, 2.048], "pixel_nm": 8, "iterations": 2, "refine_iterations": 0}),
    );
    assert_eq!(whole["target"]["mode"], "clip");
    assert_eq!(whole["window_nm"], whole["clip_nm"]);

    // Both exclusive targets: a schema error.
    let e = err(
        &mut host,
        "optimize",
        json!({"violation_id": vid, "box_um": [0, 0, 1, 1]}),
    );
    assert_eq!(e["code"], "INVALID_INPUT");

    // Connection 2 (a new session): the cache is empty. Nothing was cached and dropped
    // here, so not CACHE_EVICTED: NOT_FOUND, naming the layout (the deck of a shipped
    // hash is found from the id, D181).
    drop(host);
    let mut host = start(tmp.path(), &artifacts);
    let e = err(&mut host, "optimize", json!({"violation_id": vid}));
    assert_eq!(e["code"], "NOT_FOUND", "{e}");
    assert_eq!(e["recoverable"], true);
    assert_eq!(e["details"]["missing_arguments"], json!(["layout"]));
    assert!(e["details"]["hint"].as_str().unwrap().contains("layout"));
    // Re-resolved from the self-describing id with the layout pinned.
    let out = ok(
        &mut host,
        "optimize",
        json!({"violation_id": vid, "layout": copy_s, "deck": acceptance_deck(), "clip_um": [0.0, 0.0, 2.048, 2.048], "pixel_nm": 8, "tile_nm": 1024, "iterations": 2, "refine_iterations": 0, "layout_artifact_id": report["layout"]["sha256"]}),
    );
    assert_eq!(out["target"]["resolved_from"], "violation_id");
    assert_eq!(
        out["target"]["resolved_violation_id"],
        canonical["violation_id"]
    );
    // A pin that names another layout.
    let e = err(
        &mut host,
        "optimize",
        json!({"violation_id": vid, "layout": copy_s, "deck": acceptance_deck(), "layout_artifact_id": "0000000000000000"}),
    );
    assert_eq!(e["code"], "LAYOUT_NOT_PINNED", "{e}");
    // The layout changed since evaluate: its hash no longer matches the id.
    std::fs::copy(fixtures_dir().join("layouts/observer_demo.gds"), &copy).unwrap();
    let e = err(
        &mut host,
        "optimize",
        json!({"violation_id": vid, "layout": copy_s, "deck": acceptance_deck(), "clip_um": [0.0, 0.0, 2.048, 2.048], "pixel_nm": 8, "iterations": 1, "refine_iterations": 0}),
    );
    assert_eq!(e["code"], "LAYOUT_NOT_PINNED", "{e}");
    assert_eq!(e["recoverable"], false);
    // The layout is gone.
    std::fs::remove_file(&copy).unwrap();
    let e = err(
        &mut host,
        "optimize",
        json!({"violation_id": vid, "layout": copy_s, "deck": acceptance_deck()}),
    );
    assert_eq!(e["code"], "LAYOUT_NOT_PINNED", "{e}");
    assert_eq!(e["details"]["reason"], "layout_gone");
}

#[test]
fn simulate_writes_aerial_resist_and_printed_images_with_statistics() {
    let tmp = tempfile::tempdir().unwrap();
    let artifacts = tmp.path().join("artifacts");
    let mut host = start(tmp.path(), &artifacts);
    let layout = fixtures_dir().join("layouts/lines_and_pad.glp");
    let out = ok(
        &mut host,
        "simulate",
        json!({"layout": layout, "pixel_nm": 8, "images": true}),
    );
    let st = &out["statistics"];
    let a = &st["aerial_intensity"];
    assert!(a["min"].as_f64() <= a["mean"].as_f64() && a["mean"].as_f64() <= a["max"].as_f64());
    assert!(a["max"].as_f64().unwrap() > 0.225, "something prints: {st}");
    assert_eq!(st["printed_px"], st["corners"][0]["printed_px"]);
    assert_eq!(
        st["printed_area_nm2"].as_f64().unwrap(),
        st["printed_px"].as_f64().unwrap() * 64.0
    );
    let root = artifacts.canonicalize().unwrap();
    for kind in ["aerial", "resist", "printed"] {
        let npy_path = out["images"][kind]["npy"]["path"].as_str().unwrap();
        let png_path = out["images"][kind]["png"]["path"].as_str().unwrap();
        assert!(Path::new(npy_path).starts_with(&root), "{npy_path}");
        let npy = std::fs::read(npy_path).unwrap();
        assert_eq!(&npy[..6], b"\x93NUMPY");
        let hlen = usize::from(u16::from_le_bytes([npy[8], npy[9]]));
        let header = String::from_utf8_lossy(&npy[10..10 + hlen]).into_owned();
        assert!(header.contains("'shape': (256, 256)"), "{header}");
        let elem = if kind == "printed" { 1 } else { 4 };
        assert_eq!(npy.len(), 10 + hlen + 256 * 256 * elem);
        let png = std::fs::read(png_path).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    }
    // The printed .npy holds exactly the printed pixels the statistics count.
    let npy = std::fs::read(out["images"]["printed"]["npy"]["path"].as_str().unwrap()).unwrap();
    let hlen = usize::from(u16::from_le_bytes([npy[8], npy[9]]));
    let ones = npy[10 + hlen..].iter().filter(|&&b| b == 1).count();
    assert_eq!(ones as u64, st["printed_px"].as_u64().unwrap());
    // Without images: statistics, no files.
    let plain = ok(
        &mut host,
        "simulate",
        json!({"layout": layout, "pixel_nm": 8}),
    );
    assert!(plain["images"].is_null());
    assert_eq!(plain["statistics"]["printed_px"], st["printed_px"]);
}

#[test]
fn a_long_optimize_is_cancelled_mid_ilt_and_the_next_one_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let artifacts = tmp.path().join("artifacts");
    let mut host = start(tmp.path(), &artifacts);
    let args = json!({"layout": acceptance_layout(), "deck": acceptance_deck(), "clip_um": [0.0, 0.0, 2.048, 2.048], "pixel_nm": 4, "iterations": 10000, "render": "json"});
    let started = host.request(
        json!("start"),
        "tools/call",
        json!({"name": "optimize", "arguments": args}),
    );
    let job_id = started["result"]["structuredContent"]["job_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // Wait until the ILT loop reports iterations.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let polled = host.request(
            json!(format!("poll-{}", uuid_like())),
            "tools/call",
            json!({"name": "poll", "arguments": {"job_id": job_id, "render": "json"}}),
        );
        let s = &polled["result"]["structuredContent"];
        let message = s["progress"]["message"].as_str().unwrap_or("");
        if message.starts_with("ilt iteration") {
            break;
        }
        assert_ne!(s["status"], "completed", "10000 iterations finished: {s}");
        assert!(std::time::Instant::now() < deadline, "no ILT progress: {s}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let t0 = std::time::Instant::now();
    let cancelled = host.request(
        json!("cancel"),
        "tools/call",
        json!({"name": "cancel", "arguments": {"job_id": job_id, "render": "json"}}),
    );
    assert_eq!(
        cancelled["result"]["structuredContent"]["status"], "cancelled",
        "{cancelled}"
    );
    let polled = host.request(
        json!("after"),
        "tools/call",
        json!({"name": "poll", "arguments": {"job_id": job_id, "render": "json"}}),
    );
    assert_eq!(polled["result"]["structuredContent"]["status"], "cancelled");
    eprintln!("cancelled mid-ILT in {:?}", t0.elapsed());
    let next = ok(
        &mut host,
        "optimize",
        json!({"layout": acceptance_layout(), "deck": acceptance_deck(), "clip_um": [0.0, 0.0, 2.048, 2.048], "pixel_nm": 8, "iterations": 1, "refine_iterations": 0}),
    );
    assert_eq!(next["status"], "completed");
}

#[test]
fn reticle_demo_writes_a_png_of_the_violations() {
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("demo");
    let out = std::process::Command::new(reticle_tests::binary("reticle"))
        .args(["demo", "--pixel-nm", "8", "--out"])
        .arg(&out_dir)
        .env("RETICLE_BACKEND", "cpu")
        .env(
            "RETICLE_WORKER_BIN",
            reticle_tests::binary("reticle-worker"),
        )
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    let png = out_dir.canonicalize().unwrap().join("demo_violations.png");
    assert!(
        stdout.contains(&format!("picture: {}", png.display())),
        "{stdout}"
    );
    assert!(stderr.contains("wrote"), "{stderr}");
    assert!(
        stdout.contains("iccad13-m1") || stdout.contains("M1."),
        "{stdout}"
    );
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
}
