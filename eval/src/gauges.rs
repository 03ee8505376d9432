//! EPE and PV-band rules, checked at the ICCAD-2013 checkpoints of the drawn edges: EPE is
//! the nominal printed edge's offset along the edge normal, the PV band the distance
//! between the max- and min-corner edges at the same checkpoint.

use reticle_kernel::LithoOutput;
use reticle_kernel::metrics::{EpeConfig, checkpoints, epe, epe_at};
use reticle_kernel::rules::{Rule, RuleKind};
use reticle_layout::{BBox, Point};
use serde_json::{Value, json};

use crate::found::{Found, pm};
use crate::r3;
use crate::window::ImagedWindow;

/// The ICCAD-2013 EPE settings (nm) in the units of a layout whose dbu is `dbu_nm` nm.
#[must_use]
pub fn iccad_epe_config(dbu_nm: f64) -> EpeConfig {
    EpeConfig {
        spacing_nm: EpeConfig::ICCAD2013.spacing_nm / dbu_nm,
        tolerance_nm: EpeConfig::ICCAD2013.tolerance_nm / dbu_nm,
        search_nm: EpeConfig::ICCAD2013.search_nm / dbu_nm,
    }
}

/// Checks the EPE and PV-band rules among `rules` on `output` (imaged on `imaged`'s frame,
/// gauged against the drawn polygons), pushing a [`Found`] per failing checkpoint (one
/// where no printed edge is found fails too). Returns the nominal corner's EPE summary,
/// `null` when its images were not kept.
pub fn check(
    rules: &[&Rule],
    imaged: &ImagedWindow,
    output: &LithoOutput,
    found: &mut Vec<Found>,
) -> Value {
    let dbu_nm = imaged.layout.dbu_nm;
    let level = f64::from(imaged.resist.threshold);
    let scale = dbu_nm;
    let cfg = iccad_epe_config(dbu_nm);
    let corners = &output.corners;
    let polygons = &imaged.layout.polygons;
    let (Some(aerial), Some(printed)) = (&corners[0].aerial, &corners[0].printed) else {
        return Value::Null;
    };
    let report = epe(polygons, printed, aerial, level, &imaged.frame, &cfg);
    let found_abs: Vec<f64> = report
        .epe_nm
        .iter()
        .flatten()
        .map(|e| e.abs() * scale)
        .collect();
    let mean =
        (!found_abs.is_empty()).then(|| r3(found_abs.iter().sum::<f64>() / found_abs.len() as f64));
    let max = found_abs.iter().copied().reduce(f64::max).map(r3);
    let cps = checkpoints(polygons, cfg.spacing_nm);
    for (i, rule) in rules.iter().enumerate() {
        let per_checkpoint: Vec<Option<f64>> = match rule.kind {
            RuleKind::Epe => report.epe_nm.iter().map(|e| e.map(|e| e * scale)).collect(),
            RuleKind::Pvband => match (&corners[1].aerial, &corners[2].aerial) {
                (Some(hi), Some(lo)) => cps
                    .iter()
                    .map(|c| {
                        let a = epe_at(hi, &imaged.frame, c, level, cfg.search_nm)?;
                        let b = epe_at(lo, &imaged.frame, c, level, cfg.search_nm)?;
                        Some((a - b) * scale)
                    })
                    .collect(),
                _ => continue,
            },
            _ => continue,
        };
        for (c, value) in cps.iter().zip(per_checkpoint) {
            let bad = value.is_none_or(|v| v.abs() > rule.value);
            if !bad {
                continue;
            }
            let p = Point::new(c.x.round() as i64, c.y.round() as i64);
            found.push(Found {
                rule: i,
                at_pm: (pm(c.x, dbu_nm), pm(c.y, dbu_nm)),
                bbox: BBox::from_corners(p, p),
                measured: value.map(|v| r3(v.abs())),
                marker: json!({
                    "type": "checkpoint",
                    "point": [r3(c.x * dbu_nm), r3(c.y * dbu_nm)],
                    "normal": [r3(c.nx), r3(c.ny)],
                }),
            });
        }
    }
    json!({"checkpoints": report.checkpoints, "violations": report.violations, "mean_abs_nm": mean, "max_abs_nm": max})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_iccad_settings_scale_to_dbu() {
        let nm = iccad_epe_config(1.0);
        assert_eq!(nm.spacing_nm, EpeConfig::ICCAD2013.spacing_nm);
        let half = iccad_epe_config(0.5);
        assert_eq!(half.spacing_nm, 2.0 * EpeConfig::ICCAD2013.spacing_nm);
        assert_eq!(half.tolerance_nm, 2.0 * EpeConfig::ICCAD2013.tolerance_nm);
        assert_eq!(half.search_nm, 2.0 * EpeConfig::ICCAD2013.search_nm);
    }
}
