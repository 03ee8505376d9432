//! The ICCAD-2013 data on the GPU: the ten clips against the CPU reference, and the 2048²
//! benchmark (ignored unless asked for).

use super::*;

// ---------------------------------------------------------------- ICCAD-2013 data

fn data_dir() -> Option<PathBuf> {
    let dir = crate::common::data_dir_setting()
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data"));
    dir.join("iccad13").is_dir().then_some(dir)
}

/// Minimal `.npy` reader for little-endian C-order arrays: (shape, raw data).
fn read_npy(path: &std::path::Path, descr: &str) -> (Vec<usize>, Vec<u8>) {
    let bytes = std::fs::read(path).expect("read npy");
    assert_eq!(
        &bytes[..6],
        b"\x93NUMPY",
        "{}: not an npy file",
        path.display()
    );
    let (header_len, start) = if bytes[6] == 1 {
        (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10)
    } else {
        (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        )
    };
    let header = std::str::from_utf8(&bytes[start..start + header_len]).expect("npy header");
    assert!(header.contains(&format!("'descr': '{descr}'")), "{header}");
    assert!(header.contains("'fortran_order': False"), "{header}");
    let shape_text = header
        .split("'shape': (")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .expect("shape");
    let shape = shape_text
        .split(',')
        .filter_map(|t| t.trim().parse().ok())
        .collect();
    (shape, bytes[start + header_len..].to_vec())
}

fn iccad_kernels(dir: &std::path::Path, name: &str) -> KernelSet {
    let kdir = dir.join("iccad13/kernels");
    let (shape, raw) = read_npy(&kdir.join(format!("{name}.npy")), "<c8");
    let (count, size) = (shape[0], shape[1]);
    assert_eq!(shape, vec![count, size, size]);
    let kernels = raw
        .chunks_exact(8)
        .map(|c| {
            Complex32::new(
                f32::from_le_bytes([c[0], c[1], c[2], c[3]]),
                f32::from_le_bytes([c[4], c[5], c[6], c[7]]),
            )
        })
        .collect();
    let (sshape, sraw) = read_npy(&kdir.join(format!("{name}_scales.npy")), "<f4");
    assert_eq!(sshape, vec![count]);
    let scales = sraw
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    KernelSet {
        size,
        kernels,
        scales,
        period_nm: 2048.0,
        hash: format!("iccad13:{name}"),
    }
}

/// Rasterizes the rectilinear RECT/PGON shapes of a `.glp` clip at 1 nm, centred in
/// an `n × n` grid; a pixel is inside when its centre is (even-odd rule).
fn rasterize_glp(path: &std::path::Path, n: usize) -> Grid<u8> {
    let text = std::fs::read_to_string(path).expect("read glp");
    let mut polys: Vec<Vec<(i64, i64)>> = Vec::new();
    for line in text.lines() {
        let t: Vec<&str> = line.split_whitespace().collect();
        let nums =
            |from: usize| -> Vec<i64> { t[from..].iter().filter_map(|v| v.parse().ok()).collect() };
        match t.first() {
            Some(&"RECT") => {
                let v = nums(3);
                let (x, y, w, h) = (v[0], v[1], v[2], v[3]);
                polys.push(vec![(x, y), (x + w, y), (x + w, y + h), (x, y + h)]);
            }
            Some(&"PGON") => {
                let v = nums(3);
                polys.push(v.chunks_exact(2).map(|p| (p[0], p[1])).collect());
            }
            _ => {}
        }
    }
    assert!(!polys.is_empty(), "{}: no shapes", path.display());
    let (mut x0, mut y0, mut x1, mut y1) = (i64::MAX, i64::MAX, i64::MIN, i64::MIN);
    for &(x, y) in polys.iter().flatten() {
        (x0, y0, x1, y1) = (x0.min(x), y0.min(y), x1.max(x), y1.max(y));
    }
    let off_x = (n as i64 - (x1 - x0)) / 2 - x0;
    let off_y = (n as i64 - (y1 - y0)) / 2 - y0;
    let mut grid = Grid::filled(n, n, 0u8);
    for poly in &polys {
        for y in 0..n {
            let yc = y as f64 + 0.5 - off_y as f64;
            let mut xs: Vec<f64> = Vec::new();
            for e in 0..poly.len() {
                let (a, b) = (poly[e], poly[(e + 1) % poly.len()]);
                if a.0 == b.0 && ((a.1 as f64) <= yc) != ((b.1 as f64) <= yc) {
                    xs.push(a.0 as f64);
                }
            }
            xs.sort_by(f64::total_cmp);
            for pair in xs.chunks_exact(2) {
                let from = (pair[0] + off_x as f64 - 0.5).ceil().max(0.0) as usize;
                let to = ((pair[1] + off_x as f64 - 0.5).ceil().max(0.0) as usize).min(n);
                for x in from..to {
                    *grid.at_mut(x, y) ^= 1;
                }
            }
        }
    }
    grid
}

