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

/// The ICCAD-2013 corners: nominal = focus @ 1.00, max = focus @ 1.02, min = defocus @ 0.98.
#[must_use]
pub fn iccad_corners(focus: &Arc<KernelSet>, defocus: &Arc<KernelSet>) -> Vec<Corner> {
    vec![
        Corner {
            name: "nominal".into(),
            kernels: Arc::clone(focus),
            dose: 1.0,
        },
        Corner {
            name: "max".into(),
            kernels: Arc::clone(focus),
            dose: 1.02,
        },
        Corner {
            name: "min".into(),
            kernels: Arc::clone(defocus),
            dose: 0.98,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn print_matches_sigmoid_half() {
        let r = Resist::ICCAD2013;
        for i in [0.0f32, 0.2, 0.224, 0.226, 0.5, 1.0] {
            assert_eq!(r.prints(i), r.response(i) > 0.5, "{i}");
        }
        assert!((r.response(0.225) - 0.5).abs() < 1e-6);
    }
}
