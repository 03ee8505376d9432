//! Unit tests of `reticle_layout::observe::layers`: the layer list.

use reticle_layout::model::LayerName;
use reticle_layout::observe::layers::*;

#[test]
fn sorted_with_flat_counts_and_names() {
    let mut lib = super::observe_cells::sample();
    lib.layer_names.push(LayerName {
        name: "WG".into(),
        layers: (2, 2),
        datatypes: (0, 0),
        text: false,
    });
    let layers = list_layers(&lib, 1).expect("layers");
    let got: Vec<(u32, u32, u64)> = layers
        .iter()
        .map(|l| (l.layer, l.datatype, l.shape_count))
        .collect();
    assert_eq!(got, [(1, 0, 9), (2, 0, 8), (3, 0, 0), (10, 0, 8)]);
    assert_eq!(layers[1].name.as_deref(), Some("WG"));
    let v = serde_json::to_value(&layers[0]).expect("json");
    assert!(v.get("name").is_none());
    assert_eq!(v["visible"], true);
    assert_eq!(
        list_layers(&lib, 9).expect_err("bad").code(),
        "TOP_CELL_NOT_FOUND"
    );
}
