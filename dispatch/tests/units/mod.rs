//! The library's own tests, one module per source module (`src/…`): they live here, in
//! an integration test, so the library is not compiled a second time as a test harness
//! (docs/DECISIONS.md D251). What they reach of the crate's internals is `#[doc(hidden)]`.

mod dispatcher;
mod events;
mod fanout;
mod handover;
mod jobs;
mod scope;
mod slurm;
mod slurm_job_dir;
mod supervisor_config;
mod supervisor_error;
mod supervisor_process;
mod supervisor_runtime_dir;
