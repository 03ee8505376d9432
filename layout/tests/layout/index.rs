//! The layout index: indexed flattening gives exactly what the plain walk gives (polygons,
//! texts and order) for random clip boxes, layer filters and both clip modes, on the
//! fixtures and on generated hierarchies; the layer box equals the flattened box; limits
//! hold with an index.

use crate::common;

use std::collections::{BTreeSet, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use common::{place, rect, sample_library};
use reticle_layout::clip::clip_polygon;
use reticle_layout::index::bench::{flat_cell_library, flat_cell_speedup};
use reticle_layout::{
    BBox, Cell, ClipMode, FlatGeometry, FlatLayout, FlattenError, FlattenOptions, LayerKey,
    LayoutIndex, Library, Limits, Path, PathEnds, Point, Polygon, Repetition, Shape, Text, flatten,
    flatten_with_mode, read_layout, walk_with_mode,
};

/// SplitMix64: deterministic test randomness without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D4_9BB4_9133_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % ((hi - lo) as u64 + 1)) as i64
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[(self.next() % xs.len() as u64) as usize]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

fn fixtures() -> Vec<(String, Library)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/layouts");
    let mut out = Vec::new();
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("fixtures/layouts")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "gds" || e == "oas"))
        .collect();
    names.sort();
    for p in names {
        let bytes = std::fs::read(&p).expect("read fixture");
        let lib = read_layout(&bytes, None, &Limits::default()).expect("parse fixture");
        out.push((p.display().to_string(), lib));
    }
    assert!(out.len() >= 4, "expected the GDS and OASIS fixtures");
    assert!(out.iter().any(|(n, _)| n.ends_with(".oas")));
    out
}

/// Everything a walk visits, in order: layer, cell path, geometry.
fn walk_trace(
    lib: &Library,
    index: Option<&LayoutIndex>,
    cell: usize,
    opts: &FlattenOptions,
    mode: ClipMode,
) -> Result<Vec<(LayerKey, Vec<usize>, FlatGeometry)>, FlattenError> {
    let mut trace = Vec::new();
    let mut visit = |s: reticle_layout::FlatShape<'_>| {
        trace.push((s.key, s.cell_path.to_vec(), s.geometry));
    };
    match index {
        Some(index) => index.walk(cell, opts, mode, &mut visit)?,
        None => walk_with_mode(lib, cell, opts, mode, &mut visit)?,
    }
    Ok(trace)
}

/// A random clip box around `extent`: anything from a sliver to more than the whole.
fn random_clip(rng: &mut Rng, extent: BBox) -> BBox {
    let (w, h) = (extent.width().max(1), extent.height().max(1));
    let x = rng.range(extent.left - w / 4, extent.right + w / 8);
    let y = rng.range(extent.bottom - h / 4, extent.top + h / 8);
    let size = |rng: &mut Rng, s: i64| match rng.next() % 4 {
        0 => rng.range(0, (s / 50).max(1)),
        1 => rng.range(0, (s / 8).max(1)),
        2 => rng.range(0, (s / 2).max(1)),
        _ => rng.range(0, s + s / 2),
    };
    let (cw, ch) = (size(rng, w), size(rng, h));
    rect(x, y, x + cw, y + ch)
}

fn random_layers(rng: &mut Rng, lib: &Library) -> Option<BTreeSet<LayerKey>> {
    let all = lib.layers();
    if all.is_empty() || rng.chance(30) {
        return None;
    }
    let mut set = BTreeSet::new();
    for _ in 0..rng.range(1, 2) {
        set.insert(rng.pick(&all));
    }
    Some(set)
}

