//! Unit tests of the op registry (`reticle_worker::ops`).

use reticle_worker::ops::{Op, find, names};

#[test]
fn every_op_is_found_by_its_name_and_names_are_unique() {
    let names = names();
    let mut dedup = names.clone();
    dedup.dedup();
    assert_eq!(names, dedup);
    for name in &names {
        assert_eq!(find(name).map(Op::name), Some(*name));
    }
    assert!(find("no.such.op").is_none());
}
