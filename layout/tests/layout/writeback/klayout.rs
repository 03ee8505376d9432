//! KLayout as the oracle (issue 28's acceptance test for item 4): on `gcd_45nm` (GDSII and
//! OASIS), on a hierarchy built from it (an AREF of it and a rotated, mirrored copy, the
//! region across four array copies), and on a second repair continuing the first:
//! - every input layer of the written layout XOR the input's is empty;
//! - the mask layer XOR the base layer (target, or the earlier mask) outside the box is empty;
//! - the mask layer inside the box equals the given mask polygons, and differs from the target;
//! - every input cell keeps its instances.

use std::path::{Path as FsPath, PathBuf};

use serde_json::Value;

use super::{GCD_M1, gcd, limits, mask_library, synthetic_mask};
use crate::common::{self, place, rect};
use reticle_layout::{
    BBox, Cell, Format, LayerKey, Library, Point, Repetition, WritebackRequest, read_layout,
    write_back, write_layout,
};

const MASK: LayerKey = LayerKey::new(11, 1);

struct Case {
    name: &'static str,
    src: PathBuf,
    out: PathBuf,
    masks: PathBuf,
    top: String,
    base: LayerKey,
    region: BBox,
    hierarchical: bool,
    /// Variant placements the write-back added to the top cell.
    top_instances: usize,
}

/// Writes the input (unless it is a file already), the written-back layout and the mask.
#[allow(clippy::too_many_arguments)]
fn prepare(
    dir: &FsPath,
    name: &'static str,
    lib: &Library,
    src: Option<PathBuf>,
    format: Format,
    region: BBox,
    hierarchical: bool,
    grow: i64,
) -> (Case, Library) {
    let ext = format.name();
    let src = src.unwrap_or_else(|| {
        let p = dir.join(format!("{name}_in.{ext}"));
        std::fs::write(&p, write_layout(lib, format).expect("input")).expect("write");
        p
    });
    let top = lib.top_cells()[0];
    let mask = synthetic_mask(lib, top, GCD_M1, region, grow);
    let req = WritebackRequest {
        top,
        target: GCD_M1,
        mask_layer: MASK,
        region,
        mask: &mask,
    };
    let wb = write_back(lib, &req, &limits()).expect("write back");
    eprintln!("{name}: {:?}", wb.report);
    let out = dir.join(format!("{name}_out.{ext}"));
    let bytes = write_layout(&wb.library, format).expect("output");
    std::fs::write(&out, &bytes).expect("write");
    let masks = dir.join(format!("{name}_mask.gds"));
    let ml = mask_library(lib, MASK, &mask);
    std::fs::write(&masks, write_layout(&ml, Format::Gds).expect("mask")).expect("write");
    let back = read_layout(&bytes, Some(format), &limits()).expect("read back");
    let case = Case {
        name,
        src,
        out,
        masks,
        top: lib.cells[top].name.clone(),
        base: wb.report.base_layer,
        region,
        hierarchical,
        top_instances: wb.report.top_instances,
    };
    (case, back)
}

