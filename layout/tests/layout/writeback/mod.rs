//! Writing a repaired layout back (`write_back`, issue 28 item 4, D160): the invariants
//! checked in Rust on hand-made and random hierarchies (`invariants`), GDSII and OASIS round
//! trips (`round_trips`), and KLayout as the oracle on `gcd_45nm` and hierarchies built from
//! it (`klayout`).

mod invariants;
mod klayout;
mod round_trips;

use std::collections::BTreeSet;

use reticle_layout::{
    BBox, FlattenOptions, LayerKey, Library, Limits, Point, Polygon, Shape, WritebackRequest,
    flatten,
};

/// Whether the half-integer point `(x + ½, y + ½)` lies inside `poly` (non-zero winding, so
/// cut lines and zero-width bridges, which no such point lies on, do not matter).
pub fn contains(poly: &Polygon, x: i64, y: i64) -> bool {
    let (qx, qy) = (2 * i128::from(x) + 1, 2 * i128::from(y) + 1);
    let n = poly.points.len();
    let mut winding = 0i32;
    for i in 0..n {
        let a = poly.points[i];
        let b = poly.points[(i + 1) % n];
        let (ax, ay, bx, by) = (
            2 * i128::from(a.x),
            2 * i128::from(a.y),
            2 * i128::from(b.x),
            2 * i128::from(b.y),
        );
        let cross = (bx - ax) * (qy - ay) - (qx - ax) * (by - ay);
        if ay <= qy && by > qy && cross > 0 {
            winding += 1;
        } else if ay > qy && by <= qy && cross < 0 {
            winding -= 1;
        }
    }
    winding != 0
}

fn covered(polys: &[Polygon], x: i64, y: i64) -> bool {
    polys.iter().any(|p| {
        p.bbox()
            .is_some_and(|b| x >= b.left && x < b.right && y >= b.bottom && y < b.top)
            && contains(p, x, y)
    })
}

/// The flattened polygons of `top` on `key`.
pub fn flat(lib: &Library, top: usize, key: LayerKey) -> Vec<Polygon> {
    let opts = FlattenOptions {
        layers: Some(BTreeSet::from([key])),
        ..FlattenOptions::default()
    };
    flatten(lib, top, &opts)
        .expect("flatten")
        .polygons
        .remove(&key)
        .unwrap_or_default()
}

/// Checks what `write_back` promises, cell by cell and on a grid of sample points:
/// - every input cell keeps its name, every shape on every layer but the mask layer and
///   every instance (in order); it only gains instances of new cells, which hold nothing
///   but the mask layer;
/// - flattened from the top, the mask layer is the mask inside the region and `base`
///   outside (sampled every `step` dbu over `window`).
///
/// Without `exact`, a sample point may disagree where the expected geometry changes within
/// one dbu of it (rounded crossings of slanted edges); at most 1 % of them.
///
/// Returns the number of sample points inside the mask layer (so callers can require a
/// non-trivial case).
pub fn check(
    input: &Library,
    out: &Library,
    req: &WritebackRequest<'_>,
    base: LayerKey,
    window: BBox,
    step: i64,
    exact: bool,
) -> usize {
    let m = req.mask_layer;
    let n = input.cells.len();
    assert!(out.cells.len() >= n);
    for (i, c) in input.cells.iter().enumerate() {
        let o = &out.cells[i];
        assert_eq!(o.name, c.name);
        for key in c.shapes.keys().chain(o.shapes.keys()) {
            if *key != m {
                assert_eq!(o.shapes.get(key), c.shapes.get(key), "{} {key:?}", c.name);
            }
        }
        assert_eq!(
            &o.instances[..c.instances.len()],
            &c.instances[..],
            "{}",
            c.name
        );
        assert!(
            o.instances[c.instances.len()..].iter().all(|i| i.cell >= n),
            "{}: added instances place input cells",
            c.name
        );
        // Texts on the mask layer stay.
        let texts = |v: Option<&Vec<Shape>>| -> Vec<Shape> {
            v.into_iter()
                .flatten()
                .filter(|s| matches!(s, Shape::Text(_)))
                .cloned()
                .collect()
        };
        assert_eq!(texts(o.shapes.get(&m)), texts(c.shapes.get(&m)));
    }
    for c in &out.cells[n..] {
        assert!(
            c.shapes.keys().all(|k| *k == m),
            "{}: {:?}",
            c.name,
            c.shapes.keys()
        );
        assert!(c.instances.iter().all(|i| i.cell >= n), "{}", c.name);
    }
    let want_in = req.mask;
    let want_out = flat(input, req.top, base);
    let got = flat(out, req.top, m);
    let r = req.region;
    let expect = |x: i64, y: i64| {
        if x >= r.left && x < r.right && y >= r.bottom && y < r.top {
            covered(want_in, x, y)
        } else {
            covered(&want_out, x, y)
        }
    };
    let (mut inside, mut samples, mut tolerated) = (0, 0, 0);
    let mut y = window.bottom;
    while y < window.top {
        let mut x = window.left;
        while x < window.right {
            let want = expect(x, y);
            let have = covered(&got, x, y);
            samples += 1;
            if have != want {
                let at_edge = [(1, 0), (-1, 0), (0, 1), (0, -1)]
                    .iter()
                    .any(|(dx, dy)| expect(x + dx, y + dy) != want);
                assert!(
                    !exact && at_edge,
                    "mask layer at ({x}.5, {y}.5) is {have}, want {want} (region {r:?})"
                );
                tolerated += 1;
            }
            inside += usize::from(have);
            x += step;
        }
        y += step;
    }
    assert!(
        tolerated * 100 <= samples,
        "{tolerated} of {samples} samples off"
    );
    inside
}