/// Compares indexed and plain walks for `queries` random clips on every top cell.
fn check_equivalence(name: &str, lib: Library, queries: usize, seed: u64) -> usize {
    let lib = Arc::new(lib);
    // Every list indexed (the fixtures are small) and the default threshold.
    let indexes = [
        LayoutIndex::with_min_indexed_items(Arc::clone(&lib), 1).expect("index"),
        LayoutIndex::new(Arc::clone(&lib)).expect("index"),
    ];
    let mut rng = Rng(seed);
    let mut compared = 0;
    for top in lib.top_cells() {
        let Some(extent) = indexes[0]
            .layer_bbox(top, None, &Limits::default())
            .expect("extent")
            .bbox
        else {
            continue;
        };
        for q in 0..queries {
            // Windows over much of the 2-million-copy fixture stop at the shape limit,
            // at the same shape both ways (the order is the same).
            let opts = FlattenOptions {
                clip: Some(random_clip(&mut rng, extent)),
                layers: random_layers(&mut rng, &lib),
                include_texts: rng.chance(50),
                limits: Limits {
                    max_shapes: 20_000,
                    ..Limits::default()
                },
            };
            let mode = if q % 2 == 0 {
                ClipMode::Clip
            } else {
                ClipMode::Overlap
            };
            let plain = walk_trace(&lib, None, top, &opts, mode);
            for index in &indexes {
                let indexed = walk_trace(&lib, Some(index), top, &opts, mode);
                assert_eq!(
                    plain, indexed,
                    "{name}: cell {top}, {mode:?}, clip {:?}, layers {:?}",
                    opts.clip, opts.layers
                );
            }
            let flat = flatten_with_mode(&lib, top, &opts, mode);
            assert_eq!(flat, indexes[0].flatten(top, &opts, mode));
            compared += plain.map_or(0, |t| t.len());
        }
    }
    compared
}

#[test]
fn fixtures_flatten_the_same_with_an_index() {
    for (i, (name, lib)) in fixtures().into_iter().enumerate() {
        let shapes = check_equivalence(&name, lib, 300, 100 + i as u64);
        assert!(shapes > 0, "{name}: the clips should meet some geometry");
    }
}

/// A random hierarchy: leaves of every shape kind on three layers, middle cells placing
/// them with Manhattan and arbitrary placements, lattices (skewed ones too) and irregular
/// repetitions, and a top cell with many shapes and instances of its own.
fn generated_library(seed: u64, manhattan_only: bool) -> Library {
    let mut rng = Rng(seed);
    let layers = [
        LayerKey::new(1, 0),
        LayerKey::new(2, 0),
        LayerKey::new(5, 3),
    ];
    let mut lib = Library::new("GEN", 1e-9);
    let add_shapes = |rng: &mut Rng, cell: &mut Cell, n: usize, span: i64| {
        for _ in 0..n {
            let key = rng.pick(&layers);
            let (x, y) = (rng.range(-span, span), rng.range(-span, span));
            let (w, h) = (rng.range(1, span / 4), rng.range(1, span / 4));
            let shape = match rng.next() % 10 {
                0..=3 => Shape::Box(rect(x, y, x + w, y + h)),
                4..=5 => Shape::Polygon(Polygon::new(vec![
                    Point::new(x, y),
                    Point::new(x + w, y + rng.range(0, h)),
                    Point::new(x + rng.range(0, w), y + h),
                ])),
                6 => Shape::Polygon(Polygon::new(vec![
                    Point::new(x, y),
                    Point::new(x + w, y),
                    Point::new(x + w, y + h),
                    Point::new(x + w / 2, y + h / 2),
                    Point::new(x, y + h),
                ])),
                7..=8 => Shape::Path(Path {
                    spine: vec![
                        Point::new(x, y),
                        Point::new(x + w, y),
                        Point::new(x + w, y + h),
                    ],
                    width: rng.range(0, 40),
                    ends: rng.pick(&[
                        PathEnds::Flush,
                        PathEnds::HalfWidth,
                        PathEnds::Round,
                        PathEnds::Variable { begin: 3, end: -2 },
                    ]),
                }),
                _ => Shape::Text(Text {
                    string: format!("T{x}"),
                    position: Point::new(x, y),
                }),
            };
            cell.push_shape(key, shape);
        }
    };
    // Middle cells turn by multiples of 45°, the top cell by any angle: a few dozen
    // orientations in all, as in real layouts.
    let (mid_angles, top_angles): (&[f64], &[f64]) = if manhattan_only {
        (&[0.0, 90.0, 180.0, 270.0], &[0.0, 90.0, 180.0, 270.0])
    } else {
        (
            &[0.0, 90.0, 45.0, 135.0, 270.0],
            &[0.0, 90.0, 30.0, 45.0, 137.5],
        )
    };
    let mags: &[f64] = if manhattan_only {
        &[1.0, 2.0, 3.0]
    } else {
        &[1.0, 2.0, 0.5, 1.25]
    };
    let random_instance = |rng: &mut Rng, child: usize, span: i64, angles: &[f64]| {
        let mut inst = place(
            child,
            rng.range(-span, span),
            rng.range(-span, span),
            rng.pick(angles),
            rng.chance(40),
            rng.pick(mags),
        );
        inst.repetition = match rng.next() % 8 {
            0 | 1 => Some(Repetition::Array {
                cols: rng.range(1, 4) as u32,
                rows: rng.range(1, 3) as u32,
                col_step: Point::new(rng.range(-900, 900), 0),
                row_step: Point::new(0, rng.range(-900, 900)),
            }),
            2 => Some(Repetition::Array {
                cols: rng.range(1, 4) as u32,
                rows: rng.range(1, 4) as u32,
                col_step: Point::new(rng.range(-500, 500), rng.range(-200, 200)),
                row_step: Point::new(rng.range(-200, 200), rng.range(-500, 500)),
            }),
            3 => Some(Repetition::Explicit(
                (0..rng.range(1, 5))
                    .map(|_| Point::new(rng.range(-2000, 2000), rng.range(-2000, 2000)))
                    .collect(),
            )),
            _ => None,
        };
        inst
    };
    for i in 0..4 {
        let mut leaf = Cell::new(format!("LEAF{i}"));
        add_shapes(&mut rng, &mut leaf, 20 + 10 * i, 400);
        lib.cells.push(leaf);
    }
    for i in 0..3 {
        let mut mid = Cell::new(format!("MID{i}"));
        add_shapes(&mut rng, &mut mid, 10, 1500);
        for _ in 0..8 {
            // Mostly leaves, sometimes the middle cell below.
            let child = if i > 0 && rng.chance(20) {
                3 + i
            } else {
                rng.range(0, 3) as usize
            };
            mid.instances
                .push(random_instance(&mut rng, child, 5000, mid_angles));
        }
        lib.cells.push(mid);
    }
    let mut top = Cell::new("TOP");
    add_shapes(&mut rng, &mut top, 300, 30_000);
    for _ in 0..24 {
        let child = rng.range(0, 6) as usize;
        top.instances
            .push(random_instance(&mut rng, child, 30_000, top_angles));
    }
    lib.cells.push(top);
    lib
}

