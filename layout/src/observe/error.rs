//! Typed failures of the observer queries, each with seed 003's exact error code.

use serde_json::{Value, json};

use crate::flatten::FlattenError;

/// Why an observer query failed. [`ObserveError::code`] gives the wire code.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ObserveError {
    /// The named cell is not in the layout (or the layout has no cell at all).
    #[error("cell {cell:?} not found in the layout")]
    CellNotFound {
        /// The requested name (empty when the layout has no cells).
        cell: String,
    },
    /// A box is empty, inverted, not finite or out of range.
    #[error("invalid box: {reason}")]
    InvalidBox {
        /// What is wrong with it.
        reason: String,
    },
    /// A layer reference names a (layer, datatype) the layout does not have.
    #[error("layer {layer}/{datatype} does not exist in the layout")]
    InvalidLayer {
        /// Layer number.
        layer: u32,
        /// Datatype.
        datatype: u32,
    },
    /// A target id is unknown, or refers to a shape of the wrong kind for the operation.
    #[error("invalid target {id:?}: {reason}")]
    InvalidTarget {
        /// The offending id.
        id: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// The query would visit more of the layout than the configured budget allows.
    #[error("query too large: {what} exceeds {limit}")]
    QueryTooLarge {
        /// Which budget.
        what: &'static str,
        /// Its value.
        limit: u64,
    },
    /// A request parameter exceeds the tool's hard maximum.
    #[error("{what} = {requested} exceeds the maximum {max}")]
    ToolLimitExceeded {
        /// Which parameter.
        what: &'static str,
        /// What was asked for.
        requested: u64,
        /// The maximum.
        max: u64,
    },
    /// Rendering failed.
    #[error("render failed: {reason}")]
    RenderFailed {
        /// Why.
        reason: String,
    },
    /// A request field has a value outside its domain (unknown mode or style, wrong number
    /// of targets, malformed colour).
    #[error("invalid input: {reason}")]
    InvalidInput {
        /// Why.
        reason: String,
    },
    /// A bug or an impossible state (e.g. a coordinate overflow in a validated layout).
    #[error("internal error: {reason}")]
    Internal {
        /// What happened.
        reason: String,
    },
}

impl ObserveError {
    /// The exact wire code (seed 003, plus reticle's `INVALID_INPUT`).
    #[must_use]
    pub const fn code(&self) -> &'static str {
        match self {
            Self::CellNotFound { .. } => "TOP_CELL_NOT_FOUND",
            Self::InvalidBox { .. } => "INVALID_BOX",
            Self::InvalidLayer { .. } => "INVALID_LAYER",
            Self::InvalidTarget { .. } => "INVALID_TARGET",
            Self::QueryTooLarge { .. } => "QUERY_TOO_LARGE",
            Self::ToolLimitExceeded { .. } => "TOOL_LIMIT_EXCEEDED",
            Self::RenderFailed { .. } => "RENDER_FAILED",
            Self::InvalidInput { .. } => "INVALID_INPUT",
            Self::Internal { .. } => "INTERNAL_ERROR",
        }
    }

    /// The `details` object of the seed's `ErrorObject`.
    #[must_use]
    pub fn details(&self) -> Value {
        match self {
            Self::CellNotFound { cell } => json!({ "cell": cell }),
            Self::InvalidBox { reason }
            | Self::RenderFailed { reason }
            | Self::InvalidInput { reason }
            | Self::Internal { reason } => json!({ "reason": reason }),
            Self::InvalidLayer { layer, datatype } => {
                json!({ "layer": layer, "datatype": datatype })
            }
            Self::InvalidTarget { id, reason } => json!({ "target_id": id, "reason": reason }),
            Self::QueryTooLarge { what, limit } => json!({ "what": what, "limit": limit }),
            Self::ToolLimitExceeded {
                what,
                requested,
                max,
            } => json!({ "what": what, "requested": requested, "max": max }),
        }
    }

    /// The seed's `ErrorObject`: `{"code", "message", "details"}`.
    #[must_use]
    pub fn to_error_object(&self) -> Value {
        json!({ "code": self.code(), "message": self.to_string(), "details": self.details() })
    }
}

impl From<FlattenError> for ObserveError {
    fn from(e: FlattenError) -> Self {
        match e {
            FlattenError::NoSuchCell(cell) => Self::CellNotFound { cell },
            FlattenError::LimitExceeded { what, limit } => Self::QueryTooLarge { what, limit },
            other => Self::Internal {
                reason: other.to_string(),
            },
        }
    }
}

impl From<crate::model::HierarchyError> for ObserveError {
    fn from(e: crate::model::HierarchyError) -> Self {
        Self::Internal {
            reason: e.to_string(),
        }
    }
}

impl From<crate::transform::CoordinateOverflow> for ObserveError {
    fn from(_: crate::transform::CoordinateOverflow) -> Self {
        Self::QueryTooLarge {
            what: "coordinate range",
            limit: crate::transform::COORD_LIMIT as u64,
        }
    }
}
