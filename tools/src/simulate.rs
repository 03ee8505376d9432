//! `simulate`: image a layout window at the ICCAD-2013 corners on a worker.
//! A job: returns `{job_id, status}` at once unless the call waits.

use libmcp::ReplayContract;
use reticle_protocol::args::SimulateArgs;
use serde_json::{Map, Value};

use super::imaging::Imaging;
use super::worker_job::{JobExtras, parse_call, resolve_path, run_op_with, run_tiled};
use super::{Detail, TaskSupport, Tool, ToolContext, ToolDef, ToolResult};

pub(super) fn tool() -> Tool {
    Tool::new(ToolDef {
        name: "simulate",
        title: "Simulate printing",
        description: "Images a square window of a layout (.glp, .gds, .oas) with Hopkins/SOCS \
                      lithography at the ICCAD-2013 corners (nominal, max dose, min dose + \
                      defocus) and reports L2 against the drawn shapes, PV band, EPE and \
                      summary statistics (aerial min/max/mean, printed area per corner). \
                      With images=true it also writes the nominal aerial, resist and \
                      printed images as .npy (numbers) and PNG (to look at) under the \
                      artifact root and returns their paths. \
                      Returns a job_id at once (poll it) unless `wait` is true or the call \
                      carries a progressToken.",
        replay: ReplayContract::Convergent,
        read_only: true,
        handler: run,
        porcelain: Some(porcelain),
    })
    .with_task_support(TaskSupport::Optional)
}

async fn run(ctx: ToolContext, args: Map<String, Value>) -> ToolResult {
    let mut call: SimulateArgs = parse_call(args)?;
    let wait = call.wait.take().unwrap_or(false);
    call.layout = resolve_path(&ctx, &call.layout)?;
    let imaging = Imaging::of(
        call.tiling.take(),
        &call.layout,
        call.model.as_ref(),
        call.box_um,
    );
    if imaging == Imaging::Tiles {
        // Tiles write their outputs (and, with images, their cores' pixels) into the
        // job's artifact directory; the merge stitches them.
        return run_tiled(&ctx, "simulate", "sim", &call, wait).await;
    }
    // Images travel as files in a host-created job directory, not in the op's JSON (D48).
    let artifact_dir = if call.images.take() == Some(true) {
        Some(ctx.scope.sessions.new_job_dir("sim")?)
    } else {
        None
    };
    let extras = JobExtras {
        artifact_dir,
        on_result: None,
    };
    run_op_with(&ctx, "simulate", &call, wait, extras).await
}

fn porcelain(payload: &Value, _detail: Detail) -> String {
    let m = &payload["metrics"];
    format!(
        "{} {}: L2={} px PVB={} px EPE violations={}/{} | {}×{} px at {} nm | {} ({}) | {} ms",
        payload["job_id"].as_str().unwrap_or("?"),
        payload["status"].as_str().unwrap_or("?"),
        m["l2_px"],
        m["pvb_px"],
        m["epe"]["violations"],
        m["epe"]["checkpoints"],
        payload["grid"]["width"],
        payload["grid"]["height"],
        payload["pixel_nm"],
        payload["backend"]["kind"].as_str().unwrap_or("?"),
        payload["backend"]["adapter"].as_str().unwrap_or("?"),
        payload["timing_ms"]["total"],
    ) + &payload
        .get("imaging")
        .map(|i| {
            format!(
                " | tiled: {} tiles, core {} nm, halo {} nm",
                i["tiles"], i["core_nm"], i["halo_nm"]
            )
        })
        .unwrap_or_default()
}
