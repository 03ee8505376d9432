//! `demo.render`: `evaluate` at `report_level: detailed` plus a picture of the window with
//! the violations drawn on it (issue 7 item 7, `reticle demo`; D48). Not reachable from
//! MCP: the host's `reticle demo` command runs it with a job artifact directory.
//!
//! The picture (PNG, row 0 of the clip at the bottom): drawn polygons grey, the nominal
//! printed image's outline cyan, each violation's marker box red (canonical records) or
//! orange (shadows), grown to at least 9 pixels so checkpoints are visible.

use reticle_eval::payload::{DedupStrategy, ViolationReport};
use reticle_eval::report::{ReportLevel, ViolationLimits};
use reticle_kernel::Grid;
use reticle_kernel::model::ModelSpec;
use reticle_protocol::args::EvaluateArgs;
use reticle_protocol::files::FileRef;
use serde::Serialize;

use crate::artifacts;
use crate::attempt::AttemptCtx;
use crate::deck_job::DeckArgs;
use crate::op::{Op, OpResult, cancelled, parse_args, payload};

/// `demo.render`'s result: the detailed report, the picture and what its colours mean.
#[derive(Serialize)]
struct DemoResult {
    /// The `evaluate` report at `report_level: detailed`.
    report: ViolationReport,
    /// The picture.
    png: FileRef,
    /// What each colour of the picture shows.
    legend: Legend,
}

/// The picture's colours.
#[derive(Serialize)]
struct Legend {
    grey: &'static str,
    cyan: &'static str,
    red: &'static str,
    orange: &'static str,
}

const LEGEND: Legend = Legend {
    grey: "drawn polygons",
    cyan: "printed outline (nominal corner)",
    red: "canonical violation records",
    orange: "shadow records",
};

/// The `demo.render` op.
pub struct DemoRender;

const STEPS: u64 = 8;

fn outline(g: &Grid<u8>, x: usize, y: usize) -> bool {
    if *g.at(x, y) == 0 {
        return false;
    }
    let off = |dx: isize, dy: isize| {
        let (nx, ny) = (x as isize + dx, y as isize + dy);
        nx < 0
            || ny < 0
            || nx as usize >= g.width
            || ny as usize >= g.height
            || *g.at(nx as usize, ny as usize) == 0
    };
    off(-1, 0) || off(1, 0) || off(0, -1) || off(0, 1)
}

impl Op for DemoRender {
    fn name(&self) -> &'static str {
        "demo.render"
    }

    fn run(&self, ctx: &AttemptCtx<'_>, args_json: &str) -> OpResult {
        // `evaluate`'s arguments (the command sends `layout`, `deck`, `pixel_nm`): one
        // parse into the type the `evaluate` op reads.
        let call: EvaluateArgs<ModelSpec> = parse_args(self.name(), args_json)?;
        let args = DeckArgs::from(&call);
        let setup = args.setup(
            ctx,
            None,
            ReportLevel::Detailed,
            ViolationLimits::default(),
            |_| Ok(()),
        )?;
        let (imaged, report) = args.evaluate(ctx, &setup, call.box_um, STEPS)?;
        if ctx.cancel.is_cancelled() {
            return Err(cancelled(ctx.job_id));
        }
        let frame = &imaged.frame;
        let (w, h) = (imaged.target.width, imaged.target.height);
        let dbu_nm = imaged.layout.dbu_nm;
        // Marker boxes in pixels, canonical drawn last (on top).
        let mut boxes: Vec<(bool, [usize; 4])> = Vec::new();
        for r in report.violations.iter().flatten() {
            let b = r.bbox_nm;
            let px = |nm: &f64, origin: f64, n: usize| {
                let v = (nm / dbu_nm - origin) / frame.pixel_nm;
                v.clamp(0.0, n as f64 - 1.0)
            };
            let (mut x0, mut y0) = (px(&b[0], frame.left_nm, w), px(&b[1], frame.bottom_nm, h));
            let (mut x1, mut y1) = (px(&b[2], frame.left_nm, w), px(&b[3], frame.bottom_nm, h));
            let grow = |lo: &mut f64, hi: &mut f64, n: usize| {
                let missing = (8.0 - (*hi - *lo)).max(0.0) / 2.0;
                *lo = (*lo - missing - 1.0).max(0.0);
                *hi = (*hi + missing + 1.0).min(n as f64 - 1.0);
            };
            grow(&mut x0, &mut x1, w);
            grow(&mut y0, &mut y1, h);
            boxes.push((
                r.dedup_strategy == DedupStrategy::Canonical,
                [x0 as usize, y0 as usize, x1 as usize, y1 as usize],
            ));
        }
        boxes.sort_by_key(|b| b.0);
        let mut marks = Grid::filled(w, h, 0u8);
        for (canonical, [x0, y0, x1, y1]) in boxes {
            let color = if canonical { 2 } else { 1 };
            for x in x0..=x1 {
                for y in [y0, y1] {
                    *marks.at_mut(x, y) = color;
                    if y + 1 < h {
                        *marks.at_mut(x, y + 1) = color;
                    }
                }
            }
            for y in y0..=y1 {
                for x in [x0, x1] {
                    *marks.at_mut(x, y) = color;
                    if x + 1 < w {
                        *marks.at_mut(x + 1, y) = color;
                    }
                }
            }
        }
        let printed = imaged.output.corners[0].printed.as_ref();
        let rgba = artifacts::rgba_of(&imaged.target, |x, y, &t| match *marks.at(x, y) {
            2 => [235, 40, 40, 255],
            1 => [255, 150, 30, 255],
            _ if printed.is_some_and(|p| outline(p, x, y)) => [40, 220, 235, 255],
            _ if t != 0 => [120, 120, 130, 255],
            _ => [14, 14, 20, 255],
        });
        let png = artifacts::png_rgba(w, h, &rgba)?;
        let dir = artifacts::dir(ctx)?;
        let file = artifacts::write(&dir, "demo_violations.png", &png)?;
        ctx.progress.report(STEPS, STEPS, "picture written");
        payload(DemoResult {
            report,
            png: file,
            legend: LEGEND,
        })
    }
}
