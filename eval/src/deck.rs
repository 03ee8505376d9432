//! Rule decks: the decks shipped with reticle, parsing a deck's text, and which layers an
//! evaluation reads (the target layer, and the second layers of its enclosure rules).
//!
//! Reading a deck file is the caller's (the worker confines the path to the job's roots
//! and bounds its size): [`load`] takes the reader as a function.

use std::collections::BTreeSet;
use std::path::Path;

use reticle_kernel::rules::deck::parse_layer_spec;
use reticle_kernel::rules::{AppliesTo, DeckLayer, RuleDeck, RuleKind};
use reticle_protocol::{ErrorCode, ToolError};
use serde_json::json;

use crate::error::invalid;

/// Decks shipped with reticle, usable by name (`deck: "iccad13_m1"`).
pub const SHIPPED_DECKS: &[(&str, &str)] = &[
    (
        "iccad13_m1",
        include_str!("../../fixtures/decks/iccad13_m1.json"),
    ),
    (
        "nangate45_m1v1",
        include_str!("../../fixtures/decks/nangate45_m1v1.json"),
    ),
    (
        "nangate45_m1_litho",
        include_str!("../../fixtures/decks/nangate45_m1_litho.json"),
    ),
];

/// A deck file's text and its file name (for the report's `deck.source`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeckFile {
    /// The file's contents.
    pub text: String,
    /// The file name, without directories.
    pub file_name: String,
}

/// Whether a `deck` argument that names no shipped deck is a path: it contains `/` or
/// ends in `.json` (anything else is a misspelt shipped name).
#[must_use]
pub fn is_path(spec: &str) -> bool {
    spec.contains('/') || spec.ends_with(".json")
}

/// The deck `spec` names: a shipped deck by name, else a file read with `read_file`,
/// with where it came from (`shipped:<name>` or `file:<file name>`).
///
/// # Errors
/// `NOT_FOUND` for a name that is neither shipped nor a path, `INVALID_INPUT` for a deck
/// that does not parse, and whatever `read_file` returns.
pub fn load(
    spec: &str,
    read_file: impl FnOnce(&Path) -> Result<DeckFile, ToolError>,
) -> Result<(RuleDeck, String), ToolError> {
    let (text, source) = if let Some((name, text)) = SHIPPED_DECKS.iter().find(|(n, _)| *n == spec)
    {
        ((*text).to_owned(), format!("shipped:{name}"))
    } else if is_path(spec) {
        let file = read_file(Path::new(spec))?;
        (file.text, format!("file:{}", file.file_name))
    } else {
        let shipped: Vec<&str> = SHIPPED_DECKS.iter().map(|(n, _)| *n).collect();
        return Err(ToolError::new(
            ErrorCode::NotFound,
            format!(
                "no shipped rule deck named {spec:?} (a path must contain '/' or end in .json)"
            ),
        )
        .with_details(json!({"deck": spec, "shipped": shipped})));
    };
    let deck = RuleDeck::from_json(&text).map_err(|e| {
        invalid(
            format!("invalid rule deck: {e}"),
            json!({"deck": spec, "error": e.to_string()}),
        )
    })?;
    Ok((deck, source))
}

/// The layer evaluated: the caller's, else the deck's only layer.
///
/// # Errors
/// `INVALID_LAYER` for a malformed layer, a deck with several layers and no choice, or a
/// layer the deck has no rules for.
pub fn target_layer(deck: &RuleDeck, layer: Option<&str>) -> Result<DeckLayer, ToolError> {
    let deck_layers: BTreeSet<String> = deck.rules.iter().map(|r| r.layer.to_string()).collect();
    let target = match layer {
        Some(text) => parse_layer_spec(text).ok_or_else(|| {
            ToolError::new(
                ErrorCode::InvalidLayer,
                format!("layer must be \"layer/datatype\", got {text:?}"),
            )
            .with_details(json!({"layer": text}))
        })?,
        None if deck_layers.len() == 1 => deck.rules[0].layer,
        None => {
            return Err(ToolError::new(
                ErrorCode::InvalidLayer,
                "the deck has rules on several layers; name one with `layer`",
            )
            .with_details(json!({"deck_layers": deck_layers})));
        }
    };
    if !deck_layers.contains(&target.to_string()) {
        return Err(ToolError::new(
            ErrorCode::InvalidLayer,
            format!("the deck has no rules for layer {target}"),
        )
        .with_details(json!({"layer": target.to_string(), "deck_layers": deck_layers})));
    }
    Ok(target)
}

/// The second layers the deck's mask enclosure rules on `target` need (read with the
/// target, clipped to the same window, not imaged), sorted, without repeats.
#[must_use]
pub fn context_layers(deck: &RuleDeck, target: DeckLayer) -> Vec<String> {
    let mut layers: Vec<String> = deck
        .rules
        .iter()
        .filter(|r| {
            r.layer == target && r.kind == RuleKind::Enclosure && r.applies_to == AppliesTo::Mask
        })
        .filter_map(|r| r.other_layer.map(|l| l.to_string()))
        .collect();
    layers.sort();
    layers.dedup();
    layers
}