#[test]
fn iccad_clips_agree_with_cpu_reference() {
    let Some(gpu) = backend() else { return };
    let Some(dir) = data_dir() else {
        eprintln!(
            "SKIP: ICCAD-2013 data not found (set RETICLE_DATA_DIR or provide ../shared/data)"
        );
        return;
    };
    let focus = Arc::new(iccad_kernels(&dir, "focus"));
    let defocus = Arc::new(iccad_kernels(&dir, "defocus"));
    let i0 = open_frame(&focus);
    assert!((i0 - 0.9515).abs() < 2e-3, "focus open frame {i0}");
    let clip = std::env::var("RETICLE_ICCAD_CLIP").unwrap_or_else(|_| "M1_test1".into());
    let target = rasterize_glp(&dir.join(format!("iccad13/layouts/{clip}.glp")), 2048);
    let mask = Grid {
        width: 2048,
        height: 2048,
        data: target.data.iter().map(|&v| f32::from(v)).collect(),
    };
    check_litho_against_reference(
        gpu,
        &mask,
        &target,
        &focus,
        &defocus,
        Resist::ICCAD2013,
        &clip,
    );
}

/// One 2048² three-corner benchmark (explicit: `cargo test … -- --ignored gpu_bench_2048`).
#[test]
#[ignore = "benchmark; run explicitly"]
fn gpu_bench_2048() {
    let Some(gpu) = backend() else { return };
    let (focus, defocus) = match data_dir() {
        Some(dir) => (
            Arc::new(iccad_kernels(&dir, "focus")),
            Arc::new(iccad_kernels(&dir, "defocus")),
        ),
        None => (
            Arc::new(synthetic_kernels(35, 24, 1, 0.0, "bench-focus")),
            Arc::new(synthetic_kernels(35, 24, 1, 0.004, "bench-defocus")),
        ),
    };
    let mask = random_mask(2048, 3);
    let target = Grid {
        width: 2048,
        height: 2048,
        data: mask.data.iter().map(|&v| u8::from(v > 0.5)).collect(),
    };
    let corners = iccad_corners(&focus, &defocus);
    let job = LithoJob {
        mask: &mask,
        target: Some(&target),
        corners: &corners,
        resist: Resist::ICCAD2013,
        keep: KeepImages::default(),
    };
    let runs: usize = std::env::var("RETICLE_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let report = gpu_bench(gpu, &job, 1, runs).expect("bench");
    println!("{}", serde_json::to_string_pretty(&report).expect("json"));
    assert!(report.ms_per_sim_min > 0.0);
    // The CPU path on the same job, for the ratio (one warm-up, one timed run).
    let cpu = CpuBackend::new();
    let cancel = CancelToken::new();
    let cpu_out = cpu.litho(&job, &cancel, &|_| {}).expect("cpu litho");
    let t = std::time::Instant::now();
    cpu.litho(&job, &cancel, &|_| {}).expect("cpu litho");
    let cpu_ms = t.elapsed().as_secs_f64() * 1e3;
    let gpu_out = gpu.litho(&job, &cancel, &|_| {}).expect("gpu litho");
    println!(
        "cpu {cpu_ms:.1} ms per sim ({}); gpu/cpu time ratio {:.3}; L2 gpu {:?} cpu {:?}; PVB gpu {:?} cpu {:?}",
        cpu.info().adapter,
        report.ms_per_sim_median / cpu_ms,
        gpu_out.l2,
        cpu_out.l2,
        gpu_out.pvb,
        cpu_out.pvb
    );
}
