//! Unit tests of the binary morphology of mask-rule legalization (`reticle_kernel::mrc::morph`).

use reticle_kernel::Grid;
use reticle_kernel::mrc::morph::{
    FAR, close_disk, close_square, components, open_disk, open_square, sq_distance,
};

fn grid(rows: &[&str]) -> Grid<u8> {
    let h = rows.len();
    let w = rows[0].len();
    let mut g = Grid::filled(w, h, 0u8);
    for (r, line) in rows.iter().enumerate() {
        for (x, c) in line.chars().enumerate() {
            *g.at_mut(x, h - 1 - r) = u8::from(c == '#');
        }
    }
    g
}

#[test]
fn the_distance_transform_equals_brute_force() {
    let mut g = Grid::filled(23, 17, 0u8);
    for (i, v) in g.data.iter_mut().enumerate() {
        *v = u8::from((i * 7919) % 13 == 0);
    }
    let d = sq_distance(&g, 1);
    for y in 0..17usize {
        for x in 0..23usize {
            let mut best = FAR;
            for yy in 0..17usize {
                for xx in 0..23usize {
                    if *g.at(xx, yy) != 0 {
                        let dx = x as f64 - xx as f64;
                        let dy = y as f64 - yy as f64;
                        best = best.min(dx * dx + dy * dy);
                    }
                }
            }
            assert_eq!(d[y * 23 + x], best, "({x}, {y})");
        }
    }
}

#[test]
fn opening_removes_a_thin_line_and_keeps_a_wide_bar() {
    let mut g = Grid::filled(40, 40, 0u8);
    for y in 5..35 {
        for x in 5..8 {
            *g.at_mut(x, y) = 1; // 3 px wide
        }
        for x in 15..30 {
            *g.at_mut(x, y) = 1; // 15 px wide
        }
    }
    let o = open_disk(&g, 4.0);
    assert!((5..8).all(|x| *o.at(x, 20) == 0));
    assert!((15..30).all(|x| *o.at(x, 20) == 1));
    let s = open_square(&g, 6);
    assert!((5..8).all(|x| *s.at(x, 20) == 0));
    assert_eq!(
        s.data.iter().filter(|&&v| v != 0).count(),
        15 * 30,
        "a square opening keeps a wide rectangle exactly"
    );
}

#[test]
fn closing_fills_a_narrow_gap_and_keeps_a_wide_one() {
    let g = grid(&[
        "##########..##########......##########",
        "##########..##########......##########",
        "##########..##########......##########",
        "##########..##########......##########",
    ]);
    let c = close_square(&g, 4);
    assert_eq!(*c.at(10, 1), 1, "the 2-px gap is filled");
    assert_eq!(*c.at(24, 1), 0, "the 6-px gap stays");
    let d = close_disk(&g, 2.0);
    assert_eq!(*d.at(10, 1), 1);
    assert_eq!(*d.at(24, 1), 0);
}

#[test]
fn components_are_four_connected() {
    let g = grid(&["#..#", "#.#.", "##.."]);
    let (_, sizes) = components(&g);
    assert_eq!(
        sizes.len() - 1,
        3,
        "two diagonal pixels are separate components"
    );
    assert_eq!(sizes[1..].iter().sum::<usize>(), 6);
}
