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
pub(crate) fn in_halves<A, E>(
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

#[cfg(test)]
mod tests {
    use super::*;
    use rayon::prelude::*;

    /// Terms whose sum rounds differently in different orders.
    fn terms(n: usize) -> Vec<f64> {
        (0..n)
            .map(|i| {
                let x = (i as f64 * 0.618_033_988_749).fract();
                x * 10f64.powi((i % 7) as i32 - 3)
            })
            .collect()
    }

    fn sum(t: &[f64]) -> f64 {
        in_halves(t.len(), || 0.0, |a, i| Ok::<_, ()>(a + t[i]), |a, b| a + b).unwrap()
    }

    #[test]
    fn the_sum_is_the_same_bits_on_every_pool_size() {
        let t = terms(48);
        let want = sum(&t);
        for threads in [1, 2, 3, 8] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            for _ in 0..20 {
                assert_eq!(pool.install(|| sum(&t)).to_bits(), want.to_bits());
            }
        }
    }

    #[test]
    fn it_adds_in_the_order_a_one_thread_rayon_pool_does() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        for n in [0, 1, 2, 3, 24, 48, 49] {
            let t = terms(n);
            let rayon_sum = pool.install(|| {
                (0..n)
                    .into_par_iter()
                    .try_fold(|| 0.0, |a, i| Ok::<_, ()>(a + t[i]))
                    .try_reduce(|| 0.0, |a, b| Ok(a + b))
                    .unwrap()
            });
            assert_eq!(sum(&t).to_bits(), rayon_sum.to_bits(), "{n} terms");
        }
    }

    #[test]
    fn an_error_stops_the_fold() {
        let r = in_halves(
            10,
            || 0,
            |a, i| if i == 7 { Err(i) } else { Ok(a + i) },
            |a, b| a + b,
        );
        assert_eq!(r, Err(7));
    }
}
