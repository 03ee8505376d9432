//! KLayout DRC: `run_drc_script` reports what KLayout itself reports, and
//! `extract_markers` crops its markers.

use super::*;

fn klayout_bin() -> String {
    let bin = std::env::var("KLAYOUT_BIN").unwrap_or_else(|_| "klayout".into());
    let found = Command::new(&bin).arg("-v").output();
    assert!(
        found.as_ref().is_ok_and(|o| o.status.success()),
        "KLayout is required for the DRC tests (scripts/setup.sh test installs it): {bin}: {found:?}"
    );
    bin
}

/// Markers KLayout itself reports for `deck` on `layout` (an independent batch run).
fn klayout_marker_counts(
    bin: &str,
    deck: &Path,
    layout: &Path,
    params: &[(&str, &str)],
) -> Vec<(String, u64)> {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.lyrdb");
    let mut cmd = Command::new(bin);
    cmd.arg("-b").arg("-r").arg(deck);
    cmd.arg("-rd").arg(format!("input={}", layout.display()));
    cmd.arg("-rd").arg(format!("report={}", report.display()));
    for (k, v) in params {
        cmd.arg("-rd").arg(format!("{k}={v}"));
    }
    cmd.env("HOME", dir.path());
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let xml = std::fs::read_to_string(report).unwrap();
    let mut counts = std::collections::BTreeMap::<String, u64>::new();
    for item in xml.split("<item>").skip(1) {
        let cat = item
            .split("<category>")
            .nth(1)
            .and_then(|s| s.split("</category>").next())
            .unwrap()
            .trim_matches('\'')
            .to_owned();
        *counts.entry(cat).or_default() += 1;
    }
    counts.into_iter().collect()
}

#[test]
fn run_drc_script_reports_what_klayout_reports_and_extract_markers_crops_them() {
    let bin = klayout_bin();
    let mut o = Observer::start(&[("KLAYOUT_BIN", bin.as_str())]);
    let deck = fixtures_dir().join("decks/width_space.drc");
    let opened = o.open(&demo_gds());
    let sid = opened["session_id"].clone();
    let run = o.ok(
        "run_drc_script",
        json!({"session_id": sid, "script_path": deck, "script_type": "ruby", "params": {"WG_MIN_SPACE": "0.3", "WG_MIN_WIDTH": "0.3"}}),
    );
    assert_eq!(run["return_code"], 0);
    assert_eq!(run["script_type"], "ruby");
    let expected = klayout_marker_counts(
        &bin,
        &deck,
        &demo_gds(),
        &[("WG_MIN_SPACE", "0.3"), ("WG_MIN_WIDTH", "0.3")],
    );
    assert_eq!(
        expected,
        [
            ("wg_min_space".to_owned(), 1),
            ("wg_min_width".to_owned(), 1)
        ]
    );
    let got: Vec<(String, u64)> = run["rule_counts"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect();
    assert_eq!(got, expected, "{run}");
    assert_eq!(run["marker_count"], 2);
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    let run_dir = PathBuf::from(opened["artifact_root"].as_str().unwrap())
        .join("drc")
        .join(&run_id);
    for f in [
        "report.lyrdb",
        "markers.json",
        "layout.gds",
        "stdout.txt",
        "stderr.txt",
    ] {
        assert!(run_dir.join(f).is_file(), "{f} missing in {run_dir:?}");
    }
    assert_eq!(
        std::fs::read(run_dir.join("layout.gds")).unwrap(),
        std::fs::read(demo_gds()).unwrap(),
        "the deck ran on a copy of the session layout"
    );
    let report = run["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["kind"] == "drc_report")
        .unwrap();
    assert_eq!(report["path"], json!(run_dir.join("report.lyrdb")));
    let markers_json: Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("markers.json")).unwrap()).unwrap();
    assert_eq!(markers_json["marker_count"], 2);

    // Parameters are data: a smaller minimum space finds no space marker.
    let relaxed = o.ok(
        "run_drc_script",
        json!({"session_id": sid, "script_path": deck, "params": {"WG_MIN_SPACE": "0.1"}}),
    );
    let expected = klayout_marker_counts(&bin, &deck, &demo_gds(), &[("WG_MIN_SPACE", "0.1")]);
    assert_eq!(expected, [("wg_min_width".to_owned(), 1)]);
    assert_eq!(relaxed["rule_counts"], json!({"wg_min_width": 1}));
    assert_ne!(relaxed["run_id"], run["run_id"]);
    // A shell fragment in a value stays a string.
    let odd = o.ok(
        "run_drc_script",
        json!({"session_id": sid, "script_path": deck, "params": {"WG_MIN_SPACE": "0.3; touch /tmp/reticle_pwned"}}),
    );
    assert_eq!(odd["return_code"], 0);
    assert!(!Path::new("/tmp/reticle_pwned").exists());

    let markers = o.ok(
        "extract_markers",
        json!({"session_id": sid, "run_id": run_id, "include_crops": true, "crop_size_um": {"x": 4.0, "y": 4.0}}),
    );
    let list = markers["markers"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(markers["truncation"]["markers_dropped"], 0);
    let width = list.iter().find(|m| m["rule"] == "wg_min_width").unwrap();
    assert_eq!(width["box_um"], mbox(10.0, 5.0, 10.2, 8.0));
    let space = list.iter().find(|m| m["rule"] == "wg_min_space").unwrap();
    assert_eq!(space["box_um"], mbox(14.0, 5.0, 14.2, 8.0));
    for m in list {
        let crop = PathBuf::from(m["crop"]["path"].as_str().unwrap());
        assert!(crop.starts_with(run_dir.join("crops")), "{crop:?}");
        let (w, h, _) = decode_png(&std::fs::read(&crop).unwrap());
        assert_eq!((w, h), (256, 256));
    }
    let plain = o.ok(
        "extract_markers",
        json!({"session_id": sid, "run_id": run_id, "include_crops": false}),
    );
    assert!(plain["markers"][0].get("crop").is_none());
    // A deck that writes no report is a DRC failure, with KLayout's output kept.
    let decks = tempfile::tempdir().unwrap();
    let bad_deck = decks.path().join("no_report.drc");
    std::fs::write(&bad_deck, "source($input)\n").unwrap();
    let root = format!("{}:{}", repo_root().display(), decks.path().display());
    drop(o);
    let mut o = Observer::start(&[
        ("KLAYOUT_BIN", bin.as_str()),
        ("RETICLE_ALLOWED_ROOTS", root.as_str()),
    ]);
    let sid = o.open(&demo_gds())["session_id"].clone();
    let e = o.err(
        "run_drc_script",
        json!({"session_id": sid, "script_path": bad_deck}),
        "DRC_RUN_FAILED",
    );
    assert!(e["message"].as_str().unwrap().contains("no report"), "{e}");
}