#[test]
fn generated_hierarchies_flatten_the_same_with_an_index() {
    for seed in 0..3 {
        for manhattan_only in [true, false] {
            let lib = generated_library(seed, manhattan_only);
            let shapes = check_equivalence("generated", lib, 80, 1000 + seed);
            assert!(
                shapes > 1000,
                "clips should meet plenty of geometry: {shapes}"
            );
        }
    }
    let shapes = check_equivalence("sample", sample_library(), 200, 7);
    assert!(shapes > 0);
}

#[test]
fn grid_rounding_at_the_clip_edges_is_not_missed() {
    // Tiny shapes under arbitrary angles and magnifications, tiny clips: flattened vertices
    // are rounded to the grid, so a shape whose exact image just misses a clip may still
    // land in it; the index must not rule such shapes out.
    let mut rng = Rng(99);
    let mut lib = Library::new("R", 1e-9);
    let mut leaf = Cell::new("TINY");
    for _ in 0..2000 {
        let (x, y) = (rng.range(0, 100), rng.range(0, 100));
        let (w, h) = (rng.range(1, 3), rng.range(1, 3));
        let shape = if rng.chance(50) {
            Shape::Box(rect(x, y, x + w, y + h))
        } else {
            Shape::Polygon(Polygon::new(vec![
                Point::new(x, y),
                Point::new(x + w, y),
                Point::new(x, y + h),
            ]))
        };
        leaf.push_shape(LayerKey::new(1, 0), shape);
    }
    lib.cells.push(leaf);
    let mut top = Cell::new("TOP");
    for (i, (rot, mag)) in [(45.0, 1.0), (30.0, 1.5), (-71.3, 0.7), (12.5, 2.5)]
        .into_iter()
        .enumerate()
    {
        top.instances
            .push(place(0, 1000 * i as i64, 0, rot, i % 2 == 1, mag));
    }
    lib.cells.push(top);
    let lib = Arc::new(lib);
    let index = LayoutIndex::with_min_indexed_items(Arc::clone(&lib), 1).expect("index");
    let mut found = 0;
    for q in 0..4000 {
        // Around the image of a random point of the leaf.
        let inst = &lib.cells[1].instances[q % 4];
        let (x, y) = inst
            .transform
            .to_affine()
            .apply_f64(rng.range(0, 100) as f64, rng.range(0, 100) as f64);
        let (x, y) = (x as i64 + rng.range(-2, 2), y as i64 + rng.range(-2, 2));
        let (w, h) = (rng.range(0, 3), rng.range(0, 3));
        let opts = FlattenOptions {
            clip: Some(rect(x, y, x + w, y + h)),
            include_texts: true,
            ..FlattenOptions::default()
        };
        let mode = if q % 8 < 4 {
            ClipMode::Clip
        } else {
            ClipMode::Overlap
        };
        let plain = walk_trace(&lib, None, 1, &opts, mode).expect("plain");
        let indexed = walk_trace(&lib, Some(&index), 1, &opts, mode).expect("indexed");
        assert_eq!(plain, indexed, "clip {:?} {mode:?}", opts.clip);
        found += plain.len();
    }
    assert!(found > 500, "{found}");
}

