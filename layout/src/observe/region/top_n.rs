//! The first `max` entries of a list in sort order, kept in a bounded heap while every
//! entry is counted (the query's truncation metadata).

use super::PlacedShape;
use crate::model::LayerKey;

/// Sort key of listed shapes: layer, kind, bbox (texts: position, then string), id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct SortKey {
    pub(super) layer: LayerKey,
    pub(super) kind: &'static str,
    pub(super) coords: [i64; 4],
    pub(super) text: String,
    pub(super) id: String,
}

/// The `max` smallest entries by key, and how many were offered.
pub(super) struct TopN {
    max: usize,
    /// Entries offered, kept or not.
    pub(super) seen: u64,
    heap: std::collections::BinaryHeap<(SortKey, HeapItem)>,
}

/// A shape in the heap; ordering is by the key alone.
struct HeapItem(PlacedShape);

impl PartialEq for HeapItem {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for HeapItem {}
impl PartialOrd for HeapItem {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for HeapItem {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

impl TopN {
    pub(super) fn new(max: u64) -> Self {
        Self {
            max: usize::try_from(max).unwrap_or(usize::MAX),
            seen: 0,
            heap: std::collections::BinaryHeap::new(),
        }
    }

    pub(super) fn push(&mut self, key: SortKey, s: PlacedShape) {
        self.seen += 1;
        if self.max == 0 {
            return;
        }
        if self.heap.len() < self.max {
            self.heap.push((key, HeapItem(s)));
        } else if self.heap.peek().is_some_and(|(top, _)| key < *top) {
            self.heap.pop();
            self.heap.push((key, HeapItem(s)));
        }
    }

    pub(super) fn into_sorted(self) -> Vec<PlacedShape> {
        self.heap
            .into_sorted_vec()
            .into_iter()
            .map(|(_, s)| s.0)
            .collect()
    }
}
