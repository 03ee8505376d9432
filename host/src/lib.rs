//! The reticle host as a library: the pieces the `reticle` binary is built from.

pub mod supervisor;
