//! Unit tests of artifact files (.npy, plain names, whole writes) (`reticle_worker::artifacts`).

use reticle_kernel::Grid;
use reticle_worker::artifacts::{npy_f32, write};

#[test]
fn npy_header_is_aligned_and_describes_the_array() {
    let g = Grid {
        width: 3,
        height: 2,
        data: vec![0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0],
    };
    let b = npy_f32(&g);
    assert_eq!(&b[..8], b"\x93NUMPY\x01\x00");
    let hlen = usize::from(u16::from_le_bytes([b[8], b[9]]));
    assert_eq!((10 + hlen) % 64, 0);
    let header = std::str::from_utf8(&b[10..10 + hlen]).unwrap();
    assert!(header.contains("'shape': (2, 3)"), "{header}");
    assert_eq!(b.len(), 10 + hlen + 6 * 4);
    assert_eq!(&b[10 + hlen + 4..10 + hlen + 8], &1.0f32.to_le_bytes());
}

#[test]
fn artifact_names_are_plain_and_writes_are_whole() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(write(tmp.path(), "../x", b"").is_err());
    assert!(write(tmp.path(), ".x", b"").is_err());
    let v = write(tmp.path(), "a.png", b"abc").unwrap();
    assert_eq!(v.bytes, 3);
    assert_eq!(std::fs::read(tmp.path().join("a.png")).unwrap(), b"abc");
}
