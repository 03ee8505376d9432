//! The fan-out's progress line (`src/fanout.rs`).

use std::time::Instant;

use reticle_dispatch::fanout::progress_message;

#[test]
fn progress_says_the_time_left_at_the_rate_so_far() {
    let started = Instant::now() - std::time::Duration::from_secs(10);
    assert_eq!(progress_message(0, 40, started), "tile 0/40");
    assert_eq!(
        progress_message(10, 40, started),
        "tile 10/40, about 30 s left"
    );
}

#[test]
fn a_large_wave_groups_its_tiles_and_a_small_one_does_not() {
    use reticle_dispatch::fanout::tiles_per_unit;
    // 702 tiles on 2 workers: the op's limit.
    assert_eq!(tiles_per_unit(702, 2, 8), 8);
    // An op that takes one tile a unit (no `unit_tiles`), whatever the wave.
    assert_eq!(tiles_per_unit(702, 2, 1), 1);
    // Each worker keeps at least 16 units: 100 tiles on 2 workers, 3 a unit.
    assert_eq!(tiles_per_unit(100, 2, 8), 3);
    // A small wave (the tiled optimize's), or a wide pool: one tile a unit.
    assert_eq!(tiles_per_unit(9, 2, 8), 1);
    assert_eq!(tiles_per_unit(702, 64, 8), 1);
    // Degenerate inputs stay at one.
    assert_eq!(tiles_per_unit(0, 0, 0), 1);
}
