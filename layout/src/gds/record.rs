//! GDSII record framing: the record-type table, the record lexer and the 8-byte
//! excess-64 base-16 real format.

use super::GdsError;

/// Record type numbers (the third byte of each record header).
#[allow(missing_docs)]
pub mod rt {
    pub const HEADER: u8 = 0x00;
    pub const BGNLIB: u8 = 0x01;
    pub const LIBNAME: u8 = 0x02;
    pub const UNITS: u8 = 0x03;
    pub const ENDLIB: u8 = 0x04;
    pub const BGNSTR: u8 = 0x05;
    pub const STRNAME: u8 = 0x06;
    pub const ENDSTR: u8 = 0x07;
    pub const BOUNDARY: u8 = 0x08;
    pub const PATH: u8 = 0x09;
    pub const SREF: u8 = 0x0A;
    pub const AREF: u8 = 0x0B;
    pub const TEXT: u8 = 0x0C;
    pub const LAYER: u8 = 0x0D;
    pub const DATATYPE: u8 = 0x0E;
    pub const WIDTH: u8 = 0x0F;
    pub const XY: u8 = 0x10;
    pub const ENDEL: u8 = 0x11;
    pub const SNAME: u8 = 0x12;
    pub const COLROW: u8 = 0x13;
    pub const TEXTNODE: u8 = 0x14;
    pub const NODE: u8 = 0x15;
    pub const TEXTTYPE: u8 = 0x16;
    pub const PRESENTATION: u8 = 0x17;
    pub const STRING: u8 = 0x19;
    pub const STRANS: u8 = 0x1A;
    pub const MAG: u8 = 0x1B;
    pub const ANGLE: u8 = 0x1C;
    pub const REFLIBS: u8 = 0x1F;
    pub const FONTS: u8 = 0x20;
    pub const PATHTYPE: u8 = 0x21;
    pub const GENERATIONS: u8 = 0x22;
    pub const ATTRTABLE: u8 = 0x23;
    pub const STRTYPE: u8 = 0x25;
    pub const ELFLAGS: u8 = 0x26;
    pub const NODETYPE: u8 = 0x2A;
    pub const PROPATTR: u8 = 0x2B;
    pub const PROPVALUE: u8 = 0x2C;
    pub const BOX: u8 = 0x2D;
    pub const BOXTYPE: u8 = 0x2E;
    pub const PLEX: u8 = 0x2F;
    pub const BGNEXTN: u8 = 0x30;
    pub const ENDEXTN: u8 = 0x31;
    pub const STRCLASS: u8 = 0x34;
    pub const FORMAT: u8 = 0x36;
    pub const MASK: u8 = 0x37;
    pub const ENDMASKS: u8 = 0x38;
    pub const LIBDIRSIZE: u8 = 0x39;
    pub const SRFNAME: u8 = 0x3A;
    pub const LIBSECUR: u8 = 0x3B;
    /// Highest record type defined by the GDSII stream format.
    pub const LAST: u8 = 0x3B;
}

/// Data type numbers (the fourth byte of each record header).
#[allow(missing_docs)]
pub mod dt {
    pub const NONE: u8 = 0;
    pub const BITS: u8 = 1;
    pub const I16: u8 = 2;
    pub const I32: u8 = 3;
    pub const REAL8: u8 = 5;
    pub const ASCII: u8 = 6;
}

/// The name of a record type, for error messages.
#[must_use]
pub fn record_name(t: u8) -> &'static str {
    const NAMES: [&str; 0x3C] = [
        "HEADER",
        "BGNLIB",
        "LIBNAME",
        "UNITS",
        "ENDLIB",
        "BGNSTR",
        "STRNAME",
        "ENDSTR",
        "BOUNDARY",
        "PATH",
        "SREF",
        "AREF",
        "TEXT",
        "LAYER",
        "DATATYPE",
        "WIDTH",
        "XY",
        "ENDEL",
        "SNAME",
        "COLROW",
        "TEXTNODE",
        "NODE",
        "TEXTTYPE",
        "PRESENTATION",
        "SPACING",
        "STRING",
        "STRANS",
        "MAG",
        "ANGLE",
        "UINTEGER",
        "USTRING",
        "REFLIBS",
        "FONTS",
        "PATHTYPE",
        "GENERATIONS",
        "ATTRTABLE",
        "STYPTABLE",
        "STRTYPE",
        "ELFLAGS",
        "ELKEY",
        "LINKTYPE",
        "LINKKEYS",
        "NODETYPE",
        "PROPATTR",
        "PROPVALUE",
        "BOX",
        "BOXTYPE",
        "PLEX",
        "BGNEXTN",
        "ENDEXTN",
        "TAPENUM",
        "TAPECODE",
        "STRCLASS",
        "RESERVED",
        "FORMAT",
        "MASK",
        "ENDMASKS",
        "LIBDIRSIZE",
        "SRFNAME",
        "LIBSECUR",
    ];
    NAMES.get(usize::from(t)).copied().unwrap_or("UNKNOWN")
}

/// One record: header fields plus a borrowed payload.
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    /// Byte offset of the record header in the file.
    pub offset: usize,
    /// Record type.
    pub rtype: u8,
    /// Data type.
    pub dtype: u8,
    /// Payload (record length minus the 4-byte header).
    pub data: &'a [u8],
}

impl<'a> Record<'a> {
    fn expect_dtype(&self, want: u8) -> Result<(), GdsError> {
        if self.dtype == want {
            Ok(())
        } else {
            Err(GdsError::BadDataType {
                offset: self.offset,
                record: record_name(self.rtype),
                expected: want,
                found: self.dtype,
            })
        }
    }

