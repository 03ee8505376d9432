//! Unit tests of `reticle_layout::writeback::split`: intervals, composition, array splits.

use reticle_layout::geom::{BBox, Point};
use reticle_layout::model::{Instance, Repetition, Transform};
use reticle_layout::transform::Affine;
use reticle_layout::writeback::split::*;

fn brute(a: i128, c: i128, n: i128) -> (i128, i128) {
    let v: Vec<i128> = (0..n).filter(|i| a * i + c < 0).collect();
    v.first().map_or((0, 0), |&f| (f, v[v.len() - 1] + 1))
}

#[test]
fn interval_matches_brute_force() {
    for a in -7..=7 {
        for c in -40..=40 {
            let n = 9;
            let (lo, hi) = interval_lt(a, c, n);
            let got = if lo < hi { (lo, hi) } else { (0, 0) };
            assert_eq!(got, brute(a, c, n), "a={a} c={c}");
        }
    }
}

#[test]
fn compose_matches_affine_composition() {
    let ts = [
        Transform::translation(Point::new(5, -3)),
        Transform {
            offset: Point::new(100, 7),
            rotation_deg: 90.0,
            mirror_x: true,
            magnification: 1.0,
        },
        Transform {
            offset: Point::new(-40, 13),
            rotation_deg: 270.0,
            mirror_x: false,
            magnification: 2.0,
        },
        Transform {
            offset: Point::new(1, 2),
            rotation_deg: 180.0,
            mirror_x: true,
            magnification: 3.0,
        },
    ];
    for o in &ts {
        for i in &ts {
            let c = compose(o, i).expect("in range");
            assert_eq!(
                c.to_affine(),
                o.to_affine().then_inner(&i.to_affine()),
                "{o:?} ∘ {i:?}"
            );
        }
    }
}

#[test]
fn array_split_matches_enumeration() {
    let inst = Instance {
        cell: 0,
        transform: Transform {
            offset: Point::new(3, -2),
            rotation_deg: 90.0,
            mirror_x: true,
            magnification: 1.0,
        },
        repetition: Some(Repetition::Array {
            cols: 13,
            rows: 7,
            col_step: Point::new(10, 1),
            row_step: Point::new(-2, 12),
        }),
    };
    let child = [0.0, 0.0, 6.0, 4.0];
    let a = Affine::from_placement(Point::new(50, 20), 180.0, false, 1.0);
    for region in [
        BBox::from_corners(Point::new(-60, -40), Point::new(-20, 10)),
        BBox::from_corners(Point::new(-1000, -1000), Point::new(1000, 1000)),
        BBox::from_corners(Point::new(500, 500), Point::new(600, 600)),
        BBox::from_corners(Point::new(-35, -80), Point::new(-34, 80)),
    ] {
        let s = split(&inst, &a, child, &region, 1 << 20).expect("split");
        let mut plain = inst.clone();
        plain.repetition = Some(Repetition::Explicit(
            (0..91)
                .map(|k| {
                    let (x, y) = inst.repetition.as_ref().expect("rep").displacement(k);
                    Point::new(x as i64, y as i64)
                })
                .collect(),
        ));
        let e = split(&plain, &a, child, &region, 1 << 20).expect("split");
        // The analytic split may count a copy within a dbu as touching; never fewer.
        assert!(e.touching.iter().all(|k| s.touching.contains(k)));
        let mut all: Vec<u64> = s.touching.clone();
        for r in &s.clear {
            match *r {
                Run::Block { i0, ni, j0, nj } => {
                    for j in j0..j0 + nj {
                        for i in i0..i0 + ni {
                            all.push(u64::from(j) * 13 + u64::from(i));
                        }
                    }
                }
                Run::One(k) => all.push(k),
            }
        }
        all.sort_unstable();
        assert_eq!(all, (0..91).collect::<Vec<u64>>(), "{region:?}");
        assert!(s.clear.len() <= 8, "{:?}", s.clear);
    }
}
