//! Reused buffers for the engine's large per-window intermediates (D195).
//!
//! A whole-layout worker images hundreds of windows of one size, one after another. Each
//! window's intermediates (the upsampled intensity of each kernel set, the spectra of the
//! mask band and of the upsampling) are megabytes; allocated afresh, every one of them is
//! mapped, faulted in page by page and unmapped again, window after window (glibc maps
//! every block over 128 KiB). Here a finished window hands its buffers back ([`give`])
//! and the next one takes them ([`take`]): the same memory, already resident.
//!
//! The pool is bounded: at most [`KEPT`] buffers of each element type, the largest kept
//! when more are given back, so what it holds is at most the working set of the largest
//! window imaged so far, however many windows follow (the worker's memory stays flat in
//! the tile count). A taken buffer's content is unspecified: callers overwrite what they
//! read (or ask for [`take_zeroed`]).

use std::sync::Mutex;

use num_complex::Complex64;

/// Most buffers of one element type the pool keeps.
pub const KEPT: usize = 6;

/// An element type the pool holds buffers of.
pub trait Reusable: Copy + Default + Send + 'static {
    /// The pool of this type.
    fn pool() -> &'static Mutex<Vec<Vec<Self>>>;
}

macro_rules! reusable {
    ($($t:ty),*) => {$(
        impl Reusable for $t {
            fn pool() -> &'static Mutex<Vec<Vec<Self>>> {
                static POOL: Mutex<Vec<Vec<$t>>> = Mutex::new(Vec::new());
                &POOL
            }
        }
    )*};
}
reusable!(f32, f64, u8, Complex64);

/// A buffer of `len` elements whose content is unspecified (a pooled buffer's old values,
/// or `T::default()` where it had to grow): a pooled buffer of exactly that length (a
/// worker's windows ask for the same few lengths over and over, so in the steady state
/// nothing is written before the caller writes), else the smallest that holds `len`
/// without growing, else a new one.
#[must_use]
pub fn take<T: Reusable>(len: usize) -> Vec<T> {
    let found = T::pool().lock().ok().and_then(|mut pool| {
        let exact = pool.iter().position(|v| v.len() == len);
        let best = exact.or_else(|| {
            pool.iter()
                .enumerate()
                .filter(|(_, v)| v.capacity() >= len)
                .min_by_key(|(_, v)| v.capacity())
                .map(|(i, _)| i)
        })?;
        Some(pool.swap_remove(best))
    });
    let mut v = found.unwrap_or_default();
    if v.len() < len {
        v.resize(len, T::default());
    } else {
        v.truncate(len);
    }
    v
}

/// [`take`], every element `T::default()`.
#[must_use]
pub fn take_zeroed<T: Reusable>(len: usize) -> Vec<T> {
    let mut v = take(len);
    v.fill(T::default());
    v
}

/// Hands a buffer back for a later [`take`]. With [`KEPT`] buffers of its type pooled
/// already, the smallest of them all is dropped.
pub fn give<T: Reusable>(v: Vec<T>) {
    if v.capacity() == 0 {
        return;
    }
    let Ok(mut pool) = T::pool().lock() else {
        return;
    };
    pool.push(v);
    if pool.len() > KEPT
        && let Some(smallest) = pool
            .iter()
            .enumerate()
            .min_by_key(|(_, v)| v.capacity())
            .map(|(i, _)| i)
    {
        pool.swap_remove(smallest);
    }
}

/// Bytes the pool of `T` holds now.
#[must_use]
pub fn held_bytes<T: Reusable>() -> usize {
    T::pool().lock().map_or(0, |pool| {
        pool.iter()
            .map(|v| v.capacity() * std::mem::size_of::<T>())
            .sum()
    })
}
