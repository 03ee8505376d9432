//! Files a job writes into its artifact directory (D44, D45).
//!
//! The host creates one private directory per job under the artifact root
//! (`KLAYOUT_MCP_ARTIFACT_ROOT/jobs/<prefix>_<random>/`) and names it in the job's
//! `artifact_dir`; the worker writes only there, under fixed names chosen here, through a
//! temporary file and a rename. Nothing a caller supplies becomes a path component.
//! Images are large (a 2048² `f32` image is 16 MiB), so they travel as files rather than
//! as base64 in the op's JSON.

use std::path::{Path, PathBuf};

use reticle_eval::payload::{ImageFile, ImageFiles};
use reticle_kernel::Grid;
use reticle_protocol::error::{ErrorCode, ToolError};
use reticle_protocol::files::FileRef;

use crate::attempt::AttemptCtx;

fn internal(message: String) -> ToolError {
    ToolError::new(ErrorCode::InternalError, message)
}

/// The job's artifact directory.
///
/// # Errors
/// `INTERNAL_ERROR` when the host gave the job none, or it is not a plain directory.
pub fn dir(ctx: &AttemptCtx<'_>) -> Result<PathBuf, ToolError> {
    let dir = ctx
        .context
        .artifact_dir
        .as_deref()
        .ok_or_else(|| internal("the job has no artifact directory".into()))?;
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|e| internal(format!("artifact directory {dir}: {e}")))?;
    if !meta.is_dir() {
        return Err(internal(format!(
            "artifact directory {dir} is not a plain directory"
        )));
    }
    Ok(PathBuf::from(dir))
}

/// Writes `bytes` as `dir/name` (temp file + rename) and describes it
/// (`{path, sha256, bytes}`).
///
/// # Errors
/// `INTERNAL_ERROR` on an I/O failure or a name that is not plain.
pub fn write(dir: &Path, name: &'static str, bytes: &[u8]) -> Result<FileRef, ToolError> {
    write_named(dir, name, bytes)
}

/// [`write`] for a name built at run time (a tile's file), held to the same plain-name
/// rule.
///
/// # Errors
/// `INTERNAL_ERROR` on an I/O failure or a name that is not plain.
pub fn write_named(dir: &Path, name: &str, bytes: &[u8]) -> Result<FileRef, ToolError> {
    if !reticle_protocol::wire::is_plain_artifact_name(name) {
        return Err(internal(format!("refusing artifact name {name:?}")));
    }
    let target = dir.join(name);
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    reticle_protocol::paths::write_replacing(&target, &tmp, bytes)
        .map_err(|e| internal(format!("cannot write {}: {e}", target.display())))?;
    Ok(file_ref(
        &target,
        reticle_layout::sha256_hex(bytes),
        bytes.len() as u64,
    ))
}

/// The description of the file written at `path`.
pub(crate) fn file_ref(path: &Path, sha256: String, bytes: u64) -> FileRef {
    FileRef {
        path: path.to_string_lossy().into_owned(),
        sha256,
        bytes,
    }
}

/// PNG with fixed settings (RGBA8, no ancillary chunks): equal pixels give equal bytes.
///
/// # Errors
/// `INTERNAL_ERROR` when encoding fails.
pub fn png_rgba(width: usize, height: usize, rgba: &[u8]) -> Result<Vec<u8>, ToolError> {
    let fail = |e: png::EncodingError| internal(format!("png: {e}"));
    let mut out = Vec::new();
    let w = u32::try_from(width).map_err(|_| internal("png too wide".into()))?;
    let h = u32::try_from(height).map_err(|_| internal("png too tall".into()))?;
    let mut enc = png::Encoder::new(&mut out, w, h);
    enc.set_color(png::ColorType::Rgba);
    enc.set_depth(png::BitDepth::Eight);
    enc.set_compression(png::Compression::Balanced);
    let mut writer = enc.write_header().map_err(fail)?;
    writer.write_image_data(rgba).map_err(fail)?;
    writer.finish().map_err(fail)?;
    Ok(out)
}