/// gcd cut into 8 × 8 tile cells (each shape goes to the tile holding its box's lower-left
/// corner, in tile coordinates), placed by a new top cell TILED: a standard-cell-like
/// hierarchy in which the region meets a few tiles only.
fn tiled(gcd: &Library) -> Library {
    let t = gcd.cell_index("TOP").expect("TOP");
    let src = &gcd.cells[t];
    let bb = gcd.cells[t]
        .shapes
        .values()
        .flatten()
        .filter_map(reticle_layout::Shape::bbox)
        .reduce(|a, b| a.union(&b))
        .expect("shapes");
    let pitch = (bb.width().max(bb.height()) + 7) / 8;
    let mut lib = Library::new("TILED", gcd.dbu_in_meters);
    lib.dbu_in_user_units = gcd.dbu_in_user_units;
    let mut tiles: std::collections::BTreeMap<(i64, i64), Cell> = Default::default();
    for (key, shapes) in &src.shapes {
        for s in shapes {
            let b = s.bbox().expect("box");
            let (i, j) = ((b.left - bb.left) / pitch, (b.bottom - bb.bottom) / pitch);
            let (ox, oy) = (bb.left + i * pitch, bb.bottom + j * pitch);
            let moved = match s {
                reticle_layout::Shape::Box(b) => reticle_layout::Shape::Box(rect(
                    b.left - ox,
                    b.bottom - oy,
                    b.right - ox,
                    b.top - oy,
                )),
                reticle_layout::Shape::Polygon(p) => {
                    reticle_layout::Shape::Polygon(reticle_layout::Polygon::new(
                        p.points
                            .iter()
                            .map(|q| Point::new(q.x - ox, q.y - oy))
                            .collect(),
                    ))
                }
                other => panic!("gcd has only boxes and polygons, not {}", other.kind()),
            };
            tiles
                .entry((i, j))
                .or_insert_with(|| Cell::new(format!("TILE_{i}_{j}")))
                .push_shape(*key, moved);
        }
    }
    let mut top = Cell::new("TILED");
    for ((i, j), cell) in tiles {
        top.instances.push(place(
            lib.cells.len(),
            bb.left + i * pitch,
            bb.bottom + j * pitch,
            0.0,
            false,
            1.0,
        ));
        lib.cells.push(cell);
    }
    lib.cells.push(top);
    lib
}

/// gcd's TOP in a 3×3 array, rotated by 90° and mirrored, under a new top cell GRID.
fn grid(gcd: &Library) -> Library {
    let mut lib = gcd.clone();
    let t = lib.cell_index("TOP").expect("TOP");
    let mut grid = Cell::new("GRID");
    let mut arr = place(t, 0, 0, 90.0, true, 1.0);
    arr.repetition = Some(Repetition::Array {
        cols: 3,
        rows: 3,
        col_step: Point::new(320_000, 0),
        row_step: Point::new(0, 320_000),
    });
    grid.instances.push(arr);
    lib.cells.push(grid);
    lib
}

/// gcd's TOP in a 2×2 array (pitch 32 µm) and once more rotated by 90° and mirrored, under
/// a new top cell CHIP.
fn chip(gcd: &Library) -> Library {
    let mut lib = gcd.clone();
    let t = lib.cell_index("TOP").expect("TOP");
    let mut chip = Cell::new("CHIP");
    let mut arr = place(t, 0, 0, 0.0, false, 1.0);
    arr.repetition = Some(Repetition::Array {
        cols: 2,
        rows: 2,
        col_step: Point::new(320_000, 0),
        row_step: Point::new(0, 320_000),
    });
    chip.instances.push(arr);
    chip.instances.push(place(t, 1_000_000, 0, 90.0, true, 1.0));
    lib.cells.push(chip);
    lib
}

