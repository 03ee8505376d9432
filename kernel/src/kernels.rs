//! SOCS kernel sets: the optics reduced to a weighted sum of coherent systems.

use num_complex::Complex32;

/// A set of SOCS kernels in the frequency domain, with their weights.
///
/// `I(x) = Σ_k scales[k] · |F⁻¹{F{dose·M} · Φ_k}|²`.
///
/// Each kernel is `size × size` complex samples of the centred spectrum (DC at
/// `(size/2, size/2)`), stored `[k][row = fy][col = fx]`, the ICCAD-2013 `.npy`
/// convention. Spectrum bin spacing is `1 / period_nm` cycles per nm: a grid of
/// `n` pixels of `pixel_nm` images these kernels correctly only when
/// `n · pixel_nm == period_nm` and `n >= size`.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelSet {
    /// Side of each kernel (odd).
    pub size: usize,
    /// `count · size · size` samples, kernel-major then row-major.
    pub kernels: Vec<Complex32>,
    /// One weight per kernel.
    pub scales: Vec<f32>,
    /// The field period the spectrum sampling corresponds to (nm).
    pub period_nm: f64,
    /// Content hash (`sha256:<hex>`) used as the cache key.
    pub hash: String,
}

impl KernelSet {
    /// Number of kernels.
    #[must_use]
    pub fn count(&self) -> usize {
        self.scales.len()
    }

    /// Kernel `k` as a `size × size` slice.
    #[must_use]
    pub fn kernel(&self, k: usize) -> &[Complex32] {
        let n = self.size * self.size;
        &self.kernels[k * n..(k + 1) * n]
    }
}

/// A kernel set that is internally inconsistent.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum KernelError {
    /// Side even or zero, lengths that do not match, no kernels.
    #[error("invalid kernel set: {0}")]
    Shape(String),
    /// NaN or infinite samples, weights or period.
    #[error("kernel set holds non-finite values")]
    NonFinite,
}

impl KernelSet {
    /// Builds a set, checking shapes and values, and computing its content hash.
    pub fn new(
        size: usize,
        kernels: Vec<Complex32>,
        scales: Vec<f32>,
        period_nm: f64,
    ) -> Result<Self, KernelError> {
        if size == 0 || size.is_multiple_of(2) {
            return Err(KernelError::Shape(format!("side {size} is not odd")));
        }
        if scales.is_empty() || kernels.len() != scales.len() * size * size {
            return Err(KernelError::Shape(format!(
                "{} samples for {} kernels of {size}×{size}",
                kernels.len(),
                scales.len()
            )));
        }
        let finite = kernels.iter().all(|c| c.re.is_finite() && c.im.is_finite())
            && scales.iter().all(|s| s.is_finite())
            && period_nm.is_finite()
            && period_nm > 0.0;
        if !finite {
            return Err(KernelError::NonFinite);
        }
        let hash = content_hash(size, &kernels, &scales, period_nm);
        Ok(Self {
            size,
            kernels,
            scales,
            period_nm,
            hash,
        })
    }

    /// The first `count` kernels (all when `count` is larger), rehashed.
    #[must_use]
    pub fn truncated(&self, count: usize) -> Self {
        let k = count.clamp(1, self.count());
        let kernels = self.kernels[..k * self.size * self.size].to_vec();
        let scales = self.scales[..k].to_vec();
        let hash = content_hash(self.size, &kernels, &scales, self.period_nm);
        Self {
            size: self.size,
            kernels,
            scales,
            period_nm: self.period_nm,
            hash,
        }
    }

    /// The largest pixel (nm) that samples this set's intensity without aliasing:
    /// `P / (2·(K − 1))` for `K × K` kernels at period `P` (the period for `K = 1`).
    ///
    /// Derivation. Spectrum bins are `1/P` apart and a kernel holds bins
    /// `-(K−1)/2 ..= (K−1)/2` on each axis, so every coherent field is band-limited to
    /// `(K−1)/(2P)` cycles/nm and its intensity (a field times its conjugate) to
    /// `(K−1)/P`. A grid of pixel `p` holds frequencies below `1/(2p)` per axis:
    /// `p <= P / (2·(K−1))`. ICCAD-2013 (`K = 35`, `P = 2048` nm): 30.12 nm. At exactly
    /// the limit the top bin `K − 1` lands on the Nyquist bin of a `2·(K−1)`-pixel grid
    /// (only its cosine part is seen); any smaller pixel that divides `P` is alias-free.
    #[must_use]
    pub fn max_pixel_nm(&self) -> f64 {
        max_pixel_for_side(self.size, self.period_nm)
    }

    /// Open-frame intensity `Σ_k w_k |Φ_k(0)|²` (mask all ones, dose 1).
    #[must_use]
    pub fn open_frame(&self) -> f64 {
        let dc = (self.size / 2) * self.size + self.size / 2;
        (0..self.count())
            .map(|k| f64::from(self.scales[k]) * f64::from(self.kernel(k)[dc].norm_sqr()))
            .sum()
    }
}

/// [`KernelSet::max_pixel_nm`] for a kernel side and a period: `P / (2·(K − 1))`, or `P`
/// when `K = 1` (a DC-only kernel images a constant).
#[must_use]
pub fn max_pixel_for_side(size: usize, period_nm: f64) -> f64 {
    if size <= 1 {
        period_nm
    } else {
        period_nm / (2.0 * (size - 1) as f64)
    }
}

/// `sha256:<hex>` of the set's shape, period, weights and samples (little-endian).
#[must_use]
pub fn content_hash(size: usize, kernels: &[Complex32], scales: &[f32], period_nm: f64) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"reticle-kernelset-v1");
    h.update((size as u64).to_le_bytes());
    h.update((scales.len() as u64).to_le_bytes());
    h.update(period_nm.to_le_bytes());
    for s in scales {
        h.update(s.to_le_bytes());
    }
    for c in kernels {
        h.update(c.re.to_le_bytes());
        h.update(c.im.to_le_bytes());
    }
    let digest = h.finalize();
    let mut out = String::from("sha256:");
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}
