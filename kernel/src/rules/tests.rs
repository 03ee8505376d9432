//! Check-level tests on hand-built shapes.

use reticle_layout::{BBox, Point, Polygon};

use super::*;

fn rect(l: i64, b: i64, r: i64, t: i64) -> Polygon {
    Polygon::rect(BBox {
        left: l,
        bottom: b,
        right: r,
        top: t,
    })
}

fn region(polys: &[Polygon]) -> Region {
    Region::from_polygons(polys)
}

fn rule(kind: RuleKind, value: f64) -> Rule {
    Rule {
        id: format!("R.{}", kind.as_str()),
        kind,
        layer: LayerRef {
            layer: 1,
            datatype: 0,
        },
        other_layer: None,
        value,
        severity: Severity::Error,
        dedup_radius_nm: 0.0,
        applies_to: AppliesTo::Mask,
        metric: Metric::Euclidean,
    }
}

#[test]
fn width_boundary_is_strict() {
    let r = region(&[rect(0, 0, 40, 200)]);
    assert!(width(&r, 40.0, Metric::Euclidean).is_empty());
    let hits = width(&r, 41.0, Metric::Euclidean);
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].distance, 40.0);
    assert_eq!(
        hits[0].bbox(),
        BBox {
            left: 0,
            bottom: 0,
            right: 40,
            top: 200
        }
    );
    // Both dimensions too small: two pairs.
    assert_eq!(width(&r, 201.0, Metric::Euclidean).len(), 2);
}

#[test]
fn abutting_shapes_do_not_give_false_width_or_space() {
    // Two 30-wide halves of a 60-wide line, and a stack of touching squares.
    let r = region(&[
        rect(0, 0, 30, 500),
        rect(30, 0, 60, 500),
        rect(0, 500, 60, 560),
    ]);
    assert!(width(&r, 50.0, Metric::Euclidean).is_empty());
    assert!(space(&r, 50.0, Metric::Euclidean).is_empty());
    // Unmerged they would show a 30 nm width violation; merged they are one 60 nm shape.
    assert_eq!(width(&r, 61.0, Metric::Euclidean).len(), 1);
}

#[test]
fn space_between_polygons_and_corners() {
    // Facing edges 40 apart.
    let r = region(&[rect(0, 0, 50, 100), rect(90, 0, 140, 100)]);
    assert!(space(&r, 40.0, Metric::Euclidean).is_empty());
    let hits = space(&r, 41.0, Metric::Euclidean);
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].distance, 40.0);
    // Diagonal corner-to-corner: (50,100)-(80,140) is 50 away.
    let c = region(&[rect(0, 0, 50, 100), rect(80, 140, 130, 240)]);
    assert!(space(&c, 50.0, Metric::Euclidean).is_empty());
    let e = space(&c, 51.0, Metric::Euclidean);
    // Two edge pairs touch the corner region (vertical and horizontal facing edges).
    assert_eq!(e.len(), 2);
    assert!(e.iter().all(|h| (h.distance - 50.0).abs() < 1e-9));
    // Projection metric ignores corner-to-corner.
    assert!(space(&c, 51.0, Metric::Projection).is_empty());
}

#[test]
fn notch_is_same_polygon_only_and_space_includes_it() {
    // U shape: notch 20 wide between two arms; a separate rect 20 away.
    let u = [
        rect(0, 0, 100, 30),
        rect(0, 0, 40, 100),
        rect(60, 0, 100, 100),
    ];
    let other = rect(120, 0, 160, 100);
    let r = region(&[u[0].clone(), u[1].clone(), u[2].clone(), other]);
    assert_eq!(r.polygons().len(), 2);
    let n = notch(&r, 25.0, Metric::Euclidean);
    assert_eq!(n.len(), 1);
    assert_eq!(n[0].distance, 20.0);
    assert_eq!(space(&r, 25.0, Metric::Euclidean).len(), 2);
    assert!(notch(&r, 20.0, Metric::Euclidean).is_empty());
}

