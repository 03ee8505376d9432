//! Unit tests of `reticle_layout::observe::render`: rendering and annotations.

use std::collections::BTreeMap;

use reticle_layout::geom::BBox;
use reticle_layout::geom::Point;
use reticle_layout::model::Library;
use reticle_layout::model::{Cell, LayerKey, Shape};
use reticle_layout::observe::region::{HierarchyMode, QueryBudget, RegionRequest, query_region};
use reticle_layout::observe::render::*;
use reticle_layout::observe::units::{MicronBox, ObservedLayer};

/// TOP: box 1/0 (0,0)-(5000,10000) (left half of a 10×10 µm view); box 2/0
/// (6000,6000)-(9000,9000). dbu 1 nm.
fn lib() -> Library {
    let mut lib = Library::new("R", 1e-9);
    let mut top = Cell::new("TOP");
    top.push_shape(
        LayerKey::new(1, 0),
        Shape::Box(BBox::from_corners(
            Point::new(0, 0),
            Point::new(5000, 10_000),
        )),
    );
    top.push_shape(
        LayerKey::new(2, 0),
        Shape::Box(BBox::from_corners(
            Point::new(6000, 6000),
            Point::new(9000, 9000),
        )),
    );
    lib.cells.push(top);
    lib
}

fn spec(style: RenderStyle) -> RenderSpec {
    RenderSpec {
        cell: "TOP".into(),
        box_um: MicronBox {
            left: 0.0,
            bottom: 0.0,
            right: 10.0,
            top: 10.0,
        },
        layers: None,
        width: 100,
        height: 100,
        style,
        max_shapes: MAX_RENDER_SHAPES,
    }
}

fn decode(png_bytes: &[u8]) -> (u32, u32, Vec<u8>) {
    let dec = png::Decoder::new(std::io::Cursor::new(png_bytes));
    let mut r = dec.read_info().expect("png");
    let mut buf = vec![0; r.output_buffer_size().expect("size")];
    let info = r.next_frame(&mut buf).expect("frame");
    assert_eq!(info.color_type, png::ColorType::Rgba);
    (info.width, info.height, buf)
}

fn pixel(img: &(u32, u32, Vec<u8>), x: u32, y: u32) -> [u8; 4] {
    let i = ((y * img.0 + x) * 4) as usize;
    [img.2[i], img.2[i + 1], img.2[i + 2], img.2[i + 3]]
}

#[test]
fn pixels_follow_the_layout() {
    let l = lib();
    let r = render_view(&l, &spec(RenderStyle::Light), &[]).expect("render");
    let img = decode(&r.png);
    assert_eq!((img.0, img.1), (100, 100));
    // 1 px = 100 nm; y flips (row 0 is the top, y = 10 µm).
    assert_ne!(pixel(&img, 25, 50), [255, 255, 255, 255], "layer 1 box");
    assert_eq!(
        pixel(&img, 55, 50),
        [255, 255, 255, 255],
        "gap between boxes"
    );
    assert_ne!(
        pixel(&img, 75, 25),
        [255, 255, 255, 255],
        "layer 2 box (y 6..9 µm)"
    );
    assert_eq!(
        pixel(&img, 75, 75),
        [255, 255, 255, 255],
        "below layer 2 box"
    );
    assert_ne!(
        pixel(&img, 25, 50),
        pixel(&img, 75, 25),
        "layers differ in colour"
    );
    let mask = decode(
        &render_view(&l, &spec(RenderStyle::Mask), &[])
            .expect("mask")
            .png,
    );
    assert_eq!(pixel(&mask, 25, 50), [255, 255, 255, 255]);
    assert_eq!(pixel(&mask, 55, 50), [0, 0, 0, 255]);
    // Exactly the covered area is white: 50×100 + 30×30 pixels.
    let white = mask.2.chunks(4).filter(|p| p[0] == 255).count();
    assert_eq!(white, 50 * 100 + 30 * 30);
    let dark = decode(
        &render_view(&l, &spec(RenderStyle::Dark), &[])
            .expect("dark")
            .png,
    );
    assert_eq!(pixel(&dark, 55, 50), [0, 0, 0, 255]);
    assert_ne!(pixel(&dark, 25, 50), [0, 0, 0, 255]);
    // A layer filter drops the other layer.
    let mut only2 = spec(RenderStyle::Mask);
    only2.layers = Some(vec![ObservedLayer {
        layer: 2,
        datatype: 0,
        name: None,
    }]);
    let img = decode(&render_view(&l, &only2, &[]).expect("filtered").png);
    assert_eq!(pixel(&img, 25, 50), [0, 0, 0, 255]);
    assert_eq!(pixel(&img, 75, 25), [255, 255, 255, 255]);
}

