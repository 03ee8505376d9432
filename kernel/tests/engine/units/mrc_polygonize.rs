//! Unit tests of tracing a binary mask into polygons (`reticle_kernel::mrc::polygonize`).

use reticle_kernel::Grid;
use reticle_kernel::mrc::morph::components;
use reticle_kernel::mrc::polygonize::{area2, dist2_to_segment, group, keyhole, simplify, trace};

fn ring() -> Grid<u8> {
    let mut g = Grid::filled(30, 30, 0u8);
    for y in 5..25 {
        for x in 5..25 {
            let inner = (10..20).contains(&x) && (10..20).contains(&y);
            *g.at_mut(x, y) = u8::from(!inner);
        }
    }
    g
}

#[test]
fn a_ring_traces_to_a_hull_and_a_hole_and_keyholes_to_one_polygon() {
    let g = ring();
    let (labels, _) = components(&g);
    let loops = trace(&g, (0, 0, 30, 30), &labels);
    assert_eq!(loops.len(), 2);
    let groups = group(loops);
    assert_eq!(groups.len(), 1);
    let (hull, holes) = groups.into_iter().next().expect("one component");
    assert_eq!(area2(&hull), 2 * 400);
    assert_eq!(holes.len(), 1);
    assert_eq!(area2(&holes[0]), -2 * 100);
    let (poly, failed) = keyhole(hull, holes);
    assert!(failed.is_empty());
    assert_eq!(area2(&poly), 2 * 300, "the cut line adds no area");
}

#[test]
fn simplification_keeps_anchors_and_stays_within_the_tolerance() {
    // A staircase diagonal: a right triangle drawn in pixels.
    let mut g = Grid::filled(40, 40, 0u8);
    for y in 0..30 {
        for x in 0..(30 - y) {
            *g.at_mut(x + 5, y + 5) = 1;
        }
    }
    let (labels, _) = components(&g);
    let loops = trace(&g, (0, 0, 40, 40), &labels);
    assert_eq!(loops.len(), 1);
    let pts = &loops[0].points;
    assert!(pts.len() > 50, "the staircase has many corners");
    let s = simplify(pts, 1.0, |p| p == (5, 5));
    assert!(s.len() <= 5, "the diagonal becomes one edge: {s:?}");
    assert!(s.contains(&(5, 5)));
    for p in pts {
        let n = s.len();
        let d = (0..n)
            .map(|i| dist2_to_segment(*p, s[i], s[(i + 1) % n]))
            .fold(f64::MAX, f64::min);
        assert!(d <= 1.0 + 1e-9, "{p:?} is {d} away");
    }
}
