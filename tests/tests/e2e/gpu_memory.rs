//! Issue 4's GPU memory proof. A worker that has run a job holds device buffers; when
//! it is SIGKILLed its pid is gone and reaped by the host within 200 ms (every machine)
//! and, where an NVIDIA GPU exists, NVML shows its per-process GPU memory released
//! within 2 s. NVML is loaded at run time; without it the test says so and proves the
//! part every machine can (on the CPU backend), then the next job succeeds.

use std::time::{Duration, Instant};

use nvml_wrapper::Nvml;
use nvml_wrapper::enums::device::UsedGpuMemory;
use reticle_tests::{Host, fixtures_dir};
use serde_json::{Value, json};

fn start(backend: &str) -> Host {
    let roots = fixtures_dir();
    Host::start_initialized(&[
        ("RETICLE_ALLOWED_ROOTS", roots.to_str().unwrap()),
        ("RETICLE_BACKEND", backend),
    ])
}

fn call(host: &mut Host, id: &str, name: &str, arguments: Value) -> Value {
    let response = host.request(
        json!(id),
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    );
    assert!(response["result"]["isError"] != true, "{response}");
    response["result"]["structuredContent"].clone()
}

fn simulate(host: &mut Host, id: &str) -> Value {
    let layout = fixtures_dir().join("layouts/lines_and_pad.glp");
    call(
        host,
        id,
        "simulate",
        json!({"layout": layout.display().to_string(), "wait": true, "render": "json"}),
    )
}

/// GPU memory NVML attributes to `pid` on any device (compute and graphics contexts:
/// wgpu's Vulkan contexts may be listed as either); `None` when `pid` holds none.
fn gpu_bytes_of(nvml: &Nvml, pid: u32) -> Option<u64> {
    let mut found = None;
    for index in 0..nvml.device_count().unwrap_or(0) {
        let Ok(device) = nvml.device_by_index(index) else {
            continue;
        };
        let compute = device.running_compute_processes().unwrap_or_default();
        let graphics = device.running_graphics_processes().unwrap_or_default();
        for p in compute.into_iter().chain(graphics).filter(|p| p.pid == pid) {
            let bytes = match p.used_gpu_memory {
                UsedGpuMemory::Used(b) => b,
                // Listed but not measurable (some drivers in containers): still held.
                UsedGpuMemory::Unavailable => 1,
            };
            found = Some(found.unwrap_or(0) + bytes);
        }
    }
    found
}

#[test]
fn a_killed_worker_is_reaped_at_once_and_its_gpu_memory_is_freed() {
    let nvml = match Nvml::init() {
        Ok(nvml) if nvml.device_count().unwrap_or(0) > 0 => Some(nvml),
        Ok(_) => {
            eprintln!("SKIP (NVML part): NVML loaded but reports no NVIDIA device");
            None
        }
        Err(e) => {
            eprintln!("SKIP (NVML part): no NVIDIA driver here ({e}); checking the reap only");
            None
        }
    };
    let mut host = start(if nvml.is_some() { "gpu" } else { "cpu" });
    let first = simulate(&mut host, "sim-1");
    let health = call(&mut host, "health", "health", json!({"render": "json"}));
    let worker = &health["workers"]["workers"][0];
    let pid = worker["pid"].as_u64().expect("worker pid") as u32;
    eprintln!("worker {pid}: backend {}", first["backend"]);

    let held = nvml.as_ref().map(|nvml| {
        let bytes = gpu_bytes_of(nvml, pid).expect("NVML lists the worker after a GPU job");
        eprintln!("NVML: worker {pid} holds {bytes} bytes of GPU memory");
        assert!(bytes > 0);
        bytes
    });

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("SIGKILL the worker");
    let killed = Instant::now();
    // Reaped: the /proc entry is gone, not merely a zombie.
    while std::path::Path::new(&format!("/proc/{pid}")).exists() {
        assert!(
            killed.elapsed() < Duration::from_millis(200),
            "worker {pid} not reaped within 200 ms"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    eprintln!("worker {pid} reaped {:?} after SIGKILL", killed.elapsed());

    if let (Some(nvml), Some(held)) = (nvml.as_ref(), held) {
        while gpu_bytes_of(nvml, pid).is_some() {
            assert!(
                killed.elapsed() < Duration::from_secs(2),
                "GPU memory of worker {pid} ({held} bytes) still held 2 s after SIGKILL"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!(
            "NVML: {held} bytes released {:?} after SIGKILL",
            killed.elapsed()
        );
    }

    // A replacement takes the next job and gives the same answer.
    let again = simulate(&mut host, "sim-2");
    assert_eq!(again["metrics"], first["metrics"]);
}
