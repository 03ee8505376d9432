//! Rule decks: the serde model of `protocol/schemas/rule_deck.json`, validation and the
//! deck hash.
//!
//! The hash is `sha256:` + lower-case hex SHA-256 of the deck's canonical JSON: the deck
//! as this module serializes it (every rule with its defaults resolved), object keys sorted
//! by byte order, no whitespace, numbers as `serde_json` writes them. Two files that differ
//! only in key order, whitespace or spelled-out defaults hash the same.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What a rule measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleKind {
    /// Minimum width: interior edge pairs closer than `value` nm.
    Width,
    /// Minimum space: exterior edge pairs (same or different polygons) closer than `value` nm.
    Space,
    /// Minimum area: polygons with area below `value` nm².
    Area,
    /// Minimum notch: exterior edge pairs of the same polygon closer than `value` nm.
    Notch,
    /// Minimum enclosure of `layer` by `other_layer`, `value` nm.
    Enclosure,
    /// Edge placement error tolerance (nm), evaluated from the simulation.
    Epe,
    /// Process-variation band limit (nm), evaluated from the simulation.
    Pvband,
}

impl RuleKind {
    /// The lower-case name used in decks and reports.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Width => "width",
            Self::Space => "space",
            Self::Area => "area",
            Self::Notch => "notch",
            Self::Enclosure => "enclosure",
            Self::Epe => "epe",
            Self::Pvband => "pvband",
        }
    }

    /// Whether the check is purely geometric (runs on polygons, see [`crate::rules::check_rule`]).
    /// EPE and PV band need the simulated images and are evaluated by the imaging path.
    #[must_use]
    pub const fn is_geometric(self) -> bool {
        !matches!(self, Self::Epe | Self::Pvband)
    }
}

/// How serious a violation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Must be fixed.
    Error,
    /// Should be looked at.
    Warning,
    /// Informational.
    Info,
}

/// Which shapes a rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AppliesTo {
    /// The mask polygons (MRC).
    Mask,
    /// The printed contours (litho DRC).
    Printed,
}

/// Distance metric for edge-pair checks (KLayout's names).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// Euclidean distance between the edges, corners included.
    #[default]
    Euclidean,
    /// Only the parts of the edges that project onto each other count.
    Projection,
}

/// Values a rule takes when it does not say.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleDefaults {
    /// Default severity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<Severity>,
    /// Default dedup radius (nm).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedup_radius_nm: Option<f64>,
    /// Default target shapes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applies_to: Option<AppliesTo>,
    /// Default metric.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<Metric>,
}

/// One rule as written in a deck file (optional fields not yet resolved).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    /// Unique id, e.g. `M1.W.1`.
    pub id: String,
    /// What is checked.
    pub kind: RuleKind,
    /// Layer: `"11/0"` (layer/datatype) or a name from the deck's `layers` map.
    pub layer: String,
    /// Second layer (the enclosing one, for `enclosure`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_layer: Option<String>,
    /// Limit: nm for width/space/notch/enclosure/epe/pvband, nm² for area.
    pub value: f64,
    /// Severity; falls back to the deck default, then `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<Severity>,
    /// Radius (nm) within which records of this rule form one violation group (seed 000 §2b).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedup_radius_nm: Option<f64>,
    /// Mask (MRC) or printed shapes (litho DRC); falls back to the deck default, then `printed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applies_to: Option<AppliesTo>,
    /// Distance metric; falls back to the deck default, then `euclidean`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<Metric>,
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A rule deck file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleDeckFile {
    /// Deck name (e.g. `iccad13-m1`).
    pub name: String,
    /// Deck version.
    pub version: String,
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Layer aliases: name → `"layer/datatype"`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub layers: BTreeMap<String, String>,
    /// Defaults for the rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defaults: Option<RuleDefaults>,
    /// The rules.
    pub rules: Vec<RuleSpec>,
}

/// A layer as a rule names it after alias resolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DeckLayer {
    /// Layer number.
    pub layer: u32,
    /// Datatype.
    pub datatype: u32,
}

