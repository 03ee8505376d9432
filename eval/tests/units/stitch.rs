//! Unit tests of `reticle_eval::stitch`: joining pieces of a violation across tiles.

use reticle_layout::{BBox, Point};

use reticle_eval::stitch::*;
use reticle_eval::tile::Piece;
use reticle_eval::tiles::TileIndex;
use serde_json::json;

fn piece(rule: usize, ix: i64, segments: Vec<[i64; 4]>) -> Piece {
    let bbox = segments
        .iter()
        .map(|s| BBox::from_corners(Point::new(s[0], s[1]), Point::new(s[2], s[3])))
        .reduce(|a, b| a.union(&b))
        .unwrap();
    Piece {
        rule,
        tile: TileIndex { ix, iy: 0 },
        measured: 40.0 + ix as f64,
        segments,
        bbox,
    }
}

#[test]
fn pieces_of_a_long_violation_across_three_tiles_join_into_one() {
    // A printed line 40 nm wide from x = 500 to 2600, cut at x = 1024 and 2048.
    let pieces = vec![
        piece(0, 1, vec![[1024, 100, 2048, 100], [2048, 140, 1024, 140]]),
        piece(0, 0, vec![[500, 100, 1024, 100], [1024, 140, 500, 140]]),
        piece(0, 2, vec![[2048, 100, 2600, 100], [2600, 141, 2048, 141]]),
        // Another rule's piece at the same place stays apart.
        piece(1, 0, vec![[500, 100, 1024, 100]]),
        // A piece of the same rule far away is another violation.
        piece(0, 9, vec![[9000, 100, 9300, 100], [9300, 140, 9000, 140]]),
    ];
    let joined = join(&pieces, 1.0, 2);
    assert_eq!(joined.len(), 3);
    let long = &joined[0];
    assert_eq!(
        (long.rule, long.bbox),
        (
            0,
            BBox {
                left: 500,
                bottom: 100,
                right: 2600,
                top: 141
            }
        )
    );
    assert_eq!(long.measured, Some(40.0));
    assert_eq!(
        json!(long.marker)["first"],
        json!([[500.0, 100.0], [2600.0, 100.0]])
    );
    assert_eq!(
        json!(long.marker)["second"],
        json!([[500.0, 140.0], [2600.0, 141.0]])
    );
    assert_eq!(
        json!(long.marker)["joined_from_tiles"],
        json!(["T_0_0", "T_1_0", "T_2_0"])
    );
    let mut reversed = pieces.clone();
    reversed.reverse();
    assert_eq!(
        join(&reversed, 1.0, 2),
        joined,
        "independent of the input order"
    );
}

#[test]
fn a_pair_kept_whole_by_two_tiles_joins_once() {
    // The pair's midline runs along a tile edge: both tiles keep the whole pair.
    let both = vec![[0, 100, 900, 100], [900, 140, 0, 140]];
    let pieces = vec![
        piece(0, 0, both.clone()),
        Piece {
            tile: TileIndex { ix: 0, iy: 1 },
            ..piece(0, 0, both)
        },
    ];
    let joined = join(&pieces, 1.0, 2);
    assert_eq!(joined.len(), 1);
    assert_eq!(
        json!(joined[0].marker)["first"],
        json!([[0.0, 100.0], [900.0, 100.0]])
    );
    assert_eq!(
        json!(joined[0].marker)["second"],
        json!([[0.0, 140.0], [900.0, 140.0]])
    );
}
