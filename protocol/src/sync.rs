//! The one way host and worker code takes a mutex.
//!
//! A panic while a lock is held poisons the mutex; everything guarded in reticle stays
//! consistent between statements (tables, counters, caches), so the next user takes the
//! data as it is instead of propagating the panic into every later call.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, taking the data of a poisoned one as it is.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_mutex_still_locks() {
        let m = std::sync::Arc::new(Mutex::new(1));
        let m2 = std::sync::Arc::clone(&m);
        let _ = std::thread::spawn(move || {
            let _guard = m2.lock().unwrap();
            panic!("poison it");
        })
        .join();
        assert!(m.is_poisoned());
        *lock(&m) += 1;
        assert_eq!(*lock(&m), 2);
    }
}
