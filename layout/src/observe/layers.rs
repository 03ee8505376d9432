//! `list_layers`: every (layer, datatype) of the layout, sorted, with flattened counts.

use serde::Serialize;

use super::error::ObserveError;
use super::units::layer_name;
use crate::model::Library;
use crate::stats::flat_shape_counts;

/// One entry of `list_layers`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LayerEntry {
    /// Layer number.
    pub layer: u32,
    /// Datatype.
    pub datatype: u32,
    /// Name, when the layout names the layer (OASIS LAYERNAME).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Always true: the observer has no hidden layers.
    pub visible: bool,
    /// Shapes (texts included) on this layer in the flattened session cell, each placement
    /// counted, as KLayout's recursive shape iterator counts them (saturating).
    pub shape_count: u64,
}

/// `list_layers` for the session cell `root`: all layers any cell uses, sorted by layer then
/// datatype (layers the root does not reach have `shape_count` 0).
///
/// # Errors
/// [`ObserveError::Internal`] for a broken hierarchy (readers reject those).
pub fn list_layers(lib: &Library, root: usize) -> Result<Vec<LayerEntry>, ObserveError> {
    if root >= lib.cells.len() {
        return Err(ObserveError::CellNotFound {
            cell: format!("#{root}"),
        });
    }
    let counts = flat_shape_counts(lib, root)?;
    Ok(lib
        .layers()
        .into_iter()
        .map(|k| LayerEntry {
            layer: k.layer,
            datatype: k.datatype,
            name: layer_name(lib, k),
            visible: true,
            shape_count: counts.get(&k).copied().unwrap_or(0),
        })
        .collect())
}
