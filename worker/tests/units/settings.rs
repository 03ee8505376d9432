//! Unit tests of the worker's settings from its environment (`reticle_worker::settings`).

use std::ffi::OsString;
use std::path::PathBuf;

use reticle_kernel::gpu::BackendPref;
use reticle_protocol::wire::{WORKER_SOCKET_ENV, WORKER_THREADS_ENV};
use reticle_worker::settings::{ARRAY_TASK_ID_ENV, BACKEND_ENV, KERNEL_CACHE_ENV, Settings};

fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
    move |name| {
        pairs
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| OsString::from(v))
    }
}

#[test]
fn settings_come_from_the_lookup_with_their_defaults() {
    let none = Settings::from_lookup(env(&[("HOME", "/home/u")]));
    assert_eq!(none.backend, BackendPref::Auto);
    assert_eq!(
        none.kernel_cache,
        Some(PathBuf::from("/home/u/.cache/reticle/kernels"))
    );
    assert!(none.socket.is_none() && none.array_element.is_none());
    let set = Settings::from_lookup(env(&[
        (BACKEND_ENV, "cpu"),
        (KERNEL_CACHE_ENV, "off"),
        (WORKER_SOCKET_ENV, "/run/w.sock"),
        (ARRAY_TASK_ID_ENV, "3"),
    ]));
    assert_eq!(set.backend, BackendPref::Cpu);
    assert_eq!(set.kernel_cache, None);
    assert_eq!(set.socket, Some(OsString::from("/run/w.sock")));
    assert_eq!(set.array_element.as_deref(), Some("3"));
    assert_eq!(set.threads, None, "unset: every core");
    assert_eq!(
        Settings::from_lookup(env(&[(WORKER_THREADS_ENV, "3")])).threads,
        Some(3)
    );
    for unreadable in [
        &[(WORKER_THREADS_ENV, "0")],
        &[(WORKER_THREADS_ENV, "")],
        &[(WORKER_THREADS_ENV, "two")],
    ] {
        let bad = Settings::from_lookup(env(unreadable));
        assert_eq!(bad.threads, None, "{unreadable:?} is every core");
    }
    let bad = Settings::from_lookup(env(&[(BACKEND_ENV, "tpu")]));
    assert_eq!(bad.backend, BackendPref::Auto, "an unknown backend is auto");
}
