//! Cross-check of the observer queries against KLayout: KLayout writes a layout with
//! hierarchy, arrays, Manhattan and arbitrary rotations, mirrors, magnification, paths of
//! every end style and texts (tests/klayout/make_reference.py) as GDSII and OASIS; KLayout
//! then reports cells (box, top flag, instance records, shape counts) and per layer the
//! flattened count and the shapes touching query boxes (tests/klayout/observe_reference.py).
//! `list_cells`, `list_layers` and `query_region` must agree. Skips (with `SKIP:`) when
//! `klayout` is not installed.

use crate::common;

use reticle_layout::observe::cells::{list_cells, select_top_cell};
use reticle_layout::observe::layers::list_layers;
use reticle_layout::observe::region::{
    HARD_MAX_ITEMS, HierarchyMode, QueryBudget, RegionRequest, query_region,
};
use reticle_layout::observe::{MicronBox, ObservedLayer};
use reticle_layout::{Limits, read_layout};
use serde_json::Value;

/// Query boxes (dbu): the 4×3 LEAF array at (100000, 100000), the R90 LEAF at (10000, 0),
/// and part of MID's 5×3 box array placed R90 at (50000, 0) (edges cut through boxes). All
/// three regions hold only Manhattan placements, where KLayout's "touching" test is exact.
const BOXES: [[i64; 4]; 3] = [
    [99_000, 99_000, 103_500, 104_000],
    [9000, -1000, 10_500, 1500],
    [47_000, 100, 47_800, 700],
];

#[test]
fn observer_queries_match_klayout() {
    let Some(bin) = common::klayout_bin() else {
        eprintln!("SKIP: klayout not found (set KLAYOUT_BIN or install Debian's klayout)");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let outdir = format!("outdir={}", dir.path().display());
    common::run_klayout_script(&bin, "make_reference.py", std::slice::from_ref(&outdir));
    let files = ["sample.gds", "sample.oas", "sample_cblocks.oas"];
    let inputs: Vec<String> = files
        .iter()
        .map(|f| dir.path().join(f).display().to_string())
        .collect();
    let boxes: Vec<String> = BOXES
        .iter()
        .map(|b| b.map(|v| v.to_string()).join(","))
        .collect();
    common::run_klayout_script(
        &bin,
        "observe_reference.py",
        &[
            outdir,
            format!("inputs={}", inputs.join(",")),
            format!("boxes={}", boxes.join(";")),
        ],
    );
    let reference: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("observe_reference.json")).expect("json"),
    )
    .expect("parse");

    for (file, path) in files.iter().zip(&inputs) {
        let bytes = std::fs::read(path).expect("read");
        let lib = read_layout(&bytes, None, &Limits::default()).expect("parse");
        let facts = &reference[*file];
        let sel = select_top_cell(&lib, Some("TOP")).expect("TOP");
        assert_eq!(
            select_top_cell(&lib, None)
                .expect("default")
                .selected_top_cell,
            "AAA_OTHER",
            "{file}: alphabetically first top cell"
        );

        // list_cells
        let ours = list_cells(&lib, sel.index, None).expect("cells");
        let theirs = facts["cells"].as_array().expect("cells");
        assert_eq!(ours.len(), theirs.len(), "{file}: cell count");
        for (o, t) in ours.iter().zip(theirs) {
            assert_eq!(o.name, t["name"].as_str().expect("name"), "{file}: order");
            assert_eq!(
                o.is_top,
                t["is_top"].as_bool().expect("top"),
                "{file} {}",
                o.name
            );
            assert_eq!(
                o.child_instance_count as u64,
                t["child_instances"].as_u64().expect("ci"),
                "{file} {}: instance records",
                o.name
            );
            assert_eq!(
                o.shape_count as u64,
                t["shape_count"].as_u64().expect("sc"),
                "{file} {}: shapes",
                o.name
            );
            let bb = o.bbox_dbu.map(|b| vec![b.left, b.bottom, b.right, b.top]);
            let want: Option<Vec<i64>> = t["bbox"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_i64).collect());
            assert_eq!(bb, want, "{file} {}: bbox", o.name);
            let um = o.bbox_um.expect("non-empty");
            assert!(
                (um.left - want.as_ref().map_or(0, |w| w[0]) as f64 * lib.dbu_um()).abs() < 1e-9
            );
        }

        // list_layers and query_region per layer
        let layers = list_layers(&lib, sel.index).expect("layers");
        let theirs = facts["layers"].as_array().expect("layers");
        assert_eq!(layers.len(), theirs.len(), "{file}: layer count");
        for (o, t) in layers.iter().zip(theirs) {
            let key = (o.layer, o.datatype);
            assert_eq!(
                key,
                (
                    t["layer"].as_u64().expect("l") as u32,
                    t["datatype"].as_u64().expect("d") as u32
                ),
                "{file}: layer order"
            );
            assert_eq!(
                o.shape_count,
                t["count"].as_u64().expect("count"),
                "{file} {key:?}"
            );
            for (bx, want) in BOXES
                .iter()
                .zip(t["touching"].as_array().expect("touching"))
            {
                let dbu = lib.dbu_um();
                let req = RegionRequest {
                    box_um: MicronBox {
                        left: bx[0] as f64 * dbu,
                        bottom: bx[1] as f64 * dbu,
                        right: bx[2] as f64 * dbu,
                        top: bx[3] as f64 * dbu,
                    },
                    cell: Some("TOP".into()),
                    layers: Some(vec![ObservedLayer {
                        layer: o.layer,
                        datatype: o.datatype,
                        name: None,
                    }]),
                    hierarchy_mode: HierarchyMode::Recursive,
                    max_shapes: Some(HARD_MAX_ITEMS),
                    max_instances: None,
                    max_texts: Some(HARD_MAX_ITEMS),
                };
                let p = query_region(&lib, &req, &QueryBudget::default())
                    .expect("query")
                    .payload;
                let n = p.summary.shape_count + p.summary.text_count;
                assert_eq!(n, want.as_u64().expect("n"), "{file} {key:?} box {bx:?}");
                eprintln!("{file} {key:?} box {bx:?}: {n} shapes touching (KLayout agrees)");
            }
        }
    }
}
