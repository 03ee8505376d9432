//! Unit tests of `reticle_eval::tile`: tiled evaluation against the whole-layout check.

use std::collections::BTreeMap;

use reticle_kernel::CancelToken;
use reticle_kernel::raster::PixelFrame;
use reticle_kernel::rules::{Region, Rule, check_rule};
use reticle_layout::{BBox, Polygon};
use reticle_protocol::ToolError;

use reticle_eval::found::from_violation;
use reticle_eval::tiles::{TileGrid, touches};
use reticle_kernel::rules::RuleDeck;
use reticle_layout::clip::clip_polygon;

use reticle_eval::found::Found;
use reticle_eval::tile::pixels::pixels_in;
use reticle_eval::tile::*;

/// Every polygon in memory; boxes clip them as the worker's flatten does.
struct VecSource {
    target: Vec<Polygon>,
}

impl LayoutSource for VecSource {
    fn polygons(&mut self, b: BBox, whole: bool) -> Result<LayerPolygons, ToolError> {
        let target = self
            .target
            .iter()
            .filter(|p| p.bbox().is_some_and(|pb| touches(&pb, &b)))
            .filter_map(|p| {
                if whole {
                    Some(p.clone())
                } else {
                    clip_polygon(p, &b)
                }
            })
            .collect();
        Ok(LayerPolygons {
            target,
            context: BTreeMap::new(),
            mask: None,
        })
    }

    fn extent(&self) -> Option<BBox> {
        self.target
            .iter()
            .filter_map(Polygon::bbox)
            .reduce(|a, b| a.union(&b))
    }
}

fn rect(l: i64, b: i64, r: i64, t: i64) -> Polygon {
    Polygon::rect(BBox {
        left: l,
        bottom: b,
        right: r,
        top: t,
    })
}

fn deck() -> RuleDeck {
    RuleDeck::from_json(
        r#"{"name": "t", "version": "1", "layers": {"M1": "1/0"},
            "defaults": {"severity": "error", "applies_to": "mask", "dedup_radius_nm": 0},
            "rules": [
              {"id": "W", "kind": "width", "layer": "M1", "value": 65},
              {"id": "S", "kind": "space", "layer": "M1", "value": 65},
              {"id": "A", "kind": "area", "layer": "M1", "value": 6500}
            ]}"#,
    )
    .unwrap()
}

/// The mask violations of every tile of `region`, and the whole layout's own check
/// (violations touching the region), as comparable lists.
fn tiled_and_whole(polygons: Vec<Polygon>, region: BBox) -> (Vec<Found>, Vec<Found>, u32) {
    let deck = deck();
    let rules: Vec<&Rule> = deck.rules.iter().collect();
    // 1 nm dbu, a 512 nm period with a 128 nm halo: 256 nm cores, so shapes cross many.
    let grid = TileGrid::new(512.0, 128.0, 4.0, 1.0).unwrap();
    let range = grid.covering(region);
    let mut source = VecSource {
        target: polygons.clone(),
    };
    let mut tiled = Vec::new();
    let mut growths = 0;
    for tile in range.iter() {
        let job = TileJob {
            grid: &grid,
            range: &range,
            region,
            tile,
            rules: &rules,
            statistics: false,
        };
        let out = evaluate_tile(&job, None, &mut source, &CancelToken::new()).unwrap();
        growths += out.mask_box_growths;
        tiled.extend(out.found);
    }
    let merged = Region::from_polygons(&polygons);
    let mut whole = Vec::new();
    for (i, rule) in rules.iter().enumerate() {
        for v in check_rule(rule, &merged, None, 1.0).unwrap() {
            if touches(&v.bbox, &region) {
                whole.push(from_violation(i, &canonical(v), 1.0));
            }
        }
    }
    let key = |f: &Found| (f.rule, f.at_pm, f.bbox, f.marker.sort_key());
    tiled.sort_by_key(key);
    whole.sort_by_key(key);
    (tiled, whole, growths)
}

#[test]
fn a_long_narrow_wire_is_one_violation_owned_by_one_tile() {
    // 50 nm wide, 3 µm long: it crosses a dozen 256 nm cores and every window.
    let (tiled, whole, growths) = tiled_and_whole(
        vec![rect(100, 300, 3100, 350), rect(0, 0, 200, 200)],
        BBox {
            left: 0,
            bottom: 0,
            right: 3200,
            top: 600,
        },
    );
    assert_eq!(whole.len(), 1, "{whole:?}");
    assert_eq!(tiled, whole);
    assert!(
        growths > 0,
        "the wire is longer than a window: the box had to grow"
    );
}

#[test]
fn cut_shapes_at_a_window_edge_are_not_violations() {
    // Wide shapes crossing every window edge: clipped slivers would fail width and area.
    let polygons: Vec<Polygon> = (0..6)
        .map(|i| rect(i * 300 + 17, 5, i * 300 + 250, 1500))
        .chain([rect(0, 1600, 2000, 1700)])
        .collect();
    let (tiled, whole, _) = tiled_and_whole(
        polygons,
        BBox {
            left: 0,
            bottom: 0,
            right: 2000,
            top: 1800,
        },
    );
    assert!(whole.is_empty(), "{whole:?}");
    assert!(tiled.is_empty(), "{tiled:?}");
}

#[test]
fn small_areas_and_spaces_straddling_tile_corners_are_reported_once() {
    let polygons = vec![
        // 60 × 60 squares centred on a core corner (256, 256) and on a core edge.
        rect(226, 226, 286, 286),
        rect(482, 100, 542, 160),
        // Two wires 40 nm apart across the core edge x = 768.
        rect(600, 400, 760, 480),
        rect(800, 400, 1000, 480),
    ];
    let (tiled, whole, _) = tiled_and_whole(
        polygons,
        BBox {
            left: 0,
            bottom: 0,
            right: 1100,
            top: 600,
        },
    );
    assert!(whole.len() >= 5, "{whole:?}");
    assert_eq!(tiled, whole);
}

