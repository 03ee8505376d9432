//! Shared helpers for the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

use reticle_layout::{
    BBox, Cell, Instance, LayerKey, Library, Path, PathEnds, Point, Polygon, Repetition, Shape,
    Text, Transform,
};

/// The reference data folder: `RETICLE_DATA_DIR`, else `<workspace>/../shared/data`.
pub fn data_dir() -> PathBuf {
    std::env::var_os("RETICLE_DATA_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data"),
        PathBuf::from,
    )
}

pub fn rect(l: i64, b: i64, r: i64, t: i64) -> BBox {
    BBox::from_corners(Point::new(l, b), Point::new(r, t))
}

pub fn place(cell: usize, x: i64, y: i64, rot: f64, mirror: bool, mag: f64) -> Instance {
    Instance {
        cell,
        transform: Transform {
            offset: Point::new(x, y),
            rotation_deg: rot,
            mirror_x: mirror,
            magnification: mag,
        },
        repetition: None,
    }
}

/// A library using every shape kind and placement feature GDSII has.
pub fn sample_library() -> Library {
    let mut lib = Library::new("SAMPLE", 1e-9);
    let mut leaf = Cell::new("LEAF");
    leaf.push_shape(LayerKey::new(1, 0), Shape::Box(rect(0, 0, 10, 5)));
    leaf.push_shape(
        LayerKey::new(2, 3),
        Shape::Polygon(Polygon::new(vec![
            Point::new(0, 0),
            Point::new(20, 0),
            Point::new(20, 10),
            Point::new(10, 10),
            Point::new(10, 20),
            Point::new(0, 20),
        ])),
    );
    leaf.push_shape(
        LayerKey::new(3, 0),
        Shape::Path(Path {
            spine: vec![Point::new(0, 0), Point::new(100, 0), Point::new(100, 50)],
            width: 6,
            ends: PathEnds::Variable { begin: 2, end: 4 },
        }),
    );
    leaf.push_shape(
        LayerKey::new(3, 1),
        Shape::Path(Path {
            spine: vec![Point::new(0, 0), Point::new(0, 30)],
            width: 4,
            ends: PathEnds::HalfWidth,
        }),
    );
    leaf.push_shape(
        LayerKey::new(10, 2),
        Shape::Text(Text {
            string: "PIN_A".into(),
            position: Point::new(5, 2),
        }),
    );
    lib.cells.push(leaf);
    let mut mid = Cell::new("MID");
    mid.instances.push(place(0, 50, 0, 0.0, true, 1.0));
    mid.push_shape(
        LayerKey::new(1, 0),
        Shape::Polygon(Polygon::rect(rect(-5, -5, 0, 0))),
    );
    lib.cells.push(mid);
    let mut top = Cell::new("TOP");
    top.instances.push(place(0, 100, 0, 90.0, false, 1.0));
    top.instances.push(place(0, 0, 100, 0.0, true, 1.0));
    top.instances.push(place(0, 0, 0, 180.0, false, 2.0));
    top.instances.push(place(0, -500, -500, 30.0, false, 1.5));
    top.instances.push(place(1, 1000, 0, 90.0, false, 1.0));
    let mut arr = place(0, 1000, 1000, 0.0, false, 1.0);
    arr.repetition = Some(Repetition::Array {
        cols: 3,
        rows: 2,
        col_step: Point::new(200, 0),
        row_step: Point::new(0, 300),
    });
    top.instances.push(arr);
    lib.cells.push(top);
    lib
}

/// Twice the area of each polygon, sorted, for order-independent comparisons.
pub fn areas2(polys: &[Polygon]) -> Vec<i128> {
    let mut v: Vec<i128> = polys.iter().map(|p| p.signed_area2().abs()).collect();
    v.sort_unstable();
    v
}

pub fn bboxes(polys: &[Polygon]) -> Vec<BBox> {
    let mut v: Vec<BBox> = polys.iter().filter_map(Polygon::bbox).collect();
    v.sort_unstable();
    v
}

pub mod oas;

/// `KLAYOUT_BIN` (default `klayout` on `PATH`), when it runs (`-v` answers).
pub fn klayout_bin() -> Option<PathBuf> {
    let bin =
        std::env::var_os("KLAYOUT_BIN").map_or_else(|| PathBuf::from("klayout"), PathBuf::from);
    let ok = std::process::Command::new(&bin)
        .arg("-v")
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some(bin)
}

/// Runs `tests/klayout/<script>` in KLayout's batch mode with one `-rd` per `args`
/// entry (`name=value`), and fails the test with KLayout's stderr when it fails.
pub fn run_klayout_script(bin: &std::path::Path, script: &str, args: &[String]) {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/klayout")
        .join(script);
    let mut cmd = std::process::Command::new(bin);
    cmd.arg("-b").arg("-r").arg(&script);
    for a in args {
        cmd.arg("-rd").arg(a);
    }
    let out = cmd.output().expect("run klayout");
    assert!(
        out.status.success(),
        "klayout {} failed: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}
