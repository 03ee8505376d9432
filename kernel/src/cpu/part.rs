//! The CPU backend's `litho_part` (D193): each corner's kept images inside a part of the
//! frame, made from each kernel set's upsampled rows while they are in cache (D228).
//!
//! The upsampling hands over its rows pair by pair ([`bandlimited::aerial_pairs`]); each
//! row inside the part is converted to `f32` once (the image's value, the same bits as
//! [`bandlimited::aerial_rows_into`]'s) and every corner that reads that kernel set writes
//! its aerial image `d·I`, print `d·I > th` and resist `sigmoid(s·(d·I − th))` from it. A
//! kernel set's image is stored only when a corner keeps it as its aerial image (the first
//! corner at dose 1, D196); the others are never written to memory whole.

use crate::bandlimited::{self, MaskBand};
use crate::imaging::{CornerOutput, FramePart, ImagingError, LithoJob, LithoOutput};
use crate::resist::sigmoid;
use crate::{CancelToken, Progress, ProgressFn, scratch};

use super::square;

/// What the part's corners are made from: the mask band, and for each corner the corner
/// whose kernel set it shares (`owners`; the distinct sets are `distinct`), on an `n × n`
/// frame.
pub(super) struct Images<'a> {
    pub band: &'a MaskBand,
    pub owners: &'a [usize],
    pub distinct: &'a [usize],
    pub n: usize,
}

/// One corner's kept images inside the part: the kernel set it reads (the owner corner's
/// index), its dose factor `d` (the intensity's) and its buffers.
struct CornerPart {
    image: usize,
    d: f32,
    aerial: Option<Vec<f32>>,
    printed: Option<Vec<u8>>,
    resist: Option<Vec<f32>>,
}

/// A buffer of `len` for a kept image: `reuse` when it has that length (the pixels outside
/// the part keep what it held, D194), else zeros.
fn buffer<T: Copy + Default>(reuse: Option<Vec<T>>, len: usize) -> Vec<T> {
    match reuse {
        Some(v) if v.len() == len => v,
        _ => vec![T::default(); len],
    }
}

/// One corner's two rows (a pair) of its kept images.
struct CornerRows<'a> {
    d: f32,
    aerial: Option<&'a mut [f32]>,
    printed: Option<&'a mut [u8]>,
    resist: Option<&'a mut [f32]>,
}

/// What one pair of rows of a kernel set's image is written into: the image's own rows
/// (when a corner keeps the image as its aerial image) and the rows of every corner that
/// reads the set.
struct PairOut<'a> {
    image: Option<&'a mut [f32]>,
    corners: Vec<CornerRows<'a>>,
}

/// The columns and rows of the part, clamped to the frame.
#[derive(Clone, Copy)]
struct Span {
    x0: usize,
    x1: usize,
    y0: usize,
    y1: usize,
}

/// Row `r` (0 or 1) of a pair starting at row `y`: the image's row inside the part, then
/// every corner's images from it.
fn write_row(out: &mut PairOut<'_>, r: usize, row: &[f32], s: Span, n: usize, th: f32, k: f32) {
    let at = r * n + s.x0..r * n + s.x1;
    if let Some(img) = out.image.as_deref_mut() {
        img[at.clone()].copy_from_slice(row);
    }
    for c in &mut out.corners {
        let d = c.d;
        match (c.aerial.as_deref_mut(), c.printed.as_deref_mut()) {
            (Some(a), Some(p)) => {
                for ((oa, op), &i) in a[at.clone()].iter_mut().zip(&mut p[at.clone()]).zip(row) {
                    let v = d * i;
                    *oa = v;
                    *op = u8::from(v > th);
                }
            }
            (Some(a), None) => {
                for (oa, &i) in a[at.clone()].iter_mut().zip(row) {
                    *oa = d * i;
                }
            }
            (None, Some(p)) => {
                for (op, &i) in p[at.clone()].iter_mut().zip(row) {
                    *op = u8::from(d * i > th);
                }
            }
            (None, None) => {}
        }
        if let Some(rs) = c.resist.as_deref_mut() {
            for (o, &i) in rs[at.clone()].iter_mut().zip(row) {
                *o = sigmoid(k * (d * i - th));
            }
        }
    }
}

