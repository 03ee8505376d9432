//! Layouts a job reads, and the worker's cache of them: a session's layout parsed once and
//! kept (with its spatial index) by sha256 in `WorkerState::layouts`, for the observer
//! ops, KLayout DRC and whole-layout work ([`open_region`]). Every path is re-checked
//! against the job's roots here, in the process that opens the file.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use reticle_eval::region_source::RegionSource;
use reticle_eval::source::{is_glp, layout_limits, read_error};
use reticle_layout::observe::ObserveError;
use reticle_layout::{BBox, Format, LayoutIndex, Library, read_layout, sha256_hex};
use reticle_protocol::error::{ErrorCode, ToolError};
use reticle_protocol::sync::lock;
use serde::Deserialize;
use serde_json::json;

use crate::attempt::AttemptCtx;

/// A session's layout as the host names it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayoutRef {
    /// Absolute path (the worker re-checks it against the job's roots).
    pub path: PathBuf,
    /// `gds` or `oasis`.
    pub format: String,
    /// The sha256 recorded at `open_layout`; absent only for `layout.open` itself.
    #[serde(default)]
    pub sha256: Option<String>,
}

/// A seed 003 error from an observer query, as a tool error with the same code.
#[must_use]
pub fn observe_error(e: &ObserveError) -> ToolError {
    let code: ErrorCode =
        serde_json::from_value(json!(e.code())).unwrap_or(ErrorCode::InternalError);
    ToolError::new(code, e.to_string()).with_details(e.details())
}

/// Reads, hashes and parses the layout, or takes it from the worker's cache.
///
/// # Errors
/// `FILE_NOT_FOUND` (missing, unreadable, or changed since it was opened),
/// `PATH_NOT_ALLOWED`, `QUERY_TOO_LARGE` (file over the size limit), `UNSUPPORTED_FORMAT`
/// (the bytes are not a valid layout of that format).
pub fn load(ctx: &AttemptCtx<'_>, layout: &LayoutRef) -> Result<(Arc<Library>, String), ToolError> {
    let (index, sha) = load_indexed(ctx, layout)?;
    Ok((Arc::clone(index.library_arc()), sha))
}

/// [`load`], with the layout's spatial index (built cell by cell as queries need it).
///
/// # Errors
/// As [`load`].
pub fn load_indexed(
    ctx: &AttemptCtx<'_>,
    layout: &LayoutRef,
) -> Result<(Arc<LayoutIndex>, String), ToolError> {
    let path = ctx.readable(&layout.path)?;
    if let Some(sha) = &layout.sha256 {
        let hit = lock(&ctx.state.layouts).get(sha);
        if let Some(lib) = hit {
            return Ok((lib, sha.clone()));
        }
    }
    let format = Format::from_name(&layout.format).ok_or_else(|| {
        ToolError::new(
            ErrorCode::UnsupportedFormat,
            format!(
                "unsupported format {:?} (gds, gdsii, oas, oasis)",
                layout.format
            ),
        )
        .with_details(json!({"format": layout.format}))
    })?;
    let size =
        crate::attempt::check_file_size(&path, ctx.context.limits.max_layout_bytes, "layout file")?;
    let bytes = std::fs::read(&path).map_err(|e| {
        ToolError::new(
            ErrorCode::FileNotFound,
            format!("cannot read {}: {e}", path.display()),
        )
        .with_details(json!({"path": path}))
    })?;
    let sha = sha256_hex(&bytes);
    if let Some(expected) = &layout.sha256
        && expected != &sha
    {
        return Err(ToolError::new(
            ErrorCode::FileNotFound,
            "the layout file changed since open_layout (its sha256 differs); open it again",
        )
        .with_details(json!({"path": path, "expected_sha256": expected, "sha256": sha})));
    }
    let limits = layout_limits(&ctx.context.limits);
    let lib = read_layout(&bytes, Some(format), &limits)
        .map_err(|e| read_error(&e, &path.to_string_lossy(), format.name()))?;
    let index = LayoutIndex::new(Arc::new(lib)).map_err(|e| {
        ToolError::new(
            ErrorCode::UnsupportedFormat,
            format!("invalid hierarchy: {e}"),
        )
        .with_details(json!({"path": path}))
    })?;
    let index = Arc::new(index);
    lock(&ctx.state.layouts).insert(sha.clone(), Arc::clone(&index), size.saturating_mul(4));
    Ok((index, sha))
}