impl std::fmt::Display for DeckLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.layer, self.datatype)
    }
}

/// A validated rule with every default resolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    /// Unique id.
    pub id: String,
    /// What is checked.
    pub kind: RuleKind,
    /// Checked layer.
    pub layer: DeckLayer,
    /// Enclosing layer (enclosure only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_layer: Option<DeckLayer>,
    /// Limit (nm, or nm² for area).
    pub value: f64,
    /// Severity.
    pub severity: Severity,
    /// Dedup radius (nm).
    pub dedup_radius_nm: f64,
    /// Mask or printed shapes.
    pub applies_to: AppliesTo,
    /// Metric.
    pub metric: Metric,
}

/// A validated deck: what the checks consume.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleDeck {
    /// Deck name.
    pub name: String,
    /// Deck version.
    pub version: String,
    /// Rules in file order, defaults resolved.
    pub rules: Vec<Rule>,
}

/// Why a deck was rejected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DeckError {
    /// Not JSON, or not the deck shape (unknown field, wrong type, bad enum value).
    #[error("rule deck is not valid JSON for the schema: {0}")]
    Parse(String),
    /// The deck has no rules.
    #[error("rule deck has no rules")]
    NoRules,
    /// Empty name or version.
    #[error("rule deck field `{0}` is empty")]
    EmptyField(&'static str),
    /// Two rules share an id.
    #[error("duplicate rule id `{0}`")]
    DuplicateId(String),
    /// A rule id is empty.
    #[error("rule #{0} has an empty id")]
    EmptyId(usize),
    /// An enclosure rule lacks `other_layer`.
    #[error("rule `{0}`: enclosure needs `other_layer`")]
    MissingOtherLayer(String),
    /// `other_layer` on a rule kind that does not use it.
    #[error("rule `{0}`: `other_layer` is only meaningful for enclosure")]
    UnexpectedOtherLayer(String),
    /// `value` is zero, negative or not finite.
    #[error("rule `{id}`: value must be a positive finite number, got {value}")]
    NonPositiveValue {
        /// Rule id.
        id: String,
        /// Offending value.
        value: f64,
    },
    /// `dedup_radius_nm` is negative or not finite.
    #[error("rule `{id}`: dedup_radius_nm must be finite and >= 0, got {value}")]
    BadDedupRadius {
        /// Rule id.
        id: String,
        /// Offending value.
        value: f64,
    },
    /// A layer is neither `L/D` nor a known alias.
    #[error("rule `{id}`: unknown layer `{layer}` (use \"L/D\" or a name from `layers`)")]
    UnknownLayer {
        /// Rule id (or `layers.<alias>`).
        id: String,
        /// The layer as written.
        layer: String,
    },
}

/// Parses `"11/0"` (also `"11"`, datatype 0).
#[must_use]
pub fn parse_layer_spec(s: &str) -> Option<DeckLayer> {
    let (l, d) = match s.split_once('/') {
        Some((l, d)) => (l, d),
        None => (s, "0"),
    };
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    if !digits(l) || !digits(d) {
        return None;
    }
    Some(DeckLayer {
        layer: l.parse().ok()?,
        datatype: d.parse().ok()?,
    })
}

impl RuleDeckFile {
    /// Parses a deck from JSON text (shape only; see [`RuleDeckFile::validate`]).
    ///
    /// # Errors
    /// [`DeckError::Parse`].
    pub fn from_json(text: &str) -> Result<Self, DeckError> {
        serde_json::from_str(text).map_err(|e| DeckError::Parse(e.to_string()))
    }

    fn resolve_layer(&self, id: &str, s: &str) -> Result<DeckLayer, DeckError> {
        parse_layer_spec(s)
            .or_else(|| self.layers.get(s).and_then(|t| parse_layer_spec(t)))
            .ok_or_else(|| DeckError::UnknownLayer {
                id: id.to_string(),
                layer: s.to_string(),
            })
    }

