//! Unit tests of the per-type buffer pool (`reticle_kernel::scratch`).

use reticle_kernel::scratch::{KEPT, Reusable, give, take, take_zeroed};

#[test]
fn a_given_buffer_comes_back_and_the_pool_stays_bounded() {
    // u8 is used by no engine path that runs in this test binary concurrently with
    // checks on its size; still, only relations that hold under sharing are checked.
    let v = take::<u8>(1000);
    assert_eq!(v.len(), 1000);
    let ptr = v.as_ptr();
    give(v);
    let again = take::<u8>(900);
    assert_eq!(again.len(), 900);
    assert_eq!(again.as_ptr(), ptr, "the pooled buffer is reused");
    give(again);
    for _ in 0..3 * KEPT {
        give(vec![1u8; 10]);
    }
    assert!(u8::pool().lock().unwrap().len() <= KEPT);
    let z = take_zeroed::<u8>(2000);
    assert!(z.iter().all(|&b| b == 0));
}
