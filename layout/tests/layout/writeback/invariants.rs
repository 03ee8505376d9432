//! `write_back`'s promises checked in Rust: hand-made hierarchies (arrays across the region,
//! a plate around it, paths, texts), continuing a repair, empty and outside regions, typed
//! errors, and 160 random hierarchies (seeded, reproducible) with Manhattan, 30° and
//! magnified placements, arrays and explicit repetitions, and second top cells.

use super::{check, contains, flat, keyholed_ring, limits, request};
use crate::common::{place, rect};
use reticle_layout::{
    BBox, Cell, LayerKey, Library, Path, PathEnds, Point, Polygon, Repetition, Shape, Text,
    WritebackError, WritebackRequest, default_mask_layer, write_back,
};

const T: LayerKey = LayerKey::new(1, 0);
const M: LayerKey = LayerKey::new(1, 1);
const OTHER: LayerKey = LayerKey::new(2, 0);

/// LEAF (a box on the target, one on another layer) in a 10×10 array in MID; TOP places MID
/// twice (plain, and rotated and mirrored) and holds a plate, a path and a text itself.
pub fn arrayed() -> Library {
    let mut lib = Library::new("ARR", 1e-9);
    let mut leaf = Cell::new("LEAF");
    leaf.push_shape(T, Shape::Box(rect(0, 0, 40, 20)));
    leaf.push_shape(OTHER, Shape::Box(rect(5, 5, 30, 60)));
    lib.cells.push(leaf);
    let mut mid = Cell::new("MID");
    let mut arr = place(0, 0, 0, 0.0, false, 1.0);
    arr.repetition = Some(Repetition::Array {
        cols: 10,
        rows: 10,
        col_step: Point::new(100, 0),
        row_step: Point::new(0, 100),
    });
    mid.instances.push(arr);
    mid.push_shape(T, Shape::Polygon(Polygon::rect(rect(-50, -50, -10, 990))));
    lib.cells.push(mid);
    let mut top = Cell::new("TOP");
    top.instances.push(place(1, 0, 0, 0.0, false, 1.0));
    top.instances.push(place(1, 3000, 0, 90.0, true, 1.0));
    top.push_shape(T, Shape::Box(rect(1200, -100, 1900, 1100)));
    top.push_shape(
        T,
        Shape::Path(Path {
            spine: vec![
                Point::new(-200, 500),
                Point::new(2500, 500),
                Point::new(2500, 900),
            ],
            width: 15,
            ends: PathEnds::HalfWidth,
        }),
    );
    top.push_shape(
        T,
        Shape::Text(Text {
            string: "NET".into(),
            position: Point::new(450, 450),
        }),
    );
    lib.cells.push(top);
    lib
}

#[test]
fn arrays_across_the_region_keep_their_hierarchy() {
    let lib = arrayed();
    let region = rect(250, 250, 1600, 720);
    let mask = vec![
        Polygon::rect(rect(240, 260, 420, 300)),
        keyholed_ring(1300, 300, 200, 80),
    ];
    let req = request(2, region, &mask);
    let wb = write_back(&lib, &req, &limits()).expect("write back");
    let inside = check(
        &lib,
        &wb.library,
        &req,
        T,
        rect(-300, -300, 3300, 1300),
        7,
        true,
    );
    assert!(inside > 1000, "{inside}");
    let r = &wb.report;
    assert_eq!(r.mask_layer, M);
    assert_eq!(r.base_layer, T);
    assert_eq!(r.touched_cells, ["LEAF", "MID", "TOP"]);
    // The rotated MID stays clear: its variant is placed in TOP; it places LEAF's.
    assert_eq!(r.variant_cells, ["MID$MASK_1_1", "LEAF$MASK_1_1"]);
    assert_eq!(r.mask_polygons, 2);
    // Of the 100 copies of the array in the first MID, 7×5 reach the region; the other 65
    // come back as three sub-arrays of LEAF's variant (rows below, columns left, rows
    // above), plus MID's variant for the rotated MID.
    assert_eq!(r.top_instances, 4, "{r:?}");
    let out = &wb.library;
    let top = &out.cells[2];
    assert_eq!(top.instances.len(), 2 + r.top_instances);
    let arrays: Vec<(u32, u32)> = top.instances[2..]
        .iter()
        .filter_map(|i| match &i.repetition {
            Some(Repetition::Array { cols, rows, .. }) => Some((*cols, *rows)),
            _ => None,
        })
        .collect();
    assert_eq!(arrays, [(10, 3), (3, 5), (10, 2)]);
    // LEAF's box reaches into the region in some copies: no copy in place. MID's plate is
    // clear wherever MID is placed: copied in place, and MID's variant holds nothing itself.
    assert!(!out.cells[0].shapes.contains_key(&M));
    assert_eq!(out.cells[1].shapes.get(&M).map(Vec::len), Some(1));
    let mid_variant = out.cell_index("MID$MASK_1_1").expect("variant");
    assert!(out.cells[mid_variant].shapes.is_empty());
    assert_eq!(
        r.in_place_cells, 1,
        "MID's plate only: TOP's box and path cross the region"
    );
    // Holes: the ring's hole stays empty, its body is mask.
    let got = flat(out, 2, M);
    let hit = |x, y| got.iter().any(|p| contains(p, x, y));
    assert!(hit(1310, 310) && !hit(1400, 400));
}