#[test]
fn overlap_keeps_whole_what_clip_cuts() {
    let lib = Arc::new(generated_library(42, false));
    let index = LayoutIndex::new(Arc::clone(&lib)).expect("index");
    let mut rng = Rng(5);
    let extent = index
        .layer_bbox(7, None, &Limits::default())
        .expect("ok")
        .bbox
        .expect("not empty");
    let everything = flatten(&lib, 7, &FlattenOptions::default()).expect("all");
    let everything: HashSet<(LayerKey, Polygon)> = everything
        .polygons
        .into_iter()
        .flat_map(|(k, v)| v.into_iter().map(move |p| (k, p)))
        .collect();
    let mut cut = 0;
    for _ in 0..40 {
        let clip = random_clip(&mut rng, extent);
        let opts = FlattenOptions {
            clip: Some(clip),
            ..FlattenOptions::default()
        };
        let clipped = index.flatten(7, &opts, ClipMode::Clip).expect("clip");
        let whole = index.flatten(7, &opts, ClipMode::Overlap).expect("overlap");
        for (key, polys) in &whole.polygons {
            assert_eq!(polys.len(), clipped.polygons[key].len());
            for (w, c) in polys.iter().zip(&clipped.polygons[key]) {
                assert_eq!(clip_polygon(w, &clip).as_ref(), Some(c));
                assert!(everything.contains(&(*key, w.clone())), "kept whole");
                cut += usize::from(w != c);
            }
        }
        assert_eq!(whole.polygons.len(), clipped.polygons.len());
    }
    assert!(cut > 10, "some polygons cross the clips: {cut}");
}

/// The box of all flattened polygons, per the given filter.
fn flat_bbox(flat: &FlatLayout) -> Option<BBox> {
    flat.polygons
        .values()
        .flatten()
        .filter_map(Polygon::bbox)
        .reduce(|a, b| a.union(&b))
}

fn within_one(a: Option<BBox>, b: Option<BBox>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => [
            a.left - b.left,
            a.bottom - b.bottom,
            a.right - b.right,
            a.top - b.top,
        ]
        .iter()
        .all(|d| d.abs() <= 1),
        (a, b) => a == b,
    }
}

#[test]
fn layer_bbox_is_the_flattened_bbox() {
    let mut cases: Vec<(String, Library, bool)> =
        fixtures().into_iter().map(|(n, l)| (n, l, false)).collect();
    for seed in 0..4 {
        cases.push((
            format!("manhattan {seed}"),
            generated_library(seed, true),
            true,
        ));
        cases.push((
            format!("any angle {seed}"),
            generated_library(seed, false),
            false,
        ));
    }
    cases.push(("sample".into(), sample_library(), false));
    let mut exact_checked = 0;
    for (name, lib, exact) in cases {
        let lib = Arc::new(lib);
        let index = LayoutIndex::new(Arc::clone(&lib)).expect("index");
        let mut filters: Vec<Option<BTreeSet<LayerKey>>> = vec![None];
        filters.extend(lib.layers().into_iter().map(|k| Some(BTreeSet::from([k]))));
        for cell in 0..lib.cells.len() {
            for layers in &filters {
                let opts = FlattenOptions {
                    layers: layers.clone(),
                    limits: Limits {
                        max_shapes: 300_000,
                        ..Limits::default()
                    },
                    ..FlattenOptions::default()
                };
                let extent = index
                    .layer_bbox(cell, layers.as_ref(), &Limits::default())
                    .expect("layer bbox");
                assert!(extent.tight, "{name}: cell {cell}");
                let got = extent.bbox;
                let Ok(flat) = flatten(&lib, cell, &opts) else {
                    // Too large to flatten (the huge-array fixture): the box still comes.
                    assert!(got.is_some(), "{name}: cell {cell}");
                    continue;
                };
                let want = flat_bbox(&flat);
                if exact {
                    assert_eq!(got, want, "{name}: cell {cell} layers {layers:?}");
                    exact_checked += 1;
                } else {
                    assert!(
                        within_one(got, want),
                        "{name}: cell {cell} layers {layers:?}: {got:?} vs {want:?}"
                    );
                }
            }
        }
    }
    assert!(exact_checked > 50);
}