/// Which layers of which cell a whole-layout job reads.
#[derive(Debug, Clone, Copy, Default)]
pub struct RegionLayers<'a> {
    /// The cell; `None`: the top cell.
    pub cell: Option<&'a str>,
    /// The evaluated (target) layer; required for GDSII/OASIS unless the layout has one.
    pub layer: Option<&'a str>,
    /// The second layers of enclosure rules.
    pub context_layers: &'a [String],
    /// A mask layer imaged instead of `layer` (post-OPC verification, D180).
    pub mask_layer: Option<&'a str>,
}

/// Opens `path` (confined to the job's roots) for whole-layout work: the `layers` of its
/// cell. With `sha256`, a cached parse is used and a file that no longer has that hash is
/// refused. `extent` is the layers' box when the caller knows it (a tile, from its plan);
/// otherwise it is computed.
///
/// # Errors
/// As [`load`], plus `TOP_CELL_NOT_FOUND`, `INVALID_LAYER`, `LAYOUT_NOT_PINNED`.
pub fn open_region(
    ctx: &AttemptCtx<'_>,
    path: &Path,
    layers: &RegionLayers<'_>,
    sha256: Option<&str>,
    extent: Option<Option<BBox>>,
) -> Result<RegionSource, ToolError> {
    let RegionLayers {
        cell,
        layer,
        context_layers,
        mask_layer,
    } = *layers;
    let path = ctx.readable(path)?;
    let source = if is_glp(&path) {
        RegionSource::glp(&read_file(ctx, &path)?, layer, context_layers)?
    } else {
        // Long enough for the OASIS magic (`%SEMI-OASIS\r\n`, 13 bytes).
        let mut head = [0u8; 16];
        let read = std::fs::File::open(&path)
            .and_then(|mut f| f.read(&mut head))
            .map_err(|e| {
                ToolError::new(
                    ErrorCode::FileNotFound,
                    format!("cannot read {}: {e}", path.display()),
                )
            })?;
        let format = Format::sniff(&head[..read]).ok_or_else(|| {
            ToolError::new(
                ErrorCode::UnsupportedFormat,
                "not a GDSII or OASIS file (and not a .glp clip)",
            )
            .with_details(json!({"path": path}))
        })?;
        let (index, sha) = load_indexed(
            ctx,
            &LayoutRef {
                path: path.clone(),
                format: format.name().to_owned(),
                sha256: sha256.map(str::to_owned),
            },
        )?;
        RegionSource::library(
            index,
            sha,
            cell,
            layer,
            context_layers,
            layout_limits(&ctx.context.limits),
        )?
    };
    source
        .with_mask_layer(mask_layer)?
        .pinned(&path, sha256, extent)
}

/// The bytes of the layout file at `path` (already confined to the job's roots), within
/// the job's size limit.
///
/// # Errors
/// `QUERY_TOO_LARGE` (over the limit), `FILE_NOT_FOUND`.
pub fn read_file(ctx: &AttemptCtx<'_>, path: &Path) -> Result<Vec<u8>, ToolError> {
    crate::attempt::check_file_size(path, ctx.context.limits.max_layout_bytes, "layout file")?;
    std::fs::read(path).map_err(|e| {
        ToolError::new(
            ErrorCode::FileNotFound,
            format!("cannot read {}: {e}", path.display()),
        )
    })
}
