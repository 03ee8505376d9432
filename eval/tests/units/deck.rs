//! Unit tests of `reticle_eval::deck`: loading decks and the target layer.

use std::path::Path;

use reticle_eval::deck::*;
use reticle_kernel::rules::RuleDeck;
use reticle_protocol::{ErrorCode, ToolError};

fn no_file(_: &Path) -> Result<DeckFile, ToolError> {
    panic!("no file should be read")
}

#[test]
fn shipped_decks_parse() {
    for (name, text) in SHIPPED_DECKS {
        assert!(RuleDeck::from_json(text).is_ok(), "{name}");
        let (deck, source) = load(name, no_file).unwrap();
        assert_eq!(source, format!("shipped:{name}"));
        assert!(!deck.rules.is_empty());
    }
}

#[test]
fn names_paths_and_misspellings() {
    assert!(is_path("decks/x") && is_path("x.json") && !is_path("iccad13"));
    let e = load("iccad13", no_file).unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);
    let (_, source) = load("some/deck.json", |p| {
        assert_eq!(p, Path::new("some/deck.json"));
        Ok(DeckFile {
            text: SHIPPED_DECKS[0].1.to_owned(),
            file_name: "deck.json".into(),
        })
    })
    .unwrap();
    assert_eq!(source, "file:deck.json");
    let e = load("bad.json", |_| {
        Ok(DeckFile {
            text: "{}".into(),
            file_name: "bad.json".into(),
        })
    })
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
}

#[test]
fn the_target_layer_is_the_callers_or_the_decks_only_one() {
    let (deck, _) = load("iccad13_m1", no_file).unwrap();
    let only = deck.rules[0].layer;
    assert_eq!(target_layer(&deck, None).unwrap(), only);
    assert_eq!(target_layer(&deck, Some(&only.to_string())).unwrap(), only);
    for bad in ["x", "999/999"] {
        let e = target_layer(&deck, Some(bad)).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidLayer, "{bad}");
    }
}