#[test]
fn layer_bbox_of_huge_arrays_costs_nothing() {
    // 10^12 copies: the box comes from the lattice's corners.
    let mut lib = Library::new("H", 1e-9);
    let mut leaf = Cell::new("LEAF");
    leaf.push_shape(LayerKey::new(1, 0), Shape::Box(rect(0, 0, 10, 10)));
    leaf.push_shape(LayerKey::new(2, 0), Shape::Box(rect(-5, 3, 4, 7)));
    lib.cells.push(leaf);
    let mut top = Cell::new("TOP");
    let mut inst = place(0, 100, 200, 90.0, false, 1.0);
    inst.repetition = Some(Repetition::Array {
        cols: 1_000_000,
        rows: 1_000_000,
        col_step: Point::new(20, 0),
        row_step: Point::new(0, 30),
    });
    top.instances.push(inst);
    lib.cells.push(top);
    let index = LayoutIndex::new(Arc::new(lib)).expect("index");
    let l1 = BTreeSet::from([LayerKey::new(1, 0)]);
    // Rotated by 90° at (100, 200): the leaf box (0,0)-(10,10) lands at (90,200)-(100,210).
    assert_eq!(
        index
            .layer_bbox(1, Some(&l1), &Limits::default())
            .map(|e| e.bbox),
        Ok(Some(rect(90, 200, 100 + 20 * 999_999, 210 + 30 * 999_999)))
    );
    let l2 = BTreeSet::from([LayerKey::new(2, 0)]);
    // (-5,3)-(4,7) rotated by 90°: (-7,-5)-(-3,4), then moved.
    assert_eq!(
        index
            .layer_bbox(1, Some(&l2), &Limits::default())
            .map(|e| e.bbox),
        Ok(Some(rect(93, 195, 97 + 20 * 999_999, 204 + 30 * 999_999)))
    );
    assert_eq!(
        index
            .layer_bbox(
                1,
                Some(&BTreeSet::from([LayerKey::new(9, 9)])),
                &Limits::default()
            )
            .map(|e| e.bbox),
        Ok(None)
    );
}

/// `levels` cells, each placing the one below twice, the second time rotated by
/// `angle(level)`: 2^levels boxes.
fn exponential(levels: usize, angle: impl Fn(usize) -> f64) -> Library {
    let mut lib = Library::new("E", 1e-9);
    let mut leaf = Cell::new("C0");
    leaf.push_shape(LayerKey::new(1, 0), Shape::Box(rect(0, 0, 10, 10)));
    leaf.push_shape(
        LayerKey::new(1, 0),
        Shape::Polygon(Polygon::new(vec![
            Point::new(0, 0),
            Point::new(40, 5),
            Point::new(3, 17),
        ])),
    );
    lib.cells.push(leaf);
    for i in 1..=levels {
        let mut c = Cell::new(format!("C{i}"));
        c.instances.push(place(i - 1, 0, 0, 0.0, false, 1.0));
        c.instances.push(place(i - 1, 0, 0, angle(i), false, 1.0));
        lib.cells.push(c);
    }
    lib
}

fn is_limit<T: std::fmt::Debug>(r: &Result<T, FlattenError>, what: &str) -> bool {
    matches!(r, Err(FlattenError::LimitExceeded { what: w, .. }) if *w == what)
}

