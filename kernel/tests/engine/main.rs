//! The engine's integration tests: imaging paths against each other and the naive reference, physics, tiling, rule decks against KLayout, the GPU backend, cancellation.
//!
//! One test executable per crate (each module was its own executable before): the
//! release build that `run-tests` shares with the binaries links it once (D130).

mod bandlimited;
mod cancel;
mod coarse_pixels;
mod common;
mod gpu_backend;
mod iccad;
mod part;
mod physics;
mod rule_decks;
mod rules_klayout;
mod tiling;
mod units;
