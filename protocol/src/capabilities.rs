//! The engine-path matrix of seed 000 §3: for each engine path an evaluation can emit
//! (`counts.by_rule[].engine_path`), what `report_level = detailed` costs or needs. One
//! table, read by the host (the `_meta.capabilities` of `evaluate` in `tools/list`) and
//! by the evaluation (`REPORT_LEVEL_UNSUPPORTED` where the table says `unsupported`), so
//! the descriptor and the engine cannot drift apart (docs/DECISIONS.md D73).

/// Seed 000 §3's four values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DetailSupport {
    /// Detailed output is free: the check builds the list anyway.
    SinglePass,
    /// Detailed output needs a separate engine pass.
    RerunRequired,
    /// Detailed output works below a precondition; above it the response says so.
    Conditional,
    /// The path cannot produce per-violation output: a planner must not ask.
    Unsupported,
}

impl DetailSupport {
    /// Every value, in the seed's order.
    pub const ALL: [Self; 4] = [
        Self::SinglePass,
        Self::RerunRequired,
        Self::Conditional,
        Self::Unsupported,
    ];

    /// The value's name in the matrix.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::SinglePass => "single_pass",
            Self::RerunRequired => "rerun_required",
            Self::Conditional => "conditional",
            Self::Unsupported => "unsupported",
        }
    }

    /// What the value means (seed 000 §3), for the published matrix.
    #[must_use]
    pub const fn meaning(self) -> &'static str {
        match self {
            Self::SinglePass => "detailed output is free: the check builds the list anyway",
            Self::RerunRequired => "detailed output requires a separate engine pass",
            Self::Conditional => {
                "detailed output works below the path's precondition; above it the engine falls back and says so on the response (never silently)"
            }
            Self::Unsupported => {
                "the path cannot produce per-violation output: do not ask (REPORT_LEVEL_UNSUPPORTED)"
            }
        }
    }
}

/// One engine path of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnginePath {
    /// Its name (`counts.by_rule[].engine_path`).
    pub name: &'static str,
    /// What `report_level = detailed` is on it.
    pub detailed: DetailSupport,
    /// Why, in one line.
    pub note: &'static str,
}

/// The matrix. Every imaged path is `conditional`: its records are built in the same
/// pass as its counts, but a detailed answer holds at most `limits.max_violations`
/// records and past that truncates or degrades to aggregate, which the response says.
/// No reticle path is `rerun_required` (D73).
pub const ENGINE_PATHS: &[EnginePath] = &[
    EnginePath {
        name: "mrc.standard",
        detailed: DetailSupport::Conditional,
        note: "mask rules on the drawn polygons; records from the same pass",
    },
    EnginePath {
        name: "drc.printed_contour",
        detailed: DetailSupport::Conditional,
        note: "printed rules on the nominal contours; records from the same pass",
    },
    EnginePath {
        name: "epe.gauge",
        detailed: DetailSupport::Conditional,
        note: "EPE at the gauge checkpoints; records from the same pass",
    },
    EnginePath {
        name: "pvband.3corner",
        detailed: DetailSupport::Conditional,
        note: "PV band over the three ICCAD-2013 corners; records from the same pass",
    },
    EnginePath {
        name: "enclosure.mask",
        detailed: DetailSupport::Conditional,
        note: "mask enclosure (reported under mrc.standard); records from the same pass",
    },
    EnginePath {
        name: "enclosure.printed",
        detailed: DetailSupport::Unsupported,
        note: "needs the enclosing layer imaged too; evaluate images one layer, so the rule is not checked",
    },
    EnginePath {
        name: "euv.stochastic",
        detailed: DetailSupport::Unsupported,
        note: "no stochastic EUV model in this engine",
    },
];

/// The matrix entry of `name`, if it is an engine path.
#[must_use]
pub fn engine_path(name: &str) -> Option<&'static EnginePath> {
    ENGINE_PATHS.iter().find(|p| p.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_every_value_is_named() {
        for (i, p) in ENGINE_PATHS.iter().enumerate() {
            assert!(
                ENGINE_PATHS[i + 1..].iter().all(|q| q.name != p.name),
                "{}",
                p.name
            );
            assert_eq!(engine_path(p.name), Some(p));
        }
        let names: Vec<&str> = DetailSupport::ALL.iter().map(|v| v.as_str()).collect();
        assert_eq!(
            names,
            [
                "single_pass",
                "rerun_required",
                "conditional",
                "unsupported"
            ]
        );
        assert!(engine_path("nope").is_none());
    }
}
