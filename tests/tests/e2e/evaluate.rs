//! `evaluate` end to end (seed 000): the MCP tool and `reticle eval` on real worker
//! processes. G3 (the CLI's JSON is the tool's structured bytes, on the CPU and the GPU
//! backends), the golden aggregate report, deterministic group ids across runs, tiles
//! and windows, canonical/shadow records, truncation and degradation past the limits,
//! typed errors for bad input, and the capabilities matrix on the tool descriptor.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use reticle_tests::{Host, SEED000_RECORD_FIELDS, binary, fixtures_dir, repo_root};
use serde_json::{Value, json};

/// A deck of mask rules made to fire on `lines_and_pad.glp` (60 nm lines 80 nm apart):
/// width < 70 on every line, space < 100 between lines (radius 0, per edge pair), and
/// the same space rule with a 200 nm dedup radius so the four gaps form one group.
const TEST_DECK: &str = r#"{
  "name": "test-mrc", "version": "1.0.0",
  "layers": {"M1": "1/0"},
  "defaults": {"severity": "error", "applies_to": "mask", "dedup_radius_nm": 0},
  "rules": [
    {"id": "T.W.MRC", "kind": "width", "layer": "M1", "value": 70},
    {"id": "T.S.MRC", "kind": "space", "layer": "M1", "value": 100},
    {"id": "T.S.GRP", "kind": "space", "layer": "M1", "value": 100, "dedup_radius_nm": 200, "severity": "warning"}
  ]
}"#;

fn layout() -> String {
    fixtures_dir()
        .join("layouts/lines_and_pad.glp")
        .display()
        .to_string()
}

/// A temp dir holding the test deck; allowed next to the fixtures.
fn deck_dir() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("test_mrc.json");
    std::fs::write(&path, TEST_DECK).unwrap();
    let p = path.display().to_string();
    (dir, p)
}

fn roots(extra: &Path) -> String {
    std::env::join_paths([fixtures_dir(), extra.to_path_buf()])
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

fn start(backend: &str, roots: &str) -> Host {
    let mut host = Host::start_with(&[
        ("RETICLE_ALLOWED_ROOTS", roots),
        ("RETICLE_BACKEND", backend),
    ]);
    host.request(
        json!("init"),
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}}),
    );
    host.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    host
}

fn call(host: &mut Host, id: &str, arguments: Value) -> Value {
    host.request(
        json!(id),
        "tools/call",
        json!({"name": "evaluate", "arguments": arguments}),
    )["result"]
        .clone()
}

/// A waited evaluate call's structuredContent (panics on a tool error).
fn evaluate(host: &mut Host, id: &str, mut arguments: Value) -> Value {
    arguments["wait"] = json!(true);
    arguments["render"] = json!("json");
    let result = call(host, id, arguments);
    assert!(result["isError"] != true, "{result}");
    result["structuredContent"].clone()
}

/// The tool error of a failed call.
fn evaluate_err(host: &mut Host, id: &str, mut arguments: Value) -> Value {
    arguments["wait"] = json!(true);
    let result = call(host, id, arguments);
    assert_eq!(result["isError"], true, "{result}");
    result["structuredContent"]["error"].clone()
}

