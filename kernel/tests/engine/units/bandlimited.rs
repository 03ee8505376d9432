//! Unit tests of the band-limited imaging path's row transforms (`reticle_kernel::bandlimited`).

use num_complex::Complex64;
use reticle_kernel::CancelToken;
use reticle_kernel::bandlimited::{Repeats, real_band_of, same_bits};

/// A raster like a layout's: runs of equal rows between edges, an odd side (the last
/// pair has one row), a run of `-0.0` rows after `0.0` rows (equal values, other bits).
fn repeating_image(n: usize) -> Vec<f32> {
    let mut image = vec![0.0f32; n * n];
    for y in 0..n {
        let row = &mut image[y * n..(y + 1) * n];
        match y {
            0..=6 => {}
            7..=12 => row.fill(-0.0),
            13..=30 => row[5..20].fill(1.0),
            31 => row[5..20].fill(0.5),
            _ => {
                row[(y % 7)..(y % 7) + 9].fill(1.0);
                row[25] = 0.25;
            }
        }
    }
    image
}

#[test]
fn copied_pairs_have_the_bits_of_transformed_ones() {
    let cancel = CancelToken::new();
    for n in [45usize, 64] {
        let image = repeating_image(n);
        let copied = real_band_of(&image, n, 6, Repeats::Copied, &cancel).unwrap();
        let each = real_band_of(&image, n, 6, Repeats::Transformed, &cancel).unwrap();
        let bits = |v: &[Complex64]| -> Vec<(u64, u64)> {
            v.iter().map(|z| (z.re.to_bits(), z.im.to_bits())).collect()
        };
        assert_eq!(bits(&copied), bits(&each), "n = {n}");
    }
}

#[test]
fn a_negative_zero_row_is_not_a_repeat_of_a_zero_row() {
    assert!(!same_bits(&[0.0f32, 1.0], &[-0.0f32, 1.0]));
    assert!(same_bits(&[0.5f32, 1.0], &[0.5f32, 1.0]));
    assert!(!same_bits(&[0.5f32], &[0.5f32, 1.0]));
}
