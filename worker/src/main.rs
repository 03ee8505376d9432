//! `reticle-worker`: a disposable process that runs engine jobs for the host.

fn main() {}
