//! A layout opened for whole-layout work: the evaluated layer (and the second layers of
//! enclosure rules) read box by box, so a tile costs what its box holds and memory does
//! not grow with the region. GDSII and OASIS layouts stay hierarchical (a parsed library
//! with its spatial index, which the caller may cache); `.glp` clips are small and read
//! whole. The caller reads the file (confined to its roots); nothing here opens one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use reticle_layout::clip::clip_polygon;
use reticle_layout::{
    BBox, ClipMode, FlattenOptions, LayerKey, LayoutIndex, Limits, Polygon, glp, resolve_cell,
};
use reticle_protocol::error::{ErrorCode, ToolError};
use serde_json::json;

use crate::source::{flatten_error, parse_layer};
use crate::tile::{LayerPolygons, LayoutSource};

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
        /// A mask layer imaged instead of `target` (D180).
        mask: Option<LayerKey>,
        limits: Limits,
    },
}

/// An opened layout.
pub struct RegionSource {
    /// `glp` or `gds/oasis`.
    pub format: &'static str,
    /// SHA-256 of the file (hex).
    pub sha256: String,
    /// nm per dbu.
    pub dbu_nm: f64,
    geometry: Geometry,
    extent: Option<BBox>,
}

impl RegionSource {
    /// A `.glp` clip's `layer` (its only one when `None`) and `context_layers`, from the
    /// file's bytes.
    ///
    /// # Errors
    /// `UNSUPPORTED_FORMAT`.
    pub fn glp(
        bytes: &[u8],
        layer: Option<&str>,
        context_layers: &[String],
    ) -> Result<Self, ToolError> {
        let layout = glp::parse(bytes).map_err(|e| {
            ToolError::new(
                ErrorCode::UnsupportedFormat,
                format!("not a valid .glp file: {e}"),
            )
        })?;
        Ok(Self {
            format: "glp",
            sha256: reticle_layout::sha256_hex(bytes),
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

    /// A parsed GDSII/OASIS library (its file's hash `sha256`): `layer` (required unless
    /// the layout has one layer) and `context_layers` in `cell` (the top cell when `None`).
    ///
    /// # Errors
    /// `TOP_CELL_NOT_FOUND`, `INVALID_LAYER`.
    pub fn library(
        index: Arc<LayoutIndex>,
        sha256: String,
        cell: Option<&str>,
        layer: Option<&str>,
        context_layers: &[String],
        limits: Limits,
    ) -> Result<Self, ToolError> {
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
        Ok(Self {
            format: "gds/oasis",
            sha256,
            dbu_nm: index.library().dbu_in_meters * 1e9,
            geometry: Geometry::Library {
                index,
                cell: cell_index,
                target,
                context,
                mask: None,
                limits,
            },
            extent: None,
        })
    }

    /// Images `mask_layer` instead of the evaluated layer, which stays the target
    /// (post-OPC verification, D180); `None` changes nothing. Call before
    /// [`Self::pinned`], so the extent covers the mask layer too.
    ///
    /// # Errors
    /// `INVALID_LAYER` (a `.glp` clip, or the mask layer is the target layer).
    pub fn with_mask_layer(mut self, mask_layer: Option<&str>) -> Result<Self, ToolError> {
        let is_glp = matches!(self.geometry, Geometry::Glp { .. });
        let target_text = match &self.geometry {
            Geometry::Library { target, .. } => {
                Some(format!("{}/{}", target.layer, target.datatype))
            }
            Geometry::Glp { .. } => None,
        };
        let key = crate::source::check_mask_layer(mask_layer, target_text.as_deref(), is_glp)?;
        if let Geometry::Library { mask, .. } = &mut self.geometry {
            *mask = key;
        }
        Ok(self)
    }

    /// Checks the file's hash against the plan's `sha256` (when given) and sets the extent:
    /// `extent` when the caller knows it (a tile, from its plan), else computed.
    ///
    /// # Errors
    /// `LAYOUT_NOT_PINNED` (the file changed), a flattening limit.
    pub fn pinned(
        mut self,
        path: &std::path::Path,
        sha256: Option<&str>,
        extent: Option<Option<BBox>>,
    ) -> Result<Self, ToolError> {
        if let Some(expected) = sha256
            && expected != self.sha256
        {
            return Err(ToolError::new(
                ErrorCode::LayoutNotPinned,
                "the layout file changed during the evaluation (its sha256 differs from the plan's)",
            )
            .with_details(json!({"path": path, "expected_sha256": expected, "sha256": self.sha256})));
        }
        self.extent = match extent {
            Some(known) => known,
            None => self.compute_extent()?,
        };
        Ok(self)
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
                .map_err(flatten_error)?
                .bbox),
        }
    }

    /// The layers a library source reads: the evaluated one and the context layers.
    fn layer_keys(&self) -> BTreeSet<LayerKey> {
        match &self.geometry {
            Geometry::Library {
                target,
                context,
                mask,
                ..
            } => std::iter::once(*target)
                .chain(context.iter().map(|(_, k)| *k))
                .chain(*mask)
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
            mask,
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
            .map_err(flatten_error)?;
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
            mask: mask.map(|key| flat.polygons.remove(&key).unwrap_or_default()),
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
                    mask: None,
                })
            }
            Geometry::Library { .. } => self.flat(b, whole),
        }
    }

    fn extent(&self) -> Option<BBox> {
        self.extent
    }
}
