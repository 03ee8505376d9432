//! `evaluate`: one layout window checked against a rule deck (seed 000, RFC 0006).
//!
//! The adapter: parse the arguments, load the deck (a shipped one, or a file read through
//! the job's roots), image the window exactly as `simulate` images it (the shared
//! [`crate::imaging::image`]), and hand the imaged window to
//! [`reticle_eval::report::report`], which checks every rule, builds the records (tiles,
//! groups, canonical/shadow, ids) and the payload. See `reticle_eval` for what the
//! report holds and why (docs/DECISIONS.md D23, D24).

use reticle_eval::report::{Limits, ReportLevel};
use reticle_protocol::error::ToolError;
use serde::Deserialize;
use serde_json::Value;

use crate::deck_job::parse_deck_args;
use crate::job::JobCtx;
use crate::op::Op;

/// Progress steps of one evaluation.
const STEPS: u64 = 7;

/// `evaluate`'s own arguments (the shared ones are [`crate::deck_job::DeckArgs`]).
#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct Own {
    box_um: Option<[f64; 4]>,
    tile_nm: Option<f64>,
    report_level: ReportLevel,
    limits: Limits,
}

/// The `evaluate` op.
pub struct Evaluate;

impl Op for Evaluate {
    fn name(&self) -> &'static str {
        "evaluate"
    }

    fn run(&self, ctx: &JobCtx<'_>, args_json: &str) -> Result<Value, ToolError> {
        let (args, own): (_, Own) = parse_deck_args(self.name(), args_json)?;
        let setup = args.setup(ctx, own.tile_nm, own.report_level, own.limits, |_| Ok(()))?;
        let (_, report) = args.evaluate(ctx, &setup, own.box_um, STEPS)?;
        Ok(report)
    }
}
