//! Unit tests of `reticle_layout::model`: top cells, hierarchy checks, arrays.

use reticle_layout::geom::Point;
use reticle_layout::model::*;

fn lib_with(edges: &[(usize, usize)], n: usize) -> Library {
    let mut lib = Library::new("L", 1e-9);
    for i in 0..n {
        lib.cells.push(Cell::new(format!("C{i}")));
    }
    for &(p, c) in edges {
        lib.cells[p].instances.push(Instance {
            cell: c,
            transform: Transform::default(),
            repetition: None,
        });
    }
    lib
}

#[test]
fn top_cells_are_unreferenced_sorted_by_name() {
    let lib = lib_with(&[(2, 0), (2, 1), (1, 0)], 4);
    let names: Vec<&str> = lib
        .top_cells()
        .iter()
        .map(|&i| lib.cells[i].name.as_str())
        .collect();
    assert_eq!(names, ["C2", "C3"]);
}

#[test]
fn cycle_detected() {
    let lib = lib_with(&[(0, 1), (1, 2), (2, 1)], 3);
    assert!(matches!(
        lib.check_hierarchy(),
        Err(HierarchyError::Recursive { .. })
    ));
    let self_loop = lib_with(&[(0, 0)], 1);
    assert!(self_loop.check_hierarchy().is_err());
    let dag = lib_with(&[(0, 1), (0, 2), (1, 2)], 3);
    assert_eq!(dag.check_hierarchy(), Ok(()));
}

#[test]
fn bad_index_detected() {
    let lib = lib_with(&[(0, 5)], 1);
    assert!(matches!(
        lib.check_hierarchy(),
        Err(HierarchyError::BadCellIndex { index: 5, .. })
    ));
}

#[test]
fn array_displacements() {
    let r = Repetition::Array {
        cols: 3,
        rows: 2,
        col_step: Point::new(10, 0),
        row_step: Point::new(0, 7),
    };
    assert_eq!(r.count(), 6);
    assert_eq!(r.displacement(0), (0, 0));
    assert_eq!(r.displacement(2), (20, 0));
    assert_eq!(r.displacement(4), (10, 7));
}