/// The corners' outputs of `job` in part `p`: kept images inside the part (into `reuse`'s
/// buffers where they fit, D194), no aerial image for a corner at or past
/// `p.aerial_corners` (D228), the first corner at dose 1 of each kernel set keeping the
/// set's image itself (D196), and no counts.
pub(super) fn corners(
    job: &LithoJob<'_>,
    p: FramePart,
    mut reuse: LithoOutput,
    images: &Images<'_>,
    cancel: &CancelToken,
    progress: ProgressFn<'_>,
) -> Result<Vec<CornerOutput>, ImagingError> {
    let n = images.n;
    let len = n * n;
    let count = job.corners.len();
    let s = {
        let (x0, y0) = (p.x0.min(n), p.y0.min(n));
        Span {
            x0,
            x1: p.x1.min(n).max(x0),
            y0,
            y1: p.y1.min(n).max(y0),
        }
    };
    let d2: Vec<f32> = job.corners.iter().map(|c| c.dose * c.dose).collect();
    // Which corner keeps which kernel set's image as its aerial image, and the buffers of
    // every corner's other kept images.
    let mut moved: Vec<Option<usize>> = vec![None; count];
    let mut outs = Vec::with_capacity(count);
    for ci in 0..count {
        let old = reuse
            .corners
            .get_mut(ci)
            .map(std::mem::take)
            .unwrap_or_default();
        let owner = images.owners[ci];
        let keep_aerial = job.keep.aerial && ci < p.aerial_corners;
        let move_image = keep_aerial && d2[ci] == 1.0 && !moved.contains(&Some(owner));
        let mut old_aerial = old.aerial.map(|g| g.data);
        if move_image {
            moved[ci] = Some(owner);
        }
        if (!keep_aerial || move_image)
            && let Some(v) = old_aerial.take()
        {
            scratch::give(v);
        }
        outs.push(CornerPart {
            image: owner,
            d: d2[ci],
            aerial: (keep_aerial && !move_image).then(|| buffer(old_aerial, len)),
            printed: job
                .keep
                .printed
                .then(|| buffer(old.printed.map(|g| g.data), len)),
            resist: job
                .keep
                .resist
                .then(|| buffer(old.resist.map(|g| g.data), len)),
        });
    }
    // The kernel sets' images that a corner keeps, in pooled buffers (D195).
    let mut kept: Vec<Option<Vec<f32>>> = vec![None; count];
    for owner in moved.iter().flatten() {
        kept[*owner] = Some(scratch::take(len));
    }
    let pairs = bandlimited::row_pairs(&(s.y0..s.y1), n);
    let (th, k) = (job.resist.threshold, job.resist.steepness);
    let total = images.distinct.len() as u64 + count as u64;
    for (done, &set) in images.distinct.iter().enumerate() {
        cancel.check()?;
        let mut items: Vec<PairOut<'_>> = pairs
            .clone()
            .map(|_| PairOut {
                image: None,
                corners: Vec::new(),
            })
            .collect();
        if let Some(img) = kept[set].as_mut() {
            for (item, rows) in items
                .iter_mut()
                .zip(img.chunks_mut(2 * n).skip(pairs.start))
            {
                item.image = Some(rows);
            }
        }
        for c in outs.iter_mut().filter(|c| c.image == set) {
            let mut a = c
                .aerial
                .as_mut()
                .map(|v| v.chunks_mut(2 * n).skip(pairs.start));
            let mut pr = c
                .printed
                .as_mut()
                .map(|v| v.chunks_mut(2 * n).skip(pairs.start));
            let mut rs = c
                .resist
                .as_mut()
                .map(|v| v.chunks_mut(2 * n).skip(pairs.start));
            for item in &mut items {
                item.corners.push(CornerRows {
                    d: c.d,
                    aerial: a.as_mut().and_then(Iterator::next),
                    printed: pr.as_mut().and_then(Iterator::next),
                    resist: rs.as_mut().and_then(Iterator::next),
                });
            }
        }
        bandlimited::aerial_pairs(
            images.band,
            &job.corners[set].kernels,
            n,
            pairs.start,
            items,
            cancel,
            |mut out, y, buf| {
                let mut row = vec![0.0f32; s.x1 - s.x0];
                let src = &buf[s.x0..s.x1];
                if (s.y0..s.y1).contains(&y) {
                    for (v, z) in row.iter_mut().zip(src) {
                        *v = z.re as f32;
                    }
                    write_row(&mut out, 0, &row, s, n, th, k);
                }
                if (s.y0..s.y1).contains(&(y + 1)) {
                    for (v, z) in row.iter_mut().zip(src) {
                        *v = z.im as f32;
                    }
                    write_row(&mut out, 1, &row, s, n, th, k);
                }
            },
        )?;
        progress(Progress {
            done: done as u64 + 1,
            total,
            stage: "aerial",
        });
    }
    let mut corners: Vec<CornerOutput> = outs
        .into_iter()
        .map(|c| CornerOutput {
            aerial: c.aerial.map(|v| square(n, v)),
            resist: c.resist.map(|v| square(n, v)),
            printed: c.printed.map(|v| square(n, v)),
            printed_pixels: 0,
        })
        .collect();
    for (ci, owner) in moved.iter().enumerate() {
        if let Some(owner) = *owner {
            corners[ci].aerial = kept[owner].take().map(|v| square(n, v));
        }
    }
    progress(Progress {
        done: total,
        total,
        stage: "corner",
    });
    Ok(corners)
}
