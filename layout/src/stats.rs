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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geom::{BBox, Point};
    use crate::model::{Cell, Instance, Repetition, Shape, Transform};

    #[test]
    fn counts_multiply_through_arrays_and_saturate() {
        let mut lib = Library::new("S", 1e-9);
        let mut leaf = Cell::new("L");
        let b = BBox::from_corners(Point::new(0, 0), Point::new(1, 1));
        leaf.push_shape(LayerKey::new(1, 0), Shape::Box(b));
        leaf.push_shape(LayerKey::new(1, 0), Shape::Box(b));
        lib.cells.push(leaf);
        let mut top = Cell::new("T");
        top.push_shape(LayerKey::new(2, 0), Shape::Box(b));
        top.instances.push(Instance {
            cell: 0,
            transform: Transform::default(),
            repetition: Some(Repetition::Array {
                cols: 3,
                rows: 4,
                col_step: Point::new(5, 0),
                row_step: Point::new(0, 5),
            }),
        });
        lib.cells.push(top);
        let c = flat_shape_counts(&lib, 1).expect("ok");
        assert_eq!(c[&LayerKey::new(1, 0)], 24);
        assert_eq!(c[&LayerKey::new(2, 0)], 1);
        // 40 levels of 2^31 x 2^31 arrays: saturates instead of overflowing.
        for i in 2..42 {
            let mut c = Cell::new(format!("C{i}"));
            c.instances.push(Instance {
                cell: i - 1,
                transform: Transform::default(),
                repetition: Some(Repetition::Array {
                    cols: 1 << 31,
                    rows: 1 << 31,
                    col_step: Point::new(1, 0),
                    row_step: Point::new(0, 1),
                }),
            });
            lib.cells.push(c);
        }
        let c = flat_shape_counts(&lib, 41).expect("ok");
        assert_eq!(c[&LayerKey::new(1, 0)], u64::MAX);
    }
}
