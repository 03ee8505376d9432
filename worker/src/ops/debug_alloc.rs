//! `debug.alloc {bytes}`: allocates and touches `bytes` of memory and holds it until
//! the worker exits, so tests can watch memory go away when a worker is killed and
//! watch the host's memory limits act. It allocates as the imaging ops do: a refused
//! allocation aborts the worker.

use reticle_protocol::error::{ErrorCode, ToolError};
use reticle_protocol::sync::lock;
use serde::Deserialize;

use crate::attempt::AttemptCtx;
use crate::op::{Op, OpResult, parse_args, payload};

/// Most one call may allocate (4 GiB): a typo must not take the machine down.
const MAX_BYTES: u64 = 4 << 30;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AllocArgs {
    bytes: u64,
}

/// The `debug.alloc` op.
pub struct DebugAlloc;

impl Op for DebugAlloc {
    fn name(&self) -> &'static str {
        "debug.alloc"
    }

    fn run(&self, ctx: &AttemptCtx<'_>, args_json: &str) -> OpResult {
        let args: AllocArgs = parse_args(self.name(), args_json)?;
        if args.bytes > MAX_BYTES {
            return Err(ToolError::new(
                ErrorCode::ToolLimitExceeded,
                format!("debug.alloc is limited to {MAX_BYTES} bytes"),
            )
            .with_details(serde_json::json!({ "bytes": args.bytes, "max_bytes": MAX_BYTES })));
        }
        let len = usize::try_from(args.bytes).map_err(|_| {
            ToolError::new(
                ErrorCode::ToolLimitExceeded,
                "allocation exceeds the address space",
            )
        })?;
        // Non-zero fill so every page is really committed (zero pages may stay shared).
        let block = vec![0xA5_u8; len];
        ctx.progress.report(1, 1, "allocated");
        let mut ballast = lock(&ctx.state.ballast);
        ballast.push(block);
        let held: u64 = ballast.iter().map(|b| b.len() as u64).sum();
        payload(Allocated {
            allocated_bytes: args.bytes,
            held_bytes: held,
        })
    }
}

/// `debug.alloc`'s answer.
#[derive(serde::Serialize)]
struct Allocated {
    allocated_bytes: u64,
    held_bytes: u64,
}
