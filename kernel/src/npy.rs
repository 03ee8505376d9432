//! A small, strict reader for NumPy `.npy` files (the ICCAD-2013 kernel convention).
//!
//! Only what kernels need: little-endian `complex64`/`complex128`/`float32`/`float64`,
//! C order, format versions 1–3. Everything else, and every inconsistency between the
//! header and the payload, is a typed [`NpyError`]; nothing here panics on garbage.

use num_complex::Complex32;

/// Largest header accepted (bytes); real headers are under 200.
const MAX_HEADER: usize = 1 << 16;

/// Why a `.npy` payload was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NpyError {
    /// Missing `\x93NUMPY` magic or truncated preamble.
    #[error("not a .npy file (bad magic or truncated preamble)")]
    BadMagic,
    /// Format version other than 1.0, 2.0, 3.0.
    #[error("unsupported .npy version {0}.{1}")]
    Version(u8, u8),
    /// The header is truncated, too long, not ASCII, or not the expected dict.
    #[error("malformed .npy header: {0}")]
    Header(String),
    /// A dtype this reader does not handle.
    #[error("unsupported dtype {0:?} (want little-endian c8, c16, f4 or f8)")]
    Dtype(String),
    /// Fortran-ordered arrays are not supported.
    #[error("fortran_order arrays are not supported")]
    FortranOrder,
    /// The payload length does not match the header's shape.
    #[error("payload has {got} bytes, shape needs {want}")]
    Length {
        /// Bytes present.
        got: usize,
        /// Bytes the shape implies.
        want: usize,
    },
    /// The array does not have the expected shape.
    #[error("unexpected shape {got:?}: {why}")]
    Shape {
        /// The shape found.
        got: Vec<usize>,
        /// What was expected.
        why: String,
    },
    /// A non-finite value in the data.
    #[error("non-finite value at index {0}")]
    NonFinite(usize),
}

/// Element type of an array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    /// `<c8`: two f32.
    Complex64,
    /// `<c16`: two f64.
    Complex128,
    /// `<f4`.
    Float32,
    /// `<f8`.
    Float64,
}

impl Dtype {
    fn parse(descr: &str) -> Result<Self, NpyError> {
        match descr {
            "<c8" => Ok(Self::Complex64),
            "<c16" => Ok(Self::Complex128),
            "<f4" => Ok(Self::Float32),
            "<f8" => Ok(Self::Float64),
            other => Err(NpyError::Dtype(other.chars().take(16).collect())),
        }
    }

    fn size(self) -> usize {
        match self {
            Self::Float32 => 4,
            Self::Complex64 | Self::Float64 => 8,
            Self::Complex128 => 16,
        }
    }

    fn is_complex(self) -> bool {
        matches!(self, Self::Complex64 | Self::Complex128)
    }
}

/// A parsed header and a borrowed payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyArray<'a> {
    /// Element type.
    pub dtype: Dtype,
    /// Dimensions, C order.
    pub shape: Vec<usize>,
    /// Raw little-endian payload, exactly `product(shape) · itemsize` bytes.
    pub data: &'a [u8],
}

impl NpyArray<'_> {
    /// Values as complex f32 (real dtypes get a zero imaginary part).
    pub fn to_complex32(&self) -> Result<Vec<Complex32>, NpyError> {
        let step = self.dtype.size();
        let half = step / 2;
        let mut out = Vec::with_capacity(self.data.len() / step);
        for (i, e) in self.data.chunks_exact(step).enumerate() {
            let (re, im) = match self.dtype {
                Dtype::Complex64 => (f32le(&e[..half]), f32le(&e[half..])),
                Dtype::Complex128 => (f64le(&e[..half]) as f32, f64le(&e[half..]) as f32),
                Dtype::Float32 => (f32le(e), 0.0),
                Dtype::Float64 => (f64le(e) as f32, 0.0),
            };
            if !(re.is_finite() && im.is_finite()) {
                return Err(NpyError::NonFinite(i));
            }
            out.push(Complex32::new(re, im));
        }
        Ok(out)
    }

    /// Values as f32; complex arrays are rejected.
    pub fn to_f32(&self) -> Result<Vec<f32>, NpyError> {
        if self.dtype.is_complex() {
            return Err(NpyError::Dtype("complex where real expected".into()));
        }
        Ok(self.to_complex32()?.into_iter().map(|c| c.re).collect())
    }
}

fn f32le(b: &[u8]) -> f32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(b);
    f32::from_le_bytes(a)
}

fn f64le(b: &[u8]) -> f64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    f64::from_le_bytes(a)
}

/// The header of a `.npy` file: element type, shape, and where the payload starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyHeader {
    /// Element type.
    pub dtype: Dtype,
    /// Shape (C order).
    pub shape: Vec<usize>,
    /// Byte offset of the payload.
    pub data_offset: usize,
}

/// Longest prefix [`parse_header`] may need (preamble plus the largest header accepted).
pub const MAX_PREFIX: usize = 12 + MAX_HEADER;

