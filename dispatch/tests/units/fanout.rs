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