    /// Checks the semantic rules the schema cannot express and resolves defaults.
    ///
    /// # Errors
    /// The first problem found, as a [`DeckError`].
    pub fn validate(&self) -> Result<RuleDeck, DeckError> {
        if self.name.trim().is_empty() {
            return Err(DeckError::EmptyField("name"));
        }
        if self.version.trim().is_empty() {
            return Err(DeckError::EmptyField("version"));
        }
        if self.rules.is_empty() {
            return Err(DeckError::NoRules);
        }
        for (alias, spec) in &self.layers {
            if parse_layer_spec(spec).is_none() {
                return Err(DeckError::UnknownLayer {
                    id: format!("layers.{alias}"),
                    layer: spec.clone(),
                });
            }
        }
        let d = self.defaults.clone().unwrap_or_default();
        let mut seen = BTreeSet::new();
        let mut rules = Vec::with_capacity(self.rules.len());
        for (i, r) in self.rules.iter().enumerate() {
            if r.id.trim().is_empty() {
                return Err(DeckError::EmptyId(i));
            }
            if !seen.insert(r.id.as_str()) {
                return Err(DeckError::DuplicateId(r.id.clone()));
            }
            if !(r.value.is_finite() && r.value > 0.0) {
                return Err(DeckError::NonPositiveValue {
                    id: r.id.clone(),
                    value: r.value,
                });
            }
            let layer = self.resolve_layer(&r.id, &r.layer)?;
            let other_layer = match (&r.other_layer, r.kind) {
                (None, RuleKind::Enclosure) => {
                    return Err(DeckError::MissingOtherLayer(r.id.clone()));
                }
                (Some(o), RuleKind::Enclosure) => Some(self.resolve_layer(&r.id, o)?),
                (Some(_), _) => return Err(DeckError::UnexpectedOtherLayer(r.id.clone())),
                (None, _) => None,
            };
            let dedup_radius_nm = r.dedup_radius_nm.or(d.dedup_radius_nm).unwrap_or(0.0);
            if !(dedup_radius_nm.is_finite() && dedup_radius_nm >= 0.0) {
                return Err(DeckError::BadDedupRadius {
                    id: r.id.clone(),
                    value: dedup_radius_nm,
                });
            }
            rules.push(Rule {
                id: r.id.clone(),
                kind: r.kind,
                layer,
                other_layer,
                value: r.value,
                severity: r.severity.or(d.severity).unwrap_or(Severity::Error),
                dedup_radius_nm,
                applies_to: r.applies_to.or(d.applies_to).unwrap_or(AppliesTo::Printed),
                metric: r.metric.or(d.metric).unwrap_or_default(),
            });
        }
        Ok(RuleDeck {
            name: self.name.clone(),
            version: self.version.clone(),
            rules,
        })
    }
}

impl RuleDeck {
    /// Parses and validates a deck from JSON text.
    ///
    /// # Errors
    /// [`DeckError`].
    pub fn from_json(text: &str) -> Result<Self, DeckError> {
        RuleDeckFile::from_json(text)?.validate()
    }

    /// The canonical JSON of this deck (defaults resolved, keys sorted, no whitespace).
    #[must_use]
    pub fn canonical_json(&self) -> String {
        // Serializing plain structs of strings, numbers and enums cannot fail.
        let value = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        let mut out = String::new();
        write_canonical(&value, &mut out);
        out
    }

    /// `sha256:<hex>` of [`RuleDeck::canonical_json`] (the seed-000 `rule_deck_hash`).
    #[must_use]
    pub fn deck_hash(&self) -> String {
        use std::fmt::Write;
        let digest = Sha256::digest(self.canonical_json().as_bytes());
        digest.iter().fold(String::from("sha256:"), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
    }

    /// The rule with this id.
    #[must_use]
    pub fn rule(&self, id: &str) -> Option<&Rule> {
        self.rules.iter().find(|r| r.id == id)
    }
}

/// Writes `v` with object keys sorted by byte order and no whitespace.
fn write_canonical(v: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String((*k).clone()).to_string());
                out.push(':');
                write_canonical(&map[k.as_str()], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}
