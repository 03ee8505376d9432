//! OASIS (SEMI P39) reader producing the same [`crate::Library`] model as GDSII, and a
//! writer ([`write_oasis`]) for the inverse.
//!
//! Covers every record type: name tables (explicit and implicit reference numbers, forward
//! references resolved at END), CELL, both PLACEMENTs, TEXT, RECTANGLE, POLYGON (all
//! point-list types), PATH, the three TRAPEZOIDs, CTRAPEZOID, CIRCLE (as a 32-gon, like
//! KLayout), PROPERTY/XNAME/XELEMENT/XGEOMETRY (parsed and skipped), CBLOCK (raw deflate,
//! bounded by [`crate::Limits::max_decompressed_bytes`]), modal variables and all twelve
//! repetition types. Shape repetitions are expanded into copies; placement repetitions
//! become [`crate::Repetition`]s. Every allocation is charged to a [`crate::Limits`] budget
//! before it is made, so hostile counts fail with `LimitExceeded` instead of exhausting
//! memory.

// Public for the crate's tests (tests/layout/units), not an API.
#[doc(hidden)]
pub mod cursor;
// Public for the crate's tests (tests/layout/units), not an API.
#[doc(hidden)]
pub mod geometry;
mod reader;
// Public for the crate's tests (tests/layout/units), not an API.
#[doc(hidden)]
pub mod writer;

pub use reader::read_oasis;
pub use writer::{OasisWriteError, write_oasis};

use crate::model::HierarchyError;

/// The 13-byte magic string every OASIS file starts with.
pub const MAGIC: &[u8; 13] = b"%SEMI-OASIS\r\n";

/// Why an OASIS file could not be read. Offsets are byte offsets in the file; inside a
/// CBLOCK they are the offset of the CBLOCK record and `in_cblock` is set.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OasisError {
    /// The input is larger than [`crate::Limits::max_input_bytes`].
    #[error("input of {len} bytes exceeds the limit of {limit} bytes")]
    InputTooLarge {
        /// Input length.
        len: u64,
        /// The limit.
        limit: u64,
    },
    /// The file does not start with `%SEMI-OASIS\r\n`.
    #[error("not an OASIS file (bad magic)")]
    BadMagic,
    /// The input ends inside a record.
    #[error("truncated record at byte {offset}{}", if *.in_cblock { " (in CBLOCK)" } else { "" })]
    Truncated {
        /// Record offset.
        offset: u64,
        /// Whether inside a CBLOCK.
        in_cblock: bool,
    },
    /// The file ends before the END record.
    #[error("missing END record")]
    MissingEnd,
    /// An unsigned integer does not fit in 64 bits.
    #[error("integer overflow at byte {offset}")]
    IntegerOverflow {
        /// Record offset.
        offset: u64,
    },
    /// A record id outside 0..=34.
    #[error("unknown record id {id} at byte {offset}")]
    UnknownRecord {
        /// Record offset.
        offset: u64,
        /// The id.
        id: u64,
    },
    /// A known record where the grammar does not allow it.
    #[error("record {record} not allowed {context} at byte {offset}")]
    UnexpectedRecord {
        /// Record offset.
        offset: u64,
        /// Record name.
        record: &'static str,
        /// Where it appeared.
        context: &'static str,
    },
    /// A field value outside its legal range.
    #[error("invalid {what} ({value}) at byte {offset}")]
    InvalidValue {
        /// Record offset.
        offset: u64,
        /// The field.
        what: &'static str,
        /// The value, as text.
        value: String,
    },
    /// A field was omitted but its modal variable has no value yet.
    #[error("modal variable {what} used before being set, at byte {offset}")]
    MissingModal {
        /// Record offset.
        offset: u64,
        /// The modal variable.
        what: &'static str,
    },
    /// A reference number with no entry in its name table.
    #[error("{table} reference number {refnum} is not defined")]
    UndefinedName {
        /// The table (CELLNAME, TEXTSTRING).
        table: &'static str,
        /// The number.
        refnum: u64,
    },
    /// A placement of a cell that the file never defines.
    #[error("placement of undefined cell {name:?}")]
    UndefinedCell {
        /// The name.
        name: String,
    },
    /// Two CELL records with the same name.
    #[error("duplicate cell {name:?}")]
    DuplicateCell {
        /// The name.
        name: String,
    },
    /// A CBLOCK that does not inflate as declared.
    #[error("bad CBLOCK at byte {offset}: {message}")]
    Compression {
        /// CBLOCK offset.
        offset: u64,
        /// What went wrong.
        message: String,
    },
    /// A cycle in the hierarchy, or another structural problem.
    #[error(transparent)]
    Hierarchy(#[from] HierarchyError),
    /// A resource limit was hit while reading.
    #[error("limit exceeded: {what} (limit {limit})")]
    LimitExceeded {
        /// Which limit.
        what: &'static str,
        /// Its value.
        limit: u64,
    },
}
