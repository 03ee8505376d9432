//! `reticle optimize`: the `optimize` tool from the command line (issue 28 item 5, seed 000
//! G3; docs/DECISIONS.md D183).
//!
//! The arguments are the tool's (checked against `optimize.input.json`, paths confined by
//! `RETICLE_ALLOWED_ROOTS`, else the working directory); the work is the tool's own
//! ([`reticle_tools::optimize_run::run_in`]: a region or the whole layer in tiles, written
//! back; a violation id or a clip in one window) on workers this command starts, with the
//! files in `--out`. Stdout is the tool's `structuredContent` byte for byte, less the job
//! envelope (`job_id`, `status`); progress goes to stderr; Ctrl-C stops the workers
//! (exit 130). The mechanism is `reticle eval`'s ([`crate::cli_run`]).

use std::process::ExitCode;

use reticle_protocol::ToolError;
use reticle_protocol::args::{MaskStyleName, OptimizeArgs as ToolArgs};
use serde_json::Value;

use reticle_tools::confine::AllowedRoots;
use reticle_tools::evaluate::deck_is_path;

use crate::cli_run::{Pool, RunFlags, emit_json, four, root_list, run_on_pool, validate};

/// `reticle optimize` options.
#[derive(Debug, Clone, clap::Args)]
pub struct OptimizeFlags {
    /// The layout, region, sizes and workers (shared with `reticle eval`).
    #[command(flatten)]
    pub run: RunFlags,
    /// Rule deck: a shipped name or a deck JSON path (default: with --violation-id, the
    /// shipped deck the id's hash names; else the shipped deck whose layers the layout
    /// has).
    #[arg(long)]
    pub deck: Option<String>,
    /// Optimize the whole evaluated layer (in tiles, written back).
    #[arg(long)]
    pub whole_layer: bool,
    /// A violation_id from `evaluate` (one window around its group).
    #[arg(long)]
    pub violation_id: Option<String>,
    /// Several violation_ids of one layout and deck (`--violation-ids A B` or `A,B`): the
    /// region covering their locations, in tiles, written back; the result says for each
    /// whether its group was resolved, remains, or was not found.
    #[arg(long, num_args = 1.., value_delimiter = ',')]
    pub violation_ids: Option<Vec<String>>,
    /// An evaluation job's groups: refused with the tool's `INVALID_INPUT` (a one-shot
    /// command has no job table; pass the job's box with --box instead).
    #[arg(long)]
    pub job_id: Option<String>,
    /// The evaluate call's box (µm) for a violation id or a window.
    #[arg(long = "clip", num_args = 4, allow_hyphen_values = true)]
    pub clip_um: Option<Vec<f64>>,
    /// Mask layer the optimized mask is written to (default: the target's first free
    /// datatype, 11/0 → 11/1); for one window, the layer imaged (continuing a repair).
    #[arg(long)]
    pub mask_layer: Option<String>,
    /// ILT iterations.
    #[arg(long)]
    pub iterations: Option<u32>,
    /// ILT iterations of the refinement stage.
    #[arg(long)]
    pub refine_iterations: Option<u32>,
    /// curvilinear or manhattan.
    #[arg(long, value_parser = ["curvilinear", "manhattan"])]
    pub mask_style: Option<String>,
    /// Directory for the result's files (the written layout, pictures, re-evaluations);
    /// created.
    #[arg(long, default_value = "reticle-optimize")]
    pub out: std::path::PathBuf,
}

impl OptimizeFlags {
    /// The tool arguments an MCP client would send for the same request, as the tool's
    /// type (D210).
    fn tool_arguments(&self) -> ToolArgs {
        let run = &self.run;
        ToolArgs {
            layout: Some(run.layout.clone()),
            deck: self.deck.clone(),
            layer: run.layer.clone(),
            violation_id: self.violation_id.clone(),
            violation_ids: self.violation_ids.clone(),
            job_id: self.job_id.clone(),
            mask_layer: self.mask_layer.clone(),
            cell: run.cell.clone(),
            mask_style: self.mask_style.as_deref().map(|s| match s {
                "manhattan" => MaskStyleName::Manhattan,
                _ => MaskStyleName::Curvilinear,
            }),
            box_um: run.box4(),
            clip_um: four(self.clip_um.as_ref()),
            whole_layer: self.whole_layer.then_some(true),
            pixel_nm: run.pixel_nm,
            tile_nm: run.tile_nm,
            iterations: self.iterations,
            refine_iterations: self.refine_iterations,
            ..ToolArgs::default()
        }
    }
}

/// Validates the arguments against the tool's input schema and resolves their paths as
/// the tool does.
fn prepare(mut call: ToolArgs, roots: &AllowedRoots) -> Result<ToolArgs, ToolError> {
    let Ok(Value::Object(args)) = serde_json::to_value(&call) else {
        unreachable!("OptimizeFlags is a struct: it writes an object")
    };
    validate("optimize", &args)?;
    let layout = call.layout.clone().unwrap_or_default();
    call.layout = Some(roots.resolve_read(&layout)?.display().to_string());
    if let Some(deck) = call.deck.clone()
        && deck_is_path(&deck)
    {
        call.deck = Some(roots.resolve_read(&deck)?.display().to_string());
    }
    Ok(call)
}

/// Runs `reticle optimize`. Exit 0 with a result, 1 on a tool error, 2 when the workers or
/// `--out` cannot be set up, 130 after Ctrl-C.
pub fn optimize(opts: &OptimizeFlags, config: &reticle_config::Config) -> ExitCode {
    let roots = AllowedRoots::configured(config);
    let call = match prepare(opts.tool_arguments(), &roots) {
        Ok(a) => a,
        Err(error) => return emit_json(&Err(error)),
    };
    let dir = match std::fs::create_dir_all(&opts.out).and_then(|()| opts.out.canonicalize()) {
        Ok(dir) => dir,
        Err(e) => {
            eprintln!(
                "reticle optimize: cannot prepare {}: {e}",
                opts.out.display()
            );
            return ExitCode::from(2);
        }
    };
    let mut allowed = root_list(&roots);
    // The written layout lies in --out: its re-evaluation reads it there.
    allowed.push(dir.display().to_string());
    // A region's tile fan-outs go to the cluster; one window runs here.
    let slurm = call.target().is_region() && opts.run.wants_slurm(config);
    let workers = if slurm || !call.target().is_region() {
        1
    } else {
        opts.run.tile_workers(config)
    };
    let pool = Pool { workers, slurm };
    let result = run_on_pool(
        "optimize",
        pool,
        config,
        allowed,
        |dispatcher, scope| async move {
            reticle_tools::optimize_run::run_in(&dispatcher, &scope, call, &dir).await
        },
    );
    match result {
        Ok(result) => emit_json(&result),
        Err(code) => code,
    }
}
