//! `engine.info {}`: what this worker runs on and what it holds.

use std::sync::atomic::Ordering;

use serde::{Deserialize, Serialize};

use crate::attempt::AttemptCtx;
use crate::op::{Op, OpResult, parse_args, payload};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EngineInfoArgs {}

/// `engine.info`'s answer.
#[derive(Serialize)]
struct Info {
    backend: BackendInfo,
    worker_version: &'static str,
    pid: u32,
    jobs_run: u64,
    held_bytes: u64,
    ops: Vec<&'static str>,
}

/// The backend the worker opened, and the device memory it holds.
#[derive(Serialize)]
struct BackendInfo {
    kind: String,
    adapter: String,
    device_bytes: u64,
}

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
        payload(Info {
            backend: BackendInfo {
                kind: backend.kind.clone(),
                adapter: backend.adapter.clone(),
                device_bytes: ctx.state.backend.device_bytes(),
            },
            worker_version: env!("CARGO_PKG_VERSION"),
            pid: std::process::id(),
            jobs_run: ctx.state.jobs_run.load(Ordering::Relaxed),
            held_bytes: ctx.state.ballast_bytes(),
            ops: super::names(),
        })
    }
}
