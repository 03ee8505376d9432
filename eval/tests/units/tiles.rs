//! Unit tests of `reticle_eval::tiles`: the tile grid and box helpers.

use reticle_layout::BBox;

use reticle_eval::tiles::*;

fn grid() -> TileGrid {
    // gcd_45nm: dbu 0.1 nm; the default model's 2048 nm period; 1 nm pixels; 512 nm halo.
    TileGrid::new(2048.0, 512.0, 1.0, 0.1).unwrap()
}

#[test]
fn the_window_is_the_period_and_cores_tile_the_plane() {
    let g = grid();
    assert_eq!(g.core_dbu, 10_240);
    assert_eq!(g.halo_dbu, 5_120);
    assert_eq!(g.window_dbu(), 20_480);
    let t = TileIndex { ix: -1, iy: 2 };
    assert_eq!(
        g.core(t),
        BBox {
            left: -10_240,
            bottom: 20_480,
            right: 0,
            top: 30_720
        }
    );
    assert_eq!(g.window(t).width(), 20_480);
    assert_eq!(g.core(TileIndex { ix: 0, iy: 2 }).left, g.core(t).right);
    assert_eq!(t.id(), "T_-1_2");
}

#[test]
fn the_halo_rounds_up_to_whole_pixels_and_bad_grids_are_refused() {
    let g = TileGrid::new(2048.0, 500.0, 8.0, 1.0).unwrap();
    assert_eq!(g.halo_dbu, 504);
    assert_eq!(g.core_dbu, 2048 - 2 * 504);
    assert!(TileGrid::new(2048.0, 1024.0, 1.0, 1.0).is_err(), "no core");
    assert!(
        TileGrid::new(2048.0, 256.0, 3.0, 1.0).is_err(),
        "period not whole pixels"
    );
    assert!(
        TileGrid::new(2048.0, 100.25, 0.5, 1.0).is_err(),
        "halo not whole dbu"
    );
    assert!(TileGrid::new(f64::NAN, 256.0, 1.0, 1.0).is_err());
}

#[test]
fn covering_is_half_open_and_rows_are_dispatched_bottom_up() {
    let g = grid();
    let r = g.covering(BBox {
        left: 11_400,
        bottom: 13_150,
        right: 317_300,
        top: 308_850,
    });
    assert_eq!((r.ix0, r.iy0, r.ix1, r.iy1), (1, 1, 30, 30));
    assert_eq!(r.count(), 900);
    let exact = g.covering(BBox {
        left: 0,
        bottom: 0,
        right: 10_240,
        top: 20_480,
    });
    assert_eq!((exact.ix1, exact.iy1), (0, 1));
    assert_eq!(r.nth(0), Some(TileIndex { ix: 1, iy: 1 }));
    assert_eq!(r.nth(30), Some(TileIndex { ix: 1, iy: 2 }));
    assert_eq!(r.nth(900), None);
    assert_eq!(r.iter().count(), 900);
    assert!(r.contains(TileIndex { ix: 30, iy: 30 }) && !r.contains(TileIndex { ix: 31, iy: 1 }));
}

#[test]
fn owners_are_the_tile_holding_the_location_clamped_to_the_range() {
    let g = grid();
    let r = TileRange {
        ix0: 1,
        iy0: 1,
        ix1: 3,
        iy1: 3,
    };
    // 1 dbu = 100 pm; the core is 1 024 000 pm.
    assert_eq!(
        g.owner(&r, (1_024_000, 2_500_000)),
        TileIndex { ix: 1, iy: 2 }
    );
    assert_eq!(
        g.owner(&r, (1_023_999, 2_500_000)),
        TileIndex { ix: 1, iy: 2 }
    );
    assert_eq!(g.owner(&r, (-5, 99_000_000)), TileIndex { ix: 1, iy: 3 });
    assert_eq!(
        g.owner(&r, (3_072_000, 1_024_000)),
        TileIndex { ix: 3, iy: 1 }
    );
}

#[test]
fn box_helpers() {
    let a = BBox {
        left: 0,
        bottom: 0,
        right: 10,
        top: 10,
    };
    let b = BBox {
        left: 10,
        bottom: 5,
        right: 20,
        top: 6,
    };
    assert!(touches(&a, &b));
    assert_eq!(
        intersection(&a, &b),
        Some(BBox {
            left: 10,
            bottom: 5,
            right: 10,
            top: 6
        })
    );
    assert!(!touches(
        &a,
        &BBox {
            left: 11,
            bottom: 0,
            right: 12,
            top: 1
        }
    ));
    assert_eq!(
        grow(a, 2),
        BBox {
            left: -2,
            bottom: -2,
            right: 12,
            top: 12
        }
    );
    let g = TileGrid::new(2048.0, 512.0, 2.0, 1.0).unwrap();
    assert!(g.pixel_centre_in(
        0.0,
        0.0,
        &BBox {
            left: 0,
            bottom: 0,
            right: 2,
            top: 2
        }
    ));
    assert!(!g.pixel_centre_in(
        2.0,
        0.0,
        &BBox {
            left: 0,
            bottom: 0,
            right: 2,
            top: 2
        }
    ));
}