/// A request with the usual layers: target 1/0, mask 1/1.
pub fn request(top: usize, region: BBox, mask: &[Polygon]) -> WritebackRequest<'_> {
    WritebackRequest {
        top,
        target: LayerKey::new(1, 0),
        mask_layer: LayerKey::new(1, 1),
        region,
        mask,
    }
}

/// A square with a square hole, the hole joined to the hull by a cut line (the kernel's
/// keyhole convention).
pub fn keyholed_ring(x: i64, y: i64, outer: i64, inner: i64) -> Polygon {
    let o = (outer - inner) / 2;
    let p = |dx: i64, dy: i64| Point::new(x + dx, y + dy);
    Polygon::new(vec![
        p(0, 0),
        p(outer, 0),
        p(outer, outer),
        p(0, outer),
        p(0, o),
        p(o, o),
        p(o, o + inner),
        p(o + inner, o + inner),
        p(o + inner, o),
        p(0, o),
    ])
}

pub fn limits() -> Limits {
    Limits::default()
}

/// `gcd_45nm.gds` (metal 1 = 11/0, 0.1 nm dbu) from the shared data folder, when present.
pub fn gcd() -> Option<(std::path::PathBuf, Library)> {
    let path = crate::common::data_dir().join("gds/gcd_45nm.gds");
    match std::fs::read(&path) {
        Ok(bytes) => {
            let lib = reticle_layout::read_gds(&bytes, &Limits::default()).expect("gds");
            Some((path, lib))
        }
        Err(e) => {
            eprintln!(
                "SKIP: {} absent ({e}); set RETICLE_DATA_DIR",
                path.display()
            );
            None
        }
    }
}

/// Metal 1 of `gcd_45nm`.
pub const GCD_M1: LayerKey = LayerKey::new(11, 0);

/// A synthetic optimized mask for `region`: each target polygon the region meets, flattened
/// and clipped to it, as its box grown by `grow` dbu (shrunk when negative; 5 nm = 50 dbu on gcd's grid: the
/// tests can tell mask from target), plus a keyholed ring in the region's lower-left corner.
pub fn synthetic_mask(
    lib: &Library,
    top: usize,
    target: LayerKey,
    region: BBox,
    grow: i64,
) -> Vec<Polygon> {
    let opts = FlattenOptions {
        layers: Some(BTreeSet::from([target])),
        clip: Some(region),
        ..FlattenOptions::default()
    };
    let flat = flatten(lib, top, &opts).expect("flatten");
    let mut out: Vec<Polygon> = flat
        .polygons
        .get(&target)
        .into_iter()
        .flatten()
        .filter_map(Polygon::bbox)
        .map(|b| BBox {
            left: b.left - grow,
            bottom: b.bottom - grow,
            right: b.right + grow,
            top: b.top + grow,
        })
        .filter(|b| b.left < b.right && b.bottom < b.top)
        .map(Polygon::rect)
        .collect();
    let side = (region.width().min(region.height()) / 4).max(8);
    out.push(keyholed_ring(
        region.left + side / 8,
        region.bottom + side / 8,
        side,
        side / 2,
    ));
    out
}

/// The mask polygons alone, as a library to hand to KLayout.
pub fn mask_library(like: &Library, key: LayerKey, mask: &[Polygon]) -> Library {
    let mut lib = Library::new("MASK", like.dbu_in_meters);
    lib.dbu_in_user_units = like.dbu_in_user_units;
    let mut cell = reticle_layout::Cell::new("MASK");
    for p in mask {
        cell.push_shape(key, Shape::Polygon(p.clone()));
    }
    lib.cells.push(cell);
    lib
}
