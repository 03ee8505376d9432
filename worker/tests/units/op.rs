//! Unit tests of op argument parsing (`reticle_worker::op`).

use reticle_protocol::error::ErrorCode;
use reticle_worker::op::parse_args;

#[test]
fn bad_arguments_are_invalid_input() {
    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    struct A {
        #[allow(dead_code)]
        ms: u64,
    }
    let e = parse_args::<A>("x", r#"{"ms": "soon"}"#).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    let e = parse_args::<A>("x", r#"{"ms": 1, "typo": 2}"#).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    assert!(parse_args::<A>("x", r#"{"ms": 1}"#).is_ok());
}
