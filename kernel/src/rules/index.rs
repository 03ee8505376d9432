//! A uniform-grid spatial index over boxes: the candidate-pair filter of every check.

use std::collections::HashMap;

use reticle_layout::BBox;

/// Boxes covering more cells than this go to a list that every query scans, so one long
/// diagonal edge cannot blow up memory.
const MAX_CELLS_PER_ITEM: i64 = 4096;

/// Grid buckets of item ids.
#[derive(Debug)]
pub(crate) struct GridIndex {
    cell: i64,
    buckets: HashMap<(i64, i64), Vec<u32>>,
    big: Vec<u32>,
    boxes: Vec<BBox>,
}

impl GridIndex {
    /// Indexes `boxes` (inclusive on all sides) with square cells of `cell` dbu.
    pub(crate) fn new(boxes: Vec<BBox>, cell: i64) -> Self {
        let cell = cell.max(1);
        let mut buckets: HashMap<(i64, i64), Vec<u32>> = HashMap::new();
        let mut big = Vec::new();
        for (i, b) in boxes.iter().enumerate() {
            let id = u32::try_from(i).unwrap_or(u32::MAX);
            let (x0, x1) = (b.left.div_euclid(cell), b.right.div_euclid(cell));
            let (y0, y1) = (b.bottom.div_euclid(cell), b.top.div_euclid(cell));
            if (x1 - x0 + 1).saturating_mul(y1 - y0 + 1) > MAX_CELLS_PER_ITEM {
                big.push(id);
                continue;
            }
            for cx in x0..=x1 {
                for cy in y0..=y1 {
                    buckets.entry((cx, cy)).or_default().push(id);
                }
            }
        }
        Self {
            cell,
            buckets,
            big,
            boxes,
        }
    }

    /// A cell size suited to the boxes: their mean extent, at least `min`.
    pub(crate) fn suggested_cell(boxes: &[BBox], min: i64) -> i64 {
        if boxes.is_empty() {
            return min.max(1);
        }
        let sum: i128 = boxes
            .iter()
            .map(|b| i128::from(b.width().max(b.height())))
            .sum();
        let mean = i64::try_from(sum / boxes.len() as i128).unwrap_or(i64::MAX);
        mean.max(min).max(1)
    }

    /// Calls `f` once for each item whose box touches `q` (inclusive), using `stamp` (one
    /// slot per item, reused across queries with a fresh `tag`) to report each id once.
    pub(crate) fn query(&self, q: BBox, stamp: &mut [u32], tag: u32, mut f: impl FnMut(u32)) {
        let touches = |b: &BBox| {
            b.left <= q.right && q.left <= b.right && b.bottom <= q.top && q.bottom <= b.top
        };
        let mut visit = |id: u32, stamp: &mut [u32]| {
            let slot = &mut stamp[id as usize];
            if *slot != tag {
                *slot = tag;
                if touches(&self.boxes[id as usize]) {
                    f(id);
                }
            }
        };
        for &id in &self.big {
            visit(id, stamp);
        }
        let (x0, x1) = (q.left.div_euclid(self.cell), q.right.div_euclid(self.cell));
        let (y0, y1) = (q.bottom.div_euclid(self.cell), q.top.div_euclid(self.cell));
        if (x1 - x0 + 1).saturating_mul(y1 - y0 + 1) > self.buckets.len() as i64 {
            // Query larger than the populated grid: walk the buckets instead.
            for ((cx, cy), ids) in &self.buckets {
                if (x0..=x1).contains(cx) && (y0..=y1).contains(cy) {
                    for &id in ids {
                        visit(id, stamp);
                    }
                }
            }
            return;
        }
        for cx in x0..=x1 {
            for cy in y0..=y1 {
                if let Some(ids) = self.buckets.get(&(cx, cy)) {
                    for &id in ids {
                        visit(id, stamp);
                    }
                }
            }
        }
    }

    /// Number of items.
    pub(crate) fn len(&self) -> usize {
        self.boxes.len()
    }
}
