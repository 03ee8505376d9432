//! Resist response, printing and the ICCAD-2013 process corners.

use std::sync::Arc;

use crate::imaging::{Corner, Resist};
use crate::{Grid, KernelSet};

/// Logistic function.
#[must_use]
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

impl Resist {
    /// Resist response to intensity `i`.
    #[must_use]
    pub fn response(&self, i: f32) -> f32 {
        sigmoid(self.steepness * (i - self.threshold))
    }

    /// Whether intensity `i` prints (`response > 0.5` ⇔ `i > threshold`).
    #[must_use]
    pub fn prints(&self, i: f32) -> bool {
        i > self.threshold
    }

    /// Resist image of an aerial image.
    #[must_use]
    pub fn image(&self, aerial: &Grid<f32>) -> Grid<f32> {
        Grid {
            width: aerial.width,
            height: aerial.height,
            data: aerial.data.iter().map(|&i| self.response(i)).collect(),
        }
    }

    /// Printed pixels (1) of an aerial image.
    #[must_use]
    pub fn print(&self, aerial: &Grid<f32>) -> Grid<u8> {
        Grid {
            width: aerial.width,
            height: aerial.height,
            data: aerial
                .data
                .iter()
                .map(|&i| u8::from(self.prints(i)))
                .collect(),
        }
    }
}

/// Names of the three process corners, in the order every corner list of reticle uses
/// (images, doses, reports): nominal and max image with the focus kernels, min with the
/// defocus kernels.
pub const CORNER_NAMES: [&str; 3] = ["nominal", "max", "min"];

/// The ICCAD-2013 doses of [`CORNER_NAMES`]: nominal 1.00, max 1.02, min 0.98.
pub const ICCAD2013_DOSES: [f32; 3] = [1.0, 1.02, 0.98];

/// The corners [`CORNER_NAMES`] at `doses`: nominal = focus @ `doses[0]`, max = focus @
/// `doses[1]`, min = defocus @ `doses[2]`.
#[must_use]
pub fn corners_at(
    focus: &Arc<KernelSet>,
    defocus: &Arc<KernelSet>,
    doses: [f32; 3],
) -> Vec<Corner> {
    CORNER_NAMES
        .into_iter()
        .zip([focus, focus, defocus])
        .zip(doses)
        .map(|((name, kernels), dose)| Corner {
            name: name.into(),
            kernels: Arc::clone(kernels),
            dose,
        })
        .collect()
}

/// The ICCAD-2013 corners: nominal = focus @ 1.00, max = focus @ 1.02, min = defocus @ 0.98.
#[must_use]
pub fn iccad_corners(focus: &Arc<KernelSet>, defocus: &Arc<KernelSet>) -> Vec<Corner> {
    corners_at(focus, defocus, ICCAD2013_DOSES)
}
