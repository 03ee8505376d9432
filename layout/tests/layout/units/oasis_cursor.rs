//! Unit tests of `reticle_layout::oasis::cursor`: integers, reals, deltas, point lists, repetitions.

use reticle_layout::OasisError;
use reticle_layout::oasis::cursor::*;

fn cur(b: &[u8]) -> Cursor<'_> {
    Cursor::new(b, false)
}

#[test]
fn integers() {
    assert_eq!(cur(&[0x00]).uint(), Ok(0));
    assert_eq!(cur(&[0x7f]).uint(), Ok(127));
    assert_eq!(cur(&[0x80, 0x01]).uint(), Ok(128));
    assert_eq!(cur(&[0xff, 0x7f]).uint(), Ok(16383));
    assert_eq!(cur(&[0x03]).sint(), Ok(-1));
    assert_eq!(cur(&[0x04]).sint(), Ok(2));
    let max = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
    assert_eq!(cur(&max).uint(), Ok(u64::MAX));
    let over = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
    assert!(matches!(
        cur(&over).uint(),
        Err(OasisError::IntegerOverflow { .. })
    ));
    // Redundant zero continuation bytes are legal.
    assert_eq!(
        cur(&[
            0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00
        ])
        .uint(),
        Ok(1)
    );
    assert!(matches!(
        cur(&[0x80]).uint(),
        Err(OasisError::Truncated { .. })
    ));
}

#[test]
fn reals_all_eight_forms() {
    assert_eq!(cur(&[0, 5]).real(), Ok(5.0));
    assert_eq!(cur(&[1, 5]).real(), Ok(-5.0));
    assert_eq!(cur(&[2, 4]).real(), Ok(0.25));
    assert_eq!(cur(&[3, 4]).real(), Ok(-0.25));
    assert_eq!(cur(&[4, 3, 4]).real(), Ok(0.75));
    assert_eq!(cur(&[5, 3, 4]).real(), Ok(-0.75));
    let mut f = vec![6];
    f.extend_from_slice(&1.5f32.to_le_bytes());
    assert_eq!(cur(&f).real(), Ok(1.5));
    let mut d = vec![7];
    d.extend_from_slice(&(-2.125f64).to_le_bytes());
    assert_eq!(cur(&d).real(), Ok(-2.125));
    assert!(cur(&[2, 0]).real().is_err(), "1/0 is not a real");
    assert!(cur(&[8, 0]).real().is_err());
}

#[test]
fn gdeltas() {
    // form 1: direction NE (4), magnitude 3: (3 << 4) | (4 << 1)
    assert_eq!(cur(&[(3 << 4) | (4 << 1)]).gdelta(), Ok((3, 3)));
    // form 2: x = -5, y = +7
    assert_eq!(cur(&[(5 << 2) | 2 | 1, 14]).gdelta(), Ok((-5, 7)));
}

#[test]
fn point_lists() {
    let mut ok = |_: u64| Ok(());
    // type 0, 2 deltas: +10 horizontal, +5 vertical -> rectangle with implicit vertex
    let r = cur(&[0, 2, 20, 10]).point_list(true, &mut ok);
    assert_eq!(r, Ok(vec![(0, 0), (10, 0), (10, 5), (0, 5)]));
    let p = cur(&[1, 2, 20, 10]).point_list(false, &mut ok);
    assert_eq!(p, Ok(vec![(0, 0), (0, 10), (5, 10)]));
    // type 2: east 4 (4<<2|0), north 3 (3<<2|1)
    assert_eq!(
        cur(&[2, 2, 16, 13]).point_list(true, &mut ok),
        Ok(vec![(0, 0), (4, 0), (4, 3)])
    );
    // type 3: SE 2 = (2<<3)|7
    assert_eq!(
        cur(&[3, 1, 23]).point_list(true, &mut ok),
        Ok(vec![(0, 0), (2, -2)])
    );
    // type 5: double deltas (1,0),(1,0) -> steps (1,0),(2,0)
    let e1 = 1 << 4; // form 1, east, magnitude 1
    assert_eq!(
        cur(&[5, 2, e1, e1]).point_list(false, &mut ok),
        Ok(vec![(0, 0), (1, 0), (3, 0)])
    );
    // An absurd count fails by truncation, not by allocating.
    assert!(
        cur(&[4, 0xff, 0xff, 0xff, 0xff, 0x0f])
            .point_list(true, &mut ok)
            .is_err()
    );
}

#[test]
fn repetitions() {
    let mut ok = |_: u64| Ok(());
    assert_eq!(
        // x-dim 1, y-dim 0 -> 3 x 2 copies
        cur(&[1, 0, 2, 10])
            .repetition(1, &mut ok)
            .map(|r| r.count()),
        Ok(3 * 2)
    );
    assert_eq!(
        cur(&[1, 5, 7]).repetition(4, &mut ok),
        Ok(Rep::List(vec![(0, 0), (5, 0), (12, 0)]))
    );
    assert_eq!(
        cur(&[0, 2, 3]).repetition(7, &mut ok),
        Ok(Rep::List(vec![(0, 0), (0, 6)]))
    );
    let mut deny = |n: u64| {
        Err(OasisError::LimitExceeded {
            what: "x",
            limit: n,
        })
    };
    assert!(cur(&[0xff, 0xff, 0x03]).repetition(10, &mut deny).is_err());
}
