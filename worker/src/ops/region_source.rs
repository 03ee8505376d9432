//! A layout opened for whole-layout evaluation: the evaluated layer (and the second layers
//! of enclosure rules) read box by box, so a tile costs what its box holds and memory does
//! not grow with the region. GDSII and OASIS layouts stay hierarchical (the parsed
//! library, cached by sha256 like the observer's); `.glp` clips are small and read whole.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use reticle_eval::tile::{LayerPolygons, LayoutSource};
use reticle_layout::clip::clip_polygon;
use reticle_layout::{
    BBox, ClipMode, FlattenOptions, LayerKey, LayoutIndex, Limits, Polygon, glp, resolve_cell,
};
use reticle_protocol::error::{ErrorCode, ToolError};
use serde_json::json;

use super::observe::{LayoutRef, load_indexed};
use super::simulate::parse_layer;
use crate::job::JobCtx;

/// Where the polygons come from.
enum Geometry {
    /// A `.glp` clip: its shapes, by layer text.
    Glp {
        target: Vec<Polygon>,
        context: BTreeMap<String, Vec<Polygon>>,
    },
    /// A parsed GDSII/OASIS library (with its spatial index) and the cell and layers to
    /// flatten.
    Library {
        index: Arc<LayoutIndex>,
        cell: usize,
        target: LayerKey,
        context: Vec<(String, LayerKey)>,
        limits: Limits,
    },
}

/// An opened layout.
pub(crate) struct RegionSource {
    /// `glp` or `gds/oasis`.
    pub(crate) format: &'static str,
    /// SHA-256 of the file (hex).
    pub(crate) sha256: String,
    /// nm per dbu.
    pub(crate) dbu_nm: f64,
    geometry: Geometry,
    extent: Option<BBox>,
}

impl RegionSource {
    /// Opens `path` (confined to the job's roots) for `layer` (required for GDSII/OASIS)
    /// and `context_layers` in `cell`. With `sha256`, a cached parse is used and a file
    /// that no longer has that hash is refused. `extent` is the layers' box when the
    /// caller knows it (a tile, from its plan); otherwise it is computed.
    pub(crate) fn open(
        ctx: &JobCtx<'_>,
        path: &Path,
        cell: Option<&str>,
        layer: Option<&str>,
        context_layers: &[String],
        sha256: Option<&str>,
        extent: Option<Option<BBox>>,
    ) -> Result<Self, ToolError> {
        let path = ctx.readable(path)?;
        let is_glp = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("glp"));
        let mut source = if is_glp {
            open_glp(ctx, &path, layer, context_layers)?
        } else {
            open_library(ctx, &path, cell, layer, context_layers, sha256)?
        };
        if let Some(expected) = sha256
            && expected != source.sha256
        {
            return Err(ToolError::new(
                ErrorCode::LayoutNotPinned,
                "the layout file changed during the evaluation (its sha256 differs from the plan's)",
            )
            .with_details(json!({"path": path, "expected_sha256": expected, "sha256": source.sha256})));
        }
        source.extent = match extent {
            Some(known) => known,
            None => source.compute_extent()?,
        };
        Ok(source)
    }

    /// The box of every polygon of the evaluated and context layers (for a library, from
    /// per-cell boxes: nothing is flattened).
    fn compute_extent(&self) -> Result<Option<BBox>, ToolError> {
        match &self.geometry {
            Geometry::Glp { target, context } => Ok(target
                .iter()
                .chain(context.values().flatten())
                .filter_map(Polygon::bbox)
                .reduce(|a, b| a.union(&b))),
            Geometry::Library {
                index,
                cell,
                limits,
                ..
            } => Ok(index
                .layer_bbox(*cell, Some(&self.layer_keys()), limits)
                .map_err(crate::job::flatten_error)?
                .bbox),
        }
    }

    /// The layers a library source reads: the evaluated one and the context layers.
    fn layer_keys(&self) -> BTreeSet<LayerKey> {
        match &self.geometry {
            Geometry::Library {
                target, context, ..
            } => std::iter::once(*target)
                .chain(context.iter().map(|(_, k)| *k))
                .collect(),
            Geometry::Glp { .. } => BTreeSet::new(),
        }
    }

    /// The library's layers in `b`, clipped to it or (`whole`) every polygon meeting it
    /// whole, through the spatial index.
    fn flat(&self, b: BBox, whole: bool) -> Result<LayerPolygons, ToolError> {
        let Geometry::Library {
            index,
            cell,
            target,
            context,
            limits,
        } = &self.geometry
        else {
            return Ok(LayerPolygons::default());
        };
        let options = FlattenOptions {
            clip: Some(b),
            layers: Some(self.layer_keys()),
            include_texts: false,
            limits: *limits,
        };
        let mode = if whole {
            ClipMode::Overlap
        } else {
            ClipMode::Clip
        };
        let mut flat = index
            .flatten(*cell, &options, mode)
            .map_err(crate::job::flatten_error)?;
        Ok(LayerPolygons {
            target: flat.polygons.remove(target).unwrap_or_default(),
            context: context
                .iter()
                .map(|(text, key)| {
                    (
                        text.clone(),
                        flat.polygons.get(key).cloned().unwrap_or_default(),
                    )
                })
                .collect(),
        })
    }
}

