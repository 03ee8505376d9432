//! The shipped rule decks validate against `protocol/schemas/rule_deck.json` and load.

use std::path::{Path, PathBuf};

use reticle_kernel::rules::{DeckError, RuleDeck, RuleKind};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn schema() -> jsonschema::Validator {
    let text = std::fs::read_to_string(root().join("protocol/schemas/rule_deck.json")).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    jsonschema::validator_for(&value).unwrap()
}

fn decks() -> Vec<(PathBuf, String)> {
    let mut out: Vec<(PathBuf, String)> = std::fs::read_dir(root().join("fixtures/decks"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let t = std::fs::read_to_string(&p).unwrap();
            (p, t)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn shipped_decks_validate_and_load() {
    let v = schema();
    let decks = decks();
    assert!(
        decks.len() >= 2,
        "expected the shipped decks, found {}",
        decks.len()
    );
    for (path, text) in decks {
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        let errors: Vec<String> = v.iter_errors(&json).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{}: {errors:?}", path.display());
        let deck = RuleDeck::from_json(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(!deck.rules.is_empty());
        assert!(deck.deck_hash().starts_with("sha256:"));
    }
}

#[test]
fn iccad_deck_has_the_contest_limits() {
    let text = std::fs::read_to_string(root().join("fixtures/decks/iccad13_m1.json")).unwrap();
    let deck = RuleDeck::from_json(&text).unwrap();
    let w = deck.rule("M1.W.1").unwrap();
    assert_eq!((w.kind, w.value), (RuleKind::Width, 40.0));
    let e = deck.rule("M1.EPE.1").unwrap();
    assert_eq!((e.kind, e.value), (RuleKind::Epe, 15.0));
    assert!(deck.rules.iter().any(|r| r.kind == RuleKind::Pvband));
}

#[test]
fn schema_and_loader_reject_the_same_bad_decks() {
    let v = schema();
    let bad = [
        r#"{"name":"x","version":"1","rules":[{"id":"E","kind":"enclosure","layer":"1/0","value":5}]}"#,
        r#"{"name":"x","version":"1","rules":[{"id":"W","kind":"width","layer":"1/0","value":0}]}"#,
        r#"{"name":"x","version":"1","rules":[{"id":"W","kind":"width","layer":"1/0","value":5,"colour":1}]}"#,
        r#"{"name":"x","version":"1","rules":[]}"#,
        r#"{"name":"x","version":"1","rules":[{"id":"W","kind":"width","layer":"1/0","other_layer":"2/0","value":5}]}"#,
    ];
    for text in bad {
        let json: serde_json::Value = serde_json::from_str(text).unwrap();
        assert!(!v.is_valid(&json), "schema accepted {text}");
        assert!(RuleDeck::from_json(text).is_err(), "loader accepted {text}");
    }
    // Duplicate ids: only the loader can see them.
    let dup = r#"{"name":"x","version":"1","rules":[
        {"id":"A","kind":"width","layer":"1/0","value":5},
        {"id":"A","kind":"space","layer":"1/0","value":5}]}"#;
    assert_eq!(
        RuleDeck::from_json(dup),
        Err(DeckError::DuplicateId("A".into()))
    );
}
