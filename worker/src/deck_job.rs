//! What the ops that check a layout window against a rule deck (`evaluate`, `optimize`,
//! `demo.render`) share as adapters: their common arguments, reading a deck file through
//! the job's roots, and imaging the window for the deck.

use std::path::{Path, PathBuf};

use reticle_eval::ImagedWindow;
use reticle_eval::deck::{DeckFile, target_layer};
use reticle_eval::payload::ViolationReport;
use reticle_eval::report::{ReportLevel, Setup, ViolationLimits, layout_name, report, tile_size};
use reticle_kernel::model::ModelSpec;
use reticle_kernel::rules::{DeckLayer, RuleDeck};
use reticle_protocol::args::EvaluateArgs;
use reticle_protocol::error::{ErrorCode, ToolError};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::attempt::AttemptCtx;
use crate::imaging::{Window, image};
use crate::op::{cancelled, eval_error, invalid_arguments, parse_args};

/// Largest rule-deck file read.
const MAX_DECK_BYTES: u64 = 4 << 20;

/// The arguments every deck op takes (`evaluate`'s and `demo.render`'s from their typed arguments; `optimize`
/// still splits its JSON with [`parse_deck_args`]): a layout window (file, cell, layer) imaged with a
/// model at a pixel size, checked against a deck. The window box is each op's own
/// (`box_um` for evaluate and demo.render, `clip_um` for optimize, whose `box_um` is the
/// box to optimize).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeckArgs {
    /// The layout file.
    pub layout: PathBuf,
    /// Empty only for an `optimize` of a violation_id without `deck` (the id's shipped
    /// deck is then chosen, D181).
    #[serde(default)]
    pub deck: String,
    /// The target layer (`layer/datatype`); `None`: the deck's target layer.
    #[serde(default)]
    pub layer: Option<String>,
    /// The cell; `None`: the layout's top cell.
    #[serde(default)]
    pub cell: Option<String>,
    /// The imaging pixel (nm); `None`: the default pixel.
    #[serde(default)]
    pub pixel_nm: Option<f64>,
    /// The optical model; `None`: the default model.
    #[serde(default)]
    pub model: Option<ModelSpec>,
    /// A mask layer imaged instead of the target (post-OPC verification, D180).
    #[serde(default)]
    pub mask_layer: Option<String>,
}

impl From<&EvaluateArgs<ModelSpec>> for DeckArgs {
    fn from(call: &EvaluateArgs<ModelSpec>) -> Self {
        Self {
            layout: PathBuf::from(&call.layout),
            deck: call.deck.clone(),
            layer: call.layer.clone(),
            cell: call.cell.clone(),
            pixel_nm: call.pixel_nm,
            model: call.model.clone(),
            mask_layer: call.mask_layer.clone(),
        }
    }
}

/// The keys of [`DeckArgs`]: what [`parse_deck_args`] hands to it.
const DECK_ARG_KEYS: [&str; 7] = [
    "layout",
    "deck",
    "layer",
    "cell",
    "pixel_nm",
    "model",
    "mask_layer",
];

/// Parses a deck op's arguments: the keys of [`DeckArgs`] into it, every other key into
/// the op's own arguments `T`. `serde(flatten)` cannot be combined with
/// `deny_unknown_fields`; split this way, both structs deny unknown fields, so a key
/// neither knows is an error from `T`, as strict as one struct per op.
pub fn parse_deck_args<T: DeserializeOwned>(
    op: &str,
    args_json: &str,
) -> Result<(DeckArgs, T), ToolError> {
    let all: Map<String, Value> = parse_args(op, args_json)?;
    let (common, own): (Map<String, Value>, Map<String, Value>) = all
        .into_iter()
        .partition(|(key, _)| DECK_ARG_KEYS.contains(&key.as_str()));
    let common =
        serde_json::from_value(Value::Object(common)).map_err(|e| invalid_arguments(op, &e))?;
    let own = serde_json::from_value(Value::Object(own)).map_err(|e| invalid_arguments(op, &e))?;
    Ok((common, own))
}

