//! Where one tile's time goes (issue 29 item 6): the phases of
//! [`super::evaluate_tile_timed`], in seconds of wall time on the worker that ran it.
//! Timings are never part of a [`super::TileOutput`] (a tile's output does not depend on
//! when or where it ran); a tile op answers them beside its summary, and
//! `reticle bench chip` adds them up.

use std::time::Instant;

use serde::Serialize;

/// Seconds one tile spent in each phase of its evaluation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct TileTiming {
    /// Mask rules on the drawn polygons, the box growths included.
    pub mask_rules_s: f64,
    /// The printed contours: the nominal aerial image cropped to the core and its margin,
    /// traced at the threshold, merged into a region.
    pub contours_s: f64,
    /// Printed rules on that region (and the pieces cut at the margin).
    pub printed_rules_s: f64,
    /// EPE and PV band at the checkpoints of the whole polygons meeting the core (the
    /// polygon query and the checkpoints included).
    pub epe_s: f64,
    /// L2, PV band and intensity counts over the core's pixels.
    pub pixels_s: f64,
}

impl TileTiming {
    /// The seconds since `from`, and `from` moved to now.
    pub fn lap(from: &mut Instant) -> f64 {
        let now = Instant::now();
        let s = now.duration_since(*from).as_secs_f64();
        *from = now;
        s
    }

    /// The sum of the phases.
    #[must_use]
    pub fn total_s(&self) -> f64 {
        self.mask_rules_s + self.contours_s + self.printed_rules_s + self.epe_s + self.pixels_s
    }
}
