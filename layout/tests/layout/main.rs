//! Layout readers and writers: GDSII/OASIS round trips, flattening, the index, hostile and fuzzed inputs, and KLayout cross-checks on real layouts.
//!
//! One test executable per crate (each module was its own executable before): the
//! release build that `run-tests` shares with the binaries links it once (D130).

mod common;
mod flatten;
mod fuzz_gds;
mod fuzz_oasis;
mod gds_roundtrip;
mod hostile;
mod index;
mod klayout_crosscheck;
mod oasis;
mod oasis_write;
mod observe_klayout;
mod observe_real_gds;
mod props;
mod real_gds;
mod units;
mod writeback;