/// RGBA bytes of `grid` with row 0 (the bottom of the clip) at the bottom of the picture,
/// each pixel coloured by `color`.
pub fn rgba_of<T>(grid: &Grid<T>, color: impl Fn(usize, usize, &T) -> [u8; 4]) -> Vec<u8> {
    let mut out = Vec::with_capacity(grid.width * grid.height * 4);
    for row in (0..grid.height).rev() {
        for x in 0..grid.width {
            out.extend_from_slice(&color(x, row, grid.at(x, row)));
        }
    }
    out
}

/// A `.npy` (format 1.0) of a 2-D array `[height, width]`, row 0 = the bottom row of the
/// clip, C order; `descr` is the NumPy type (`<f4`, `|u1`) and `data` its little-endian bytes.
fn npy(descr: &str, height: usize, width: usize, data: &[u8]) -> Vec<u8> {
    let mut header =
        format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({height}, {width}), }}");
    // Magic (6) + version (2) + length (2) + header + '\n' is a multiple of 64.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + data.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&u16::try_from(header.len()).unwrap_or(0).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

/// A float32 grid as `.npy`.
#[must_use]
pub fn npy_f32(grid: &Grid<f32>) -> Vec<u8> {
    let data: Vec<u8> = grid.data.iter().flat_map(|v| v.to_le_bytes()).collect();
    npy("<f4", grid.height, grid.width, &data)
}

/// A 0/1 grid as `.npy` (uint8).
#[must_use]
pub fn npy_u8(grid: &Grid<u8>) -> Vec<u8> {
    npy("|u1", grid.height, grid.width, &grid.data)
}

/// The nominal corner's aerial image, resist response and print as `.npy` (numbers) and
/// PNG (to look at) in `dir` (row 0 of the grids is the bottom of the picture): what
/// `images: true` writes, for one window or a stitched region.
///
/// # Errors
/// `INTERNAL_ERROR` when a file cannot be encoded or written.
pub fn image_files(
    dir: &std::path::Path,
    aerial: &Grid<f32>,
    response: &Grid<f32>,
    printed: &Grid<u8>,
    target: &Grid<u8>,
) -> Result<ImageFiles, ToolError> {
    // Intensities map to grey with the open-frame scale clipped at the image's maximum;
    // the resist threshold is where the picture's contrast sits.
    let hi = aerial
        .data
        .iter()
        .copied()
        .fold(f32::MIN_POSITIVE, f32::max);
    let grey = |v: f32| -> [u8; 4] {
        let g = (v.clamp(0.0, 1.0) * 255.0).round() as u8;
        [g, g, g, 255]
    };
    let aerial_png = png_rgba(
        aerial.width,
        aerial.height,
        &rgba_of(aerial, |_, _, &v| grey(v / hi)),
    )?;
    let resist_png = png_rgba(
        response.width,
        response.height,
        &rgba_of(response, |_, _, &v| grey(v)),
    )?;
    let printed_png = png_rgba(
        printed.width,
        printed.height,
        &rgba_of(printed, |x, y, &v| match (v != 0, *target.at(x, y) != 0) {
            (true, true) => [235, 235, 235, 255],
            (true, false) => [60, 200, 90, 255],
            (false, true) => [220, 60, 60, 255],
            (false, false) => [16, 16, 24, 255],
        }),
    )?;
    let image = |[npy_name, png_name]: [&'static str; 2], npy: Vec<u8>, png: &[u8], scale: &str| {
        Ok::<_, ToolError>(ImageFile {
            npy: write(dir, npy_name, &npy)?,
            png: write(dir, png_name, png)?,
            png_scale: scale.to_owned(),
        })
    };
    Ok(ImageFiles {
        corner: "nominal".to_owned(),
        orientation: "row 0 of the .npy and the bottom row of the PNG are the bottom of the window"
            .to_owned(),
        aerial: image(
            ["aerial_nominal.npy", "aerial_nominal.png"],
            npy_f32(aerial),
            &aerial_png,
            "grey = intensity / max intensity",
        )?,
        resist: image(
            ["resist_nominal.npy", "resist_nominal.png"],
            npy_f32(response),
            &resist_png,
            "grey = resist response 0..1",
        )?,
        printed: image(
            ["printed_nominal.npy", "printed_nominal.png"],
            npy_u8(printed),
            &printed_png,
            "white printed and drawn, green printed only, red drawn only",
        )?,
        origin_px: None,
    })
}
