//! Hopkins TCC → SOCS kernels by a thin factorization.
//!
//! With source points `s` (weights `w_s`) and frequency samples `f`, let
//! `A[s][f] = sqrt(w_s) · P(f + f_s)`. The TCC is `A^H A` (a Gram matrix), so its
//! eigenpairs are the right singular pairs of `A`: `A = U Σ V^H` gives kernels
//! `Φ_k = conj(V[:, k])` with weights `σ_k²`, and
//! `I = Σ_s w_s |Σ_f A M e^{2πifx}|² = Σ_k σ_k² |Σ_f Φ_k M e^{2πifx}|²` exactly when all
//! kernels are kept. The TCC itself (`F² × F²`) is never formed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use faer::Mat;
use num_complex::{Complex32, Complex64};
use serde::{Deserialize, Serialize};

use crate::KernelSet;
use crate::optics::{Optics, OpticsError};

/// Everything that determines one kernel set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SocsParams {
    /// Optics and source.
    pub optics: Optics,
    /// Defocus of this set (nm).
    #[serde(default)]
    pub defocus_nm: f64,
    /// Field period the kernels are sampled for (nm): spectrum bins are `1/period`.
    pub period_nm: f64,
    /// Kernel side; default: the smallest odd side holding the band `NA(1+σmax)/λ`.
    #[serde(default)]
    pub kernel_size: Option<usize>,
    /// Keep at most this many kernels.
    #[serde(default = "default_max")]
    pub max_kernels: usize,
    /// Keep the fewest kernels whose weights sum to this fraction of the total.
    #[serde(default = "default_energy")]
    pub energy: f64,
}

fn default_max() -> usize {
    24
}

fn default_energy() -> f64 {
    0.999
}

/// Failure to build kernels.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SocsError {
    /// Bad optical parameters.
    #[error(transparent)]
    Optics(#[from] OpticsError),
    /// Bad sampling or truncation parameters.
    #[error("invalid SOCS request: {0}")]
    Invalid(String),
    /// The SVD did not converge.
    #[error("SVD failed: {0}")]
    Svd(String),
}

/// Kernels plus what the truncation kept.
#[derive(Debug, Clone)]
pub struct SocsKernels {
    /// The kernel set.
    pub set: Arc<KernelSet>,
    /// All eigenvalues (weights) before truncation, descending.
    pub spectrum: Vec<f64>,
    /// Fraction of the TCC trace captured by the kept kernels.
    pub captured: f64,
    /// Number of source points used.
    pub source_points: usize,
}

/// Largest matrix dimension accepted (source points and frequency samples).
const MAX_DIM: usize = 20_000;

impl SocsParams {
    fn validate(&self) -> Result<usize, SocsError> {
        self.optics.validate()?;
        let bad = |m: String| Err(SocsError::Invalid(m));
        if !(self.period_nm.is_finite() && self.period_nm > 0.0) {
            return bad(format!("period {} must be > 0", self.period_nm));
        }
        if !self.defocus_nm.is_finite() {
            return bad("defocus must be finite".into());
        }
        if !(self.energy > 0.0 && self.energy <= 1.0) || self.max_kernels == 0 {
            return bad("energy must be in (0, 1] and max_kernels >= 1".into());
        }
        let reach = self.optics.cutoff() * (1.0 + self.optics.source.sigma_max()) * self.period_nm;
        let natural = 2 * (reach.floor() as usize) + 1;
        let size = self.kernel_size.unwrap_or(natural);
        if size.is_multiple_of(2) || size > 1023 {
            return bad(format!("kernel size {size} must be odd and <= 1023"));
        }
        Ok(size)
    }

