//! Projection optics for Hopkins imaging: illumination source shapes and the pupil.
//!
//! Frequencies are in cycles/nm. The pupil passes `|f| <= NA/λ`; a source point at
//! normalized coordinates `σ = (σx, σy)` illuminates at frequency `σ·NA/λ`, and its
//! coherent image uses the shifted pupil `P(f + σ·NA/λ)`. Defocus `z` (nm, in the
//! immersion medium of index `n`) is the pupil phase
//! `2π z/λ · (sqrt(n² − (λ|f|)²) − n)`.

use serde::{Deserialize, Serialize};

/// Illumination shape in normalized pupil coordinates (σ = 1 fills the pupil).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "shape", rename_all = "snake_case", deny_unknown_fields)]
pub enum Source {
    /// A disc of radius `sigma` (conventional illumination).
    Circular {
        /// Radius.
        sigma: f64,
    },
    /// A ring `sigma_in <= |σ| <= sigma_out`.
    Annular {
        /// Inner radius.
        sigma_in: f64,
        /// Outer radius.
        sigma_out: f64,
    },
    /// Two annular sectors opposite each other, centred on `rotation_deg` (0 = x axis).
    Dipole {
        /// Inner radius.
        sigma_in: f64,
        /// Outer radius.
        sigma_out: f64,
        /// Angular width of each pole (degrees).
        opening_deg: f64,
        /// Angle of the pole axis (degrees).
        #[serde(default)]
        rotation_deg: f64,
    },
    /// Four annular sectors 90° apart, the first at `rotation_deg` (45 = quasar, 0 = cross-quad).
    Quadrupole {
        /// Inner radius.
        sigma_in: f64,
        /// Outer radius.
        sigma_out: f64,
        /// Angular width of each pole (degrees).
        opening_deg: f64,
        /// Angle of the first pole (degrees).
        #[serde(default = "quasar_rotation")]
        rotation_deg: f64,
    },
}

fn quasar_rotation() -> f64 {
    45.0
}

/// Errors in optical parameters.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OpticsError {
    /// A parameter out of its physical range.
    #[error("invalid optics: {0}")]
    Invalid(String),
}

impl Source {
    /// Largest `|σ|` the source reaches.
    #[must_use]
    pub fn sigma_max(&self) -> f64 {
        match *self {
            Self::Circular { sigma } => sigma,
            Self::Annular { sigma_out, .. }
            | Self::Dipole { sigma_out, .. }
            | Self::Quadrupole { sigma_out, .. } => sigma_out,
        }
    }

    /// Radial extent of the lit region (used to pick a sampling step).
    fn radial_width(&self) -> f64 {
        match *self {
            Self::Circular { sigma } => sigma,
            Self::Annular {
                sigma_in,
                sigma_out,
            }
            | Self::Dipole {
                sigma_in,
                sigma_out,
                ..
            }
            | Self::Quadrupole {
                sigma_in,
                sigma_out,
                ..
            } => sigma_out - sigma_in,
        }
    }

    /// Checks the ranges: `0 <= σin < σout <= 1`, `0 < opening <= 360/poles`.
    pub fn validate(&self) -> Result<(), OpticsError> {
        let bad = |m: String| Err(OpticsError::Invalid(m));
        let ring = |i: f64, o: f64| i.is_finite() && o.is_finite() && 0.0 <= i && i < o && o <= 1.0;
        match *self {
            Self::Circular { sigma } => {
                if !(sigma.is_finite() && sigma > 0.0 && sigma <= 1.0) {
                    return bad(format!("circular sigma {sigma} not in (0, 1]"));
                }
            }
            Self::Annular {
                sigma_in,
                sigma_out,
            } => {
                if !ring(sigma_in, sigma_out) {
                    return bad(format!("annular sigma {sigma_in}..{sigma_out} invalid"));
                }
            }
            Self::Dipole {
                sigma_in,
                sigma_out,
                opening_deg,
                rotation_deg,
            }
            | Self::Quadrupole {
                sigma_in,
                sigma_out,
                opening_deg,
                rotation_deg,
            } => {
                let poles = self.poles().unwrap_or(1) as f64;
                let ok = ring(sigma_in, sigma_out)
                    && opening_deg > 0.0
                    && opening_deg <= 360.0 / poles
                    && rotation_deg.is_finite();
                if !ok {
                    return bad(format!(
                        "pole source sigma {sigma_in}..{sigma_out}, opening {opening_deg}° invalid"
                    ));
                }
            }
        }
        Ok(())
    }