#[test]
fn a_plate_around_the_region_is_cut_without_holes() {
    let mut lib = Library::new("PLATE", 1e-9);
    let mut top = Cell::new("TOP");
    top.push_shape(T, Shape::Polygon(Polygon::rect(rect(0, 0, 1000, 1000))));
    lib.cells.push(top);
    let req = request(0, rect(400, 400, 600, 600), &[]);
    let wb = write_back(&lib, &req, &limits()).expect("write back");
    check(
        &lib,
        &wb.library,
        &req,
        T,
        rect(-10, -10, 1010, 1010),
        5,
        true,
    );
    let pieces = flat(&wb.library, 0, M);
    assert_eq!(pieces.len(), 4);
    let area: i128 = pieces.iter().map(|p| p.signed_area2().abs() / 2).sum();
    assert_eq!(area, 1000 * 1000 - 200 * 200);
}

#[test]
fn continuing_replaces_the_region_and_keeps_the_rest() {
    let lib = arrayed();
    let first_mask = vec![Polygon::rect(rect(100, 100, 700, 200))];
    let req1 = request(2, rect(50, 50, 800, 450), &first_mask);
    let first = write_back(&lib, &req1, &limits()).expect("first");
    let second_mask = vec![Polygon::rect(rect(500, 300, 1500, 350))];
    let req2 = request(2, rect(450, 250, 1500, 800), &second_mask);
    let second = write_back(&first.library, &req2, &limits()).expect("second");
    assert_eq!(second.report.base_layer, M, "continues from the mask layer");
    let inside = check(
        &first.library,
        &second.library,
        &req2,
        M,
        rect(-300, -300, 3300, 1300),
        7,
        true,
    );
    assert!(inside > 500);
    // Outside the second region the first repair is still there.
    let got = flat(&second.library, 2, M);
    let hit = |x, y| got.iter().any(|p| contains(p, x, y));
    assert!(hit(150, 150) && !hit(120, 30));
    // A third round on a region that meets nothing changes no flat geometry.
    let req3 = request(2, rect(-5000, -5000, -4000, -4000), &[]);
    let third = write_back(&second.library, &req3, &limits()).expect("third");
    assert!(third.report.touched_cells.is_empty());
    check(
        &second.library,
        &third.library,
        &req3,
        M,
        rect(-300, -300, 3300, 1300),
        11,
        true,
    );
}

#[test]
fn empty_and_outside_regions() {
    let lib = arrayed();
    let mask = vec![Polygon::rect(rect(0, 0, 50, 50))];
    for (region, untouched) in [
        (rect(300, 300, 300, 900), true),
        (rect(-10_000, -10_000, -9_000, -9_000), true),
        (rect(-10_000, 400, 10_000, 10_000), false),
        (
            BBox::from_corners(
                Point::new(i64::MIN, i64::MIN),
                Point::new(i64::MAX, i64::MAX),
            ),
            false,
        ),
    ] {
        let req = request(2, region, &mask);
        let wb = write_back(&lib, &req, &limits()).expect("write back");
        check(
            &lib,
            &wb.library,
            &req,
            T,
            rect(-300, -300, 3300, 1300),
            9,
            true,
        );
        if untouched {
            assert!(wb.report.touched_cells.is_empty(), "{region:?}");
            assert_eq!(wb.report.mask_polygons, 0);
            assert_eq!(wb.report.in_place_cells, 3, "every cell copies in place");
        }
    }
}

