//! Unit tests of bounded listings (seed 003 truncation keys) (`reticle_worker::ops::observe`).

use reticle_worker::ops::observe::{MAX_LIST, bounded};

#[test]
fn truncation_is_written_with_seed_003_keys_in_their_order() {
    let (kept, t) = bounded(vec![1, 2, 3], Some(2), "cells").unwrap();
    assert_eq!(kept, [1, 2]);
    assert_eq!(
        serde_json::to_string(&t).unwrap(),
        r#"{"cells_dropped":1,"truncated":true,"returned":2,"total":3,"max_cells":2}"#
    );
    let (_, t) = bounded(Vec::<u8>::new(), None, "layers").unwrap();
    assert_eq!(
        serde_json::to_string(&t).unwrap(),
        r#"{"layers_dropped":0,"truncated":false,"returned":0,"total":0,"max_layers":1000}"#
    );
    assert!(bounded(vec![1], Some(MAX_LIST + 1), "cells").is_err());
}
