//! Unit tests of the thread-count-independent parallel sum (`reticle_kernel::fold`).

use rayon::prelude::*;
use reticle_kernel::fold::in_halves;

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
