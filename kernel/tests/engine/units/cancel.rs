//! Unit tests of cancellation tokens (`reticle_kernel::cancel`).

use reticle_kernel::cancel::{CancelToken, Cancelled};

#[test]
fn clones_share_the_flag() {
    let a = CancelToken::new();
    let b = a.clone();
    assert!(a.check().is_ok());
    b.cancel();
    assert_eq!(a.check(), Err(Cancelled));
}