#[test]
fn errors_are_typed() {
    let lib = arrayed();
    let region = rect(0, 0, 10, 10);
    let bad = WritebackRequest {
        mask_layer: T,
        ..request(2, region, &[])
    };
    assert_eq!(
        write_back(&lib, &bad, &limits()).err(),
        Some(WritebackError::MaskIsTarget(T))
    );
    let swapped = request(
        2,
        BBox {
            left: 10,
            bottom: 0,
            right: 0,
            top: 10,
        },
        &[],
    );
    assert!(matches!(
        write_back(&lib, &swapped, &limits()),
        Err(WritebackError::InvalidRegion { .. })
    ));
    assert!(matches!(
        write_back(&lib, &request(1, region, &[]), &limits()),
        Err(WritebackError::NotTopCell { .. })
    ));
    assert_eq!(
        write_back(&lib, &request(9, region, &[]), &limits()).err(),
        Some(WritebackError::NoSuchCell(9))
    );
    // Placements beyond the coordinate range: an error, never a panic.
    let mut huge = arrayed();
    huge.cells[2]
        .instances
        .push(place(0, 0, 0, 0.0, false, 1e18));
    let all = BBox::from_corners(
        Point::new(i64::MIN, i64::MIN),
        Point::new(i64::MAX, i64::MAX),
    );
    assert!(matches!(
        write_back(&huge, &request(2, all, &[]), &limits()),
        Err(WritebackError::Coordinate(_))
    ));
    let tight = reticle_layout::Limits {
        max_placements: 5,
        ..reticle_layout::Limits::default()
    };
    assert!(matches!(
        write_back(&lib, &request(2, rect(0, 0, 1000, 1000), &[]), &tight),
        Err(WritebackError::LimitExceeded { .. })
    ));
}

#[test]
fn default_mask_layer_takes_the_first_free_datatype() {
    let lib = arrayed();
    assert_eq!(default_mask_layer(&lib, T).expect("free"), M);
    let mut used = arrayed();
    used.cells[0].push_shape(M, Shape::Box(rect(0, 0, 1, 1)));
    assert_eq!(
        default_mask_layer(&used, T).expect("free"),
        LayerKey::new(1, 2)
    );
    assert_eq!(
        default_mask_layer(&lib, LayerKey::new(2, 1)).expect("free"),
        LayerKey::new(2, 2)
    );
}

/// xorshift64*: reproducible random hierarchies without a strategy tree.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

fn random_box(rng: &mut Rng, span: i64) -> BBox {
    let (x, y) = (rng.int(-40, span), rng.int(-40, span));
    rect(x, y, x + rng.int(1, 80), y + rng.int(1, 80))
}

fn random_shape(rng: &mut Rng) -> Shape {
    match rng.int(0, 3) {
        0 | 1 => Shape::Box(random_box(rng, 150)),
        2 => {
            let b = random_box(rng, 150);
            let (mx, my) = ((b.left + b.right) / 2, (b.bottom + b.top) / 2);
            Shape::Polygon(Polygon::new(vec![
                Point::new(b.left, b.bottom),
                Point::new(b.right, b.bottom),
                Point::new(b.right, my),
                Point::new(mx, my),
                Point::new(mx, b.top),
                Point::new(b.left, b.top),
            ]))
        }
        _ => {
            let a = Point::new(rng.int(0, 150), rng.int(0, 150));
            let b = Point::new(a.x + rng.int(-60, 60), a.y);
            let c = Point::new(b.x, b.y + rng.int(-60, 60));
            Shape::Path(Path {
                spine: vec![a, b, c],
                width: rng.int(2, 11),
                ends: match rng.int(0, 2) {
                    0 => PathEnds::Flush,
                    1 => PathEnds::HalfWidth,
                    _ => PathEnds::Variable { begin: 3, end: -1 },
                },
            })
        }
    }
}

