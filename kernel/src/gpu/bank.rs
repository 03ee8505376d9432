//! Kernel banks: the distinct kernel sets of a job, uploaded once and reused.
//!
//! A bank holds `images × kernels × s × s` complex samples (sets with fewer or
//! smaller kernels are zero-padded, which changes nothing: a zero kernel or a zero
//! ring around a centred kernel contributes no light) and `images × kernels` weights.

use num_complex::Complex32;

use super::context::GpuContext;
use crate::{ImagingError, KernelSet};

/// How many banks stay on the device (e.g. focus+defocus for litho, focus alone for aerial).
const BANK_SLOTS: usize = 4;

/// A kernel bank on the device.
pub(crate) struct Bank {
    /// The sets it was built from, to recognize the same sets on the next job.
    sets: Vec<KernelSet>,
    /// Side every kernel was padded to.
    pub side: u32,
    /// Kernels per set after padding.
    pub kernels: u32,
    pub samples: wgpu::Buffer,
    pub weights: wgpu::Buffer,
}

fn same_set(a: &KernelSet, b: &KernelSet) -> bool {
    if !a.hash.is_empty() && a.hash == b.hash {
        // A content hash names the content; sizes are checked for safety only.
        a.size == b.size && a.scales.len() == b.scales.len()
    } else {
        a == b
    }
}

impl Bank {
    fn matches(&self, sets: &[&KernelSet], side: u32) -> bool {
        self.side == side
            && self.sets.len() == sets.len()
            && self.sets.iter().zip(sets).all(|(a, b)| same_set(a, b))
    }

    fn build(ctx: &GpuContext, sets: &[&KernelSet], side: u32) -> Result<Self, ImagingError> {
        let s = side as usize;
        let kernels = sets.iter().map(|k| k.count()).max().unwrap_or(0);
        let mut samples = vec![Complex32::new(0.0, 0.0); sets.len() * kernels * s * s];
        let mut weights = vec![0.0_f32; sets.len() * kernels];
        for (d, set) in sets.iter().enumerate() {
            if set.kernels.len() != set.count() * set.size * set.size {
                return Err(ImagingError::Invalid(format!(
                    "kernel set has {} samples, expected {} kernels of {}x{}",
                    set.kernels.len(),
                    set.count(),
                    set.size,
                    set.size
                )));
            }
            let pad = (s - set.size) / 2;
            for k in 0..set.count() {
                weights[d * kernels + k] = set.scales[k];
                let src = set.kernel(k);
                for i in 0..set.size {
                    let dst = ((d * kernels + k) * s + i + pad) * s + pad;
                    samples[dst..dst + set.size]
                        .copy_from_slice(&src[i * set.size..(i + 1) * set.size]);
                }
            }
        }
        let samples_buf = ctx.storage("kernel_bank", (samples.len() as u64) * 8);
        ctx.queue
            .write_buffer(&samples_buf, 0, bytemuck::cast_slice(&samples));
        let weights_buf = ctx.storage("kernel_weights", (weights.len() as u64) * 4);
        ctx.queue
            .write_buffer(&weights_buf, 0, bytemuck::cast_slice(&weights));
        Ok(Self {
            sets: sets.iter().map(|&k| k.clone()).collect(),
            side,
            kernels: u32::try_from(kernels)
                .map_err(|_| ImagingError::Invalid("too many kernels".into()))?,
            samples: samples_buf,
            weights: weights_buf,
        })
    }

    pub(crate) fn bytes(&self) -> u64 {
        self.samples.size() + self.weights.size()
    }
}

/// A small most-recently-used cache of banks.
#[derive(Default)]
pub(crate) struct BankCache {
    banks: Vec<Bank>,
}

impl BankCache {
    /// The bank for `sets` padded to `side`, uploading it when it is not cached.
    pub(crate) fn get(
        &mut self,
        ctx: &GpuContext,
        sets: &[&KernelSet],
        side: u32,
    ) -> Result<&Bank, ImagingError> {
        if let Some(pos) = self.banks.iter().position(|b| b.matches(sets, side)) {
            let bank = self.banks.remove(pos);
            self.banks.insert(0, bank);
        } else {
            let bank = Bank::build(ctx, sets, side)?;
            self.banks.insert(0, bank);
            self.banks.truncate(BANK_SLOTS);
        }
        Ok(&self.banks[0])
    }

    pub(crate) fn bytes(&self) -> u64 {
        self.banks.iter().map(Bank::bytes).sum()
    }
}
