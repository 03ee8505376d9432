//! Unit tests of `reticle_layout::observe::error`: error codes.

use reticle_layout::FlattenError;
use reticle_layout::observe::error::*;

#[test]
fn codes_are_the_seed_spellings() {
    let cases = [
        (
            ObserveError::CellNotFound { cell: "X".into() },
            "TOP_CELL_NOT_FOUND",
        ),
        (
            ObserveError::InvalidBox { reason: "r".into() },
            "INVALID_BOX",
        ),
        (
            ObserveError::InvalidLayer {
                layer: 1,
                datatype: 2,
            },
            "INVALID_LAYER",
        ),
        (
            ObserveError::InvalidTarget {
                id: "i".into(),
                reason: "r".into(),
            },
            "INVALID_TARGET",
        ),
        (
            ObserveError::QueryTooLarge {
                what: "w",
                limit: 1,
            },
            "QUERY_TOO_LARGE",
        ),
        (
            ObserveError::ToolLimitExceeded {
                what: "w",
                requested: 2,
                max: 1,
            },
            "TOOL_LIMIT_EXCEEDED",
        ),
        (
            ObserveError::RenderFailed { reason: "r".into() },
            "RENDER_FAILED",
        ),
        (
            ObserveError::Internal { reason: "r".into() },
            "INTERNAL_ERROR",
        ),
    ];
    for (e, code) in cases {
        assert_eq!(e.code(), code);
        let obj = e.to_error_object();
        assert_eq!(obj["code"], code);
        assert!(obj["message"].as_str().is_some_and(|m| !m.is_empty()));
        assert!(obj["details"].is_object());
    }
    assert_eq!(
        ObserveError::from(FlattenError::LimitExceeded {
            what: "shapes",
            limit: 3
        })
        .code(),
        "QUERY_TOO_LARGE"
    );
}
