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
use serde_json::{Map, Value, json};

use reticle_tools::confine::AllowedRoots;
use reticle_tools::evaluate::deck_is_path;

use crate::cli_run::{Pool, emit_json, run_on_pool, validate};

/// `reticle optimize` options.
#[derive(Debug, Clone, clap::Args)]
pub struct OptimizeArgs {
    /// The layout (.gds, .oas; .glp for one window).
    pub layout: String,
    /// Rule deck: a shipped name or a deck JSON path (default: with --violation-id, the
    /// shipped deck the id's hash names).
    #[arg(long)]
    pub deck: Option<String>,
    /// layer/datatype to optimize (default: the deck's only layer).
    #[arg(long)]
    pub layer: Option<String>,
    /// The region `left bottom right top` in µm, any size (`--box 5 5 11 11` or
    /// `--box 5,5,11,11`): optimized in tiles and written back.
    #[arg(long = "box", num_args = 4, allow_hyphen_values = true)]
    pub box_um: Option<Vec<f64>>,
    /// Optimize the whole evaluated layer (in tiles, written back).
    #[arg(long)]
    pub whole_layer: bool,
    /// A violation_id from `evaluate` (one window around its group).
    #[arg(long)]
    pub violation_id: Option<String>,
    /// The evaluate call's box (µm) for a violation id or a window.
    #[arg(long = "clip", num_args = 4, allow_hyphen_values = true)]
    pub clip_um: Option<Vec<f64>>,
    /// Mask layer the optimized mask is written to (default: the target's first free
    /// datatype, 11/0 → 11/1); for one window, the layer imaged (continuing a repair).
    #[arg(long)]
    pub mask_layer: Option<String>,
    /// Cell to flatten (default: the top cell).
    #[arg(long)]
    pub cell: Option<String>,
    /// Pixel size in nm.
    #[arg(long)]
    pub pixel_nm: Option<f64>,
    /// Report tile side in nm.
    #[arg(long)]
    pub tile_nm: Option<f64>,
    /// ILT iterations.
    #[arg(long)]
    pub iterations: Option<u32>,
    /// curvilinear or manhattan.
    #[arg(long, value_parser = ["curvilinear", "manhattan"])]
    pub mask_style: Option<String>,
    /// Directory for the result's files (the written layout, pictures, re-evaluations);
    /// created.
    #[arg(long, default_value = "reticle-optimize")]
    pub out: std::path::PathBuf,
    /// Workers (default: `RETICLE_WORKERS`, else one per core).
    #[arg(long)]
    pub workers: Option<usize>,
}

impl OptimizeArgs {
    /// The tool arguments an MCP client would send for the same request.
    fn tool_arguments(&self) -> Map<String, Value> {
        let mut args = Map::new();
        args.insert("layout".into(), json!(self.layout));
        let text = [
            ("deck", &self.deck),
            ("layer", &self.layer),
            ("violation_id", &self.violation_id),
            ("mask_layer", &self.mask_layer),
            ("cell", &self.cell),
            ("mask_style", &self.mask_style),
        ];
        for (key, value) in text {
            if let Some(v) = value {
                args.insert(key.into(), json!(v));
            }
        }
        if let Some(b) = &self.box_um {
            args.insert("box_um".into(), json!(b));
        }
        if let Some(b) = &self.clip_um {
            args.insert("clip_um".into(), json!(b));
        }
        if self.whole_layer {
            args.insert("whole_layer".into(), json!(true));
        }
        if let Some(p) = self.pixel_nm {
            args.insert("pixel_nm".into(), json!(p));
        }
        if let Some(t) = self.tile_nm {
            args.insert("tile_nm".into(), json!(t));
        }
        if let Some(i) = self.iterations {
            args.insert("iterations".into(), json!(i));
        }
        args
    }
}

/// Validates the arguments and resolves their paths as the tool does.
fn prepare(
    mut args: Map<String, Value>,
    roots: &AllowedRoots,
) -> Result<Map<String, Value>, ToolError> {
    validate("optimize", &args)?;
    let layout = args["layout"].as_str().unwrap_or_default().to_owned();
    args.insert("layout".into(), json!(roots.resolve_read(&layout)?));
    if let Some(deck) = args.get("deck").and_then(Value::as_str).map(str::to_owned)
        && deck_is_path(&deck)
    {
        args.insert("deck".into(), json!(roots.resolve_read(&deck)?));
    }
    Ok(args)
}

/// Runs `reticle optimize`. Exit 0 with a result, 1 on a tool error, 2 when the workers or
/// `--out` cannot be set up, 130 after Ctrl-C.
pub fn optimize(opts: &OptimizeArgs, config: &reticle_config::Config) -> ExitCode {
    let roots = AllowedRoots::configured(config);
    let args = match prepare(opts.tool_arguments(), &roots) {
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
    let mut allowed: Vec<String> = roots
        .snapshot()
        .0
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    // The written layout lies in --out: its re-evaluation reads it there.
    allowed.push(dir.display().to_string());
    let workers = opts
        .workers
        .or_else(|| config.workers_explicit())
        .or_else(|| std::thread::available_parallelism().ok().map(usize::from))
        .unwrap_or(1);
    let pool = Pool {
        workers,
        slurm: false,
    };
    let result = run_on_pool(
        "optimize",
        pool,
        config,
        allowed,
        |dispatcher, scope| async move {
            reticle_tools::optimize_run::run_in(&dispatcher, &scope, args, &dir).await
        },
    );
    match result {
        Ok(result) => emit_json(&result),
        Err(code) => code,
    }
}
