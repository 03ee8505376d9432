//! Rule decks and exact geometric checks (width, space, notch, area, enclosure).
//!
//! Flow: parse a [`RuleDeck`] ([`RuleDeck::from_json`]), merge each layer's polygons into
//! a [`Region`] ([`Region::from_polygons`]: overlapping and abutting shapes become one, so
//! touching shapes never give false width/space errors), then run a rule with
//! [`check_rule`]. Coordinates are integer dbu; limits in the deck are nm and are
//! converted with the layout's `dbu_nm`. Edge-pair semantics are KLayout 0.28's, ported
//! (the `relation` module; docs/DECISIONS.md D18): Euclidean metric by default (corner to
//! corner counts), projection as an option, ignore angle 90°, strict `< value` (a pair
//! exactly at the limit passes), collinear touching edges of a kissing corner reported at
//! distance 0; width and notch pair edges of the same merged polygon only, space any two.
//! Shielding (KLayout's default drops pairs with another edge between them; its
//! `transparent` option keeps them) is not applied: results equal KLayout's `transparent`.
//!
//! EPE and PV-band rules need the simulated images; [`check_rule`] rejects them with
//! [`CheckError::NotGeometric`] and the imaging path evaluates them.

mod checks;
pub mod deck;
mod geom;
mod index;
mod region;
// Public for the engine's integration tests (tests/engine/units), not an API.
#[doc(hidden)]
pub mod relation;

use reticle_layout::{BBox, Point};
use serde::{Deserialize, Serialize};

pub use checks::{EdgePairHit, enclosure, notch, small_areas, space, width};
pub use deck::{
    AppliesTo, DeckError, DeckLayer, Metric, Rule, RuleDeck, RuleDeckFile, RuleKind, Severity,
};
pub use geom::Edge;
pub use region::{MergedPolygon, Region, RegionEdge};

/// Where a violation is: an edge pair (width/space/notch/enclosure) or a polygon (area).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ViolationGeometry {
    /// Two segments (dbu): the near parts of the two edges.
    EdgePair {
        /// First edge (for enclosure: the enclosing layer's edge).
        first: Edge,
        /// Second edge.
        second: Edge,
    },
    /// The offending polygon's hull (dbu).
    Polygon {
        /// Hull vertices, counter-clockwise.
        hull: Vec<Point>,
    },
}

/// One rule violation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Violation {
    /// Rule id from the deck.
    pub rule_id: String,
    /// Rule kind.
    pub kind: RuleKind,
    /// Severity from the deck.
    pub severity: Severity,
    /// Checked layer (`"L/D"`).
    pub layer: String,
    /// Measured value: nm (distance between the marker edges) or nm² (area).
    pub measured: f64,
    /// Required value from the deck (nm or nm²).
    pub required: f64,
    /// The marker geometry (dbu).
    pub marker: ViolationGeometry,
    /// Bounding box of the marker (dbu).
    pub bbox: BBox,
}

impl Violation {
    /// Marker centre in dbu (the bbox centre, rounded down to a half dbu).
    #[must_use]
    pub fn center_dbu(&self) -> (f64, f64) {
        (
            (self.bbox.left + self.bbox.right) as f64 / 2.0,
            (self.bbox.bottom + self.bbox.top) as f64 / 2.0,
        )
    }
}

/// Why a rule could not be checked.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CheckError {
    /// EPE / PV band: needs the simulation.
    #[error("rule `{0}` ({1}) is not a geometric check; it is evaluated from the simulation")]
    NotGeometric(String, &'static str),
    /// Enclosure called without the enclosing layer's region.
    #[error("rule `{0}`: enclosure needs the `other_layer` region")]
    MissingOtherLayer(String),
    /// `dbu_nm` is not a positive finite number.
    #[error("dbu_nm must be positive and finite, got {0}")]
    BadDbu(f64),
}

/// Runs one geometric rule on merged regions. `other` is the enclosing layer's region
/// (enclosure only). `dbu_nm` is the size of one dbu in nm. The result is sorted
/// (see [`sort_violations`]).
///
/// # Errors
/// [`CheckError`].
pub fn check_rule(
    rule: &Rule,
    region: &Region,
    other: Option<&Region>,
    dbu_nm: f64,
) -> Result<Vec<Violation>, CheckError> {
    if !(dbu_nm.is_finite() && dbu_nm > 0.0) {
        return Err(CheckError::BadDbu(dbu_nm));
    }
    let d = rule.value / dbu_nm;
    let edge_violation = |h: EdgePairHit| Violation {
        rule_id: rule.id.clone(),
        kind: rule.kind,
        severity: rule.severity,
        layer: rule.layer.to_string(),
        measured: h.distance * dbu_nm,
        required: rule.value,
        bbox: h.bbox(),
        marker: ViolationGeometry::EdgePair {
            first: h.first,
            second: h.second,
        },
    };
    let mut out: Vec<Violation> = match rule.kind {
        RuleKind::Width => width(region, d, rule.metric)
            .into_iter()
            .map(edge_violation)
            .collect(),
        RuleKind::Space => space(region, d, rule.metric)
            .into_iter()
            .map(edge_violation)
            .collect(),
        RuleKind::Notch => notch(region, d, rule.metric)
            .into_iter()
            .map(edge_violation)
            .collect(),
        RuleKind::Enclosure => {
            let outer = other.ok_or_else(|| CheckError::MissingOtherLayer(rule.id.clone()))?;
            enclosure(region, outer, d, rule.metric)
                .into_iter()
                .map(edge_violation)
                .collect()
        }
        RuleKind::Area => small_areas(region, rule.value / (dbu_nm * dbu_nm))
            .into_iter()
            .map(|p| Violation {
                rule_id: rule.id.clone(),
                kind: rule.kind,
                severity: rule.severity,
                layer: rule.layer.to_string(),
                measured: p.area2 as f64 / 2.0 * dbu_nm * dbu_nm,
                required: rule.value,
                bbox: p.bbox,
                marker: ViolationGeometry::Polygon {
                    hull: p.hull.clone(),
                },
            })
            .collect(),
        RuleKind::Epe | RuleKind::Pvband => {
            return Err(CheckError::NotGeometric(
                rule.id.clone(),
                rule.kind.as_str(),
            ));
        }
    };
    sort_violations(&mut out);
    Ok(out)
}

/// Deterministic order: bbox (left, bottom, right, top), then rule id, then marker.
pub fn sort_violations(v: &mut [Violation]) {
    v.sort_by(|a, b| (a.bbox, &a.rule_id, &a.marker).cmp(&(b.bbox, &b.rule_id, &b.marker)));
}
