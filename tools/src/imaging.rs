//! How a call images its region (docs/DECISIONS.md D57): one periodic window or tiles.
//! `evaluate`, `simulate` and `reticle eval` decide it from their typed arguments
//! ([`Imaging::of`], over [`reticle_protocol::args::is_one_window`]).

use reticle_protocol::args::{Tiling, is_one_window, model_period_nm};
use serde_json::Value;

/// How a call images its region (docs/DECISIONS.md D57).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Imaging {
    /// One periodic window of exactly the model period (the ICCAD-2013 convention).
    Window,
    /// Tiles of the model period with halos of real layout context, stitched.
    Tiles,
}

impl Imaging {
    /// How a call with these arguments is imaged
    /// ([`reticle_protocol::args::is_one_window`]).
    #[must_use]
    pub fn of(
        tiling: Option<Tiling>,
        layout: &str,
        model: Option<&Value>,
        box_um: Option<[f64; 4]>,
    ) -> Self {
        if is_one_window(tiling, layout, model_period_nm(model), box_um) {
            Self::Window
        } else {
            Self::Tiles
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The decision for a call's arguments as JSON, parsed as the tool parses them, and
    /// whether `tiling` is still in the arguments the worker gets.
    fn decide(args: Value) -> (Imaging, bool) {
        let mut call: reticle_protocol::args::EvaluateArgs = serde_json::from_value(args).unwrap();
        let imaging = Imaging::of(
            call.tiling.take(),
            &call.layout,
            call.model.as_ref(),
            call.box_um,
        );
        let sent = serde_json::to_value(&call).unwrap();
        (imaging, sent.get("tiling").is_some())
    }

    #[test]
    fn tiling_is_decided_and_taken_out() {
        assert_eq!(decide(json!({"layout": "a.glp"})), (Imaging::Window, false));
        assert_eq!(decide(json!({"layout": "a.gds"})), (Imaging::Tiles, false));
        assert_eq!(
            decide(json!({"layout": "a.glp", "tiling": "tiles"})),
            (Imaging::Tiles, false)
        );
        assert_eq!(
            decide(json!({"layout": "a.gds", "tiling": "window"})),
            (Imaging::Window, false)
        );
        assert_eq!(
            decide(json!({"layout": "a.gds", "box_um": [1.0, 1.0, 3.048, 3.048]})),
            (Imaging::Window, false)
        );
        assert_eq!(
            decide(json!({"layout": "a.gds", "tiling": "auto", "box_um": [0.0, 0.0, 3.0, 3.0]})),
            (Imaging::Tiles, false)
        );
    }
}
