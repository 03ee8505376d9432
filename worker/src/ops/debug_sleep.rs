//! `debug.sleep {ms, steps}`: sleeps `ms` in `steps` steps, reporting progress after
//! each and honouring cancellation within 10 ms. The supervisor's tests use it as a
//! stand-in for a long engine job.

use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::attempt::AttemptCtx;
use crate::op::{Op, OpResult, cancelled, parse_args, payload};

/// Longest single sleep between two cancellation checks.
const CHECK_EVERY: Duration = Duration::from_millis(10);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SleepArgs {
    ms: u64,
    #[serde(default = "default_steps")]
    steps: u64,
}

fn default_steps() -> u64 {
    10
}

/// The `debug.sleep` op.
pub struct DebugSleep;

impl Op for DebugSleep {
    fn name(&self) -> &'static str {
        "debug.sleep"
    }

    fn run(&self, ctx: &AttemptCtx<'_>, args_json: &str) -> OpResult {
        let args: SleepArgs = parse_args(self.name(), args_json)?;
        let steps = args.steps.max(1);
        let started = Instant::now();
        for step in 1..=steps {
            // Each step ends at its share of the total, so rounding never accumulates.
            let step_end = Duration::from_millis(args.ms * step / steps);
            loop {
                if ctx.cancel.is_cancelled() {
                    return Err(cancelled(ctx.job_id));
                }
                let elapsed = started.elapsed();
                if elapsed >= step_end {
                    break;
                }
                std::thread::sleep((step_end - elapsed).min(CHECK_EVERY));
            }
            ctx.progress
                .report(step, steps, format!("step {step}/{steps}"));
        }
        payload(Slept {
            slept_ms: args.ms,
            steps,
            pid: std::process::id(),
        })
    }
}

/// `debug.sleep`'s answer.
#[derive(serde::Serialize)]
struct Slept {
    slept_ms: u64,
    steps: u64,
    pid: u32,
}
