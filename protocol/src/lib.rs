//! Wire types shared by the reticle host and its workers.
