//! Unit tests of rule-deck parsing and hashing (`reticle_kernel::rules::deck`).

use reticle_kernel::rules::deck::*;

const DECK: &str = r#"{
    "name": "t", "version": "1",
    "layers": {"M1": "11/0", "V1": "12/0"},
    "defaults": {"severity": "warning", "dedup_radius_nm": 20, "applies_to": "printed"},
    "rules": [
        {"id": "M1.W", "kind": "width", "layer": "M1", "value": 40},
        {"id": "M1.S", "kind": "space", "layer": "11/0", "value": 40, "severity": "error",
         "metric": "projection"},
        {"id": "V1.EN", "kind": "enclosure", "layer": "V1", "other_layer": "M1", "value": 5,
         "applies_to": "mask"}
    ]
}"#;

#[test]
fn parses_resolves_defaults_and_aliases() {
    let deck = RuleDeck::from_json(DECK).unwrap();
    assert_eq!(deck.rules.len(), 3);
    let w = deck.rule("M1.W").unwrap();
    assert_eq!(
        w.layer,
        DeckLayer {
            layer: 11,
            datatype: 0
        }
    );
    assert_eq!(w.severity, Severity::Warning);
    assert_eq!(w.dedup_radius_nm, 20.0);
    assert_eq!(w.metric, Metric::Euclidean);
    let s = deck.rule("M1.S").unwrap();
    assert_eq!(s.severity, Severity::Error);
    assert_eq!(s.metric, Metric::Projection);
    let e = deck.rule("V1.EN").unwrap();
    assert_eq!(
        e.other_layer,
        Some(DeckLayer {
            layer: 11,
            datatype: 0
        })
    );
    assert_eq!(e.applies_to, AppliesTo::Mask);
}

fn with_rules(rules: &str) -> Result<RuleDeck, DeckError> {
    RuleDeck::from_json(&format!(
        r#"{{"name":"t","version":"1","rules":[{rules}]}}"#
    ))
}

#[test]
fn typed_errors() {
    let w = r#"{"id":"A","kind":"width","layer":"1/0","value":10}"#;
    assert_eq!(
        with_rules(&format!("{w},{w}")),
        Err(DeckError::DuplicateId("A".into()))
    );
    assert_eq!(
        with_rules(r#"{"id":"E","kind":"enclosure","layer":"1/0","value":10}"#),
        Err(DeckError::MissingOtherLayer("E".into()))
    );
    assert_eq!(
        with_rules(r#"{"id":"W","kind":"width","layer":"1/0","other_layer":"2/0","value":1}"#),
        Err(DeckError::UnexpectedOtherLayer("W".into()))
    );
    assert!(matches!(
        with_rules(r#"{"id":"Z","kind":"width","layer":"1/0","value":0}"#),
        Err(DeckError::NonPositiveValue { .. })
    ));
    assert!(matches!(
        with_rules(r#"{"id":"Z","kind":"area","layer":"1/0","value":-5}"#),
        Err(DeckError::NonPositiveValue { .. })
    ));
    assert!(matches!(
        with_rules(r#"{"id":"L","kind":"width","layer":"metal","value":5}"#),
        Err(DeckError::UnknownLayer { .. })
    ));
    assert!(matches!(
        with_rules(r#"{"id":"D","kind":"width","layer":"1/0","value":5,"dedup_radius_nm":-1}"#),
        Err(DeckError::BadDedupRadius { .. })
    ));
    assert!(matches!(
        with_rules(r#"{"id":"T","kind":"width","layer":"1/0","value":5,"typo":1}"#),
        Err(DeckError::Parse(_))
    ));
    assert!(matches!(
        with_rules(r#"{"id":"K","kind":"girth","layer":"1/0","value":5}"#),
        Err(DeckError::Parse(_))
    ));
    assert_eq!(with_rules(""), Err(DeckError::NoRules));
}

#[test]
fn hash_ignores_key_order_whitespace_and_spelled_out_defaults() {
    let a = with_rules(r#"{"id":"A","kind":"width","layer":"1/0","value":10}"#).unwrap();
    let b = RuleDeck::from_json(
        r#"{ "rules": [ {"value": 10, "layer": "1", "kind": "width", "id": "A",
            "severity": "error", "metric": "euclidean", "applies_to": "printed",
            "dedup_radius_nm": 0} ], "version": "1", "name": "t" }"#,
    )
    .unwrap();
    assert_eq!(a.deck_hash(), b.deck_hash());
    assert!(a.deck_hash().starts_with("sha256:"));
    assert_eq!(a.deck_hash().len(), 7 + 64);
    let c = with_rules(r#"{"id":"A","kind":"width","layer":"1/0","value":11}"#).unwrap();
    assert_ne!(a.deck_hash(), c.deck_hash());
    // Canonical form: sorted keys, no whitespace.
    let canon = a.canonical_json();
    assert!(canon.starts_with(r#"{"name":"t","rules":[{"applies_to":"printed","#));
    assert!(!canon.contains(' '));
}
