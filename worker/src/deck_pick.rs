//! `evaluate` and `optimize` without `deck` (issue 28 item 7, seed 000; D185): the shipped
//! deck whose layers the layout has.
//!
//! A shipped deck fits a GDSII/OASIS layout when every layer its rules read (each rule's
//! layer, and an enclosure's outer layer) holds shapes in the layout, and a `.glp` clip
//! when every layer *name* of the deck (`layers` in the deck file, e.g. `M1`) is one of the
//! clip's levels. Exactly one fitting deck is used; none or several is `INVALID_INPUT`
//! listing every shipped deck with its layers and whether it fits, and the hint to name one.

use std::collections::BTreeSet;
use std::path::Path;

use reticle_eval::deck::SHIPPED_DECKS;
use reticle_layout::Format;
use reticle_protocol::error::{ErrorCode, ToolError};
use serde_json::{Value, json};

use crate::attempt::AttemptCtx;
use crate::layouts::{LayoutRef, load_indexed, read_file};
use crate::tiled::is_glp;

/// What a layout offers a deck: its `layer/datatype`s (GDSII/OASIS) or level names (`.glp`).
fn layout_layers(ctx: &AttemptCtx<'_>, path: &Path) -> Result<(bool, BTreeSet<String>), ToolError> {
    let path = ctx.readable(path)?;
    if is_glp(&path) {
        let bytes = read_file(ctx, &path)?;
        let layout = reticle_layout::glp::parse(&bytes).map_err(|e| {
            ToolError::new(
                ErrorCode::UnsupportedFormat,
                format!("not a valid .glp file: {e}"),
            )
        })?;
        return Ok((
            true,
            layout.shapes.iter().map(|s| s.layer.clone()).collect(),
        ));
    }
    let head = read_file(ctx, &path)?;
    let format = Format::sniff(&head).ok_or_else(|| {
        ToolError::new(
            ErrorCode::UnsupportedFormat,
            "not a GDSII or OASIS file (and not a .glp clip)",
        )
        .with_details(json!({"path": path}))
    })?;
    let (index, _) = load_indexed(
        ctx,
        &LayoutRef {
            path,
            format: format.name().to_owned(),
            sha256: None,
        },
    )?;
    let layers = index
        .library()
        .layers()
        .iter()
        .map(|k| format!("{}/{}", k.layer, k.datatype))
        .collect();
    Ok((false, layers))
}

/// The layers a shipped deck needs: `layer/datatype`s, or the deck file's layer names.
fn deck_needs(text: &str, glp: bool) -> Result<BTreeSet<String>, ToolError> {
    let file: Value = serde_json::from_str(text)
        .map_err(|e| ToolError::new(ErrorCode::InternalError, format!("shipped deck: {e}")))?;
    let layers = file["layers"].as_object().cloned().unwrap_or_default();
    Ok(if glp {
        layers.keys().cloned().collect()
    } else {
        layers
            .values()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    })
}

/// The shipped deck whose layers `layout` has.
///
/// # Errors
/// `INVALID_INPUT` (none or several fit, listing them), the read's errors.
pub fn deck_for_layout(ctx: &AttemptCtx<'_>, layout: &Path) -> Result<String, ToolError> {
    let (glp, has) = layout_layers(ctx, layout)?;
    let mut candidates = Vec::new();
    let mut fitting = Vec::new();
    for (name, text) in SHIPPED_DECKS {
        let needs = deck_needs(text, glp)?;
        let fits = !needs.is_empty() && needs.is_subset(&has);
        if fits {
            fitting.push((*name).to_owned());
        }
        candidates.push(json!({"deck": name, "layers": needs, "fits": fits}));
    }
    match fitting.as_slice() {
        [one] => Ok(one.clone()),
        _ => Err(ToolError::new(
            ErrorCode::InvalidInput,
            if fitting.is_empty() {
                "no deck named, and no shipped deck's layers are all in the layout: name one"
            } else {
                "no deck named, and several shipped decks fit the layout's layers: name one"
            },
        )
        .with_details(json!({
            // As a schema error names the argument to fix (`{path, msg}`).
            "errors": [{"path": "/deck", "msg": "required: no single shipped deck fits the layout's layers"}],
            "fitting": fitting,
            "shipped_decks": candidates,
            "layout_layers": has,
        }))
        .with_hint("pass deck: one of the fitting shipped decks, or the path of a rule-deck JSON")),
    }
}