#[test]
fn area_check_counts_holes() {
    let ring = [
        rect(0, 0, 30, 10),
        rect(0, 20, 30, 30),
        rect(0, 0, 10, 30),
        rect(20, 0, 30, 30),
    ];
    let mut polys = ring.to_vec();
    polys.push(rect(100, 100, 110, 110));
    let r = region(&polys);
    let v = check_rule(&rule(RuleKind::Area, 800.0), &r, None, 1.0).unwrap();
    assert_eq!(
        v.len(),
        1,
        "the ring is exactly 800 (not a violation), the square 100"
    );
    assert_eq!(v[0].measured, 100.0);
    let v = check_rule(&rule(RuleKind::Area, 801.0), &r, None, 1.0).unwrap();
    assert_eq!(v.len(), 2);
    assert!(v[0].bbox < v[1].bbox, "sorted by bbox");
}

#[test]
fn enclosure_of_via_by_metal() {
    let metal = region(&[rect(0, 0, 100, 100)]);
    // Via with margins: left 10, bottom 20, right 30, top 5.
    let via = region(&[rect(10, 20, 70, 95)]);
    let hits = enclosure(&via, &metal, 15.0, Metric::Euclidean);
    let mut d: Vec<f64> = hits.iter().map(|h| h.distance).collect();
    d.sort_by(f64::total_cmp);
    assert_eq!(d, vec![5.0, 10.0]);
    assert!(enclosure(&via, &metal, 5.0, Metric::Euclidean).is_empty());
    let mut r = rule(RuleKind::Enclosure, 21.0);
    assert_eq!(
        check_rule(&r, &via, None, 1.0),
        Err(CheckError::MissingOtherLayer("R.enclosure".into()))
    );
    r.other_layer = Some(LayerRef {
        layer: 2,
        datatype: 0,
    });
    assert_eq!(check_rule(&r, &via, Some(&metal), 1.0).unwrap().len(), 3);
}

#[test]
fn dbu_scaling_and_non_geometric_rules() {
    // dbu = 0.5 nm: a 40-dbu-wide line is 20 nm.
    let r = region(&[rect(0, 0, 40, 400)]);
    let v = check_rule(&rule(RuleKind::Width, 25.0), &r, None, 0.5).unwrap();
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].measured, 20.0);
    assert!(
        check_rule(&rule(RuleKind::Width, 20.0), &r, None, 0.5)
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        check_rule(&rule(RuleKind::Epe, 15.0), &r, None, 1.0),
        Err(CheckError::NotGeometric(..))
    ));
    assert_eq!(
        check_rule(&rule(RuleKind::Width, 15.0), &r, None, 0.0),
        Err(CheckError::BadDbu(0.0))
    );
}

#[test]
fn acute_angle_width() {
    // A thin 45° sliver: width between the slanted edge and the base near the tip.
    let tri = Polygon::new(vec![
        Point::new(0, 0),
        Point::new(200, 0),
        Point::new(200, 200),
    ]);
    let r = region(&[tri]);
    let hits = width(&r, 30.0, Metric::Euclidean);
    assert!(!hits.is_empty());
    assert!(hits.iter().all(|h| h.distance < 30.0));
}

#[test]
fn many_edges_are_fast_enough_and_deterministic() {
    // 100 x 100 grid of 30x30 squares at pitch 65 (space 35): 40k edges.
    let mut polys = Vec::new();
    for i in 0..100 {
        for j in 0..100 {
            polys.push(rect(i * 65, j * 65, i * 65 + 30, j * 65 + 30));
        }
    }
    let r = region(&polys);
    assert_eq!(r.polygons().len(), 10_000);
    let mut rl = rule(RuleKind::Space, 36.0);
    let v = check_rule(&rl, &r, None, 1.0).unwrap();
    // Horizontal neighbours 99*100, vertical 100*99; diagonals are sqrt(2)*35 > 36.
    assert_eq!(v.len(), 2 * 99 * 100);
    rl.value = 35.0;
    assert!(check_rule(&rl, &r, None, 1.0).unwrap().is_empty());
    let again = check_rule(&rule(RuleKind::Space, 36.0), &r, None, 1.0).unwrap();
    assert_eq!(v, again);
}
