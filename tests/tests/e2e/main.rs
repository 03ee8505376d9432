//! End-to-end tests: start the built `reticle` and `reticle-worker` binaries and talk to them as a client, an operator or a user at the command line would.
//!
//! One test executable per crate (each module was its own executable before): the
//! release build that `run-tests` shares with the binaries links it once (D130).

mod bench_cli;
mod bench_repair;
mod crash_replay;
mod debug_tools;
mod evaluate;
mod g1_stdout_hygiene;
mod gpu_memory;
mod gpu_path;
mod hostile_inputs;
mod http;
mod jobs;
mod lifecycle;
mod limits;
mod observer;
mod operations;
mod optimize;
mod optimize_cli;
mod optimize_mask_resimulation;
mod orphans;
mod roots;
mod tasks;
mod tool_names;
mod transcripts;
mod validate_cli;
mod whole_layout;