fn random_library(rng: &mut Rng) -> Library {
    let mut lib = Library::new("RND", 1e-9);
    let n = rng.int(2, 6) as usize;
    for i in 0..n {
        let mut c = Cell::new(format!("C{i}"));
        for _ in 0..rng.int(0, 4) {
            c.push_shape(T, random_shape(rng));
        }
        if rng.chance(50) {
            c.push_shape(OTHER, random_shape(rng));
        }
        if rng.chance(20) {
            c.push_shape(
                T,
                Shape::Text(Text {
                    string: "T".into(),
                    position: Point::new(rng.int(0, 100), rng.int(0, 100)),
                }),
            );
        }
        for _ in 0..if i == 0 { 0 } else { rng.int(0, 3) } {
            let child = rng.int(0, i as i64 - 1) as usize;
            let rot = if rng.chance(8) {
                30.0
            } else {
                90.0 * rng.int(0, 3) as f64
            };
            let mag = if rng.chance(10) { 2.0 } else { 1.0 };
            let mut inst = place(
                child,
                rng.int(-100, 300),
                rng.int(-100, 300),
                rot,
                rng.chance(40),
                mag,
            );
            if rng.chance(35) {
                inst.repetition = Some(Repetition::Array {
                    cols: rng.int(1, 6) as u32,
                    rows: rng.int(1, 6) as u32,
                    col_step: Point::new(rng.int(20, 90), rng.int(-10, 10)),
                    row_step: Point::new(rng.int(-10, 10), rng.int(20, 90)),
                });
            } else if rng.chance(15) {
                inst.repetition = Some(Repetition::Explicit(
                    (0..rng.int(1, 4))
                        .map(|k| Point::new(k * rng.int(30, 80), rng.int(-40, 40)))
                        .collect(),
                ));
            }
            c.instances.push(inst);
        }
        lib.cells.push(c);
    }
    lib
}

#[test]
fn random_hierarchies_keep_every_promise() {
    let mut nontrivial = 0;
    for seed in 1..=160u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let lib = random_library(&mut rng);
        let top = lib.cells.len() - 1;
        let region = if rng.chance(10) {
            let x = rng.int(0, 300);
            rect(x, 0, x, 400)
        } else {
            let (x, y) = (rng.int(-100, 400), rng.int(-100, 400));
            rect(x, y, x + rng.int(1, 500), y + rng.int(1, 500))
        };
        let mut mask: Vec<Polygon> = (0..rng.int(0, 4))
            .map(|_| Polygon::rect(random_box(&mut rng, 500)))
            .collect();
        if rng.chance(30) {
            mask.push(keyholed_ring(region.left, region.bottom, 120, 40));
        }
        let window = rect(-300, -300, 1400, 1400);
        let step = 13 + (seed % 5) as i64;
        let req = request(top, region, &mask);
        let wb = write_back(&lib, &req, &limits()).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        // 30° placements round, and clipping their slanted edges at the region rounds the
        // crossing points: exact only for Manhattan hierarchies.
        let exact = !lib
            .cells
            .iter()
            .flat_map(|c| &c.instances)
            .any(|i| i.transform.rotation_deg % 90.0 != 0.0);
        let inside = check(&lib, &wb.library, &req, T, window, step, exact);
        // Continue with a second region on the result.
        let (x, y) = (rng.int(-100, 400), rng.int(-100, 400));
        let region2 = rect(x, y, x + rng.int(1, 400), y + rng.int(1, 400));
        let mask2 = vec![Polygon::rect(random_box(&mut rng, 500))];
        let req2 = request(top, region2, &mask2);
        let wb2 = write_back(&wb.library, &req2, &limits())
            .unwrap_or_else(|e| panic!("seed {seed} (second): {e}"));
        let base2 = if wb
            .library
            .cells
            .iter()
            .any(|c| c.shapes.get(&M).is_some_and(|v| !v.is_empty()))
        {
            M
        } else {
            T
        };
        assert_eq!(wb2.report.base_layer, base2, "seed {seed}");
        check(
            &wb.library,
            &wb2.library,
            &req2,
            base2,
            window,
            step + 2,
            exact,
        );
        if inside > 0 && !wb.report.touched_cells.is_empty() && !wb.report.variant_cells.is_empty()
        {
            nontrivial += 1;
        }
    }
    assert!(nontrivial > 30, "only {nontrivial} cases with variants");
}
