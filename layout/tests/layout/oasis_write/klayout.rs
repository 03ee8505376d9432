//! KLayout reads what we write: cells, instances and an empty layer-by-layer XOR against
//! the source.

use super::*;

/// KLayout reads the OASIS we write from the sample library, the edge-case library and the
/// real 45 nm GDS, and finds the same cells, top cells, placements and texts as in the
/// source, with an empty XOR per layer of every top cell.
#[test]
fn klayout_reads_our_oasis_as_the_source() {
    let Some(bin) = common::klayout_bin() else {
        eprintln!("SKIP: klayout not found (set KLAYOUT_BIN or install Debian's klayout)");
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut pairs: Vec<(String, PathBuf, PathBuf, bool)> = Vec::new();
    let mut add = |name: &str, lib: &Library, src: Option<PathBuf>, same_instances: bool| {
        let src = src.unwrap_or_else(|| {
            let p = dir.path().join(format!("{name}.gds"));
            std::fs::write(&p, write_gds(lib).expect("gds")).expect("write");
            p
        });
        let out = dir.path().join(format!("{name}.oas"));
        std::fs::write(&out, write_oasis(lib).expect("oasis")).expect("write");
        pairs.push((name.to_owned(), src, out, same_instances));
    };
    add("sample", &sample_with_layer_names(), None, true);
    // GDS has no explicit repetitions (written as one SREF each): compare placements only.
    add("edge", &klayout_edge_library(), None, false);
    let real = common::data_dir().join("gds/gcd_45nm.gds");
    match std::fs::read(&real) {
        Ok(bytes) => {
            let lib = read_gds(&bytes, &Limits::default()).expect("gds");
            add("gcd_45nm", &lib, Some(real.clone()), true);
        }
        Err(_) => eprintln!("SKIP: {} absent", real.display()),
    }
    let spec: Vec<String> = pairs
        .iter()
        .map(|(_, s, o, _)| format!("{},{}", s.display(), o.display()))
        .collect();
    let json = dir.path().join("compare.json");
    common::run_klayout_script(
        &bin,
        "compare_oasis.py",
        &[
            format!("pairs={}", spec.join(";")),
            format!("outfile={}", json.display()),
        ],
    );
    let facts: Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("parse");
    for (name, _, oas, same_instances) in &pairs {
        let f = &facts[oas.display().to_string()];
        assert!(
            f.get("error").is_none(),
            "{name}: KLayout could not read our OASIS: {}",
            f["error"]
        );
        let (s, w) = (&f["source"], &f["written"]);
        assert_eq!(s["cells"], w["cells"], "{name}: cells");
        assert_eq!(s["tops"], w["tops"], "{name}: top cells");
        assert_eq!(s["placements"], w["placements"], "{name}: placements");
        if *same_instances {
            assert_eq!(s["instances"], w["instances"], "{name}: instances");
        }
        assert!(f.get("missing_tops").is_none(), "{name}: {f}");
        let layers = f["layers"].as_object().expect("layers");
        assert!(!layers.is_empty(), "{name}: no layers compared");
        let mut polygons = 0;
        for (layer, v) in layers {
            assert_eq!(v["xor"], 0, "{name} {layer}: XOR not empty");
            assert_eq!(
                v["source_texts"], v["written_texts"],
                "{name} {layer}: texts"
            );
            polygons += v["source_polygons"].as_u64().expect("count");
        }
        assert!(polygons > 0, "{name}: nothing compared");
        eprintln!(
            "{name}: KLayout: {} cells, {} instances, {} layers, {polygons} polygons, XOR empty",
            s["cells"].as_array().map_or(0, Vec::len),
            w["instances"],
            layers.len()
        );
    }
}
