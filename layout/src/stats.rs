//! Hierarchy statistics computed bottom-up, without flattening any geometry.

use std::collections::BTreeMap;

use crate::model::{HierarchyError, LayerKey, Library};

/// For cell `cell`, how many shapes (texts included) each layer would hold after full
/// flattening: every shape counted once per placement path, as KLayout's recursive shape
/// iterator counts them. Saturates at `u64::MAX`, so a hostile hierarchy costs
/// O(cells × layers) time, not O(placements).
///
/// # Errors
/// [`HierarchyError`] for a dangling reference or cycle.
pub fn flat_shape_counts(
    lib: &Library,
    cell: usize,
) -> Result<BTreeMap<LayerKey, u64>, HierarchyError> {
    let order = lib.bottom_up_order()?;
    let mut counts: Vec<BTreeMap<LayerKey, u64>> = vec![BTreeMap::new(); lib.cells.len()];
    for &ci in &order {
        let c = &lib.cells[ci];
        let mut m: BTreeMap<LayerKey, u64> =
            c.shapes.iter().map(|(k, v)| (*k, v.len() as u64)).collect();
        for inst in &c.instances {
            let n = inst.placement_count();
            for (k, v) in &counts[inst.cell] {
                let e = m.entry(*k).or_insert(0);
                *e = e.saturating_add(v.saturating_mul(n));
            }
        }
        m.retain(|_, v| *v > 0);
        counts[ci] = m;
    }
    Ok(counts.swap_remove(cell))
}
