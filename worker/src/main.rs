//! `reticle-worker`: a disposable process that runs engine jobs for the host (see the
//! `reticle_worker` library, whose [`reticle_worker::run`] this binary is).

fn main() -> std::process::ExitCode {
    reticle_worker::run()
}
