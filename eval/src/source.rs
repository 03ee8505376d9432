//! Reading the layout an evaluation images: the reader limits of a job, read and flatten
//! failures as tool errors, a `layer/datatype` text, and one window of a layout's bytes
//! ([`load_window`]: what `simulate`, `evaluate` and `optimize` image). The caller reads
//! the bytes (confined to its roots); nothing here opens a file. A region read box by box
//! is [`crate::region_source`].

use reticle_layout::{
    BBox, FlattenOptions, LayerKey, Point, Polygon, flatten, glp, read_layout, resolve_cell,
    sha256_hex,
};
use reticle_protocol::error::{ErrorCode, ToolError};
use serde_json::json;

use crate::LayoutWindow;

/// The layout reader's limits for a job: the host's settings (`RETICLE_MAX_LAYOUT_BYTES`,
/// `RETICLE_MAX_SHAPES`) over the reader's own defaults.
#[must_use]
pub fn layout_limits(limits: &reticle_protocol::wire::JobLimits) -> reticle_layout::Limits {
    reticle_layout::Limits {
        max_input_bytes: limits.max_layout_bytes,
        max_shapes: limits.max_shapes,
        ..reticle_layout::Limits::default()
    }
}

/// A layout read failure as a tool error: a reader limit is `QUERY_TOO_LARGE` (naming it,
/// with `setting` when the host's setting set it), anything else `UNSUPPORTED_FORMAT`
/// (the bytes are not a layout this reader accepts).
#[must_use]
pub fn read_error(e: &reticle_layout::LayoutError, path: &str, format: &str) -> ToolError {
    match e.limit_exceeded() {
        Some((what, limit)) => ToolError::new(
            ErrorCode::QueryTooLarge,
            format!("cannot read the layout as {format}: {e}"),
        )
        .with_details(json!({"path": path, "format": format, "what": what, "limit": limit})),
        None => ToolError::new(
            ErrorCode::UnsupportedFormat,
            format!("cannot read the layout as {format}: {e}"),
        )
        .with_details(json!({"path": path, "format": format})),
    }
}

/// A flattening failure as a tool error: a limit is `QUERY_TOO_LARGE` (naming it, so
/// the agent can narrow the window), anything else `INVALID_INPUT`.
#[must_use]
pub fn flatten_error(e: reticle_layout::FlattenError) -> ToolError {
    match e {
        reticle_layout::FlattenError::LimitExceeded { what, limit } => ToolError::new(
            ErrorCode::QueryTooLarge,
            format!("the window needs more than {limit} {what}; use a smaller box_um or layer"),
        )
        .with_details(json!({"what": what, "limit": limit})),
        other => ToolError::new(ErrorCode::InvalidInput, other.to_string()).with_details(json!({})),
    }
}

/// A `layer/datatype` text as a layer key (`INVALID_LAYER` otherwise).
///
/// # Errors
/// `INVALID_LAYER`.
pub fn parse_layer(text: &str) -> Result<LayerKey, ToolError> {
    let parsed = text.split_once('/').and_then(|(l, d)| {
        Some(LayerKey {
            layer: l.parse().ok()?,
            datatype: d.parse().ok()?,
        })
    });
    parsed.ok_or_else(|| {
        ToolError::new(
            ErrorCode::InvalidLayer,
            format!("layer must be \"layer/datatype\", got {text:?}"),
        )
        .with_details(json!({"layer": text}))
    })
}

/// Whether `path` names an ICCAD `.glp` clip.
#[must_use]
pub fn is_glp(path: &std::path::Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("glp"))
}

/// The square of side `side` (dbu, rounded) centred on (`center_x`, `center_y`) (dbu),
/// its lower-left corner rounded once, so it is square whatever the centre.
pub fn square_around(center_x: f64, center_y: f64, side: f64) -> BBox {
    // Round the corner once and add the side: rounding both corners of a centre at .5
    // gave a window one dbu wider than high (not a square, INVALID_BOX).
    let side = side.round() as i64;
    let left = (center_x - side as f64 / 2.0).round() as i64;
    let bottom = (center_y - side as f64 / 2.0).round() as i64;
    BBox::from_corners(
        Point::new(left, bottom),
        Point::new(left + side, bottom + side),
    )
}

/// Which window of a layout to read.
#[derive(Debug, Clone, Copy)]
pub struct WindowSpec<'a> {
    /// The file (its extension says `.glp`; errors name it).
    pub path: &'a std::path::Path,
    /// `layer/datatype` (GDSII/OASIS) or the `.glp` layer; `None`: the only layer.
    pub layer: Option<&'a str>,
    /// Cell to flatten; `None`: the top cell.
    pub cell: Option<&'a str>,
    /// The window in µm; `None`: a square of `side_nm` around the layer's extent (the
    /// ICCAD window for a `.glp` clip).
    pub box_um: Option<[f64; 4]>,
    /// Layers read with `layer`, clipped to the same window but not imaged: the second
    /// layer of a rule such as enclosure.
    pub context_layers: &'a [String],
    /// A mask layer imaged instead of `layer`, which stays the target (post-OPC
    /// verification, D180). GDSII/OASIS only, and only with `layer`.
    pub mask_layer: Option<&'a str>,
}