    /// Cache key: a hash of the canonical JSON of the parameters.
    #[must_use]
    pub fn key(&self) -> String {
        use sha2::{Digest, Sha256};
        let json = serde_json::to_string(self).unwrap_or_default();
        let d = Sha256::digest(format!("socs-v1:{json}").as_bytes());
        d.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Builds the kernels for `params`, or fetches them from the in-process cache, or from
/// the on-disk store when one is set ([`crate::socs_store::set_dir`]).
pub fn kernels(params: &SocsParams) -> Result<SocsKernels, SocsError> {
    type Cache = Mutex<HashMap<String, SocsKernels>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let key = params.key();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(hit) = cache
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(&key)
    {
        return Ok(hit.clone());
    }
    let disk = crate::socs_store::dir();
    let built = match disk
        .as_deref()
        .and_then(|dir| crate::socs_store::load(dir, &key))
    {
        Some(stored) => stored,
        None => {
            let built = build(params)?;
            if let Some(dir) = &disk {
                // A failed store only costs a rebuild next time.
                let _ = crate::socs_store::store(dir, &key, &built);
            }
            built
        }
    };
    cache
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(key, built.clone());
    Ok(built)
}

/// Builds the kernels without the cache.
pub fn build(params: &SocsParams) -> Result<SocsKernels, SocsError> {
    let size = params.validate()?;
    let o = &params.optics;
    let c = (size / 2) as isize;
    let source = o.source.sample(o.source_step);
    let w = 1.0 / source.len() as f64;
    let bin = 1.0 / params.period_nm;
    let fc = o.cutoff();
    // Frequency samples where any shifted pupil is non-zero (others give zero columns).
    let reach = fc * (1.0 + o.source.sigma_max());
    let mut freqs = Vec::new();
    for r in -c..=c {
        for q in -c..=c {
            let (fx, fy) = (q as f64 * bin, r as f64 * bin);
            if fx.hypot(fy) <= reach * (1.0 + 1e-9) {
                freqs.push(((r + c) as usize * size + (q + c) as usize, fx, fy));
            }
        }
    }
    if source.len() > MAX_DIM || freqs.len() > MAX_DIM {
        return Err(SocsError::Invalid(format!(
            "{} source points × {} frequencies is too large; raise source_step or lower the period",
            source.len(),
            freqs.len()
        )));
    }
    let sw = w.sqrt();
    let a = Mat::<Complex64>::from_fn(source.len(), freqs.len(), |i, j| {
        let (sx, sy) = source[i];
        let (_, fx, fy) = freqs[j];
        o.pupil(fx + sx * fc, fy + sy * fc, params.defocus_nm) * sw
    });
    let svd = a.thin_svd().map_err(|e| SocsError::Svd(format!("{e:?}")))?;
    let s = svd.S().column_vector();
    let spectrum: Vec<f64> = (0..s.nrows()).map(|i| s[i].re * s[i].re).collect();
    let total: f64 = spectrum.iter().sum();
    let mut keep = 0;
    let mut acc = 0.0;
    while keep < spectrum.len() && keep < params.max_kernels && acc < params.energy * total {
        acc += spectrum[keep];
        keep += 1;
    }
    let keep = keep.max(1);
    let v = svd.V();
    let mut samples = vec![Complex32::default(); keep * size * size];
    for k in 0..keep {
        // Fix the arbitrary eigenvector phase: largest sample real and positive.
        let mut best = (0.0, Complex64::new(1.0, 0.0));
        for j in 0..freqs.len() {
            let z = v[(j, k)].conj();
            if z.norm() > best.0 + 1e-12 {
                best = (z.norm(), z);
            }
        }
        let rot = best.1.conj() / best.0.max(f64::MIN_POSITIVE);
        for (j, &(idx, _, _)) in freqs.iter().enumerate() {
            let z = v[(j, k)].conj() * rot;
            samples[k * size * size + idx] = Complex32::new(z.re as f32, z.im as f32);
        }
    }
    let scales: Vec<f32> = spectrum[..keep].iter().map(|&x| x as f32).collect();
    let set = KernelSet::new(size, samples, scales, params.period_nm)
        .map_err(|e| SocsError::Invalid(e.to_string()))?;
    Ok(SocsKernels {
        set: Arc::new(set),
        captured: if total > 0.0 { acc / total } else { 0.0 },
        spectrum,
        source_points: source.len(),
    })
}
