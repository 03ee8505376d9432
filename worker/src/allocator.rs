//! The worker's heap between ops.
//!
//! Workers start with a 32 MiB mmap threshold and a 256 MiB trim threshold
//! (`reticle_dispatch::supervisor::WORKER_ALLOCATOR`), so the buffers an op allocates and
//! frees again and again stay in the heap while it runs. Between ops that free heap is
//! handed back, so the resident size after a job is what the worker keeps (layout index,
//! caches), not the largest job it ran, and it does not creep with the number of tiles
//! (docs/DECISIONS.md D191, D244).

/// Returns the heap's free pages to the system (glibc's `malloc_trim(0)`: the top of the
/// heap is released and free pages inside it are advised away). A no-op where the C
/// library is not glibc.
pub(crate) fn release_free_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: malloc_trim takes no pointer and touches only glibc's own heap, under the
    // heap's lock; it is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}
