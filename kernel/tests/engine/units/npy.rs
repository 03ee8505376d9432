//! Unit tests of the `.npy` reader (`reticle_kernel::npy`); the test-file builder other units use.

use num_complex::Complex32;
use reticle_kernel::npy::{Dtype, NpyError, parse, parse_header};

/// Builds a version-1 `.npy` file (used by other modules' tests too).
pub(crate) fn build(descr: &str, shape: &[usize], payload: &[u8]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    let tuple = if shape.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {tuple}, }}");
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(h.len() as u16).to_le_bytes());
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(payload);
    out
}

#[test]
fn reads_complex_and_real() {
    let vals = [1.0f32, -2.0, 3.5, 0.25];
    let payload: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
    let f = build("<c8", &[2], &payload);
    let a = parse(&f).unwrap();
    assert_eq!(a.shape, vec![2]);
    assert_eq!(
        a.to_complex32().unwrap(),
        vec![Complex32::new(1.0, -2.0), Complex32::new(3.5, 0.25)]
    );
    let f = build("<f4", &[4], &payload);
    assert_eq!(parse(&f).unwrap().to_f32().unwrap(), vals.to_vec());
    let f = build("<f4", &[2, 2], &payload);
    assert_eq!(parse(&f).unwrap().shape, vec![2, 2]);
}

#[test]
fn header_alone_is_enough_for_the_shape() {
    let f = build("<c8", &[24, 35, 35], &vec![0u8; 24 * 35 * 35 * 8]);
    let h = parse_header(&f).unwrap();
    assert_eq!(
        (h.dtype, h.shape.clone()),
        (Dtype::Complex64, vec![24, 35, 35])
    );
    assert_eq!(f.len() - h.data_offset, 24 * 35 * 35 * 8);
    // The payload is neither needed nor checked; a cut header is an error.
    assert_eq!(parse_header(&f[..h.data_offset]).unwrap(), h);
    assert!(parse(&f[..h.data_offset]).is_err());
    assert!(matches!(
        parse_header(&f[..h.data_offset - 1]),
        Err(NpyError::Header(_))
    ));
}

#[test]
fn rejects_garbage() {
    let ok = build("<f4", &[1], &[0, 0, 0, 0]);
    assert_eq!(parse(b"hello").unwrap_err(), NpyError::BadMagic);
    assert_eq!(
        parse(&ok[..12]).unwrap_err(),
        NpyError::Header("truncated".into())
    );
    let mut v = ok.clone();
    v[6] = 9;
    assert_eq!(parse(&v).unwrap_err(), NpyError::Version(9, 0));
    assert!(matches!(
        parse(&build(">f4", &[1], &[0; 4])),
        Err(NpyError::Dtype(_))
    ));
    assert!(matches!(
        parse(&build("<f4", &[2], &[0; 4])),
        Err(NpyError::Length { .. })
    ));
    let mut f = build("<f4", &[1], &[0; 4]);
    let pos = f.windows(5).position(|w| w == b"False").unwrap();
    f[pos..pos + 5].copy_from_slice(b"True ");
    assert_eq!(parse(&f).unwrap_err(), NpyError::FortranOrder);
    let nan = build("<f4", &[1], &f32::NAN.to_le_bytes());
    assert_eq!(
        parse(&nan).unwrap().to_f32().unwrap_err(),
        NpyError::NonFinite(0)
    );
    let huge = build("<f4", &[usize::MAX, 4], &[]);
    assert!(matches!(parse(&huge), Err(NpyError::Header(_))));
}

proptest::proptest! {
    #[test]
    fn never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
        let mut f = b"\x93NUMPY\x01\x00".to_vec();
        f.extend_from_slice(&bytes);
        if let Ok(a) = parse(&f) {
            let _ = a.to_complex32();
        }
        let _ = parse(&bytes);
    }
}
