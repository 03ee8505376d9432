//! Runs the ICCAD-2013 litho benchmark and prints its JSON report.
//!
//! `cargo run --release -p reticle-kernel --example litho_bench [threads] [repeats]`

fn main() {
    // This example's `main` is its composition root: the one read of the environment.
    let data_dir = std::env::var_os("RETICLE_DATA_DIR").map(std::path::PathBuf::from);
    let Some(dir) = reticle_kernel::data::iccad13_dir(data_dir.as_deref()) else {
        eprintln!("SKIP: ICCAD-2013 data not found (set RETICLE_DATA_DIR)");
        return;
    };
    let mut args = std::env::args().skip(1);
    let threads = args.next().and_then(|a| a.parse().ok());
    let repeats = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    match reticle_kernel::bench::litho_bench(&dir, None, threads, repeats) {
        Ok(r) => eprintln!("{}", serde_json::to_string_pretty(&r).unwrap_or_default()),
        Err(e) => eprintln!("bench failed: {e}"),
    }
}
