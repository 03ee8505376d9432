//! Unit tests of `reticle_layout::observe::measure`: the measure modes.

use reticle_layout::geom::{BBox, Point};
use reticle_layout::model::{Cell, Instance, LayerKey, Path, Text, Transform};
use reticle_layout::model::{Library, PathEnds, Shape};
use reticle_layout::observe::measure::*;
use reticle_layout::observe::region::PlacedShape;
use reticle_layout::observe::region::{ShapeLocator, Step, resolve};
use reticle_layout::observe::units::MicronBox;
use serde_json::json;

fn path(pts: &[(i64, i64)], width: i64) -> Shape {
    Shape::Path(Path {
        spine: pts.iter().map(|&(x, y)| Point::new(x, y)).collect(),
        width,
        ends: PathEnds::Flush,
    })
}

/// TOP (dbu 1 nm): A 1/0 path (0,0)-(40000,0) w 500; B 1/0 path (0,2000)-(40000,2000)
/// w 500; C 2/0 box (10000,-1000)-(12000,1000); T 10/0 text "IN" at (0,0); D 3/0 arc of
/// radius 5.525 µm through lattice points; E 4/0 L path (0,0)-(100,0)-(100,100) w 10.
/// Placed copy: SUB holding A's twin, placed in TOP rotated 90°, magnified 2, at (5000,0).
fn lib() -> Library {
    let mut lib = Library::new("M", 1e-9);
    let mut sub = Cell::new("SUB");
    sub.push_shape(LayerKey::new(1, 0), path(&[(0, 0), (40_000, 0)], 500));
    lib.cells.push(sub);
    let mut top = Cell::new("TOP");
    top.push_shape(LayerKey::new(1, 0), path(&[(0, 0), (40_000, 0)], 500));
    top.push_shape(LayerKey::new(1, 0), path(&[(0, 2000), (40_000, 2000)], 500));
    top.push_shape(
        LayerKey::new(2, 0),
        Shape::Box(BBox::from_corners(
            Point::new(10_000, -1000),
            Point::new(12_000, 1000),
        )),
    );
    top.push_shape(
        LayerKey::new(10, 0),
        Shape::Text(Text {
            string: "IN".into(),
            position: Point::new(0, 0),
        }),
    );
    // Lattice points of the circle x² + y² = 5525² (5525 = 5²·13·17 has many): an
    // exact arc, so every circumradius is exactly 5.525 µm.
    let r: i64 = 5525;
    let arc: Vec<(i64, i64)> = (0..=r)
        .filter_map(|x| {
            let y2 = r * r - x * x;
            let y = (y2 as f64).sqrt().round() as i64;
            (y * y == y2).then_some((x, y))
        })
        .collect();
    top.push_shape(LayerKey::new(3, 0), path(&arc, 400));
    top.push_shape(
        LayerKey::new(4, 0),
        path(&[(0, 0), (100, 0), (100, 100)], 10),
    );
    top.instances.push(Instance {
        cell: 0,
        transform: Transform {
            offset: Point::new(5000, 0),
            rotation_deg: 90.0,
            mirror_x: false,
            magnification: 2.0,
        },
        repetition: None,
    });
    lib.cells.push(top);
    lib
}

fn get(lib: &Library, layer: u32, index: usize, steps: Vec<Step>) -> PlacedShape {
    resolve(
        lib,
        &ShapeLocator {
            root: "TOP".into(),
            steps,
            layer,
            datatype: 0,
            index,
        },
    )
    .expect("resolve")
}

fn m(lib: &Library, mode: MeasureMode, t: &[PlacedShape]) -> MeasurePayload {
    measure_geometry(lib, mode, t).expect("measure")
}