/// Starts evaluate as a job and polls it; returns poll's `result`.
fn evaluate_polled(host: &mut Host, arguments: Value) -> Value {
    let started = call(host, "start", arguments);
    let job_id = started["structuredContent"]["job_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let t0 = Instant::now();
    for n in 0.. {
        let polled = host.request(
            json!(format!("poll-{n}")),
            "tools/call",
            json!({"name": "poll", "arguments": {"job_id": job_id, "render": "json"}}),
        );
        let s = &polled["result"]["structuredContent"];
        match s["status"].as_str() {
            Some("completed") => return s["result"].clone(),
            Some("failed" | "cancelled") => panic!("job ended: {s}"),
            _ => {}
        }
        assert!(t0.elapsed() < Duration::from_secs(300), "job too slow");
        std::thread::sleep(Duration::from_millis(100));
    }
    unreachable!()
}

/// `reticle eval …` → (exit code, stdout, stderr).
fn cli(backend: &str, roots: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(binary("reticle"))
        .arg("eval")
        .args(args)
        .env("RETICLE_ALLOWED_ROOTS", roots)
        .env("RETICLE_BACKEND", backend)
        .env("RETICLE_WORKER_BIN", binary("reticle-worker"))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// G3 on one backend: the CLI's stdout is the job's result byte for byte, and the waited
/// call's structuredContent is that object with the job envelope (`job_id`, `status`)
/// appended.
fn g3(backend: &str, cli_args: &[&str], args: &Value) -> String {
    let roots = fixtures_dir().display().to_string();
    let (code, stdout, stderr) = cli(backend, &roots, cli_args);
    assert_eq!(code, 0, "stderr: {stderr}\nstdout: {stdout}");
    assert!(stderr.contains("eval: ["), "progress on stderr: {stderr}");
    let cli_bytes = stdout.strip_suffix('\n').expect("one line").to_owned();
    assert!(!cli_bytes.contains('\n'));

    let mut host = start(backend, &roots);
    let polled = evaluate_polled(&mut host, args.clone());
    assert_eq!(
        serde_json::to_string(&polled).unwrap(),
        cli_bytes,
        "poll result vs CLI"
    );
    let waited = evaluate(&mut host, "waited", args.clone());
    let waited_bytes = serde_json::to_string(&waited).unwrap();
    let envelope = format!(
        ",\"job_id\":{},\"status\":\"completed\"}}",
        waited["job_id"]
    );
    assert_eq!(
        waited_bytes,
        format!("{}{envelope}", &cli_bytes[..cli_bytes.len() - 1]),
        "waited structuredContent = CLI bytes + job envelope"
    );
    // The backend that ran is the one asked for.
    let health = host.request(
        json!("health"),
        "tools/call",
        json!({"name": "health", "arguments": {"render": "json"}}),
    );
    let kind =
        health["result"]["structuredContent"]["workers"]["workers"][0]["backend"]["kind"].clone();
    assert_eq!(kind, backend, "backend: {health}");
    cli_bytes
}

#[test]
fn g3_cli_json_is_the_structured_content_on_cpu_and_gpu() {
    let layout = layout();
    let cli_args = [
        "--report-level=detailed",
        "--format=json",
        "--deck",
        "iccad13_m1",
        &layout,
    ];
    let args = json!({"layout": layout, "deck": "iccad13_m1", "report_level": "detailed"});
    let cpu = g3("cpu", &cli_args, &args);
    let gpu = g3("gpu", &cli_args, &args);
    let (c, g): (Value, Value) = (
        serde_json::from_str(&cpu).unwrap(),
        serde_json::from_str(&gpu).unwrap(),
    );
    eprintln!(
        "cpu metrics {} / gpu metrics {}; reports byte-identical across backends: {}",
        c["metrics"],
        g["metrics"],
        cpu == gpu
    );
    // Issue 7's G3 acceptance: the same bytes from the CPU and the GPU backend. Holds on
    // this fixture (lavapipe and the CPU path agree on every printed pixel here).
    assert_eq!(cpu, gpu, "CPU and GPU reports differ");
    // Mask rules do not depend on imaging: identical on both backends.
    for (a, b) in c["counts"]["by_rule"]
        .as_array()
        .unwrap()
        .iter()
        .zip(g["counts"]["by_rule"].as_array().unwrap())
    {
        if a["applies_to"] == "mask" {
            assert_eq!(a, b);
        }
    }
}

fn golden_path() -> PathBuf {
    repo_root().join("tests/golden/evaluate_lines_and_pad_iccad13_m1.aggregate.json")
}

#[test]
fn aggregate_report_matches_the_golden_file() {
    let roots = fixtures_dir().display().to_string();
    let (code, stdout, stderr) = cli(
        "cpu",
        &roots,
        &["--format=json", "--deck", "iccad13_m1", &layout()],
    );
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["report_level"], "aggregate");
    assert!(report.get("violations").is_none());
    let pretty = serde_json::to_string_pretty(&report).unwrap() + "\n";
    if std::env::var_os("RETICLE_UPDATE_GOLDEN").is_some() {
        std::fs::write(golden_path(), &pretty).unwrap();
    }
    let golden = std::fs::read_to_string(golden_path())
        .expect("golden file (RETICLE_UPDATE_GOLDEN=1 writes it)");
    assert_eq!(pretty, golden, "aggregate report changed");
}

fn canonical_ids(report: &Value, rule: &str) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["rule_id"] == rule && r["dedup_strategy"] == "canonical")
        .map(|r| {
            (
                r["location_nm"].to_string(),
                r["violation_group_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn group_ids_are_stable_across_runs_tiles_and_windows() {
    let (dir, deck) = deck_dir();
    let mut host = start("cpu", &roots(dir.path()));
    let base = json!({"layout": layout(), "deck": deck, "report_level": "detailed", "pixel_nm": 4});
    let a = evaluate(&mut host, "a", base.clone());
    let b = evaluate(&mut host, "b", base.clone());
    let strip = |mut v: Value| {
        v.as_object_mut().unwrap().remove("job_id");
        v
    };
    assert_eq!(strip(a.clone()), strip(b), "same request, same report");

    let mut small_tiles = base.clone();
    small_tiles["tile_nm"] = json!(256);
    let t = evaluate(&mut host, "tiles", small_tiles);
    // ICCAD window is [0, 2048]²; the same side shifted by 100 nm still holds every shape.
    let mut shifted = base.clone();
    shifted["box_um"] = json!([-0.1, -0.1, 1.948, 1.948]);
    let s = evaluate(&mut host, "shifted", shifted);
    for rule in ["T.W.MRC", "T.S.MRC", "T.S.GRP"] {
        let ids = canonical_ids(&a, rule);
        assert!(!ids.is_empty(), "{rule} fires");
        assert_eq!(
            ids,
            canonical_ids(&t, rule),
            "{rule}: tile size changes no group id"
        );
        assert_eq!(
            ids,
            canonical_ids(&s, rule),
            "{rule}: window changes no group id"
        );
    }
    // 256 nm tiles split each 900 nm line's width marker across 4 tile rows, and the
    // line at x 240–300 across two tile columns: 4 × 4 + 8 records for the same 5 groups.
    let w = |r: &Value| r["counts"]["by_rule"][0]["records"].as_u64().unwrap();
    assert_eq!(a["counts"]["by_rule"][0]["groups"], json!(5));
    assert_eq!(t["counts"]["by_rule"][0]["groups"], json!(5));
    assert_eq!(w(&a), 5);
    assert_eq!(w(&t), 24);
}

#[test]
fn canonical_and_shadow_records() {
    let (dir, deck) = deck_dir();
    let mut host = start("cpu", &roots(dir.path()));
    let report = evaluate(
        &mut host,
        "d",
        json!({"layout": layout(), "deck": deck, "report_level": "detailed", "pixel_nm": 4, "tile_nm": 256}),
    );
    let violations = report["violations"].as_array().unwrap();
    let mut groups: std::collections::BTreeMap<String, Vec<&Value>> = Default::default();
    for v in violations {
        for key in SEED000_RECORD_FIELDS {
            assert!(v.get(key).is_some(), "{key} missing in {v}");
        }
        assert_eq!(v["coordinate_frame"], "input_layout_native");
        assert_eq!(
            v["dedup_provenance"]["rule_deck_hash"],
            report["deck"]["hash"]
        );
        groups
            .entry(v["violation_group_id"].as_str().unwrap().to_owned())
            .or_default()
            .push(v);
    }
    let ids: std::collections::BTreeSet<&str> = violations
        .iter()
        .map(|v| v["violation_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), violations.len(), "violation ids are unique");
    for (gid, members) in &groups {
        let canonical: Vec<_> = members
            .iter()
            .filter(|v| v["dedup_strategy"] == "canonical")
            .collect();
        assert_eq!(canonical.len(), 1, "group {gid}: one canonical record");
        let cid = canonical[0]["violation_id"].as_str().unwrap();
        for m in members {
            assert_eq!(m["dedup_provenance"]["canonical_violation_id"], cid);
            assert_eq!(m["dedup_provenance"]["group_size"], json!(members.len()));
            assert_eq!(m["rule_id"], members[0]["rule_id"]);
            assert!(m["violation_id"].as_str().unwrap().contains(gid.as_str()));
        }
    }
    // T.S.GRP: the four 80 nm gaps (140 nm apart, radius 200) are one group with
    // shadows; T.S.MRC (radius 0) keeps them apart.
    let count = |rule: &str| {
        report["counts"]["by_rule"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["rule_id"] == rule)
            .unwrap()
            .clone()
    };
    assert_eq!(count("T.S.GRP")["groups"], json!(1));
    assert_eq!(count("T.S.MRC")["groups"], json!(4));
    let grp: Vec<_> = violations
        .iter()
        .filter(|v| v["rule_id"] == "T.S.GRP")
        .collect();
    assert!(grp.len() >= 4);
    assert_eq!(
        grp.iter()
            .filter(|v| v["dedup_strategy"] == "shadow")
            .count(),
        grp.len() - 1
    );
    assert_eq!(report["counts"]["groups_by_severity"]["warning"], json!(1));
}

#[test]
fn truncation_and_degradation_past_the_limits() {
    let (dir, deck) = deck_dir();
    let mut host = start("cpu", &roots(dir.path()));
    let base = json!({"layout": layout(), "deck": deck, "report_level": "detailed", "pixel_nm": 4});
    let mut cut = base.clone();
    cut["limits"] = json!({"max_violations": 3});
    let r = evaluate(&mut host, "cut", cut);
    assert_eq!(r["truncation"]["truncated"], true);
    assert_eq!(r["truncation"]["returned"], json!(3));
    assert_eq!(r["violations"].as_array().unwrap().len(), 3);
    assert_eq!(r["degraded_to_aggregate"], false);
    assert!(r["truncation"]["total_records"].as_u64().unwrap() > 3);

    let mut degrade = base.clone();
    degrade["limits"] = json!({"max_violations": 3, "on_exceeded": "degrade_to_aggregate"});
    let d = evaluate(&mut host, "degrade", degrade);
    assert_eq!(d["degraded_to_aggregate"], true);
    assert!(d.get("violations").is_none());
    assert!(
        d["degraded_reason"]
            .as_str()
            .unwrap()
            .contains("max_violations")
    );
    assert_eq!(d["counts"], r["counts"], "aggregate counts stay whole");

    let full = evaluate(&mut host, "full", base);
    assert_eq!(full["truncation"]["truncated"], false);
    assert_eq!(
        full["violations"].as_array().unwrap().len() as u64,
        full["truncation"]["total_records"].as_u64().unwrap()
    );
}

#[test]
fn bad_input_gives_typed_errors() {
    let (dir, deck) = deck_dir();
    let mut host = start("cpu", &roots(dir.path()));
    let code = |e: &Value| e["code"].as_str().unwrap().to_owned();
    let e = evaluate_err(
        &mut host,
        "1",
        json!({"layout": layout(), "deck": "no_such_deck"}),
    );
    assert_eq!(code(&e), "NOT_FOUND", "{e}");
    let missing = dir.path().join("missing.json").display().to_string();
    let e = evaluate_err(&mut host, "2", json!({"layout": layout(), "deck": missing}));
    assert_eq!(code(&e), "FILE_NOT_FOUND", "{e}");
    let e = evaluate_err(
        &mut host,
        "3",
        json!({"layout": layout(), "deck": deck, "layer": "7/0"}),
    );
    assert_eq!(code(&e), "INVALID_LAYER", "{e}");
    let e = evaluate_err(
        &mut host,
        "4",
        json!({"layout": layout(), "deck": deck, "layer": "M1"}),
    );
    assert_eq!(code(&e), "INVALID_INPUT", "{e}");
    let e = evaluate_err(
        &mut host,
        "5",
        json!({"layout": "/etc/hostname", "deck": deck}),
    );
    assert_eq!(code(&e), "PATH_NOT_ALLOWED", "{e}");
    let e = evaluate_err(
        &mut host,
        "6",
        json!({"layout": layout(), "deck": "iccad13_m1", "report_levle": "detailed"}),
    );
    assert_eq!(code(&e), "INVALID_INPUT", "typo is an error: {e}");
    // The CLI answers with the same error object.
    let (status, stdout, _) = cli(
        "cpu",
        &roots(dir.path()),
        &["--deck", "no_such_deck", &layout()],
    );
    assert_eq!(status, 1);
    let cli_error: Value = serde_json::from_str(&stdout).unwrap();
    let e = evaluate_err(
        &mut host,
        "7",
        json!({"layout": layout(), "deck": "no_such_deck"}),
    );
    assert_eq!(cli_error["error"], e);
}

#[test]
fn the_descriptor_carries_the_capabilities_matrix() {
    let mut host = start("cpu", &fixtures_dir().display().to_string());
    let listed = host.request(json!("l"), "tools/list", json!({}));
    let tool = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "evaluate")
        .unwrap()
        .clone();
    let caps = &tool["_meta"]["capabilities"];
    assert_eq!(caps["report_levels"], json!(["aggregate", "detailed"]));
    assert_eq!(
        caps["engine_paths"]["mrc.standard"]["detailed"],
        "conditional"
    );
    assert_eq!(caps["optimize"]["available"], true);
    assert_eq!(caps["optimize"]["scopes"], json!(["group", "record_only"]));
    assert!(caps["schema_version"].is_string());
    // The violation report schema is published.
    let schema = host.request(
        json!("s"),
        "tools/call",
        json!({"name": "get_schema", "arguments": {"name": "violation_report", "render": "json"}}),
    );
    assert!(schema["result"]["isError"] != true, "{schema}");
}

#[test]
fn ctrl_c_stops_reticle_eval_and_kills_its_worker() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let roots = fixtures_dir().display().to_string();
    // 4096×4096 pixels: about 2 s of imaging, long enough to interrupt.
    let mut child = Command::new(binary("reticle"))
        .args(["eval", "--pixel-nm", "0.5", &layout()])
        .env("RETICLE_ALLOWED_ROOTS", &roots)
        .env("RETICLE_BACKEND", "cpu")
        .env("RETICLE_WORKER_BIN", binary("reticle-worker"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "eval ended early");
        if line.contains("imaging") {
            break;
        }
    }
    let workers = reticle_tests::children_of(pid);
    assert!(!workers.is_empty(), "a worker runs the job");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let started = Instant::now();
    let status = child.wait().unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(status.code(), Some(130));
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    assert!(out.is_empty(), "no report after an interrupt: {out}");
    std::thread::sleep(Duration::from_millis(200));
    for w in workers {
        assert!(!reticle_tests::alive(w), "worker {w} still alive");
    }
}

/// A two-layer GDSII (1 nm dbu): one M1 bar (11/0) and two V1 vias (12/0) on it, one
/// well inside, one whose right edge is 3 nm from the bar's end.
fn two_layer_gds(dir: &Path) -> String {
    use reticle_layout::geom::{BBox, Point};
    use reticle_layout::model::{Cell, LayerKey, Library, Shape};
    let rect = |l: i64, b: i64, r: i64, t: i64| {
        Shape::Box(BBox::from_corners(Point::new(l, b), Point::new(r, t)))
    };
    let mut cell = Cell {
        name: "TOP".into(),
        shapes: Default::default(),
        instances: Vec::new(),
    };
    cell.shapes.insert(
        LayerKey {
            layer: 11,
            datatype: 0,
        },
        vec![rect(0, 0, 400, 200)],
    );
    cell.shapes.insert(
        LayerKey {
            layer: 12,
            datatype: 0,
        },
        vec![rect(100, 60, 170, 130), rect(327, 60, 397, 130)],
    );
    let mut lib = Library::new("ENCL", 1e-9);
    lib.cells.push(cell);
    let path = dir.join("via_enclosure.gds");
    std::fs::write(&path, reticle_layout::gds::write_gds(&lib).unwrap()).unwrap();
    path.display().to_string()
}

#[test]
fn enclosure_rules_read_the_enclosing_layer() {
    let dir = tempfile::tempdir().unwrap();
    let gds = two_layer_gds(dir.path());
    let mut host = start("cpu", &roots(dir.path()));
    let report = evaluate(
        &mut host,
        "encl",
        // No box: the window is centred on the vias' extent, x = 248.5 (a half dbu).
        json!({"layout": gds, "deck": "nangate45_m1v1", "layer": "12/0", "pixel_nm": 8,
               "report_level": "detailed"}),
    );
    let by_rule = report["counts"]["by_rule"].as_array().unwrap();
    let enclosure = by_rule.iter().find(|r| r["rule_id"] == "V1.EN.M1").unwrap();
    assert_eq!(enclosure["checked"], true, "{enclosure}");
    assert_eq!(enclosure["engine_path"], "mrc.standard");
    let records: Vec<&Value> = report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["rule_id"] == "V1.EN.M1")
        .collect();
    // One edge pair: the via's right edge (x = 397) against the bar's end (x = 400).
    assert_eq!(records.len(), 1, "{records:?}");
    let [x, y] = [0, 1].map(|i| records[0]["location_nm"][i].as_f64().unwrap());
    assert!(
        (x - 398.5).abs() <= 1.0 && (60.0..=130.0).contains(&y),
        "({x}, {y})"
    );
    // The well-enclosed via and the widths are clean.
    let others: Vec<&Value> = report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["rule_id"] != "V1.EN.M1")
        .collect();
    assert!(others.is_empty(), "{others:?}");
}

/// G3 on seed 000's acceptance fixture (issue 7): its evaluate call gives the same bytes
/// through `reticle eval`, the server on the CPU backend and the server on the GPU backend,
/// and those bytes hold the fixture's 100 records in 12 groups.
#[test]
fn g3_on_the_acceptance_fixture_cli_cpu_and_gpu_agree() {
    let fixtures = fixtures_dir();
    let layout = fixtures.join("layouts/acceptance_100x4tiles.gds");
    let deck = fixtures.join("decks/acceptance_width.json");
    let (layout, deck) = (layout.to_str().unwrap(), deck.to_str().unwrap());
    let cli_args = [
        "--report-level=detailed",
        "--format=json",
        "--deck",
        deck,
        "--box",
        "0",
        "0",
        "2.048",
        "2.048",
        "--pixel-nm",
        "8",
        "--tile-nm",
        "1024",
        layout,
    ];
    let args = json!({"layout": layout, "deck": deck, "box_um": [0.0, 0.0, 2.048, 2.048],
                      "pixel_nm": 8, "tile_nm": 1024, "report_level": "detailed"});
    let cpu = g3("cpu", &cli_args, &args);
    let gpu = g3("gpu", &cli_args, &args);
    assert_eq!(
        cpu, gpu,
        "CPU and GPU reports of the acceptance fixture differ"
    );
    let report: Value = serde_json::from_str(&cpu).unwrap();
    let records = report["violations"].as_array().unwrap();
    assert_eq!(records.len(), 100, "records");
    let groups: std::collections::BTreeSet<&str> = records
        .iter()
        .map(|r| r["violation_group_id"].as_str().unwrap())
        .collect();
    assert_eq!(groups.len(), 12, "groups");
}