#[test]
fn random_manhattan_layouts_tile_to_the_whole_layout_check() {
    // A reproducible pseudo-random layout (SplitMix64) of wires and blobs.
    let mut state = 7u64;
    let mut next = move |n: i64| {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) % n as u64) as i64
    };
    for _ in 0..12 {
        let polygons: Vec<Polygon> = (0..100)
            .map(|_| {
                let (x, y) = (next(2400), next(2400));
                let (w, h) = if next(2) == 0 {
                    (40 + next(900), 40 + next(60))
                } else {
                    (40 + next(60), 40 + next(900))
                };
                rect(x, y, x + w, y + h)
            })
            .collect();
        // A region inside the layout: shapes beyond it are context, not cut edges.
        let region = BBox {
            left: 300,
            bottom: 200,
            right: 2100,
            top: 2300,
        };
        let (tiled, whole, _) = tiled_and_whole(polygons, region);
        for f in whole.iter().filter(|f| !tiled.contains(f)) {
            eprintln!("missing: {f:?}");
        }
        for f in tiled.iter().filter(|f| !whole.contains(f)) {
            eprintln!("extra: {f:?}");
        }
        assert_eq!(tiled.len(), whole.len());
        assert_eq!(tiled, whole);
    }
}

#[test]
fn a_region_edge_is_not_a_polygon_edge() {
    // A 200 nm wide shape the region's edge cuts to 30 nm: no width or area violation.
    let (tiled, whole, _) = tiled_and_whole(
        vec![rect(970, 100, 1170, 900)],
        BBox {
            left: 0,
            bottom: 0,
            right: 1000,
            top: 1000,
        },
    );
    assert!(whole.is_empty(), "{whole:?}");
    assert!(tiled.is_empty(), "{tiled:?}");
}

#[test]
fn empty_tiles_count_their_pixels_in_the_region() {
    let deck = deck();
    let rules: Vec<&Rule> = deck.rules.iter().collect();
    let grid = TileGrid::new(512.0, 128.0, 4.0, 1.0).unwrap();
    let region = BBox {
        left: 10,
        bottom: 0,
        right: 300,
        top: 256,
    };
    let range = grid.covering(region);
    let mut source = VecSource { target: vec![] };
    let mut pixels = 0;
    for tile in range.iter() {
        let job = TileJob {
            grid: &grid,
            range: &range,
            region,
            tile,
            rules: &rules,
            statistics: false,
        };
        let out = evaluate_tile(&job, None, &mut source, &CancelToken::new()).unwrap();
        assert!(!out.metrics.imaged && out.found.is_empty());
        pixels += out.metrics.pixels;
    }
    // Pixel centres at 2, 6, 10, …: x from 10 to 298 (73 columns), y 64 rows.
    assert_eq!(pixels, 73 * 64);
}

#[test]
fn the_counted_pixel_rectangle_is_the_pixels_whose_centre_is_in_the_box() {
    let grid = TileGrid::new(512.0, 128.0, 4.0, 1.0).unwrap();
    let frame = PixelFrame {
        left_nm: -128.0,
        bottom_nm: 256.0,
        pixel_nm: 4.0,
        width: 128,
        height: 128,
    };
    for b in [
        BBox {
            left: 0,
            bottom: 256,
            right: 256,
            top: 512,
        },
        BBox {
            left: 3,
            bottom: 300,
            right: 101,
            top: 301,
        },
        BBox {
            left: -500,
            bottom: -500,
            right: 5000,
            top: 5000,
        },
        BBox {
            left: 2,
            bottom: 258,
            right: 2,
            top: 262,
        },
    ] {
        let (x0, x1, y0, y1) = pixels_in(&frame, 4.0, &b);
        let brute: Vec<(usize, usize)> = (0..128)
            .flat_map(|y| (0..128).map(move |x| (x, y)))
            .filter(|&(x, y)| {
                grid.pixel_centre_in(-128.0 + 4.0 * x as f64, 256.0 + 4.0 * y as f64, &b)
            })
            .collect();
        let rect: Vec<(usize, usize)> = (y0..y1)
            .flat_map(|y| (x0..x1).map(move |x| (x, y)))
            .collect();
        let mut brute_sorted = brute.clone();
        brute_sorted.sort_by_key(|&(x, y)| (y, x));
        assert_eq!(rect, brute_sorted, "{b:?}");
    }
}

#[test]
fn a_tile_reads_half_its_halo_only_for_printed_contours() {
    // 1 nm pixels, 0.1 nm dbu, the default model's halo (429 nm) and 60 nm EPE search.
    let grid = TileGrid::new(2048.0, 429.0, 1.0, 0.1).unwrap();
    let mask = deck();
    let mask_rules: Vec<&Rule> = mask.rules.iter().collect();
    // Mask rules only: the EPE search and two pixels (D197).
    assert_eq!(image_reach_dbu(&grid, &mask_rules), 600 + 20);
    let printed = RuleDeck::from_json(
        r#"{"name": "p", "version": "1", "layers": {"M1": "1/0"},
            "defaults": {"severity": "error", "applies_to": "printed", "dedup_radius_nm": 0},
            "rules": [{"id": "PW", "kind": "width", "layer": "M1", "value": 40}]}"#,
    )
    .unwrap();
    let mut both = mask_rules.clone();
    both.extend(printed.rules.iter());
    // A printed-contour rule: half the halo (D193).
    assert_eq!(image_reach_dbu(&grid, &both), grid.halo_dbu / 2);
    assert!(grid.halo_dbu / 2 > 620);
}
