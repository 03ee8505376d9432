//! `reticle demo`: one shipped layout evaluated end to end, with a PNG of the violations
//! drawn on the layout (issue 7 item 7; docs/DECISIONS.md D48).
//!
//! The layout (`fixtures/layouts/lines_and_pad.glp`, compiled in) is written into the
//! output directory, a one-worker supervisor runs the worker op `demo.render` (the
//! `evaluate` op's checks at `report_level: detailed` with the shipped `iccad13_m1` deck,
//! then the picture) with that directory as the job's only root and artifact directory,
//! and the command prints the report table and where the PNG is. Progress goes to stderr;
//! the summary to stdout (this is not `serve`: stdout is not a protocol stream here).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::{Value, json};

use reticle_dispatch::{Dispatcher, LocalPool, Scope, Unit};
use reticle_tools::evaluate::table;

/// The shipped demo layout: 60 nm lines 80 nm apart and a pad, ICCAD `.glp`.
const DEMO_LAYOUT: &[u8] = include_bytes!("../../fixtures/layouts/lines_and_pad.glp");

/// Options of `reticle demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Directory for the demo's files (created): the layout copy and `demo_violations.png`.
    #[arg(long, default_value = "reticle-demo")]
    pub out: PathBuf,
    /// Pixel size in nm of the simulation and the picture (2048 nm window).
    #[arg(long, default_value_t = 2.0)]
    pub pixel_nm: f64,
}

pub(crate) fn prepare(out: &Path) -> std::io::Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(out)?;
    let dir = out.canonicalize()?;
    let layout = dir.join("lines_and_pad.glp");
    std::fs::write(&layout, DEMO_LAYOUT)?;
    Ok((dir, layout))
}

/// Runs `reticle demo`. Exit 0 with the picture written, 1 on a tool error, 2 when the
/// output directory or the worker cannot be set up.
pub fn demo(opts: &DemoArgs, config: &reticle_config::Config) -> ExitCode {
    let (dir, layout) = match prepare(&opts.out) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("reticle demo: cannot prepare {}: {e}", opts.out.display());
            return ExitCode::from(2);
        }
    };
    let args = json!({
        "layout": layout,
        "deck": "iccad13_m1",
        "pixel_nm": opts.pixel_nm,
    });
    let roots = vec![dir.display().to_string()];
    let artifact_dir = dir.display().to_string();
    let runtime = match crate::eval_cli::cli_runtime("demo") {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    runtime.block_on(async move {
        let supervisor = match crate::eval_cli::one_worker("demo", config).await {
            Ok(s) => s,
            Err(code) => return code,
        };
        eprintln!(
            "reticle demo: evaluating {} against iccad13_m1 (imaging, rule checks, picture)…",
            layout.display()
        );
        let scope = Scope::cli(format!("demo-{}", std::process::id()), roots, |p| {
            eprintln!("demo: {}/{} {}", p.done, p.total, p.message);
        });
        let dispatcher = Dispatcher::new(
            std::sync::Arc::new(LocalPool::with_supervisor(std::sync::Arc::clone(
                &supervisor,
            ))),
            config.limits.job.clone(),
        );
        let unit = Unit::new("demo.render", &args).with_artifact_dir(Some(artifact_dir));
        let work = dispatcher.run(&scope, unit);
        let result = tokio::select! {
            result = work => result,
            _ = tokio::signal::ctrl_c() => {
                eprintln!("\nreticle demo: interrupted; worker stopped");
                supervisor.shutdown().await;
                return ExitCode::from(130);
            }
        };
        supervisor.shutdown().await;
        match result {
            Ok(payload) => {
                let png = payload["png"]["path"].as_str().unwrap_or("?");
                let mut stdout = std::io::stdout().lock();
                let _ = write!(stdout, "{}", table(&payload["report"]));
                let _ = writeln!(stdout, "picture: {png}");
                let _ = writeln!(stdout, "legend: {}", legend(&payload["legend"]));
                eprintln!("reticle demo: wrote {png}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("reticle demo: {}: {}", e.code, e.message);
                ExitCode::from(1)
            }
        }
    })
}

fn legend(v: &Value) -> String {
    v.as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k} = {}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}
