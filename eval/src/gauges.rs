//! EPE and PV-band rules, checked at the ICCAD-2013 checkpoints of the drawn edges: EPE is
//! the nominal printed edge's offset along the edge normal, the PV band the distance
//! between the max- and min-corner edges at the same checkpoint.

use reticle_kernel::LithoOutput;
use reticle_kernel::metrics::{Checkpoint, EpeConfig, checkpoints, epe_at, epe_violated_at};
use reticle_kernel::raster::PixelFrame;
use reticle_kernel::rules::{Rule, RuleKind};
use reticle_layout::{BBox, Point};

use crate::payload::EpeSummary;

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

/// What the nominal corner's EPE gauges measured at a set of checkpoints: the parts of the
/// report's `metrics.epe` that add up over tiles.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct EpeSums {
    /// Checkpoints gauged.
    pub checkpoints: usize,
    /// Checkpoints failing the ICCAD-2013 binary test.
    pub violations: usize,
    /// Sum of |EPE| (nm) over the checkpoints where a printed edge was found, in order.
    pub abs_sum_nm: f64,
    /// Checkpoints where a printed edge was found.
    pub measured: usize,
    /// Largest |EPE| (nm), unrounded.
    pub max_abs_nm: Option<f64>,
}

impl EpeSums {
    /// Adds `other` (a later tile) to these sums.
    pub fn add(&mut self, other: &Self) {
        self.checkpoints += other.checkpoints;
        self.violations += other.violations;
        self.abs_sum_nm += other.abs_sum_nm;
        self.measured += other.measured;
        self.max_abs_nm = match (self.max_abs_nm, other.max_abs_nm) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }

    /// The report's `metrics.epe`: `checkpoints`, `violations`, `mean_abs_nm`,
    /// `max_abs_nm` (nm, 3 decimals).
    #[must_use]
    pub fn summary(&self) -> EpeSummary {
        EpeSummary {
            checkpoints: self.checkpoints,
            violations: self.violations,
            mean_abs_nm: (self.measured > 0).then(|| r3(self.abs_sum_nm / self.measured as f64)),
            max_abs_nm: self.max_abs_nm.map(r3),
        }
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
) -> Option<EpeSummary> {
    let dbu_nm = imaged.layout.dbu_nm;
    let cps = checkpoints(&imaged.layout.polygons, iccad_epe_config(dbu_nm).spacing_nm);
    let level = f64::from(imaged.resist.threshold);
    check_at(rules, &cps, &imaged.frame, output, dbu_nm, level, found).map(|sums| sums.summary())
}

/// The EPE and PV-band rules among `rules` at the checkpoints `cps` (dbu) of an image on
/// `frame` (the print threshold `level`), pushing a [`Found`] per failing checkpoint; the
/// nominal corner's sums, `None` when its images were not kept.
pub fn check_at(
    rules: &[&Rule],
    cps: &[Checkpoint],
    frame: &PixelFrame,
    output: &LithoOutput,
    dbu_nm: f64,
    level: f64,
    found: &mut Vec<Found>,
) -> Option<EpeSums> {
    let scale = dbu_nm;
    let cfg = iccad_epe_config(dbu_nm);
    let corners = &output.corners;
    let (Some(aerial), Some(printed)) = (&corners[0].aerial, &corners[0].printed) else {
        return None;
    };
    let epe_nm: Vec<Option<f64>> = cps
        .iter()
        .map(|c| epe_at(aerial, frame, c, level, cfg.search_nm))
        .collect();
    let mut sums = EpeSums {
        checkpoints: cps.len(),
        violations: cps
            .iter()
            .filter(|c| epe_violated_at(printed, frame, c, cfg.tolerance_nm))
            .count(),
        ..EpeSums::default()
    };
    for e in epe_nm.iter().flatten() {
        let abs = e.abs() * scale;
        sums.abs_sum_nm += abs;
        sums.measured += 1;
        sums.max_abs_nm = Some(sums.max_abs_nm.map_or(abs, |m: f64| m.max(abs)));
    }
    for (i, rule) in rules.iter().enumerate() {
        let per_checkpoint: Vec<Option<f64>> = match rule.kind {
            RuleKind::Epe => epe_nm.iter().map(|e| e.map(|e| e * scale)).collect(),
            RuleKind::Pvband => match (&corners[1].aerial, &corners[2].aerial) {
                (Some(hi), Some(lo)) => cps
                    .iter()
                    .map(|c| {
                        let a = epe_at(hi, frame, c, level, cfg.search_nm)?;
                        let b = epe_at(lo, frame, c, level, cfg.search_nm)?;
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
                marker: crate::payload::Marker::Checkpoint {
                    point: [r3(c.x * dbu_nm), r3(c.y * dbu_nm)],
                    normal: [r3(c.nx), r3(c.ny)],
                },
            });
        }
    }
    Some(sums)
}