    fn poles(&self) -> Option<u32> {
        match self {
            Self::Dipole { .. } => Some(2),
            Self::Quadrupole { .. } => Some(4),
            _ => None,
        }
    }

    /// Whether the normalized source point `(sx, sy)` is lit.
    #[must_use]
    pub fn contains(&self, sx: f64, sy: f64) -> bool {
        let r = sx.hypot(sy);
        match *self {
            Self::Circular { sigma } => r <= sigma,
            Self::Annular {
                sigma_in,
                sigma_out,
            } => sigma_in <= r && r <= sigma_out,
            Self::Dipole {
                sigma_in,
                sigma_out,
                opening_deg,
                rotation_deg,
            }
            | Self::Quadrupole {
                sigma_in,
                sigma_out,
                opening_deg,
                rotation_deg,
            } => {
                if !(sigma_in <= r && r <= sigma_out) || r == 0.0 {
                    return false;
                }
                let poles = f64::from(self.poles().unwrap_or(1));
                let period = 360.0 / poles;
                let angle = sy.atan2(sx).to_degrees() - rotation_deg;
                // Angular distance to the nearest pole centre.
                let d = (angle.rem_euclid(period)).min(period - angle.rem_euclid(period));
                d <= opening_deg / 2.0 + 1e-9
            }
        }
    }

    /// Source points on a square grid of step `step` (σ units), all equally weighted.
    ///
    /// The step is refined so that the lit region is at least four steps wide, and a
    /// grid offset of half a step keeps the sampling symmetric under x and y mirrors
    /// and 90° rotations. A source too small to hold any point keeps its centre.
    #[must_use]
    pub fn sample(&self, step: f64) -> Vec<(f64, f64)> {
        let step = step.min(self.radial_width() / 4.0).max(1e-4);
        let smax = self.sigma_max();
        let half = (smax / step).ceil() as i64 + 1;
        let mut pts = Vec::new();
        for j in -half..half {
            for i in -half..half {
                let (sx, sy) = ((i as f64 + 0.5) * step, (j as f64 + 0.5) * step);
                if self.contains(sx, sy) {
                    pts.push((sx, sy));
                }
            }
        }
        if pts.is_empty() {
            pts.push((0.0, 0.0));
        }
        pts
    }
}

/// Exposure tool optics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Optics {
    /// Wavelength (nm), 193 for ArF.
    pub wavelength_nm: f64,
    /// Numerical aperture (includes the immersion index: NA = n·sin θ).
    pub na: f64,
    /// Refractive index of the immersion medium (1.0 dry, 1.44 water at 193 nm).
    #[serde(default = "one")]
    pub immersion_index: f64,
    /// Illumination.
    pub source: Source,
    /// Source sampling step in σ units.
    #[serde(default = "default_step")]
    pub source_step: f64,
}

fn one() -> f64 {
    1.0
}

fn default_step() -> f64 {
    0.05
}