#[test]
fn byte_identical_and_annotated() {
    let l = lib();
    let q = query_region(
        &l,
        &RegionRequest {
            box_um: MicronBox {
                left: 6.5,
                bottom: 6.5,
                right: 7.0,
                top: 7.0,
            },
            cell: Some("TOP".into()),
            layers: None,
            hierarchy_mode: HierarchyMode::Recursive,
            max_shapes: None,
            max_instances: None,
            max_texts: None,
        },
        &QueryBudget::default(),
    )
    .expect("query");
    let id = q.payload.shapes[0].id.clone();
    let ann = resolve_annotations(
        &l,
        &[Annotation {
            kind: "shape_outline".into(),
            target_ids: vec![id],
            color: Some("#ff0000".into()),
            box_um: None,
        }],
        &q.locators,
    )
    .expect("annotations");
    let a = render_view(&l, &spec(RenderStyle::Dark), &ann).expect("a");
    let b = render_view(&l.clone(), &spec(RenderStyle::Dark), &ann).expect("b");
    assert_eq!(a.png, b.png, "byte-identical");
    assert_eq!(a.render_id, b.render_id);
    assert!(a.render_id.starts_with("rnd_"));
    let plain = render_view(&l, &spec(RenderStyle::Dark), &[]).expect("plain");
    assert_ne!(plain.png, a.png);
    // The outline of the 2/0 box runs along x = 60 px (6 µm), rows 10..40.
    let img = decode(&a.png);
    let p = pixel(&img, 60, 25);
    assert!(
        p[0] > 200 && p[1] < 60 && p[2] < 60,
        "red outline, got {p:?}"
    );
    assert_eq!(&a.png[1..4], b"PNG");
}

#[test]
fn aspect_is_kept_and_box_annotation_drawn() {
    let l = lib();
    let mut s = spec(RenderStyle::Mask);
    s.width = 200;
    // 10 µm box in 200×100 px: 10 px/µm, centred with 50 px margins left and right.
    let img = decode(&render_view(&l, &s, &[]).expect("wide").png);
    assert_eq!((img.0, img.1), (200, 100));
    assert_eq!(pixel(&img, 45, 50), [0, 0, 0, 255], "left margin");
    assert_eq!(pixel(&img, 75, 50), [255, 255, 255, 255], "layer 1 box");
    let white = img.2.chunks(4).filter(|p| p[0] == 255).count();
    assert_eq!(white, 50 * 100 + 30 * 30, "same geometry, same pixel count");
    let ann = resolve_annotations(
        &l,
        &[Annotation {
            kind: "box".into(),
            target_ids: vec![],
            color: Some("#00ff00".into()),
            box_um: Some(MicronBox {
                left: 2.0,
                bottom: 2.0,
                right: 4.0,
                top: 4.0,
            }),
        }],
        &BTreeMap::new(),
    )
    .expect("box");
    let img = decode(&render_view(&l, &s, &ann).expect("annotated").png);
    // Left edge of the box annotation: x = 50 + 20 px, rows 60..80.
    let p = pixel(&img, 70, 70);
    assert!(p[1] > 200 && p[0] < 60, "green edge, got {p:?}");
    let e = resolve_annotations(
        &l,
        &[Annotation {
            kind: "arrow".into(),
            target_ids: vec![],
            color: None,
            box_um: None,
        }],
        &BTreeMap::new(),
    )
    .expect_err("kind");
    assert_eq!(e.code(), "INVALID_INPUT");
}

#[test]
fn errors() {
    let l = lib();
    let code = |s: &RenderSpec| render_view(&l, s, &[]).expect_err("bad").code();
    let mut s = spec(RenderStyle::Light);
    s.width = 0;
    assert_eq!(code(&s), "TOOL_LIMIT_EXCEEDED");
    s.width = MAX_IMAGE_SIDE + 1;
    assert_eq!(code(&s), "TOOL_LIMIT_EXCEEDED");
    let mut s = spec(RenderStyle::Light);
    s.box_um.right = -1.0;
    assert_eq!(code(&s), "INVALID_BOX");
    let mut s = spec(RenderStyle::Light);
    s.layers = Some(vec![ObservedLayer {
        layer: 9,
        datatype: 9,
        name: None,
    }]);
    assert_eq!(code(&s), "INVALID_LAYER");
    let mut s = spec(RenderStyle::Light);
    s.cell = "NOPE".into();
    assert_eq!(code(&s), "TOP_CELL_NOT_FOUND");
    assert_eq!(parse_color("#ff3b30").expect("ok"), [255, 59, 48, 255]);
    assert_eq!(parse_color("#ff3b3080").expect("ok"), [255, 59, 48, 128]);
    for bad in ["ff3b30", "#ff3b3", "#gg0000", "#ff3b30ff00"] {
        assert_eq!(parse_color(bad).expect_err("bad").code(), "INVALID_INPUT");
    }
    let e = resolve_annotations(
        &l,
        &[Annotation {
            kind: "shape_outline".into(),
            target_ids: vec!["shp_missing".into()],
            color: None,
            box_um: None,
        }],
        &BTreeMap::new(),
    )
    .expect_err("unknown id");
    assert_eq!(e.code(), "INVALID_TARGET");
    let v = set_view(&l, "TOP", &spec(RenderStyle::Light).box_um, None).expect("view");
    let j = serde_json::to_value(&v).expect("json");
    assert_eq!(j["cell"], "TOP");
    assert_eq!(j["box_um"]["right"], 10.0);
    assert_eq!(j["layers"], serde_json::json!([]));
    assert_eq!(
        set_view(
            &l,
            "TOP",
            &s.box_um,
            Some(&[ObservedLayer {
                layer: 5,
                datatype: 0,
                name: None
            }])
        )
        .expect_err("layer")
        .code(),
        "INVALID_LAYER"
    );
    let style: RenderStyle = serde_json::from_str(r#""mask""#).expect("style");
    assert_eq!(style, RenderStyle::Mask);
    assert!(serde_json::from_str::<RenderStyle>(r#""sepia""#).is_err());
}
