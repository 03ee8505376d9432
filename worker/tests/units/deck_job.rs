//! Unit tests of the arguments common to deck jobs (`reticle_worker::deck_job`).

use reticle_protocol::error::ErrorCode;
use reticle_worker::deck_job::{DeckArgs, parse_deck_args};
use serde::Deserialize;

#[derive(Deserialize, Default, Debug)]
#[serde(default, deny_unknown_fields)]
struct Own {
    box_um: Option<[f64; 4]>,
}

#[test]
fn the_key_list_names_every_field() {
    // Adding a field to DeckArgs breaks this destructuring: add its key to the list.
    let json = r#"{"layout": "a.gds", "deck": "d", "layer": "1/0", "cell": "TOP", "pixel_nm": 2, "model": null, "mask_layer": "1/1"}"#;
    let (args, _own): (DeckArgs, Own) = parse_deck_args("t", json).unwrap();
    let DeckArgs {
        layout,
        deck,
        layer,
        cell,
        pixel_nm,
        model,
        mask_layer,
    } = args;
    assert_eq!(
        (layout, deck, layer, cell, pixel_nm, model.is_none()),
        (
            "a.gds".into(),
            "d".into(),
            Some("1/0".into()),
            Some("TOP".into()),
            Some(2.0),
            true
        )
    );
    assert_eq!(mask_layer.as_deref(), Some("1/1"));
}

#[test]
fn common_and_own_fields_split_and_unknown_keys_are_refused() {
    let (args, own): (DeckArgs, Own) = parse_deck_args(
        "t",
        r#"{"layout": "a.gds", "deck": "d", "box_um": [0, 0, 1, 1]}"#,
    )
    .unwrap();
    assert_eq!(args.deck, "d");
    assert_eq!(own.box_um, Some([0.0, 0.0, 1.0, 1.0]));
    for bad in [
        r#"{"layout": "a.gds", "deck": "d", "typo": 1}"#,
        r#"{"layout": "a.gds", "deck": "d", "layer": 7}"#,
        r#"{"deck": "d"}"#,
        r#"{"layout": "a.gds", "deck": "d", "box_um": "x"}"#,
        "[1]",
    ] {
        let e = parse_deck_args::<Own>("t", bad).err().unwrap();
        assert_eq!(e.code, ErrorCode::InvalidInput, "{bad}");
    }
}