/// Parses the header of a `.npy` file from its first bytes (at least the whole header;
/// [`MAX_PREFIX`] bytes always suffice), without reading or checking the payload.
pub fn parse_header(bytes: &[u8]) -> Result<NpyHeader, NpyError> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(NpyError::BadMagic);
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let (hlen, start) = match major {
        1 => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
        2 | 3 => {
            let b = bytes.get(8..12).ok_or(NpyError::BadMagic)?;
            (u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize, 12)
        }
        _ => return Err(NpyError::Version(major, minor)),
    };
    if minor != 0 {
        return Err(NpyError::Version(major, minor));
    }
    if hlen > MAX_HEADER {
        return Err(NpyError::Header(format!(
            "header of {hlen} bytes is too long"
        )));
    }
    let header = bytes
        .get(start..start + hlen)
        .ok_or_else(|| NpyError::Header("truncated".into()))?;
    let header = std::str::from_utf8(header)
        .ok()
        .filter(|h| h.is_ascii())
        .ok_or_else(|| NpyError::Header("not ASCII".into()))?;
    let dict = parse_dict(header)?;
    let dtype = Dtype::parse(&dict.descr)?;
    if dict.fortran_order {
        return Err(NpyError::FortranOrder);
    }
    Ok(NpyHeader {
        dtype,
        shape: dict.shape,
        data_offset: start + hlen,
    })
}

/// Parses a whole `.npy` file held in memory.
pub fn parse(bytes: &[u8]) -> Result<NpyArray<'_>, NpyError> {
    let NpyHeader {
        dtype,
        shape,
        data_offset,
    } = parse_header(bytes)?;
    let data = &bytes[data_offset..];
    let want = shape
        .iter()
        .try_fold(dtype.size(), |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| NpyError::Header("shape overflows".into()))?;
    if data.len() != want {
        return Err(NpyError::Length {
            got: data.len(),
            want,
        });
    }
    Ok(NpyArray { dtype, shape, data })
}

struct HeaderDict {
    descr: String,
    fortran_order: bool,
    shape: Vec<usize>,
}

/// Parses `{'descr': '<c8', 'fortran_order': False, 'shape': (24, 35, 35), }`.
fn parse_dict(h: &str) -> Result<HeaderDict, NpyError> {
    let bad = |why: &str| NpyError::Header(why.to_owned());
    let mut p = NpyCursor {
        s: h.trim_end().as_bytes(),
        i: 0,
    };
    p.expect(b'{').ok_or_else(|| bad("expected '{'"))?;
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    loop {
        p.skip_ws();
        if p.eat(b'}') {
            break;
        }
        let key = p.string().ok_or_else(|| bad("expected a quoted key"))?;
        p.expect(b':').ok_or_else(|| bad("expected ':'"))?;
        match key.as_str() {
            "descr" => descr = Some(p.string().ok_or_else(|| bad("descr must be a string"))?),
            "fortran_order" => {
                fortran = Some(
                    p.boolean()
                        .ok_or_else(|| bad("fortran_order must be a bool"))?,
                );
            }
            "shape" => shape = Some(p.tuple().ok_or_else(|| bad("shape must be a tuple"))?),
            _ => return Err(bad("unknown key")),
        }
        p.skip_ws();
        if !p.eat(b',') {
            p.expect(b'}').ok_or_else(|| bad("expected ',' or '}'"))?;
            break;
        }
    }
    p.skip_ws();
    if p.i != p.s.len() {
        return Err(bad("trailing bytes after the dict"));
    }
    Ok(HeaderDict {
        descr: descr.ok_or_else(|| bad("missing descr"))?,
        fortran_order: fortran.ok_or_else(|| bad("missing fortran_order"))?,
        shape: shape.ok_or_else(|| bad("missing shape"))?,
    })
}

struct NpyCursor<'a> {
    s: &'a [u8],
    i: usize,
}

impl NpyCursor<'_> {
    fn skip_ws(&mut self) {
        while self.s.get(self.i).is_some_and(|b| b.is_ascii_whitespace()) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.skip_ws();
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8) -> Option<()> {
        self.eat(c).then_some(())
    }

    fn string(&mut self) -> Option<String> {
        self.skip_ws();
        let q = *self.s.get(self.i)?;
        if q != b'\'' && q != b'"' {
            return None;
        }
        let start = self.i + 1;
        let len = self.s.get(start..)?.iter().position(|&b| b == q)?;
        self.i = start + len + 1;
        Some(String::from_utf8_lossy(&self.s[start..start + len]).into_owned())
    }

    fn boolean(&mut self) -> Option<bool> {
        self.skip_ws();
        for (word, v) in [(&b"True"[..], true), (&b"False"[..], false)] {
            if self.s.get(self.i..self.i + word.len()) == Some(word) {
                self.i += word.len();
                return Some(v);
            }
        }
        None
    }

    fn tuple(&mut self) -> Option<Vec<usize>> {
        self.expect(b'(')?;
        let mut dims = Vec::new();
        loop {
            if self.eat(b')') {
                return Some(dims);
            }
            self.skip_ws();
            let start = self.i;
            while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
                self.i += 1;
            }
            let digits = std::str::from_utf8(&self.s[start..self.i]).ok()?;
            dims.push(digits.parse().ok()?);
            if !self.eat(b',') {
                self.expect(b')')?;
                return Some(dims);
            }
        }
    }
}