#[test]
fn klayout_sees_the_input_layers_unchanged_and_the_mask_where_it_belongs() {
    let Some(bin) = common::klayout_bin() else {
        eprintln!("SKIP: klayout not found (set KLAYOUT_BIN or install Debian's klayout)");
        return;
    };
    let Some((path, lib)) = gcd() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let mut cases = Vec::new();
    // 4 µm × 3 µm of the flat layout, in GDSII and in OASIS.
    let region = rect(100_000, 100_000, 140_000, 130_000);
    cases.push(
        prepare(
            d,
            "gcd_gds",
            &lib,
            Some(path),
            Format::Gds,
            region,
            false,
            50,
        )
        .0,
    );
    cases.push(prepare(d, "gcd_oas", &lib, None, Format::Oasis, region, false, 50).0);
    // The same region of gcd cut into tiles: only the tiles it meets are flattened.
    let tiled = tiled(&lib);
    cases.push(prepare(d, "tiled", &tiled, None, Format::Gds, region, true, 50).0);
    // 4 µm × 3 µm inside the middle copy of a rotated 3×3 array: the other eight come back
    // as four sub-arrays of TOP's variant (row below, left, right, row above).
    let grid = grid(&lib);
    let middle = rect(450_000, 450_000, 490_000, 480_000);
    let (case, _) = prepare(d, "grid", &grid, None, Format::Gds, middle, true, 50);
    assert_eq!(case.top_instances, 4);
    cases.push(case);
    // 6 µm × 6 µm across the corners of four array copies.
    let chip = chip(&lib);
    let across = rect(290_000, 290_000, 350_000, 350_000);
    let (case, written) = prepare(d, "chip", &chip, None, Format::Gds, across, true, 50);
    cases.push(case);
    // A second repair on the written chip, overlapping the first region: continues from the
    // mask layer. Its mask shrinks the target instead (so stale content would show).
    let second = rect(320_000, 250_000, 380_000, 300_000);
    let (case, _) = prepare(
        d,
        "chip_again",
        &written,
        None,
        Format::Oasis,
        second,
        true,
        -50,
    );
    assert_eq!(case.base, MASK);
    cases.push(case);
    let spec: Vec<String> = cases
        .iter()
        .map(|c| {
            let r = c.region;
            format!(
                "{}|{}|{}|{}|11/0|{}/{}|{}/{}|{},{},{},{}",
                c.src.display(),
                c.out.display(),
                c.masks.display(),
                c.top,
                MASK.layer,
                MASK.datatype,
                c.base.layer,
                c.base.datatype,
                r.left,
                r.bottom,
                r.right,
                r.top
            )
        })
        .collect();
    let json = d.join("writeback.json");
    common::run_klayout_script(
        &bin,
        "writeback_check.py",
        &[
            format!("cases={}", spec.join(";")),
            format!("outfile={}", json.display()),
        ],
    );
    let facts: Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("parse");
    for c in &cases {
        let f = &facts[c.out.display().to_string()];
        let name = c.name;
        assert!(
            f.get("error").is_none(),
            "{name}: KLayout could not read: {f}"
        );
        assert_eq!(f["tops_source"], f["tops_written"], "{name}: top cells");
        let layers = f["layers"].as_object().expect("layers");
        let mut compared = 0;
        for (layer, v) in layers {
            assert_eq!(v["xor"], 0, "{name} {layer}: input layer changed");
            compared += v["source_polygons"].as_u64().expect("count");
        }
        assert!(
            compared > 1000,
            "{name}: {compared} input polygons compared"
        );
        assert_eq!(
            f["outside_xor"], 0,
            "{name}: mask ≠ base outside the box: {f}"
        );
        assert!(f["outside_polygons"].as_u64() > Some(100), "{name}: {f}");
        assert_eq!(
            f["inside_xor"], 0,
            "{name}: mask ≠ given mask inside the box: {f}"
        );
        assert!(f["inside_polygons"].as_u64() > Some(0), "{name}: {f}");
        assert!(
            f["inside_target_xor"].as_u64() > Some(0),
            "{name}: the mask inside equals the target, the test cannot tell: {f}"
        );
        assert_eq!(
            f["cells_with_changed_instances"],
            Value::Array(vec![]),
            "{name}: hierarchy changed"
        );
        if c.hierarchical {
            // Hierarchy kept outside the region: the top holds a small part of its flattened
            // mask layer itself.
            let own = f["top_own_mask_shapes"].as_u64().expect("own");
            let flat = f["top_flat_mask_shapes"].as_u64().expect("flat");
            assert!(own * 4 < flat, "{name}: {own} own of {flat} flat");
            if name == "chip" || name == "grid" {
                // The rotated copy stays clear: it gets TOP's variant.
                assert_eq!(
                    f["cells_written"].as_u64(),
                    f["cells_source"].as_u64().map(|n| n + 1),
                    "{name}"
                );
            }
        }
        eprintln!(
            "{name}: KLayout: {} input polygons unchanged, mask = base outside ({} polygons), \
             = given mask inside ({} polygons), top holds {} of {} mask shapes",
            compared,
            f["outside_polygons"],
            f["inside_polygons"],
            f["top_own_mask_shapes"],
            f["top_flat_mask_shapes"]
        );
    }
}
