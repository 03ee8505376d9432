//! `debug.crash {after_ms}`: aborts the worker process, optionally after a delay so
//! the job is surely in flight. The supervisor's crash tests use it.

use std::time::Duration;

use serde::Deserialize;

use crate::attempt::AttemptCtx;
use crate::op::{Op, OpResult, cancelled, parse_args};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CrashArgs {
    #[serde(default)]
    after_ms: u64,
}

/// The `debug.crash` op.
pub struct DebugCrash;

impl Op for DebugCrash {
    fn name(&self) -> &'static str {
        "debug.crash"
    }

    fn run(&self, ctx: &AttemptCtx<'_>, args_json: &str) -> OpResult {
        let args: CrashArgs = parse_args(self.name(), args_json)?;
        ctx.progress.report(0, 1, "about to crash");
        let deadline = std::time::Instant::now() + Duration::from_millis(args.after_ms);
        while std::time::Instant::now() < deadline {
            if ctx.cancel.is_cancelled() {
                return Err(cancelled(ctx.job_id));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        tracing::warn!(job_id = ctx.job_id, "debug.crash: aborting the worker");
        std::process::abort();
    }
}
