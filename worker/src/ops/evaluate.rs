//! `evaluate`: one layout window checked against a rule deck (seed 000, RFC 0006).
//!
//! The adapter: parse the arguments, load the deck (a shipped one, or a file read through
//! the job's roots), image the window exactly as `simulate` images it (the shared
//! [`crate::imaging::image`]), and hand the imaged window to
//! [`reticle_eval::report::report`], which checks every rule, builds the records (tiles,
//! groups, canonical/shadow, ids) and the payload. See `reticle_eval` for what the
//! report holds and why (docs/DECISIONS.md D23, D24).

use reticle_kernel::model::ModelSpec;
use reticle_protocol::args::EvaluateArgs;

use crate::attempt::AttemptCtx;
use crate::deck_job::DeckArgs;
use crate::op::{Op, OpResult, parse_args, payload};

/// Progress steps of one evaluation.
const STEPS: u64 = 7;

/// The `evaluate` op.
pub struct Evaluate;

impl Op for Evaluate {
    fn name(&self) -> &'static str {
        "evaluate"
    }

    fn run(&self, ctx: &AttemptCtx<'_>, args_json: &str) -> OpResult {
        let call: EvaluateArgs<ModelSpec> = parse_args(self.name(), args_json)?;
        let args = DeckArgs::from(&call);
        let setup = args.setup(
            ctx,
            call.tile_nm,
            call.report_level.unwrap_or_default(),
            call.limits.unwrap_or_default(),
            |_| Ok(()),
        )?;
        let (_, report) = args.evaluate(ctx, &setup, call.box_um, STEPS)?;
        payload(report)
    }
}
