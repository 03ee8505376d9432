//! Helpers for reticle's end-to-end tests.
