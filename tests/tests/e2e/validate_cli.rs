//! `reticle validate`: exit 0 on every shipped example, 1 with RFC 6901
//! pointers on a corrupted copy, 2 on a missing or unparseable file.

use std::path::PathBuf;
use std::process::Command;

use reticle_tests::binary;
use serde_json::Value;

fn run(args: &[&str]) -> (i32, Value) {
    let out = Command::new(binary("reticle"))
        .arg("validate")
        .args(args)
        .output()
        .expect("run");
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    let value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    (out.status.code().expect("exit code"), value)
}

fn examples() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../protocol/examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("protocol/examples")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no examples in {}", dir.display());
    files
}

#[test]
fn shipped_examples_are_valid() {
    for file in examples() {
        let (code, result) = run(&[file.to_str().unwrap()]);
        assert_eq!(code, 0, "{}: {result}", file.display());
        assert_eq!(result["ok"], true);
    }
}

#[test]
fn corrupted_copy_fails_with_pointers() {
    let dir = tempfile::tempdir().unwrap();
    for file in examples() {
        let mut doc: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        doc["render"] = Value::from(3);
        doc["unexpected_field"] = Value::Bool(true);
        let copy = dir.path().join(file.file_name().unwrap());
        std::fs::write(&copy, serde_json::to_vec(&doc).unwrap()).unwrap();
        let (code, result) = run(&[copy.to_str().unwrap()]);
        assert_eq!(code, 1, "{}: {result}", copy.display());
        let paths: Vec<&str> = result["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["path"].as_str().unwrap())
            .collect();
        assert!(paths.contains(&"/render"), "{result}");
        assert!(
            paths.contains(&""),
            "additionalProperties error at the root: {result}"
        );
        let mut sorted = paths.clone();
        sorted.sort_unstable();
        assert_eq!(paths, sorted, "errors sorted by path");
    }
}

#[test]
fn missing_or_unparseable_file_exits_2() {
    let (code, result) = run(&["/nonexistent/reticle.json"]);
    assert_eq!(code, 2, "{result}");
    assert_eq!(result["reason"], "io_error");
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, b"{\"render\": ").unwrap();
    let (code, result) = run(&[bad.to_str().unwrap(), "--schema", "health.input"]);
    assert_eq!(code, 2, "{result}");
    assert_eq!(result["reason"], "parse_error");
}

/// Every shipped JSON fixture (`fixtures/**/*.json`).
fn fixture_jsons() -> Vec<PathBuf> {
    fn walk(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "json") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&reticle_tests::fixtures_dir(), &mut files);
    files.sort();
    assert!(files.len() >= 3, "shipped fixtures: {files:?}");
    files
}

/// Every shipped fixture validates against its schema: the one its `$schema` member
/// names (what `reticle validate FILE` uses), else `rule_deck` (the decks). A corrupted
/// copy exits 1 and names the pointers of what was broken.
#[test]
fn shipped_fixtures_are_valid_and_a_corrupted_copy_names_pointers() {
    let dir = tempfile::tempdir().unwrap();
    let mut named = 0;
    for file in fixture_jsons() {
        let doc: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        let file_arg = file.to_str().unwrap();
        let (code, result) = match doc.get("$schema") {
            Some(_) => {
                named += 1;
                run(&[file_arg])
            }
            None => run(&[file_arg, "--schema", "rule_deck"]),
        };
        assert_eq!(code, 0, "{}: {result}", file.display());
        assert_eq!(result["ok"], true);
        let mut broken = doc.clone();
        let expected: [&str; 2] = if doc.get("$schema").is_some() {
            broken["counts"]["records"] = Value::from("100");
            broken["assertions"][0]["scope"] = Value::from("everything");
            ["/counts/records", "/assertions/0/scope"]
        } else {
            broken["version"] = Value::from(7);
            broken["layers"] = Value::from("M1");
            ["/version", "/layers"]
        };
        let copy = dir.path().join(file.file_name().unwrap());
        std::fs::write(&copy, serde_json::to_vec(&broken).unwrap()).unwrap();
        let mut args = vec![copy.to_str().unwrap()];
        if doc.get("$schema").is_none() {
            args.extend(["--schema", "rule_deck"]);
        }
        let (code, result) = run(&args);
        assert_eq!(code, 1, "{}: {result}", copy.display());
        let paths: Vec<&str> = result["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["path"].as_str().unwrap())
            .collect();
        assert!(
            expected.iter().all(|p| paths.contains(p)),
            "{}: expected {expected:?} in {result}",
            file.display()
        );
    }
    assert!(named >= 1, "the acceptance fixture names its schema");
}
