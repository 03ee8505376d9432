//! Unit tests of `reticle_layout::stats`: flat shape counts.

use reticle_layout::geom::{BBox, Point};
use reticle_layout::model::{Cell, Instance, Repetition, Shape, Transform};
use reticle_layout::model::{LayerKey, Library};
use reticle_layout::stats::*;

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