#[test]
fn layer_bbox_limits_and_budget() {
    // 2^100 shapes under Manhattan placements: one evaluation per cell.
    let index = LayoutIndex::new(Arc::new(exponential(100, |_| 90.0))).expect("index");
    let e = index
        .layer_bbox(100, None, &Limits::default())
        .expect("fast");
    assert!(e.tight && e.bbox.is_some());
    let shallow = Limits {
        max_depth: 50,
        ..Limits::default()
    };
    assert!(is_limit(
        &index.layer_bbox(100, None, &shallow),
        "hierarchy depth"
    ));
    assert!(matches!(
        index.layer_bbox(101, None, &Limits::default()),
        Err(FlattenError::NoSuchCell(_))
    ));
    // A 1° step per level: level k sees k orientations, a few hundred in all.
    let index = LayoutIndex::new(Arc::new(exponential(12, |_| 1.0))).expect("index");
    let e = index.layer_bbox(12, None, &Limits::default()).expect("ok");
    let flat = flatten(index.library(), 12, &FlattenOptions::default()).expect("4096 x 2");
    assert!(e.tight);
    assert!(within_one(e.bbox, flat_bbox(&flat)), "{e:?}");
    let few = Limits {
        max_placements: 100,
        ..Limits::default()
    };
    assert!(is_limit(&index.layer_bbox(12, None, &few), "placements"));
    // A different irrational angle per level: every placement path has its own
    // orientation. The budget stops the memo; the box is then a superset.
    let angle = |level: usize| (level as f64 + 1.0).sqrt() * 7.0;
    let index = LayoutIndex::new(Arc::new(exponential(14, angle))).expect("index");
    let e = index.layer_bbox(14, None, &Limits::default()).expect("ok");
    assert!(!e.tight);
    let flat = flatten(index.library(), 14, &FlattenOptions::default()).expect("2^15");
    let (got, want) = (e.bbox.expect("box"), flat_bbox(&flat).expect("box"));
    assert_eq!(got.union(&want), got, "a superset");
    let index = LayoutIndex::new(Arc::new(exponential(60, angle))).expect("index");
    let started = std::time::Instant::now();
    let e = index.layer_bbox(60, None, &Limits::default()).expect("ok");
    assert!(!e.tight && e.bbox.is_some());
    assert!(started.elapsed().as_secs() < 5);
}

fn leaf_and_array(cols: u32, rows: u32) -> Library {
    let mut lib = Library::new("H", 1e-9);
    let mut leaf = Cell::new("LEAF");
    leaf.push_shape(LayerKey::new(1, 0), Shape::Box(rect(0, 0, 10, 10)));
    lib.cells.push(leaf);
    let mut top = Cell::new("TOP");
    let mut inst = place(0, 0, 0, 0.0, false, 1.0);
    inst.repetition = Some(Repetition::Array {
        cols,
        rows,
        col_step: Point::new(20, 0),
        row_step: Point::new(0, 20),
    });
    top.instances.push(inst);
    lib.cells.push(top);
    lib
}

