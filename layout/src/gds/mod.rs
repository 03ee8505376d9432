//! GDSII stream format: reader ([`read_gds`]) and writer ([`write_gds`]).
//!
//! The reader takes untrusted bytes and never panics: every malformed input becomes a
//! [`GdsError`] carrying the byte offset of the offending record. Memory use is linear in
//! the input size (each record is at most 64 KiB and is decoded into a bounded value).

mod reader;
pub mod record;
mod writer;

pub use reader::read_gds;
pub use writer::{GdsWriteError, write_gds};

use crate::model::HierarchyError;

/// Why a GDSII stream could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GdsError {
    /// The input is larger than [`crate::Limits::max_input_bytes`].
    #[error("input of {len} bytes exceeds the limit of {limit} bytes")]
    InputTooLarge {
        /// Input length.
        len: u64,
        /// The limit.
        limit: u64,
    },
    /// The file ends inside a record header or payload.
    #[error("truncated record at byte {offset}")]
    Truncated {
        /// Offset of the incomplete record.
        offset: usize,
    },
    /// The file ends before ENDLIB.
    #[error("missing ENDLIB: input ends at byte {offset}")]
    MissingEndLib {
        /// Input length.
        offset: usize,
    },
    /// A record length below 4 or odd.
    #[error("bad record length {length} at byte {offset}")]
    BadRecordLength {
        /// Record offset.
        offset: usize,
        /// The length field.
        length: usize,
    },
    /// A record type outside the GDSII table.
    #[error("unknown record type 0x{record_type:02x} at byte {offset}")]
    UnknownRecord {
        /// Record offset.
        offset: usize,
        /// The record type byte.
        record_type: u8,
    },
    /// A known record where the grammar does not allow it.
    #[error("record {record} not allowed in {context} at byte {offset}")]
    UnexpectedRecord {
        /// Record offset.
        offset: usize,
        /// Record name.
        record: &'static str,
        /// Where it appeared.
        context: &'static str,
    },
    /// The record's data type byte is wrong for its record type.
    #[error("record {record} at byte {offset} has data type {found}, expected {expected}")]
    BadDataType {
        /// Record offset.
        offset: usize,
        /// Record name.
        record: &'static str,
        /// Expected data type.
        expected: u8,
        /// Found data type.
        found: u8,
    },
    /// The payload size does not fit the record (e.g. XY not a multiple of 8 bytes).
    #[error("record {record} at byte {offset} has a malformed {len}-byte payload")]
    BadPayload {
        /// Record offset.
        offset: usize,
        /// Record name.
        record: &'static str,
        /// Payload length.
        len: usize,
    },
    /// An element lacks a required record (e.g. BOUNDARY without LAYER).
    #[error("{element} at byte {offset} lacks {record}")]
    MissingRecord {
        /// Element offset.
        offset: usize,
        /// Element name.
        element: &'static str,
        /// The missing record.
        record: &'static str,
    },
    /// Wrong number of XY points for the element.
    #[error("{element} at byte {offset} has {count} XY points")]
    BadXyCount {
        /// Element offset.
        offset: usize,
        /// Element name.
        element: &'static str,
        /// Number of points found.
        count: usize,
    },
    /// A value outside its legal range (PATHTYPE 3, COLROW 0, non-finite MAG, ...).
    #[error("invalid {what} value {value} at byte {offset}")]
    InvalidValue {
        /// Record offset.
        offset: usize,
        /// What was invalid.
        what: &'static str,
        /// The value, as text.
        value: String,
    },
    /// Two structures with the same name.
    #[error("duplicate structure {name:?} at byte {offset}")]
    DuplicateCell {
        /// The name.
        name: String,
        /// Offset of the second BGNSTR.
        offset: usize,
    },
    /// SREF/AREF naming a structure the library does not define.
    #[error("reference to undefined structure {name:?} at byte {offset}")]
    UndefinedCell {
        /// The name.
        name: String,
        /// Offset of the reference element.
        offset: usize,
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
