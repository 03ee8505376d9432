//! Errors of the evaluation: a tool error for the caller, or cancellation (which the
//! worker turns into its `CANCELLED` error naming the job).

use reticle_kernel::{Cancelled, ImagingError};
use reticle_protocol::{ErrorCode, ToolError};
use serde_json::{Value, json};

/// Why an evaluation or repair step stopped.
#[derive(Debug, Clone)]
pub enum EvalError {
    /// The run's cancel token was set.
    Cancelled,
    /// A tool error for the caller (bad input, bad deck, backend failure, …).
    Tool(ToolError),
}

impl From<ToolError> for EvalError {
    fn from(e: ToolError) -> Self {
        Self::Tool(e)
    }
}

impl From<Cancelled> for EvalError {
    fn from(_: Cancelled) -> Self {
        Self::Cancelled
    }
}

impl From<ImagingError> for EvalError {
    fn from(e: ImagingError) -> Self {
        match e {
            ImagingError::Cancelled => Self::Cancelled,
            ImagingError::Invalid(m) => Self::Tool(invalid(m, json!({}))),
            ImagingError::Backend(m) => Self::Tool(ToolError::new(ErrorCode::BackendError, m)),
        }
    }
}

/// An `INVALID_INPUT` error with details.
pub(crate) fn invalid(message: impl Into<String>, details: Value) -> ToolError {
    ToolError::new(ErrorCode::InvalidInput, message).with_details(details)
}

/// `Err(Cancelled)` once `cancel` is set.
pub(crate) fn check_cancel(cancel: &reticle_kernel::CancelToken) -> Result<(), EvalError> {
    if cancel.is_cancelled() {
        Err(EvalError::Cancelled)
    } else {
        Ok(())
    }
}
