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
