//! The worker's parts, tested through its library (D251): one module per source module.

mod artifacts;
mod backend;
mod cache;
mod deck_job;
mod drc;
mod observe;
mod op;
mod ops;
mod settings;
