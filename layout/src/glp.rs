//! Reader for the ICCAD-2013 `.glp` text layout format.
//!
//! Shapes are one per line, integer nm:
//! `RECT N <layer> x y w h` (lower-left corner, width, height) and
//! `PGON N <layer> x1 y1 x2 y2 …` (vertices, not closed). Header and structure lines
//! (`BEGIN`, `EQUIV`, `CNAME`, `LEVEL`, `CELL`, `ENDMSG`, any other upper-case keyword)
//! and blank lines are ignored. Anything malformed is a typed [`GlpError`].

use crate::geom::{BBox, Point, Polygon};

/// Coordinates beyond ±2^40 nm (about 1 km) are rejected so sums cannot overflow.
pub const MAX_COORD: i64 = 1 << 40;

/// Largest `.glp` text accepted (bytes).
pub const MAX_BYTES: usize = 64 << 20;

/// One shape from a `.glp` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlpShape {
    /// Layer name (`M1`).
    pub layer: String,
    /// Outline in nm.
    pub polygon: Polygon,
}

/// A parsed `.glp` clip.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GlpLayout {
    /// Cell name from the `CELL` line, when present.
    pub cell: Option<String>,
    /// Shapes in file order.
    pub shapes: Vec<GlpShape>,
}

impl GlpLayout {
    /// The polygons of one layer (all layers when `layer` is `None`).
    #[must_use]
    pub fn polygons(&self, layer: Option<&str>) -> Vec<Polygon> {
        self.shapes
            .iter()
            .filter(|s| layer.is_none_or(|l| s.layer == l))
            .map(|s| s.polygon.clone())
            .collect()
    }

    /// Bounding box of all shapes; `None` when there are none.
    #[must_use]
    pub fn bbox(&self) -> Option<BBox> {
        self.shapes
            .iter()
            .filter_map(|s| s.polygon.bbox())
            .reduce(|a, b| a.union(&b))
    }
}

/// Why a `.glp` text was rejected. Line numbers are 1-based.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GlpError {
    /// The input is larger than [`MAX_BYTES`].
    #[error("glp input of {0} bytes exceeds the limit")]
    TooLarge(usize),
    /// The bytes are not UTF-8 text.
    #[error("glp input is not UTF-8 text (byte {0})")]
    NotText(usize),
    /// A line that is neither a shape nor a keyword.
    #[error("line {line}: unrecognized record {token:?}")]
    UnknownRecord {
        /// Line number.
        line: usize,
        /// First token.
        token: String,
    },
    /// A shape line with too few fields.
    #[error("line {line}: {record} needs {expected}")]
    MissingField {
        /// Line number.
        line: usize,
        /// `RECT` or `PGON`.
        record: &'static str,
        /// What was expected.
        expected: &'static str,
    },
    /// A field that should be an integer is not, or is out of range.
    #[error("line {line}: bad coordinate {token:?}")]
    BadNumber {
        /// Line number.
        line: usize,
        /// The offending token.
        token: String,
    },
    /// A `RECT` with negative or zero width or height.
    #[error("line {line}: rectangle has non-positive size")]
    EmptyRect {
        /// Line number.
        line: usize,
    },
    /// A `PGON` with an odd number of coordinates or fewer than three vertices.
    #[error("line {line}: polygon needs an even number of coordinates and at least 3 vertices")]
    BadPolygon {
        /// Line number.
        line: usize,
    },
}

/// Parses `.glp` bytes.
pub fn parse(bytes: &[u8]) -> Result<GlpLayout, GlpError> {
    if bytes.len() > MAX_BYTES {
        return Err(GlpError::TooLarge(bytes.len()));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| GlpError::NotText(e.valid_up_to()))?;
    parse_str(text)
}

/// Parses `.glp` text.
pub fn parse_str(text: &str) -> Result<GlpLayout, GlpError> {
    let mut out = GlpLayout::default();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let mut tokens = raw.split_whitespace();
        let Some(head) = tokens.next() else { continue };
        match head {
            "RECT" => {
                let (layer, nums) = shape_fields(tokens, line, "RECT")?;
                let [x, y, w, h] = nums[..] else {
                    return Err(GlpError::MissingField {
                        line,
                        record: "RECT",
                        expected: "exactly 4 integers: x y w h",
                    });
                };
                if w <= 0 || h <= 0 {
                    return Err(GlpError::EmptyRect { line });
                }
                let b = BBox::from_corners(Point::new(x, y), Point::new(x + w, y + h));
                out.shapes.push(GlpShape {
                    layer,
                    polygon: Polygon::rect(b),
                });
            }
            "PGON" => {
                let (layer, nums) = shape_fields(tokens, line, "PGON")?;
                if nums.len() % 2 != 0 || nums.len() < 6 {
                    return Err(GlpError::BadPolygon { line });
                }
                let points = nums.chunks(2).map(|c| Point::new(c[0], c[1])).collect();
                out.shapes.push(GlpShape {
                    layer,
                    polygon: Polygon::new(points),
                });
            }
            "CELL" => out.cell = tokens.next().map(str::to_owned),
            kw if is_keyword(kw) => {}
            other => {
                return Err(GlpError::UnknownRecord {
                    line,
                    token: other.chars().take(32).collect(),
                });
            }
        }
    }
    Ok(out)
}

/// Header keywords: upper-case ASCII letters (`BEGIN`, `EQUIV`, `ENDMSG`, …).
fn is_keyword(token: &str) -> bool {
    !token.is_empty() && token.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
}

/// `N <layer> <ints…>` after the record name.
fn shape_fields<'a>(
    mut tokens: impl Iterator<Item = &'a str>,
    line: usize,
    record: &'static str,
) -> Result<(String, Vec<i64>), GlpError> {
    let missing = GlpError::MissingField {
        line,
        record,
        expected: "a type flag and a layer name",
    };
    tokens.next().ok_or_else(|| missing.clone())?;
    let layer = tokens.next().ok_or(missing)?.to_owned();
    let nums = tokens
        .map(|t| {
            t.parse::<i64>()
                .ok()
                .filter(|v| v.abs() <= MAX_COORD)
                .ok_or_else(|| GlpError::BadNumber {
                    line,
                    token: t.chars().take(32).collect(),
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((layer, nums))
}
