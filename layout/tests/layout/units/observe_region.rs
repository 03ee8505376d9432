//! Unit tests of `reticle_layout::observe::region`: region queries.

use super::observe_cells::sample;
use reticle_layout::geom::Point;
use reticle_layout::model::Shape;
use reticle_layout::model::{LayerKey, Repetition};
use reticle_layout::observe::region::*;
use reticle_layout::observe::units::{DbuBox, DbuPoint, MicronBox, MicronPoint, ObservedLayer};

fn req(l: f64, b: f64, r: f64, t: f64, mode: HierarchyMode) -> RegionRequest {
    RegionRequest {
        box_um: MicronBox {
            left: l,
            bottom: b,
            right: r,
            top: t,
        },
        cell: Some("TOP".into()),
        layers: None,
        hierarchy_mode: mode,
        max_shapes: None,
        max_instances: None,
        max_texts: None,
    }
}

fn run(r: &RegionRequest) -> RegionOutcome {
    query_region(&sample(), r, &QueryBudget::default()).expect("query")
}

#[test]
fn recursive_lower_left() {
    let out = run(&req(-1.0, -1.0, 1.2, 1.2, HierarchyMode::Recursive));
    let p = &out.payload;
    let got: Vec<(u32, &str, [i64; 4], &str)> = p
        .shapes
        .iter()
        .map(|s| {
            let b = s.bbox_dbu;
            (
                s.layer.layer,
                s.kind,
                [b.left, b.bottom, b.right, b.top],
                s.cell.as_str(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (1, "box", [0, 0, 1000, 500], "LEAF"),
            (1, "polygon", [-500, -500, 0, 0], "TOP"),
            (2, "path", [0, 200, 1000, 300], "LEAF"),
        ]
    );
    assert_eq!(p.shapes[0].instance_path, ["TOP", "LEAF#0"]);
    assert_eq!(p.shapes[1].instance_path, ["TOP"]);
    assert_eq!(p.shapes[2].path_width_um, Some(0.1));
    assert_eq!(p.shapes[2].path_width_dbu, Some(100));
    assert_eq!(p.shapes[2].point_count, 2);
    assert_eq!(
        p.shapes[0].bbox_um,
        MicronBox {
            left: 0.0,
            bottom: 0.0,
            right: 1.0,
            top: 0.5
        }
    );
    assert_eq!(
        p.summary,
        RegionSummary {
            shape_count: 3,
            instance_count: 1,
            text_count: 1
        }
    );
    assert_eq!(p.instances.len(), 1);
    assert_eq!(p.instances[0].name, "LEAF#0");
    assert_eq!(p.texts[0].text, "P");
    assert_eq!(p.texts[0].position_um, MicronPoint { x: 0.1, y: 0.1 });
    assert_eq!(p.truncation.shapes_dropped, 0);
    for s in &p.shapes {
        assert!(s.id.starts_with("shp_") && s.id.len() == 20, "{}", s.id);
        assert_eq!(out.locators[&s.id].root, "TOP");
    }
    assert!(p.texts[0].id.starts_with("txt_"));
    let v = serde_json::to_value(p).expect("json");
    for f in [
        "box_um",
        "cell",
        "hierarchy_mode",
        "summary",
        "shapes",
        "instances",
        "texts",
    ] {
        assert!(v.get(f).is_some(), "missing {f}");
    }
    assert_eq!(v["hierarchy_mode"], "recursive");
    assert_eq!(v["truncation"]["shapes_dropped"], 0);
    assert_eq!(v["truncation"]["instances_dropped"], 0);
    assert_eq!(v["truncation"]["texts_dropped"], 0);
    assert!(v["shapes"][0].get("path_width_um").is_none());
    assert_eq!(v["shapes"][2]["path_width_um"], 0.1);
}

#[test]
fn modes_top_and_flattened() {
    let rec = run(&req(-1.0, -1.0, 1.2, 1.2, HierarchyMode::Recursive)).payload;
    let top = run(&req(-1.0, -1.0, 1.2, 1.2, HierarchyMode::Top)).payload;
    assert_eq!(top.shapes.len(), 1);
    assert_eq!(top.shapes[0].kind, "polygon");
    assert_eq!(top.instances.len(), 1);
    assert!(top.texts.is_empty());
    let flat = run(&req(-1.0, -1.0, 1.2, 1.2, HierarchyMode::Flattened)).payload;
    assert!(flat.instances.is_empty());
    assert_eq!(flat.summary.instance_count, 0);
    let ids = |p: &RegionPayload| p.shapes.iter().map(|s| s.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&flat), ids(&rec), "one id per shape in every mode");
    assert!(
        flat.shapes
            .iter()
            .all(|s| s.cell == "TOP" && s.instance_path == ["TOP"])
    );
    assert_eq!(top.shapes[0].id, rec.shapes[1].id);
}

#[test]
fn array_copy_and_rotation() {
    let out = run(&req(2.1, 12.05, 2.2, 12.15, HierarchyMode::Recursive)).payload;
    assert_eq!(out.shapes.len(), 1);
    assert_eq!(out.shapes[0].instance_path, ["TOP", "LEAF#2[1,2]"]);
    assert_eq!(
        out.shapes[0].bbox_dbu,
        DbuBox {
            left: 2000,
            bottom: 12_000,
            right: 3000,
            top: 12_500
        }
    );
    assert_eq!(out.texts.len(), 1);
    assert_eq!(out.texts[0].position_dbu, DbuPoint { x: 2100, y: 12_100 });
    // Rotated copy: path spine (0,250)-(1000,250) → x = 4750, y 0..1000.
    let rot = run(&req(4.6, 0.0, 4.85, 1.0, HierarchyMode::Recursive)).payload;
    let path = rot.shapes.iter().find(|s| s.kind == "path").expect("path");
    assert_eq!(
        path.bbox_dbu,
        DbuBox {
            left: 4700,
            bottom: 0,
            right: 4800,
            top: 1000
        }
    );
    assert_eq!(path.instance_path, ["TOP", "LEAF#1"]);
}

#[test]
fn truncation_and_filters() {
    let mut r = req(-1.0, -1.0, 1.2, 1.2, HierarchyMode::Recursive);
    r.max_shapes = Some(1);
    r.max_instances = Some(0);
    let p = run(&r).payload;
    assert_eq!(p.shapes.len(), 1);
    assert_eq!(p.summary.shape_count, 3);
    assert_eq!(p.truncation.shapes_dropped, 2);
    assert_eq!(p.truncation.instances_dropped, 1);
    assert_eq!(p.texts.len(), 1, "max_texts defaults to max_shapes");
    let mut r = req(-1.0, -1.0, 1.2, 1.2, HierarchyMode::Recursive);
    r.layers = Some(vec![ObservedLayer {
        layer: 2,
        datatype: 0,
        name: None,
    }]);
    let p = run(&r).payload;
    assert_eq!(p.shapes.len(), 1);
    assert_eq!(p.shapes[0].kind, "path");
    assert!(p.texts.is_empty());
}

#[test]
fn huge_array_window_is_cheap_and_full_walk_is_refused() {
    // 100 000 × 100 000 copies of LEAF (10^10 placements); a small window visits a few.
    let mut lib = sample();
    lib.cells[1].instances[2].repetition = Some(Repetition::Array {
        cols: 100_000,
        rows: 100_000,
        col_step: Point::new(2000, 0),
        row_step: Point::new(0, 1000),
    });
    let budget = QueryBudget::default();
    // Copy (col 5000, row 79990) sits at (0, 10_000) + (5000·2000, 79990·1000) =
    // (10_000_000, 80_000_000) dbu.
    let r = req(
        10_000.1,
        80_000.05,
        10_000.2,
        80_000.15,
        HierarchyMode::Recursive,
    );
    let p = query_region(&lib, &r, &budget).expect("window").payload;
    assert_eq!(p.shapes.len(), 1);
    assert_eq!(p.shapes[0].instance_path, ["TOP", "LEAF#2[5000,79990]"]);
    assert_eq!(p.summary.instance_count, 1, "the array meets the box");
    let id = p.shapes[0].id.clone();
    let small = QueryBudget {
        max_placements: 20_000,
        ..budget
    };
    let e = find_by_id(&lib, 1, &id, &small).expect_err("too large");
    assert_eq!(e.code(), "QUERY_TOO_LARGE");
    let v = serde_json::to_value(&p.instances[0]).expect("json");
    assert_eq!(v["array"]["count"], 10_000_000_000u64);
}

#[test]
fn truncation_keeps_the_first_in_order() {
    let all = run(&req(-100.0, -100.0, 100.0, 100.0, HierarchyMode::Recursive)).payload;
    for n in [1u64, 4, 9, 16] {
        let mut r = req(-100.0, -100.0, 100.0, 100.0, HierarchyMode::Recursive);
        r.max_shapes = Some(n);
        r.max_texts = Some(2);
        let p = run(&r).payload;
        assert_eq!(p.shapes[..], all.shapes[..n as usize]);
        assert_eq!(p.texts[..], all.texts[..2]);
        assert_eq!(p.truncation.shapes_dropped, 17 - n);
        assert_eq!(p.truncation.texts_dropped, 6);
    }
}

#[test]
fn error_codes() {
    let lib = sample();
    let b = QueryBudget::default();
    let code =
        |r: &RegionRequest, b: &QueryBudget| query_region(&lib, r, b).expect_err("error").code();
    let mut r = req(-1.0, -1.0, 1.2, 1.2, HierarchyMode::Recursive);
    r.layers = Some(vec![ObservedLayer {
        layer: 7,
        datatype: 0,
        name: None,
    }]);
    assert_eq!(code(&r, &b), "INVALID_LAYER");
    assert_eq!(
        code(&req(1.0, 0.0, 0.0, 1.0, HierarchyMode::Top), &b),
        "INVALID_BOX"
    );
    let mut r = req(-1.0, -1.0, 1.2, 1.2, HierarchyMode::Recursive);
    r.max_shapes = Some(HARD_MAX_ITEMS + 1);
    assert_eq!(code(&r, &b), "TOOL_LIMIT_EXCEEDED");
    let mut r = req(-1.0, -1.0, 1.2, 1.2, HierarchyMode::Recursive);
    r.cell = Some("NOPE".into());
    assert_eq!(code(&r, &b), "TOP_CELL_NOT_FOUND");
    let tiny = QueryBudget {
        max_visited_shapes: 2,
        ..QueryBudget::default()
    };
    assert_eq!(
        code(&req(-1.0, -1.0, 1.2, 1.2, HierarchyMode::Recursive), &tiny),
        "QUERY_TOO_LARGE"
    );
    let few = QueryBudget {
        max_placements: 3,
        ..QueryBudget::default()
    };
    assert_eq!(
        code(
            &req(-100.0, -100.0, 100.0, 100.0, HierarchyMode::Recursive),
            &few
        ),
        "QUERY_TOO_LARGE"
    );
}

#[test]
fn ids_resolve_and_are_deterministic() {
    let lib = sample();
    let r = req(-100.0, -100.0, 100.0, 100.0, HierarchyMode::Recursive);
    let a = query_region(&lib, &r, &QueryBudget::default()).expect("a");
    let b = query_region(&lib.clone(), &r, &QueryBudget::default()).expect("b");
    assert_eq!(
        serde_json::to_string(&a.payload).expect("json"),
        serde_json::to_string(&b.payload).expect("json")
    );
    // 9 boxes/polygons + 8 paths, 8 texts, all distinct ids.
    assert_eq!(a.payload.summary.shape_count, 17);
    assert_eq!(a.locators.len(), 25);
    let ids: Vec<String> = a.locators.keys().cloned().collect();
    let resolved = resolve_ids(&lib, &ids, &a.locators).expect("resolve");
    for (id, s) in ids.iter().zip(&resolved) {
        assert_eq!(&s.id, id);
        let listed = a.payload.shapes.iter().find(|e| &e.id == id);
        if let Some(e) = listed {
            assert_eq!(s.bbox().map(DbuBox::from), Some(e.bbox_dbu));
        }
        let found = find_by_id(&lib, 1, id, &QueryBudget::default()).expect("walk");
        assert_eq!(found.map(|f| f.locator), Some(s.locator.clone()));
    }
    let e = resolve_ids(&lib, &["shp_0000000000000000".into()], &a.locators).expect_err("unknown");
    assert_eq!(e.code(), "INVALID_TARGET");
    // A locator whose shape changed no longer resolves to the id.
    let mut changed = lib.clone();
    if let Some(Shape::Box(b)) = changed.cells[0]
        .shapes
        .get_mut(&LayerKey::new(1, 0))
        .and_then(|v| v.first_mut())
    {
        b.right += 1;
    }
    let box_id = a.payload.shapes[0].id.clone();
    assert_eq!(
        resolve_ids(&changed, &[box_id], &a.locators)
            .expect_err("changed")
            .code(),
        "INVALID_TARGET"
    );
}
