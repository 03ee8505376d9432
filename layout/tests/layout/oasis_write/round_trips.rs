//! write → read round trips with our reader: the sample library, the edge-case library,
//! the real 45 nm GDS and random libraries.

use super::*;

#[test]
fn sample_library_round_trips() {
    let lib = sample_with_layer_names();
    let back = round_trip(&lib);
    assert_eq!(back.cells.len(), 3);
    // Exact placements, arbitrary angles and magnifications included.
    assert_eq!(back.cells[2].instances, lib.cells[2].instances);
}

#[test]
fn edge_library_round_trips() {
    let lib = edge_library();
    let back = round_trip(&lib);
    assert!(back.cells[1].shapes.is_empty() && back.cells[1].instances.is_empty());
}

#[test]
fn real_45nm_gds_round_trips_through_oasis() {
    let path = common::data_dir().join("gds/gcd_45nm.gds");
    let Ok(bytes) = std::fs::read(&path) else {
        eprintln!("SKIP: {} absent", path.display());
        return;
    };
    let gds = read_gds(&bytes, &Limits::default()).expect("gds");
    let t = std::time::Instant::now();
    let oas = write_oasis(&gds).expect("write oasis");
    eprintln!(
        "gcd_45nm: {} bytes GDS -> {} bytes OASIS in {:?}",
        bytes.len(),
        oas.len(),
        t.elapsed()
    );
    let back = read_oasis(&oas, &Limits::default()).expect("read oasis");
    assert_eq!(back.cells, expected(&gds).cells);
    assert_eq!(back.dbu_um(), gds.dbu_um());
    let tops = gds.top_cells();
    assert!(!tops.is_empty());
    for top in tops {
        let (a, b) = (flat(&gds, top), flat(&back, top));
        assert!(!a.0.is_empty());
        assert_eq!(a, b, "top {}", gds.cells[top].name);
    }
}

fn point() -> impl Strategy<Value = Point> {
    (-5000i64..5000, -5000i64..5000).prop_map(|(x, y)| Point::new(x, y))
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        (-1000i64..1000, -1000i64..1000, 0i64..500, 0i64..500).prop_map(|(x, y, w, h)| {
            Shape::Box(BBox::from_corners(
                Point::new(x, y),
                Point::new(x + w, y + h),
            ))
        }),
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
                Shape::Path(Path { spine, width, ends })
            }),
        (point(), "[ -~]{0,20}")
            .prop_map(|(position, string)| Shape::Text(Text { string, position })),
    ]
}

fn transform() -> impl Strategy<Value = Transform> {
    (point(), 0u8..6, any::<bool>(), 1u8..4).prop_map(|(offset, r, mirror_x, mag)| Transform {
        offset,
        rotation_deg: match r {
            4 => 37.5,
            5 => -90.0,
            _ => f64::from(r) * 90.0,
        },
        mirror_x,
        magnification: if mag == 3 { 0.5 } else { f64::from(mag) },
    })
}

fn repetition() -> impl Strategy<Value = Option<Repetition>> {
    prop_oneof![
        Just(None),
        (1u32..4, 1u32..4, point(), point()).prop_map(|(cols, rows, col_step, row_step)| {
            Some(Repetition::Array {
                cols,
                rows,
                col_step,
                row_step,
            })
        }),
        prop::collection::vec(point(), 1..5).prop_map(|v| Some(Repetition::Explicit(v))),
    ]
}

/// Random DAG: cell i may only place cells with a smaller index.
fn library() -> impl Strategy<Value = Library> {
    let cell = (
        prop::collection::vec((0u32..4, 0u32..3, shape()), 0..6),
        prop::collection::vec(
            (any::<prop::sample::Index>(), transform(), repetition()),
            0..4,
        ),
        "[!-~]{1,12}",
    );
    prop::collection::vec(cell, 1..5).prop_map(|cells| {
        let mut lib = Library::new("RANDOM", 1e-9);
        for (i, (shapes, insts, name)) in cells.into_iter().enumerate() {
            let mut c = Cell::new(format!("{name}{i}"));
            for (l, d, s) in shapes {
                c.push_shape(LayerKey::new(l, d), s);
            }
            if i > 0 {
                for (target, transform, repetition) in insts {
                    c.instances.push(Instance {
                        cell: target.index(i),
                        transform,
                        repetition,
                    });
                }
            }
            lib.cells.push(c);
        }
        lib
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]
    #[test]
    fn oasis_round_trip_of_random_libraries(lib in library()) {
        round_trip(&lib);
    }
}
