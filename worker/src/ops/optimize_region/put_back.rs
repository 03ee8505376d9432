//! `optimize.put_back`: the seam pass of a region optimize (D252). The merge's mask
//! ([`merge::REGION_MASK_FILE`]) with the drawn target put back in the squares the host
//! names (around the new groups its re-evaluation found), written back as the
//! merge writes: the same layout file, the same pictures. With no square it writes the
//! merge's own bytes again.

use reticle_eval::optimize::region::put_back::{CHECK_REACH_NM, put_back_legal, to_dbu};
use reticle_eval::optimize::region::split_for_gds;
use reticle_eval::tile::LayoutSource;
use reticle_eval::tiles::grow;
use serde_json::json;

use super::merge::{REGION_MASK_FILE, RegionMask, write_region};
use super::{RegionOpArgs, open};
use crate::artifacts;
use crate::attempt::AttemptCtx;
use crate::op::{Op, OpResult, parse_args, payload};
use crate::tiled::internal;

/// The `optimize.put_back` op.
pub struct OptimizePutBack;

impl Op for OptimizePutBack {
    fn name(&self) -> &'static str {
        "optimize.put_back"
    }

    fn run(&self, ctx: &AttemptCtx<'_>, args_json: &str) -> OpResult {
        let args: RegionOpArgs = parse_args(self.name(), args_json)?;
        let plan = args.plan("optimization")?;
        let dir = artifacts::dir(ctx)?;
        let (setup, mut source) = open(ctx, &args)?;
        let path = dir.join(REGION_MASK_FILE);
        let bytes = std::fs::read(&path)
            .map_err(|e| internal(format!("cannot read {}: {e}", path.display())))?;
        let merged: RegionMask = serde_json::from_slice(&bytes)
            .map_err(|e| internal(format!("{}: {e}", path.display())))?;
        let squares_nm = args.call.put_back.clone().unwrap_or_default();
        let squares: Vec<_> = squares_nm
            .iter()
            .map(|s| to_dbu(*s, plan.grid.dbu_nm, plan.grid.pixel_dbu))
            .collect();
        ctx.progress.report(0, 3, "putting the drawn mask back");
        // The drawn target around the region too: the mask rules near its edge see it.
        let reach = (3.0 * CHECK_REACH_NM / plan.grid.dbu_nm).round() as i64;
        let drawn = source.polygons(grow(plan.region, reach), false)?.target;
        let rules = setup.rules();
        let (mask, outcomes) = put_back_legal(
            &merged.mask,
            &drawn,
            &squares,
            plan.region,
            &rules,
            plan.grid.dbu_nm,
        );
        let mask = mask.iter().flat_map(split_for_gds).collect();
        let nm = |v: i64| reticle_eval::r3(v as f64 * plan.grid.dbu_nm);
        let outcomes: Vec<_> = outcomes
            .iter()
            .map(|o| {
                json!({
                    "square_nm": o.square.map(|b| [nm(b.left), nm(b.bottom), nm(b.right), nm(b.top)]),
                    "moves": o.moves,
                })
            })
            .collect();
        let region = RegionMask {
            mask,
            boxes: merged.boxes,
        };
        let written = write_region(ctx, &args, &setup, &mut source, &region, (1, 3))?;
        ctx.progress.report(3, 3, "put back");
        payload(json!({
            "squares": outcomes,
            "layout_out": written.layout_out,
            "pictures": written.pictures,
        }))
    }
}
