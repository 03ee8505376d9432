//! `debug.malformed {}`: returns a payload that breaks every output schema of the host
//! (`schema_version` is not a string, `metrics` is not an object), so tests can watch the
//! host's output check refuse it in every build.

use crate::attempt::AttemptCtx;
use crate::op::{Op, OpResult, payload};

/// The `debug.malformed` op.
pub struct DebugMalformed;

impl Op for DebugMalformed {
    fn name(&self) -> &'static str {
        "debug.malformed"
    }

    fn run(&self, ctx: &AttemptCtx<'_>, _args_json: &str) -> OpResult {
        ctx.progress.report(1, 1, "malformed");
        payload(Malformed {
            schema_version: 17,
            metrics: "none",
        })
    }
}

/// `debug.malformed`'s answer: the wrong types for `schema_version` and `metrics`, on
/// purpose (the host must refuse it).
#[derive(serde::Serialize)]
struct Malformed {
    schema_version: u32,
    metrics: &'static str,
}