/// `INVALID_LAYER` unless a `mask_layer` comes with a named `layer` of a GDSII/OASIS
/// layout (a `.glp` clip has one layer; a layout's only layer cannot be both); the mask
/// layer's key otherwise.
///
/// # Errors
/// `INVALID_LAYER`.
pub fn check_mask_layer(
    mask_layer: Option<&str>,
    layer: Option<&str>,
    glp: bool,
) -> Result<Option<LayerKey>, ToolError> {
    let Some(text) = mask_layer else {
        return Ok(None);
    };
    let refuse = |message: &str| {
        ToolError::new(ErrorCode::InvalidLayer, message.to_owned())
            .with_details(json!({"mask_layer": text, "layer": layer}))
    };
    if glp {
        return Err(refuse(
            "mask_layer needs a GDSII or OASIS layout (a .glp clip has one layer)",
        ));
    }
    let Some(layer) = layer else {
        return Err(refuse(
            "mask_layer needs `layer`: the target the printed mask is checked against",
        ));
    };
    let key = parse_layer(text)?;
    if key == parse_layer(layer)? {
        return Err(refuse(
            "mask_layer must differ from layer (without a mask layer, the layer itself is imaged)",
        ));
    }
    Ok(Some(key))
}

/// The window of `spec` read from the layout `bytes`: the layer's polygons clipped to it
/// (GDSII/OASIS; a `.glp` clip's shapes whole) and the context layers'.
///
/// # Errors
/// `UNSUPPORTED_FORMAT`, `QUERY_TOO_LARGE` (reader or flattening limits),
/// `TOP_CELL_NOT_FOUND`, `INVALID_LAYER` (no shapes, or several layers and none named).
pub fn load_window(
    spec: &WindowSpec<'_>,
    bytes: &[u8],
    side_nm: f64,
    limits: reticle_layout::Limits,
) -> Result<LayoutWindow, ToolError> {
    let sha256 = sha256_hex(bytes);
    let mask_key = check_mask_layer(spec.mask_layer, spec.layer, is_glp(spec.path))?;
    let um_box = |dbu_nm: f64| {
        spec.box_um.map(|[l, b, r, t]| {
            let to = |um: f64| (um * 1000.0 / dbu_nm).round() as i64;
            BBox::from_corners(Point::new(to(l), to(b)), Point::new(to(r), to(t)))
        })
    };
    if is_glp(spec.path) {
        let layout = glp::parse(bytes).map_err(|e| {
            ToolError::new(
                ErrorCode::UnsupportedFormat,
                format!("not a valid .glp file: {e}"),
            )
        })?;
        let polygons = layout.polygons(spec.layer);
        let window = um_box(1.0).unwrap_or_else(reticle_kernel::iccad::window);
        let context = spec
            .context_layers
            .iter()
            .map(|name| (name.clone(), layout.polygons(Some(name))))
            .collect();
        return Ok(LayoutWindow {
            format: "glp",
            sha256,
            dbu_nm: 1.0,
            polygons,
            mask: None,
            window,
            context,
        });
    }
    let format = reticle_layout::Format::sniff(bytes).map_or("gds or oasis", |f| f.name());
    let library = read_layout(bytes, None, &limits)
        .map_err(|e| read_error(&e, &spec.path.to_string_lossy(), format))?;
    let dbu_nm = library.dbu_in_meters * 1e9;
    let cell = resolve_cell(&library, spec.cell).map_err(|e| {
        ToolError::new(ErrorCode::TopCellNotFound, e.to_string())
            .with_details(json!({"cell": spec.cell}))
    })?;
    let layer = match spec.layer {
        Some(text) => Some(parse_layer(text)?),
        None => None,
    };
    let mut options = FlattenOptions {
        clip: None,
        layers: layer.map(|l| [l].into_iter().collect()),
        include_texts: false,
        limits,
    };
    // Without a box, centre the window on the layer's extent.
    let window = match um_box(dbu_nm) {
        Some(window) => window,
        None => {
            let all = flatten(&library, cell, &options).map_err(flatten_error)?;
            let bbox = all
                .polygons
                .values()
                .flatten()
                .filter_map(Polygon::bbox)
                .reduce(|a, b| a.union(&b))
                .ok_or_else(|| {
                    ToolError::new(ErrorCode::InvalidLayer, "the layer has no shapes")
                        .with_details(json!({"layer": spec.layer}))
                })?;
            square_around(
                (bbox.left + bbox.right) as f64 / 2.0,
                (bbox.bottom + bbox.top) as f64 / 2.0,
                side_nm / dbu_nm,
            )
        }
    };
    options.clip = Some(window);
    let context_keys = match layer {
        Some(_) => spec
            .context_layers
            .iter()
            .map(|text| Ok((text.clone(), parse_layer(text)?)))
            .collect::<Result<Vec<_>, ToolError>>()?,
        None => Vec::new(),
    };
    if let Some(layers) = options.layers.as_mut() {
        layers.extend(context_keys.iter().map(|(_, key)| *key));
        layers.extend(mask_key);
    }
    let mut flat = flatten(&library, cell, &options).map_err(flatten_error)?;
    let mask = mask_key.map(|key| flat.polygons.get(&key).cloned().unwrap_or_default());
    let context = context_keys
        .iter()
        .map(|(text, key)| {
            (
                text.clone(),
                flat.polygons.get(key).cloned().unwrap_or_default(),
            )
        })
        .collect();
    if let Some(layer) = layer {
        flat.polygons.retain(|key, _| *key == layer);
    }
    let mut layers = flat.polygons.into_iter();
    let polygons = match (layer, layers.len()) {
        (Some(_), _) | (None, 0 | 1) => layers.next().map(|(_, p)| p).unwrap_or_default(),
        (None, n) => {
            return Err(ToolError::new(
                ErrorCode::InvalidLayer,
                format!("the window has {n} layers; name one with `layer`"),
            )
            .with_details(json!({"layers": n})));
        }
    };
    Ok(LayoutWindow {
        format: "gds/oasis",
        sha256,
        dbu_nm,
        polygons,
        mask,
        window,
        context,
    })
}
