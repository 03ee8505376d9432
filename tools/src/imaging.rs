//! How a call images its region (docs/DECISIONS.md D57): one periodic window or tiles.
//! `evaluate` and `simulate` decide it from their typed arguments ([`Imaging::of`]),
//! `reticle eval` from its JSON arguments ([`take_imaging`]); both over
//! [`reticle_protocol::args::is_one_window`].

use reticle_protocol::args::{Tiling, is_one_window, model_period_nm};
use serde_json::{Map, Value};

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

/// Takes `tiling` out of a call's arguments as JSON (`reticle eval`'s, built from its
/// flags; the host's, never an op's) and resolves it with [`Imaging::of`]. A `box_um`
/// that is not four numbers is tiled.
pub fn take_imaging(args: &mut Map<String, Value>) -> Imaging {
    let tiling = args
        .remove("tiling")
        .and_then(|v| serde_json::from_value::<Tiling>(v).ok());
    let layout = args.get("layout").and_then(Value::as_str).unwrap_or("");
    let box_um = match args.get("box_um") {
        None => None,
        Some(b) => match serde_json::from_value::<[f64; 4]>(b.clone()) {
            Ok(b) => Some(b),
            Err(_) if tiling != Some(Tiling::Window) => return Imaging::Tiles,
            Err(_) => None,
        },
    };
    Imaging::of(tiling, layout, args.get("model"), box_um)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decide(args: Value) -> (Imaging, bool) {
        let mut args = args.as_object().unwrap().clone();
        let imaging = take_imaging(&mut args);
        (imaging, args.contains_key("tiling"))
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
