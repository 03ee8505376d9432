//! `engine.info {}`: what this worker runs on and what it holds.

use std::sync::atomic::Ordering;

use serde::Deserialize;

use crate::attempt::AttemptCtx;
use crate::op::{Op, OpResult, parse_args, payload};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EngineInfoArgs {}

/// The `engine.info` op.
pub struct EngineInfo;

impl Op for EngineInfo {
    fn name(&self) -> &'static str {
        "engine.info"
    }

    fn run(&self, ctx: &AttemptCtx<'_>, args_json: &str) -> OpResult {
        let _: EngineInfoArgs = parse_args(
            self.name(),
            if args_json.trim().is_empty() {
                "{}"
            } else {
                args_json
            },
        )?;
        let backend = ctx.state.backend.description();
        payload(serde_json::json!({
            "backend": {
                "kind": backend.kind,
                "adapter": backend.adapter,
                "device_bytes": ctx.state.backend.device_bytes(),
            },
            "worker_version": env!("CARGO_PKG_VERSION"),
            "pid": std::process::id(),
            "jobs_run": ctx.state.jobs_run.load(Ordering::Relaxed),
            "held_bytes": ctx.state.ballast_bytes(),
            "ops": super::names(),
        }))
    }
}