#[test]
fn eight_modes_on_hand_computed_geometry() {
    let l = lib();
    let (a, b, c) = (
        get(&l, 1, 0, vec![]),
        get(&l, 1, 1, vec![]),
        get(&l, 2, 0, vec![]),
    );
    let (t, d, e) = (
        get(&l, 10, 0, vec![]),
        get(&l, 3, 0, vec![]),
        get(&l, 4, 0, vec![]),
    );
    let r = m(&l, MeasureMode::PathWidth, std::slice::from_ref(&a));
    assert_eq!((r.value_um, r.value_dbu), (Some(0.5), Some(500)));
    let r = m(&l, MeasureMode::PathWidth, std::slice::from_ref(&c));
    assert_eq!(r.value_dbu, Some(2000), "box short side");
    let r = m(&l, MeasureMode::SegmentLength, std::slice::from_ref(&a));
    assert_eq!((r.value_um, r.value_dbu), (Some(40.0), Some(40_000)));
    let r = m(&l, MeasureMode::SegmentLength, std::slice::from_ref(&e));
    assert_eq!(r.value_dbu, Some(200));
    assert_eq!(r.details["segment_count"], 2);
    let r = m(&l, MeasureMode::CenterlineDistance, &[a.clone(), b.clone()]);
    assert_eq!((r.value_um, r.value_dbu), (Some(2.0), Some(2000)));
    let r = m(&l, MeasureMode::EdgeGap, &[a.clone(), b.clone()]);
    assert_eq!((r.value_um, r.value_dbu), (Some(1.5), Some(1500)));
    let r = m(&l, MeasureMode::EdgeGap, &[a.clone(), c.clone()]);
    assert_eq!(r.value_dbu, Some(0));
    // A's outline y -250..250 meets C (x 10000..12000): 2000 × 500 dbu² = 1 µm².
    let r = m(&l, MeasureMode::Overlap, &[a.clone(), c.clone()]);
    assert_eq!((r.value_um, r.value_dbu), (Some(1.0), Some(1_000_000)));
    let r = m(&l, MeasureMode::Overlap, &[a.clone(), b.clone()]);
    assert_eq!(r.value_dbu, Some(0));
    // Text at (0,0) to B's outline (bottom edge y = 1750).
    let r = m(&l, MeasureMode::LabelDistance, &[t.clone(), b.clone()]);
    assert_eq!((r.value_um, r.value_dbu), (Some(1.75), Some(1750)));
    let r = m(&l, MeasureMode::PortSpacing, &[a.clone(), b.clone()]);
    assert_eq!((r.value_um, r.value_dbu), (Some(2.0), Some(2000)));
    let r = m(
        &l,
        MeasureMode::BendRadiusEstimate,
        std::slice::from_ref(&d),
    );
    assert_eq!(r.value_um, Some(5.525));
    assert_eq!(r.value_dbu, Some(5525));
    let samples = r.details["samples"].as_u64().expect("samples");
    assert!(samples >= 10, "{samples} vertex triples");
    let r = m(
        &l,
        MeasureMode::BendRadiusEstimate,
        std::slice::from_ref(&a),
    );
    assert_eq!(r.value_um, None);
    let v = serde_json::to_value(&r).expect("json");
    assert!(v["value_um"].is_null());
    assert_eq!(v["mode"], "bend_radius_estimate");
}

#[test]
fn invalid_targets() {
    let l = lib();
    let (a, c, t) = (
        get(&l, 1, 0, vec![]),
        get(&l, 2, 0, vec![]),
        get(&l, 10, 0, vec![]),
    );
    let code = |mode, ts: &[PlacedShape]| measure_geometry(&l, mode, ts).expect_err("bad").code();
    assert_eq!(
        code(MeasureMode::EdgeGap, std::slice::from_ref(&a)),
        "INVALID_TARGET"
    );
    assert_eq!(
        code(MeasureMode::PathWidth, &[a.clone(), c.clone()]),
        "INVALID_TARGET"
    );
    assert_eq!(
        code(MeasureMode::BendRadiusEstimate, std::slice::from_ref(&c)),
        "INVALID_TARGET"
    );
    assert_eq!(
        code(MeasureMode::LabelDistance, &[a.clone(), c.clone()]),
        "INVALID_TARGET"
    );
    assert_eq!(
        code(MeasureMode::Overlap, &[a.clone(), t.clone()]),
        "INVALID_TARGET"
    );
    assert_eq!(
        analyze_waveguide(&l, &c).expect_err("box").code(),
        "INVALID_TARGET"
    );
    let modes: Vec<MeasureMode> = serde_json::from_str(
        r#"["path_width","segment_length","centerline_distance","edge_gap",
            "bend_radius_estimate","overlap","label_distance","port_spacing"]"#,
    )
    .expect("all eight mode names parse");
    assert_eq!(modes.len(), 8);
    assert!(serde_json::from_str::<MeasureMode>(r#""area""#).is_err());
}

#[test]
fn waveguide_analysis_and_placement() {
    let l = lib();
    let a = get(&l, 1, 0, vec![]);
    let w = analyze_waveguide(&l, &a).expect("path");
    let v = serde_json::to_value(&w).expect("json");
    assert_eq!(
        v["bbox_um"],
        json!({"left": 0.0, "bottom": -0.25, "right": 40.0, "top": 0.25})
    );
    assert_eq!(v["center_um"], json!({"x": 20.0, "y": 0.0}));
    assert_eq!(v["path_width_um"], 0.5);
    assert_eq!(v["segment_length_um"], 40.0);
    assert!(v["bend_radius_estimate_um"].is_null());
    assert_eq!(v["orientation"], "horizontal");
    assert_eq!(v["is_path"], true);
    assert_eq!(v["is_axis_aligned"], true);
    assert_eq!(v["analysis_warnings"], json!([]));
    assert_eq!(v["kind"], "path");
    // SUB's copy: rotated 90°, magnified 2 → vertical, 80 µm long, 1 µm wide.
    let placed = get(
        &l,
        1,
        0,
        vec![Step {
            instance: 0,
            copy: 0,
        }],
    );
    let w = analyze_waveguide(&l, &placed).expect("placed");
    assert_eq!(w.orientation, "vertical");
    assert_eq!(w.path_width_um, 1.0);
    assert_eq!(w.segment_length_um, 80.0);
    assert_eq!(w.cell, "SUB");
    assert_eq!(
        w.bbox_um,
        MicronBox {
            left: 4.5,
            bottom: 0.0,
            right: 5.5,
            top: 80.0
        }
    );
    assert!(
        w.analysis_warnings
            .contains(&"magnified_placement".to_owned())
    );
    let e = get(&l, 4, 0, vec![]);
    let w = analyze_waveguide(&l, &e).expect("L");
    assert_eq!(w.orientation, "mixed");
    assert!(w.is_axis_aligned);
}
