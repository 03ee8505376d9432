//! The L2 and PVB that `optimize` reports for a mask equal an independent re-simulation of
//! the GDSII it wrote (issue 26): the file is read back, its polygons rasterised with exact
//! area coverage on the clip's grid and imaged at the ICCAD-2013 corners through the
//! engine's naive full-size path (not the band-limited path the optimizer and the report
//! use).

use reticle_kernel::naive;
use reticle_kernel::raster::rasterize_in;
use reticle_kernel::{CancelToken, KeepImages, LithoJob, Resist, iccad};
use reticle_layout::{LayerKey, Polygon, Shape, read_gds};
use reticle_tests::Host;
use serde_json::json;
use std::time::Duration;

#[test]
fn reported_metrics_equal_a_naive_resimulation_of_the_written_gdsii() {
    let dir = reticle_tests::data_dir().join("iccad13");
    assert!(
        dir.join("kernels/focus.npy").is_file(),
        "the ICCAD-2013 reference data is required at {} (set RETICLE_DATA_DIR)",
        dir.display()
    );
    let clip_path = dir.join("layouts/M1_test2.glp");
    let tmp = tempfile::tempdir().unwrap();
    let roots = format!("{}:{}", dir.display(), tmp.path().display());
    let artifacts = tmp.path().join("artifacts");
    let mut host = Host::start_initialized(&[
        ("RETICLE_ALLOWED_ROOTS", roots.as_str()),
        ("RETICLE_BACKEND", "cpu"),
        ("KLAYOUT_MCP_ARTIFACT_ROOT", artifacts.to_str().unwrap()),
    ]);
    for style in ["curvilinear", "manhattan"] {
        // A synchronous optimize sends no line until it ends: seconds alone, longer while
        // the rest of the end-to-end suite shares the two cores.
        let r = host.call_tool_within(
            style,
            "optimize",
            json!({
                "layout": clip_path.display().to_string(),
                "deck": "iccad13_m1",
                "model": {"kind": "kernels", "dir": dir.join("kernels").display().to_string()},
                "mask_style": style,
                "wait": true,
                "render": "json",
            }),
            Duration::from_secs(120),
        );
        let out = &r["structuredContent"];
        assert_ne!(r["isError"], true, "{out}");
        assert_eq!(out["mask_rules"]["records"], 0, "{out}");

        let gds = std::fs::read(out["state_after"]["mask_gds"]["path"].as_str().unwrap()).unwrap();
        let lib = read_gds(&gds, &reticle_layout::Limits::default()).unwrap();
        let polygons: Vec<Polygon> = lib.cells[0]
            .shapes
            .get(&LayerKey::new(1, 0))
            .into_iter()
            .flatten()
            .filter_map(|s| match s {
                Shape::Polygon(p) => Some(p.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(
            polygons.len() as u64,
            out["state_after"]["polygons"]["gds_polygons"]
                .as_u64()
                .unwrap()
        );
        let clip = iccad::load_clip(&clip_path).unwrap();
        let mask = rasterize_in(&polygons, &clip.frame);
        let (_, _, corners) = iccad::corners(&dir).unwrap();
        let job = LithoJob {
            mask: &mask,
            target: Some(&clip.target),
            corners: &corners,
            resist: Resist::ICCAD2013,
            keep: KeepImages {
                printed: true,
                ..KeepImages::default()
            },
        };
        let again = naive::litho(&job, &CancelToken::new()).unwrap();
        let after = &out["metrics"]["after"];
        assert_eq!(
            again.l2,
            after["l2_px"].as_u64(),
            "{style}: L2 of the re-read mask"
        );
        assert_eq!(
            again.pvb,
            after["pvb_px"].as_u64(),
            "{style}: PVB of the re-read mask"
        );
        assert!(again.l2.unwrap() < out["metrics"]["before"]["l2_px"].as_u64().unwrap());
    }
}
