//! A parallel sum whose rounding does not depend on the thread count (D238).
//!
//! rayon's `try_fold` + `try_reduce` split their range by the pool's size and by work
//! stealing, so an `f64` sum over kernels was added in an order that depended on how many
//! threads the worker had and on timing. [`in_halves`] always adds in one order: the range
//! is cut once in the middle, each half is folded in index order from a fresh accumulator,
//! and the right half's sum is added into the left's. That is the order a one-thread rayon
//! pool used (one split at `len / 2`, then no more), so a pool worker's results keep their
//! bits, and a worker with more threads now gets the same bits.

/// Folds `0..len` with `step` into accumulators made by `zero`: `0..len / 2` and
/// `len / 2..len` in parallel, each in index order, then `add(left, right)` (one fold, no
/// `add`, when `len < 2`).
///
/// # Errors
/// The first error `step` returns.
pub fn in_halves<A, E>(
    len: usize,
    zero: impl Fn() -> A + Sync,
    step: impl Fn(A, usize) -> Result<A, E> + Sync,
    add: impl FnOnce(A, A) -> A,
) -> Result<A, E>
where
    A: Send,
    E: Send,
{
    let fold = |range: std::ops::Range<usize>| range.into_iter().try_fold(zero(), &step);
    if len < 2 {
        return fold(0..len);
    }
    let mid = len / 2;
    let (left, right) = rayon::join(|| fold(0..mid), || fold(mid..len));
    Ok(add(left?, right?))
}