impl DeckArgs {
    /// The window that images this window for checking `deck` on `target`:
    /// the target layer (a `.glp` file's shapes are its one layer, named by level, so no
    /// layer is passed) plus the second layers its enclosure rules read, in the box
    /// `box_um` (µm; `None`: around the layer's extent).
    pub(crate) fn imaging(
        &self,
        deck: &RuleDeck,
        target: DeckLayer,
        box_um: Option<[f64; 4]>,
    ) -> Window {
        let is_glp = self
            .layout
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("glp"));
        Window {
            layout: self.layout.clone(),
            layer: (!is_glp).then(|| target.to_string()),
            cell: self.cell.clone(),
            box_um,
            pixel_nm: self.pixel_nm,
            model: self.model.clone(),
            context_layers: reticle_eval::deck::context_layers(deck, target),
            mask_layer: self.mask_layer.clone(),
        }
    }

    /// Loads the deck (after `pin` accepts its hash) and picks the layer: the setup of a
    /// report with the given tiling, level and limits.
    pub(crate) fn setup(
        &self,
        ctx: &AttemptCtx<'_>,
        tile_nm: Option<f64>,
        report_level: ReportLevel,
        limits: ViolationLimits,
        pin: impl FnOnce(&str) -> Result<(), ToolError>,
    ) -> Result<Setup, ToolError> {
        // No deck named: the shipped deck whose layers the layout has (D185).
        let spec = if self.deck.is_empty() {
            crate::deck_pick::deck_for_layout(ctx, &self.layout)?
        } else {
            self.deck.clone()
        };
        let (deck, deck_source) = load_deck(ctx, &spec)?;
        let deck_hash = deck.deck_hash();
        pin(&deck_hash)?;
        let target = target_layer(&deck, self.layer.as_deref())?;
        let tile_nm = tile_size(tile_nm)?;
        let setup = Setup {
            deck,
            deck_source,
            deck_hash,
            target,
            mask_layer: self.mask_layer.clone(),
            tile_nm,
            layout_name: layout_name(&self.layout),
            report_level,
            limits,
        };
        setup.check_report_level()?;
        Ok(setup)
    }

    /// Images the window in `box_um` and evaluates it with `setup`: progress steps 1..=7
    /// of `total`.
    pub(crate) fn evaluate(
        &self,
        ctx: &AttemptCtx<'_>,
        setup: &Setup,
        box_um: Option<[f64; 4]>,
        total: u64,
    ) -> Result<(ImagedWindow, ViolationReport), ToolError> {
        let imaged = self.image(ctx, &setup.deck, setup.target, box_um, total)?;
        if ctx.cancel.is_cancelled() {
            return Err(cancelled(ctx.job_id));
        }
        let report = report(setup, &imaged, None, ctx.cancel, &|n, message| {
            ctx.progress.report(n, total, message);
        })
        .map_err(|e| eval_error(e, ctx.job_id))?;
        Ok((imaged, report))
    }

    /// Reads and images the window (progress steps 1..=3 of `total`).
    pub(crate) fn image(
        &self,
        ctx: &AttemptCtx<'_>,
        deck: &RuleDeck,
        target: DeckLayer,
        box_um: Option<[f64; 4]>,
        total: u64,
    ) -> Result<ImagedWindow, ToolError> {
        let (imaged, _) = image(ctx, self.imaging(deck, target, box_um), total)?;
        Ok(imaged)
    }
}

/// The deck named `spec` (a shipped name) or read from the path `spec` through the job's
/// roots, with where it came from.
pub(crate) fn load_deck(ctx: &AttemptCtx<'_>, spec: &str) -> Result<(RuleDeck, String), ToolError> {
    reticle_eval::deck::load(spec, |path| read_deck(ctx, spec, path))
}

fn read_deck(ctx: &AttemptCtx<'_>, spec: &str, path: &Path) -> Result<DeckFile, ToolError> {
    let path = ctx.readable(path)?;
    crate::attempt::check_file_size(&path, MAX_DECK_BYTES, "rule deck")?;
    let text = std::fs::read_to_string(&path).map_err(|e| {
        ToolError::new(
            ErrorCode::FileNotFound,
            format!("cannot read the rule deck: {e}"),
        )
        .with_details(json!({"deck": spec}))
    })?;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(DeckFile { text, file_name })
}