impl Optics {
    /// Checks all ranges.
    pub fn validate(&self) -> Result<(), OpticsError> {
        let ok = self.wavelength_nm.is_finite()
            && self.wavelength_nm > 0.0
            && self.na.is_finite()
            && self.na > 0.0
            && self.immersion_index.is_finite()
            && self.immersion_index >= 1.0
            && self.na < self.immersion_index
            && self.source_step.is_finite()
            && self.source_step > 0.0;
        if !ok {
            return Err(OpticsError::Invalid(format!(
                "need λ > 0, 0 < NA < n, n >= 1, step > 0 (λ {}, NA {}, n {}, step {})",
                self.wavelength_nm, self.na, self.immersion_index, self.source_step
            )));
        }
        self.source.validate()
    }

    /// The largest pixel (nm) that samples this model's intensity without aliasing:
    /// `λ / (4·NA·(1 + σ_max))`, σ_max the source's outer sigma ([`Source::sigma_max`]:
    /// `sigma` for a circular source, `sigma_out` for the others).
    ///
    /// Derivation. A source point at σ lights the mask at frequency `σ·NA/λ`; its
    /// coherent field passes the mask frequencies `f` with `|f + σ·NA/λ| <= NA/λ`, so
    /// mask frequencies up to `NA·(1 + σ_max)/λ` reach the image, and that disc is the
    /// support of every SOCS kernel ([`crate::socs`]). Each SOCS term `w_k·|Φ_k ⊛ M|²`
    /// is a field times its conjugate: its spectrum is the autocorrelation of the
    /// field's, which reaches `2·NA·(1 + σ_max)/λ`. A square grid of pixel `p` holds
    /// frequencies below `1/(2p)` on each axis (Nyquist), hence
    /// `p <= λ / (4·NA·(1 + σ_max))`.
    ///
    /// The untruncated Hopkins integral is narrower, `2·NA/λ` (each source point's field
    /// spectrum is one pupil disc, off-centre, and `|field|²` is that disc's
    /// autocorrelation), but only when every eigenpair is kept: the engine images a
    /// truncated SOCS sum, whose terms each reach `2·NA·(1 + σ_max)/λ`, and the
    /// band-limited path computes exactly that band ([`crate::bandlimited`]). So the
    /// rule is the model as imaged, not the ideal optics. At exactly the limit the top
    /// frequency falls on the Nyquist bin.
    ///
    /// Sampling is necessary, not sufficient, for accuracy: the mask raster is an area
    /// coverage (a box filter of the pixel), whose error in the kernel band grows as
    /// `(π·f·p)²/6` (`kernel/tests/engine/coarse_pixels.rs` measures it).
    #[must_use]
    pub fn max_pixel_nm(&self) -> f64 {
        self.wavelength_nm / (4.0 * self.na * (1.0 + self.source.sigma_max()))
    }

    /// The formula of [`Self::max_pixel_nm`] in words, for messages.
    #[must_use]
    pub fn max_pixel_rule(&self) -> &'static str {
        match self.source {
            Source::Circular { .. } => "λ/(4·NA·(1+σ)), Nyquist sampling of the intensity",
            _ => "λ/(4·NA·(1+σ_out)), Nyquist sampling of the intensity",
        }
    }

    /// Pupil cutoff frequency `NA/λ` (cycles/nm).
    #[must_use]
    pub fn cutoff(&self) -> f64 {
        self.na / self.wavelength_nm
    }

    /// The pupil at frequency `(fx, fy)` with defocus `z` nm: 0 outside `NA/λ`.
    #[must_use]
    pub fn pupil(&self, fx: f64, fy: f64, defocus_nm: f64) -> num_complex::Complex64 {
        let f2 = fx * fx + fy * fy;
        let fc = self.cutoff();
        if f2 > fc * fc * (1.0 + 1e-12) {
            return num_complex::Complex64::default();
        }
        if defocus_nm == 0.0 {
            return num_complex::Complex64::new(1.0, 0.0);
        }
        let n = self.immersion_index;
        let l = self.wavelength_nm;
        let phase = 2.0 * std::f64::consts::PI * defocus_nm / l
            * ((n * n - l * l * f2).max(0.0).sqrt() - n);
        num_complex::Complex64::from_polar(1.0, phase)
    }
}