#[test]
fn limits_hold_with_an_index() {
    let huge =
        LayoutIndex::with_min_indexed_items(Arc::new(leaf_and_array(1_000_000, 1_000_000)), 1)
            .expect("index");
    let opts = |clip: Option<BBox>, limits: Limits| FlattenOptions {
        clip,
        limits,
        ..FlattenOptions::default()
    };
    let d = Limits::default();
    // No clip: the size is known up front.
    assert!(is_limit(
        &huge.flatten(1, &opts(None, d), ClipMode::Clip),
        "shapes"
    ));
    // A clip over everything still stands for 10^12 copies.
    let all = Some(rect(-1, -1, 30_000_000, 30_000_000));
    assert!(is_limit(
        &huge.flatten(1, &opts(all, d), ClipMode::Clip),
        "array size"
    ));
    // A window visits 25 copies.
    let window = Some(rect(1_000_000, 1_000_000, 1_000_100, 1_000_100));
    for mode in [ClipMode::Clip, ClipMode::Overlap] {
        let flat = huge.flatten(1, &opts(window, d), mode).expect("window");
        assert_eq!(flat.polygon_count(), 25);
    }
    let few_shapes = Limits {
        max_shapes: 24,
        ..d
    };
    assert!(is_limit(
        &huge.flatten(1, &opts(window, few_shapes), ClipMode::Clip),
        "shapes"
    ));
    let few_points = Limits {
        max_points: 99,
        ..d
    };
    assert!(is_limit(
        &huge.flatten(1, &opts(window, few_points), ClipMode::Overlap),
        "points"
    ));
    let few_placements = Limits {
        max_placements: 24,
        ..d
    };
    assert!(is_limit(
        &huge.flatten(1, &opts(window, few_placements), ClipMode::Clip),
        "placements"
    ));
    // 2^61 shapes at one spot: the walk stops at the shape limit, and a deep enough
    // hierarchy fails on depth, as without an index.
    let exp =
        LayoutIndex::with_min_indexed_items(Arc::new(exponential(60, |_| 0.0)), 1).expect("index");
    let spot = Some(rect(0, 0, 5, 5));
    let capped = Limits {
        max_shapes: 10_000,
        ..d
    };
    assert!(is_limit(
        &exp.flatten(60, &opts(spot, capped), ClipMode::Clip),
        "shapes"
    ));
    let shallow = Limits { max_depth: 30, ..d };
    assert!(is_limit(
        &exp.flatten(60, &opts(spot, shallow), ClipMode::Clip),
        "hierarchy depth"
    ));
    assert!(matches!(
        exp.flatten(61, &opts(spot, d), ClipMode::Clip),
        Err(FlattenError::NoSuchCell(_))
    ));
}

#[test]
fn the_index_is_lazy_shared_and_bounded() {
    // Two big flat cells side by side under a top; a clip over one builds only its index.
    let mut lib = flat_cell_library(5000, 1);
    let mut other = lib.cells[0].clone();
    other.name = "FLAT2".into();
    lib.cells.push(other);
    let mut top = Cell::new("TOP");
    top.instances.push(place(0, 0, 0, 0.0, false, 1.0));
    top.instances.push(place(1, 10_000_000, 0, 0.0, false, 1.0));
    lib.cells.push(top);
    let lib = Arc::new(lib);
    let index = Arc::new(LayoutIndex::new(Arc::clone(&lib)).expect("index"));
    let empty = index.memory_bytes();
    let opts = FlattenOptions {
        clip: Some(rect(1000, 1000, 3000, 3000)),
        ..FlattenOptions::default()
    };
    let flat = index.flatten(2, &opts, ClipMode::Clip).expect("flat");
    assert!(flat.polygon_count() > 0);
    assert_eq!(flat, flatten(&lib, 2, &opts).expect("plain"));
    assert_eq!(
        index.indexed_cells(),
        2,
        "TOP and the flat cell under the clip"
    );
    let one = index.memory_bytes() - empty;
    // A few dozen bytes per indexed shape, not kilobytes.
    assert!(
        one > 5000 * 32 && one < 5000 * 160,
        "{one} bytes for 5000 shapes"
    );
    index.build_all();
    assert_eq!(index.indexed_cells(), 3);
    // Queries do not grow it.
    let before = index.memory_bytes();
    for i in 0..50 {
        let opts = FlattenOptions {
            clip: Some(rect(i * 997, i * 1009, i * 997 + 2000, i * 1009 + 2000)),
            ..FlattenOptions::default()
        };
        index.flatten(2, &opts, ClipMode::Overlap).expect("flat");
    }
    assert_eq!(index.memory_bytes(), before);
    // Shared between threads, same answers.
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<LayoutIndex>();
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let index = Arc::clone(&index);
            let lib = Arc::clone(&lib);
            std::thread::spawn(move || {
                for i in 0..20 {
                    let x = (t * 20 + i) * 2711 % 200_000;
                    let opts = FlattenOptions {
                        clip: Some(rect(x, x / 2, x + 2000, x / 2 + 2000)),
                        ..FlattenOptions::default()
                    };
                    assert_eq!(
                        index.flatten(2, &opts, ClipMode::Clip),
                        flatten(&lib, 2, &opts)
                    );
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("thread");
    }
}

#[test]
fn the_benchmark_compares_like_with_like() {
    // Correctness of the benchmark's setup only; the timing is the example's business.
    let r = flat_cell_speedup(2000, 20, 2000).expect("bench");
    assert!(r.identical);
    assert!(r.polygons > 20, "the clips meet rectangles: {}", r.polygons);
    assert!(r.index_bytes > 0);
}
