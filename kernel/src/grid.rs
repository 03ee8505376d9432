//! Dense 2D images in row-major order.

/// A dense `width × height` image, row-major: `data[y * width + x]`.
///
/// Row 0 is the bottom row of the clip (layout y grows with the row index), so a
/// pixel `(x, y)` covers `[x0 + x·p, x0 + (x+1)·p) × [y0 + y·p, y0 + (y+1)·p)` in the
/// layout frame, where `p` is the pixel size and `(x0, y0)` the clip origin.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid<T> {
    /// Pixels per row.
    pub width: usize,
    /// Rows.
    pub height: usize,
    /// `width * height` values.
    pub data: Vec<T>,
}

impl<T: Clone> Grid<T> {
    /// A grid filled with `value`.
    #[must_use]
    pub fn filled(width: usize, height: usize, value: T) -> Self {
        Self {
            width,
            height,
            data: vec![value; width * height],
        }
    }
}

impl<T> Grid<T> {
    /// Value at `(x, y)`.
    #[must_use]
    pub fn at(&self, x: usize, y: usize) -> &T {
        &self.data[y * self.width + x]
    }

    /// Mutable value at `(x, y)`.
    pub fn at_mut(&mut self, x: usize, y: usize) -> &mut T {
        &mut self.data[y * self.width + x]
    }
}