impl LayoutSource for RegionSource {
    fn polygons(&mut self, b: BBox, whole: bool) -> Result<LayerPolygons, ToolError> {
        match &self.geometry {
            Geometry::Glp { target, context } => {
                let keep = |polygons: &[Polygon]| -> Vec<Polygon> {
                    polygons
                        .iter()
                        .filter(|p| p.bbox().is_some_and(|pb| pb.overlaps(&b)))
                        .filter_map(|p| {
                            if whole {
                                Some(p.clone())
                            } else {
                                clip_polygon(p, &b)
                            }
                        })
                        .collect()
                };
                Ok(LayerPolygons {
                    target: keep(target),
                    context: context.iter().map(|(k, v)| (k.clone(), keep(v))).collect(),
                })
            }
            Geometry::Library { .. } => self.flat(b, whole),
        }
    }

    fn extent(&self) -> Option<BBox> {
        self.extent
    }
}

fn open_glp(
    ctx: &JobCtx<'_>,
    path: &Path,
    layer: Option<&str>,
    context_layers: &[String],
) -> Result<RegionSource, ToolError> {
    crate::job::check_file_size(path, ctx.context.limits.max_layout_bytes, "layout file")?;
    let bytes = std::fs::read(path).map_err(|e| {
        ToolError::new(
            ErrorCode::FileNotFound,
            format!("cannot read {}: {e}", path.display()),
        )
    })?;
    let layout = glp::parse(&bytes).map_err(|e| {
        ToolError::new(
            ErrorCode::UnsupportedFormat,
            format!("not a valid .glp file: {e}"),
        )
    })?;
    Ok(RegionSource {
        format: "glp",
        sha256: reticle_layout::sha256_hex(&bytes),
        dbu_nm: 1.0,
        geometry: Geometry::Glp {
            target: layout.polygons(layer),
            context: context_layers
                .iter()
                .map(|name| (name.clone(), layout.polygons(Some(name))))
                .collect(),
        },
        extent: None,
    })
}

fn open_library(
    ctx: &JobCtx<'_>,
    path: &Path,
    cell: Option<&str>,
    layer: Option<&str>,
    context_layers: &[String],
    sha256: Option<&str>,
) -> Result<RegionSource, ToolError> {
    // Long enough for the OASIS magic (`%SEMI-OASIS\r\n`, 13 bytes).
    let mut head = [0u8; 16];
    let read = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .map_err(|e| {
            ToolError::new(
                ErrorCode::FileNotFound,
                format!("cannot read {}: {e}", path.display()),
            )
        })?;
    let format = reticle_layout::Format::sniff(&head[..read]).ok_or_else(|| {
        ToolError::new(
            ErrorCode::UnsupportedFormat,
            "not a GDSII or OASIS file (and not a .glp clip)",
        )
        .with_details(json!({"path": path}))
    })?;
    let (index, sha) = load_indexed(
        ctx,
        &LayoutRef {
            path: path.to_path_buf(),
            format: format.name().to_owned(),
            sha256: sha256.map(str::to_owned),
        },
    )?;
    let cell_index = resolve_cell(index.library(), cell).map_err(|e| {
        ToolError::new(ErrorCode::TopCellNotFound, e.to_string())
            .with_details(json!({"cell": cell}))
    })?;
    let target = match layer {
        Some(text) => parse_layer(text)?,
        None => {
            // No layer named: the layout's only one, as a single window does.
            let layers = index.library().layers();
            match layers.as_slice() {
                [only] => *only,
                _ => {
                    return Err(ToolError::new(
                        ErrorCode::InvalidLayer,
                        format!("the layout has {} layers; name one with `layer`", layers.len()),
                    )
                    .with_details(json!({"layers": layers.iter().map(|k| format!("{}/{}", k.layer, k.datatype)).collect::<Vec<_>>()})));
                }
            }
        }
    };
    let context = context_layers
        .iter()
        .map(|text| Ok((text.clone(), parse_layer(text)?)))
        .collect::<Result<Vec<_>, ToolError>>()?;
    Ok(RegionSource {
        format: "gds/oasis",
        sha256: sha,
        dbu_nm: index.library().dbu_in_meters * 1e9,
        geometry: Geometry::Library {
            index,
            cell: cell_index,
            target,
            context,
            limits: crate::job::layout_limits(&ctx.context.limits),
        },
        extent: None,
    })
}
