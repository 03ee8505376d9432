//! How a call images its region (docs/DECISIONS.md D57): one periodic window or tiles.
//! `evaluate`, `simulate` and `reticle eval` read their `tiling` argument here, once.

use serde_json::{Map, Value};

/// How a call images its region (docs/DECISIONS.md D57).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Imaging {
    /// One periodic window of exactly the model period (the ICCAD-2013 convention).
    Window,
    /// Tiles of the model period with halos of real layout context, stitched.
    Tiles,
}

/// The default model's period (nm), the window side when the call names no model.
const DEFAULT_PERIOD_NM: f64 = 2048.0;

/// Takes `tiling` out of a call's arguments (the host's, never an op's) and resolves it:
/// `tiles` and `window` as given; `auto` (or none): a `.glp` clip without a box, or a box
/// of exactly one model period, is one window (what such calls always were); anything
/// else is tiled. The one place `evaluate`, `simulate` and `reticle eval` read it.
pub fn take_imaging(args: &mut Map<String, Value>) -> Imaging {
    match args.remove("tiling").as_ref().and_then(Value::as_str) {
        Some("tiles") => return Imaging::Tiles,
        Some("window") => return Imaging::Window,
        _ => {}
    }
    let glp = args
        .get("layout")
        .and_then(Value::as_str)
        .is_some_and(|p| p.to_ascii_lowercase().ends_with(".glp"));
    let period = args
        .get("model")
        .and_then(|m| m.get("period_nm"))
        .and_then(Value::as_f64)
        .unwrap_or(DEFAULT_PERIOD_NM);
    let one_period = |lo: f64, hi: f64| ((hi - lo) * 1000.0 - period).abs() <= 1e-6 * period;
    match args.get("box_um").and_then(Value::as_array) {
        None if glp => Imaging::Window,
        None => Imaging::Tiles,
        Some(b) => {
            let c: Vec<f64> = b.iter().filter_map(Value::as_f64).collect();
            if c.len() == 4 && one_period(c[0], c[2]) && one_period(c[1], c[3]) {
                Imaging::Window
            } else {
                Imaging::Tiles
            }
        }
    }
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
