//! `litho_part` (D193): inside the part, the kept images are `litho`'s bit for bit; the CPU
//! path leaves the rest 0 (but the nominal aerial image, D196), skips the whole-frame
//! counts, and makes the aerial images of the first `aerial_corners` corners only (D228).

use crate::common;

use std::sync::Arc;

use common::{random_kernels, random_mask};
use reticle_kernel::imaging::{
    Corner, FramePart, ImagingBackend, KeepImages, LithoJob, LithoOutput, Resist,
};
use reticle_kernel::{CancelToken, CpuBackend, Grid};

fn corners() -> Vec<Corner> {
    let k = Arc::new(random_kernels(15, 6, 11));
    let d = Arc::new(random_kernels(15, 6, 12));
    [("nominal", &k, 1.0), ("max", &k, 1.02), ("min", &d, 0.98)]
        .into_iter()
        .map(|(name, kernels, dose)| Corner {
            name: name.into(),
            kernels: Arc::clone(kernels),
            dose,
        })
        .collect()
}

/// Whether the pixels of `a` and `b` in `part` are equal bits and, with `zeros`, the others
/// of `b` are 0.
fn same_in<T: Copy + PartialEq + Default + std::fmt::Debug>(
    a: &Grid<T>,
    b: &Grid<T>,
    part: FramePart,
    zeros: bool,
) {
    let n = a.width;
    for y in 0..n {
        for x in 0..n {
            let (u, v) = (a.data[y * n + x], b.data[y * n + x]);
            if (part.x0..part.x1).contains(&x) && (part.y0..part.y1).contains(&y) {
                assert_eq!(u, v, "pixel ({x}, {y}) inside {part:?}");
            } else if zeros {
                assert_eq!(v, T::default(), "pixel ({x}, {y}) outside {part:?}");
            }
        }
    }
}

fn bits(g: &Grid<f32>) -> Grid<u32> {
    Grid {
        width: g.width,
        height: g.height,
        data: g.data.iter().map(|v| v.to_bits()).collect(),
    }
}

#[test]
fn a_part_is_the_whole_frame_s_pixels_and_skips_the_counts() {
    let n = 128;
    let mask = random_mask(n, 5);
    let target = Grid {
        width: n,
        height: n,
        data: mask.data.iter().map(|&v| u8::from(v >= 0.5)).collect(),
    };
    let corners = corners();
    let job = LithoJob {
        mask: &mask,
        target: Some(&target),
        corners: &corners,
        resist: Resist::ICCAD2013,
        keep: KeepImages {
            aerial: true,
            resist: true,
            printed: true,
        },
    };
    let cpu = CpuBackend::new();
    let cancel = CancelToken::new();
    let whole: LithoOutput = cpu.litho(&job, &cancel, &|_| {}).unwrap();
    assert!(whole.l2.is_some() && whole.pvb.is_some());
    // Odd and even first rows (two rows share one FFT), a part touching the frame's edges;
    // each part first into fresh buffers (zeros outside), then into the previous part's
    // buffers (D194: what lies outside is left as it was).
    let mut previous = LithoOutput::default();
    for part in [
        FramePart {
            x0: 7,
            x1: 100,
            y0: 13,
            y1: 90,
            aerial_corners: usize::MAX,
        },
        FramePart {
            x0: 0,
            x1: n,
            y0: 20,
            y1: 21,
            aerial_corners: usize::MAX,
        },
        FramePart {
            x0: 64,
            x1: n,
            y0: 0,
            y1: n,
            aerial_corners: usize::MAX,
        },
        // Only the nominal corner's aerial image (D228), the others printed as before.
        FramePart {
            x0: 3,
            x1: 77,
            y0: 30,
            y1: 111,
            aerial_corners: 1,
        },
    ] {
        for zeros in [true, false] {
            let reuse = if zeros {
                LithoOutput::default()
            } else {
                std::mem::take(&mut previous)
            };
            let got = cpu.litho_part(&job, part, reuse, &cancel, &|_| {}).unwrap();
            assert_eq!((got.l2, got.pvb), (None, None));
            for (ci, (w, g)) in whole.corners.iter().zip(&got.corners).enumerate() {
                assert_eq!(g.printed_pixels, 0);
                // The nominal corner (dose 1) keeps its kernel set's image itself (D196):
                // outside the part it holds whatever rows that image holds.
                let (wa, ga) = (w.aerial.as_ref().unwrap(), g.aerial.as_ref());
                if ci < part.aerial_corners {
                    same_in(&bits(wa), &bits(ga.unwrap()), part, zeros && ci != 0);
                } else {
                    // A corner whose aerial image the caller does not read (D228).
                    assert!(ga.is_none(), "corner {ci} has an aerial image");
                }
                let (wr, gr) = (w.resist.as_ref().unwrap(), g.resist.as_ref().unwrap());
                same_in(&bits(wr), &bits(gr), part, zeros);
                let (wp, gp) = (w.printed.as_ref().unwrap(), g.printed.as_ref().unwrap());
                same_in(wp, gp, part, zeros);
            }
            previous = got;
        }
    }
}