    fn bad_len(&self) -> GdsError {
        GdsError::BadPayload {
            offset: self.offset,
            record: record_name(self.rtype),
            len: self.data.len(),
        }
    }

    /// 16-bit integers (a BITS record reads as one 16-bit word as well).
    pub fn i16s(&self) -> Result<Vec<i16>, GdsError> {
        if self.dtype != dt::BITS {
            self.expect_dtype(dt::I16)?;
        }
        if !self.data.len().is_multiple_of(2) {
            return Err(self.bad_len());
        }
        Ok(self
            .data
            .chunks_exact(2)
            .map(|c| i16::from_be_bytes([c[0], c[1]]))
            .collect())
    }

    /// Exactly one 16-bit integer (or bit array).
    pub fn i16_one(&self) -> Result<i16, GdsError> {
        match self.i16s()?.as_slice() {
            [v] => Ok(*v),
            _ => Err(self.bad_len()),
        }
    }

    /// 32-bit integers.
    pub fn i32s(&self) -> Result<impl Iterator<Item = i32> + 'a, GdsError> {
        self.expect_dtype(dt::I32)?;
        if !self.data.len().is_multiple_of(4) {
            return Err(self.bad_len());
        }
        Ok(self
            .data
            .chunks_exact(4)
            .map(|c| i32::from_be_bytes([c[0], c[1], c[2], c[3]])))
    }

    /// Exactly one 32-bit integer.
    pub fn i32_one(&self) -> Result<i32, GdsError> {
        let mut it = self.i32s()?;
        match (it.next(), it.next()) {
            (Some(v), None) => Ok(v),
            _ => Err(self.bad_len()),
        }
    }

    /// 8-byte reals.
    pub fn reals(&self) -> Result<Vec<f64>, GdsError> {
        self.expect_dtype(dt::REAL8)?;
        if !self.data.len().is_multiple_of(8) {
            return Err(self.bad_len());
        }
        Ok(self
            .data
            .chunks_exact(8)
            .map(|c| {
                let mut b = [0u8; 8];
                b.copy_from_slice(c);
                real8_decode(b)
            })
            .collect())
    }

    /// Exactly one real.
    pub fn real_one(&self) -> Result<f64, GdsError> {
        match self.reals()?.as_slice() {
            [v] => Ok(*v),
            _ => Err(self.bad_len()),
        }
    }

    /// An ASCII string with trailing NUL padding removed (invalid UTF-8 replaced).
    pub fn string(&self) -> Result<String, GdsError> {
        self.expect_dtype(dt::ASCII)?;
        let end = self.data.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        Ok(String::from_utf8_lossy(&self.data[..end]).into_owned())
    }
}

/// Reads the record at `*pos`, advancing `*pos`. `Ok(None)` at the end of input.
///
/// # Errors
/// [`GdsError::Truncated`] or [`GdsError::BadRecordLength`].
pub fn next_record<'a>(bytes: &'a [u8], pos: &mut usize) -> Result<Option<Record<'a>>, GdsError> {
    let offset = *pos;
    if offset >= bytes.len() {
        return Ok(None);
    }
    let Some(head) = bytes.get(offset..offset + 4) else {
        return Err(GdsError::Truncated { offset });
    };
    let len = usize::from(u16::from_be_bytes([head[0], head[1]]));
    if len < 4 || len % 2 != 0 {
        return Err(GdsError::BadRecordLength {
            offset,
            length: len,
        });
    }
    let Some(data) = bytes.get(offset + 4..offset + len) else {
        return Err(GdsError::Truncated { offset });
    };
    *pos = offset + len;
    Ok(Some(Record {
        offset,
        rtype: head[2],
        dtype: head[3],
        data,
    }))
}

/// Decodes a GDSII 8-byte real: sign bit, 7-bit base-16 exponent in excess 64, 56-bit
/// fraction; value = ±fraction/2^56 · 16^(exp−64).
#[must_use]
pub fn real8_decode(b: [u8; 8]) -> f64 {
    let negative = b[0] & 0x80 != 0;
    let exp = i32::from(b[0] & 0x7f) - 64;
    let mut mant: u64 = 0;
    for &byte in &b[1..] {
        mant = (mant << 8) | u64::from(byte);
    }
    let v = mant as f64 / 2f64.powi(56) * 16f64.powi(exp);
    if negative { -v } else { v }
}

/// Encodes a real in the GDSII 8-byte format. `None` for values it cannot hold (not
/// finite, or magnitude ≥ 16^63); magnitudes below 16^-65 encode as zero.
#[must_use]
pub fn real8_encode(v: f64) -> Option<[u8; 8]> {
    if !v.is_finite() {
        return None;
    }
    if v == 0.0 {
        return Some([0; 8]);
    }
    let negative = v < 0.0;
    let mut m = v.abs();
    let mut exp: i32 = 0;
    while m >= 1.0 {
        m /= 16.0;
        exp += 1;
    }
    while m < 1.0 / 16.0 {
        m *= 16.0;
        exp -= 1;
    }
    let mut mant = (m * 2f64.powi(56)).round() as u64;
    if mant >= 1 << 56 {
        mant >>= 4;
        exp += 1;
    }
    let biased = exp + 64;
    if biased > 127 {
        return None;
    }
    if biased < 0 {
        return Some([0; 8]);
    }
    let mut out = [0u8; 8];
    out[0] = (biased as u8) | if negative { 0x80 } else { 0 };
    for (i, byte) in out[1..].iter_mut().enumerate() {
        *byte = (mant >> (8 * (6 - i))) as u8;
    }
    Some(out)
}
