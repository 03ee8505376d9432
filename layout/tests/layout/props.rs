//! Property tests of geometry invariants: clipping areas, exact Manhattan transforms, and
//! GDSII write → read round trips of random libraries.

use proptest::prelude::*;
use reticle_layout::clip::clip_polygon;
use reticle_layout::{
    BBox, Cell, FlattenOptions, Instance, LayerKey, Library, Limits, Path, PathEnds, Point,
    Polygon, Repetition, Shape, Text, Transform, flatten, read_gds, write_gds,
};

fn bbox() -> impl Strategy<Value = BBox> {
    (-1000i64..1000, -1000i64..1000, 1i64..500, 1i64..500)
        .prop_map(|(x, y, w, h)| BBox::from_corners(Point::new(x, y), Point::new(x + w, y + h)))
}

fn intersection_area(a: &BBox, b: &BBox) -> i128 {
    let w = (a.right.min(b.right) - a.left.max(b.left)).max(0);
    let h = (a.top.min(b.top) - a.bottom.max(b.bottom)).max(0);
    i128::from(w) * i128::from(h)
}

fn point() -> impl Strategy<Value = Point> {
    (-5000i64..5000, -5000i64..5000).prop_map(|(x, y)| Point::new(x, y))
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        bbox().prop_map(Shape::Box),
        prop::collection::vec(point(), 3..12).prop_map(|p| Shape::Polygon(Polygon::new(p))),
        (
            prop::collection::vec(point(), 1..6),
            0i64..200,
            0u8..4,
            -50i64..50,
            -50i64..50
        )
            .prop_map(|(spine, width, e, b, en)| {
                let ends = match e {
                    0 => PathEnds::Flush,
                    1 => PathEnds::Round,
                    2 => PathEnds::HalfWidth,
                    _ => PathEnds::Variable { begin: b, end: en },
                };
                Shape::Path(Path {
                    spine,
                    width: width * 2,
                    ends,
                })
            }),
        (point(), "[A-Za-z0-9_]{1,20}")
            .prop_map(|(position, string)| Shape::Text(Text { string, position })),
    ]
}

fn transform() -> impl Strategy<Value = Transform> {
    (point(), 0u8..5, any::<bool>(), 1u8..4).prop_map(|(offset, r, mirror_x, mag)| Transform {
        offset,
        rotation_deg: if r == 4 { 37.5 } else { f64::from(r) * 90.0 },
        mirror_x,
        magnification: if mag == 3 { 0.5 } else { f64::from(mag) },
    })
}

/// Random DAG: cell i may only place cells with a smaller index.
fn library() -> impl Strategy<Value = Library> {
    let cell = (
        prop::collection::vec((0u32..4, 0u32..3, shape()), 0..6),
        prop::collection::vec(
            (
                any::<prop::sample::Index>(),
                transform(),
                prop::option::of((1u32..4, 1u32..4, point(), point())),
            ),
            0..4,
        ),
    );
    prop::collection::vec(cell, 1..5).prop_map(|cells| {
        let mut lib = Library::new("RANDOM", 1e-9);
        for (i, (shapes, insts)) in cells.into_iter().enumerate() {
            let mut c = Cell::new(format!("C{i}"));
            for (l, d, s) in shapes {
                c.push_shape(LayerKey::new(l, d), s);
            }
            if i > 0 {
                for (target, transform, rep) in insts {
                    c.instances.push(Instance {
                        cell: target.index(i),
                        transform,
                        repetition: rep.map(|(cols, rows, col_step, row_step)| Repetition::Array {
                            cols,
                            rows,
                            col_step,
                            row_step,
                        }),
                    });
                }
            }
            lib.cells.push(c);
        }
        lib
    })
}

proptest! {
    #[test]
    fn rectangle_clip_area_is_exact(r in bbox(), c in bbox()) {
        let clipped = clip_polygon(&Polygon::rect(r), &c);
        let want = intersection_area(&r, &c);
        prop_assert_eq!(clipped.map_or(0, |p| p.signed_area2().abs() / 2), want);
    }

    #[test]
    fn clipped_polygons_stay_inside(pts in prop::collection::vec(point(), 3..10), c in bbox()) {
        let p = Polygon::new(pts);
        if let Some(q) = clip_polygon(&p, &c) {
            for v in &q.points {
                prop_assert!(v.x >= c.left && v.x <= c.right && v.y >= c.bottom && v.y <= c.top);
            }
        }
    }

    #[test]
    fn manhattan_placements_preserve_area_exactly(
        r in bbox(),
        offset in point(),
        quarter in 0u8..4,
        mirror_x in any::<bool>(),
        mag in 1u8..4,
    ) {
        let t = Transform {
            offset,
            rotation_deg: f64::from(quarter) * 90.0,
            mirror_x,
            magnification: f64::from(mag),
        };
        let mut lib = Library::new("M", 1e-9);
        let mut leaf = Cell::new("L");
        leaf.push_shape(LayerKey::new(1, 0), Shape::Box(r));
        lib.cells.push(leaf);
        let mut top = Cell::new("T");
        top.instances.push(Instance { cell: 0, transform: t, repetition: None });
        lib.cells.push(top);
        let flat = flatten(&lib, 1, &FlattenOptions::default()).expect("flatten");
        let p = &flat.polygons[&LayerKey::new(1, 0)][0];
        let mag = t.magnification as i128;
        prop_assert_eq!(p.signed_area2().abs(), 2 * mag * mag * i128::from(r.width()) * i128::from(r.height()));
    }

    #[test]
    fn gds_round_trip_of_random_libraries(lib in library()) {
        let bytes = write_gds(&lib).expect("writable");
        let back = read_gds(&bytes, &Limits::default()).expect("readable");
        // Polygons lose nothing but a closing vertex equal to the first; boxes, paths,
        // texts and placements come back identical.
        let normalize = |l: &Library| -> Vec<Cell> {
            l.cells.iter().map(|c| {
                let mut c = c.clone();
                for shapes in c.shapes.values_mut() {
                    for s in shapes.iter_mut() {
                        if let Shape::Polygon(p) = s
                            && p.points.len() > 1
                            && p.points.first() == p.points.last()
                        {
                            p.points.pop();
                        }
                    }
                }
                c
            }).collect()
        };
        prop_assert_eq!(normalize(&back), normalize(&lib));
        // And both flatten to the same polygons.
        for top in lib.top_cells() {
            let a = flatten(&lib, top, &FlattenOptions::default()).expect("a");
            let b = flatten(&back, top, &FlattenOptions::default()).expect("b");
            prop_assert_eq!(a, b);
        }
    }
}
