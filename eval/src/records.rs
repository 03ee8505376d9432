//! Report records from found violations (D23, D24): report tiles, single-linkage groups
//! per rule, the deterministic `violation_group_id`, canonical and shadow records, and
//! their [`ViolationId`]s.
//!
//! The input is a flat list of [`Found`] violations in the layout frame; nothing here
//! depends on which window found them, so the violations of several windows can be
//! merged (with duplicates at window seams removed first) and built into one report.
//! Within a rule, violations are ordered by location, bbox and marker, so the records
//! do not depend on the order of the input either.

use std::collections::BTreeMap;

use blake2::{Blake2b512, Digest};
use rayon::prelude::*;
use reticle_kernel::rules::{AppliesTo, Rule, RuleKind, Severity};
use reticle_layout::BBox;
use reticle_protocol::ViolationId;

use crate::found::Found;
use crate::payload::{DedupProvenance, DedupStrategy, TileContext, ViolationRecord};
use crate::r3;

/// What records say besides the violations: the layout and deck they were found with,
/// and the report tiling.
#[derive(Debug, Clone, Copy)]
pub struct RecordContext<'a> {
    /// SHA-256 of the layout file (hex).
    pub layout_sha256: &'a str,
    /// Deck name.
    pub deck_name: &'a str,
    /// Deck hash (`sha256:<hex>`).
    pub deck_hash: &'a str,
    /// nm per database unit.
    pub dbu_nm: f64,
    /// Report tile side in dbu (see [`tile_dbu`]).
    pub tile_dbu: i64,
    /// The imaging grid of a tiled run, whose records carry their `tile_stitch` transform;
    /// `None` for one window (seed 000 §2a, D184).
    pub stitch: Option<StitchGrid>,
}

/// The imaging grid a tiled run stitched its records on: cores of `core_nm` anchored at
/// the layout origin, each imaged with a halo of `halo_nm` (D57).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StitchGrid {
    /// Core side (nm).
    pub core_nm: f64,
    /// Halo (nm).
    pub halo_nm: f64,
}

impl StitchGrid {
    /// The record's frame and transform chain (seed 000 §2a): the stitched tiles' canvas,
    /// whose origin is the layout's, so the chain back to the layout frame is the one
    /// `tile_stitch` at origin `[0, 0]`; its imaging tile and the grid say where it was
    /// imaged.
    #[must_use]
    pub fn frame_of(&self, location_nm: [f64; 2]) -> (String, Vec<serde_json::Value>) {
        let tile = |v: f64| (v / self.core_nm).floor() as i64;
        let transform = serde_json::json!({
            "op": "tile_stitch",
            "params": {
                "origin": [0, 0],
                "imaging_tile": [tile(location_nm[0]), tile(location_nm[1])],
                "core_nm": self.core_nm,
                "halo_nm": self.halo_nm,
            },
        });
        ("post_transform_canvas".to_owned(), vec![transform])
    }
}

/// Groups whose records are written at once, on every compute thread (D240).
// Public for the crate's tests (tests/units), not an API.
#[doc(hidden)]
pub const GROUP_CHUNK: usize = 1024;

/// Records and groups of one rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RuleCount {
    /// Records (one per violation and tile it touches).
    pub records: usize,
    /// Groups (violations within the rule's dedup radius, single linkage).
    pub groups: usize,
}

/// What a report counts of its records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordCounts {
    /// Records in all.
    pub records: usize,
    /// Counts per rule, in the order of the rules.
    pub per_rule: Vec<RuleCount>,
    /// Groups by severity (`error`, `warning`, `info`, each present).
    pub groups_by_severity: BTreeMap<&'static str, usize>,
}

/// The records of a list of found violations.
#[derive(Debug, Clone)]
pub struct Records {
    /// Report records (seed 000 §2), rule by rule, group by group, canonical first.
    pub records: Vec<ViolationRecord>,
    /// What they count.
    pub counts: RecordCounts,
}

/// The report tile side in dbu for a side of `tile_nm` nm: rounded, at least 1.
#[must_use]
pub fn tile_dbu(tile_nm: f64, dbu_nm: f64) -> i64 {
    ((tile_nm / dbu_nm).round() as i64).max(1)
}

/// A rule's `severity` as reports write it.
#[must_use]
pub fn severity_name(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "info",
    }
}

/// A rule's `applies_to` as reports write it.
#[must_use]
pub fn applies_to_name(applies_to: AppliesTo) -> &'static str {
    match applies_to {
        AppliesTo::Mask => "mask",
        AppliesTo::Printed => "printed",
    }
}

fn unit(kind: RuleKind) -> &'static str {
    if kind == RuleKind::Area { "nm2" } else { "nm" }
}

/// Single-linkage groups of `found` (one rule, sorted by location) within `radius_pm`:
/// for each violation, the index of its group's first violation.
pub fn group(found: &[&Found], radius_pm: i64) -> Vec<usize> {
    let n = found.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let r2 = (radius_pm as i128) * (radius_pm as i128);
    for i in 0..n {
        for j in (i + 1)..n {
            let dx = i128::from(found[j].at_pm.0 - found[i].at_pm.0);
            // Sorted by x: no later violation is closer.
            if dx > i128::from(radius_pm) {
                break;
            }
            let dy = i128::from(found[j].at_pm.1 - found[i].at_pm.1);
            if dx * dx + dy * dy <= r2 {
                let (a, b) = (root(&mut parent, i), root(&mut parent, j));
                // The smaller index (earlier in location order) stays the root.
                parent[a.max(b)] = a.min(b);
            }
        }
    }
    (0..n).map(|i| root(&mut parent, i)).collect()
}

/// `violation_group_id` (seed 000 §2b, D23/D74): the seed's recipe,
/// `blake2b(bytes).hexdigest()[:16]` (BLAKE2b-512, unkeyed, its first 8 bytes as hex),
/// over exactly these bytes, every one of them in the record's own fields:
///
/// 1. `dedup_provenance.rule_deck_hash`, UTF-8 (`sha256:` and 64 hex digits), then `0x00`;
/// 2. `dedup_provenance.radius_nm` as an IEEE-754 f64, little-endian (8 bytes);
/// 3. `dedup_provenance.canonical_location_nm` x then y, each as picometres
///    (`round(nm × 1000)`) in an i64, little-endian (8 + 8 bytes);
/// 4. `rule_id`, UTF-8, then `0x00`;
/// 5. `layer` (`L/D`), UTF-8.
///
/// Python: `hashlib.blake2b(deck.encode() + b"\0" + struct.pack("<dqq", r, x_pm, y_pm) +
/// rule.encode() + b"\0" + layer.encode()).hexdigest()[:16]`.
#[must_use]
pub fn group_id(deck_hash: &str, radius_nm: f64, at_pm: (i64, i64), rule: &Rule) -> String {
    group_id_of(
        deck_hash,
        radius_nm,
        at_pm,
        &rule.id,
        &rule.layer.to_string(),
    )
}

/// [`group_id`] from the fields themselves (what a consumer re-derives it from).
#[must_use]
pub fn group_id_of(
    deck_hash: &str,
    radius_nm: f64,
    at_pm: (i64, i64),
    rule_id: &str,
    layer: &str,
) -> String {
    let mut h = Blake2b512::new();
    Digest::update(&mut h, deck_hash.as_bytes());
    Digest::update(&mut h, [0u8]);
    Digest::update(&mut h, radius_nm.to_le_bytes());
    Digest::update(&mut h, at_pm.0.to_le_bytes());
    Digest::update(&mut h, at_pm.1.to_le_bytes());
    Digest::update(&mut h, rule_id.as_bytes());
    Digest::update(&mut h, [0u8]);
    Digest::update(&mut h, layer.as_bytes());
    h.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Tiles (ix, iy) whose half-open square touches `bbox` (dbu); a degenerate extent
/// counts the tile holding its coordinate.
pub fn tiles_of(bbox: BBox, tile_dbu: i64) -> Vec<(i64, i64)> {
    let span = |lo: i64, hi: i64| {
        let first = lo.div_euclid(tile_dbu);
        let last = if hi > lo {
            (hi - 1).div_euclid(tile_dbu)
        } else {
            first
        };
        first..=last
    };
    let mut out = Vec::new();
    for iy in span(bbox.bottom, bbox.top) {
        for ix in span(bbox.left, bbox.right) {
            out.push((ix, iy));
        }
    }
    out
}

fn tile_id(t: (i64, i64)) -> String {
    format!("T_{}_{}", t.0, t.1)
}

/// One record to write: whether it is its group's canonical record, its violation, its tile.
type Placed<'f> = (bool, &'f Found, (i64, i64));

/// Builds the records of `found` checked with `rules` (`Found::rule` indexes `rules`).
#[must_use]
pub fn build(found: &[Found], rules: &[&Rule], ctx: &RecordContext<'_>) -> Records {
    let mut records = Vec::new();
    let counts = build_with(found, rules, ctx, &|record| record, &mut |record| {
        records.push(record);
    });
    Records { records, counts }
}

/// [`build`], handing each record to `emit` as soon as its chunk of groups is complete
/// instead of collecting them: a report of any size costs the memory of a chunk. Each
/// record goes through `prepare` first, on the compute threads with the rest of its chunk
/// (the caller's serialization, D240); `emit` gets them in report order.
pub fn build_with<P: Send>(
    found: &[Found],
    rules: &[&Rule],
    ctx: &RecordContext<'_>,
    prepare: &(dyn Fn(ViolationRecord) -> P + Sync),
    emit: &mut dyn FnMut(P),
) -> RecordCounts {
    let mut counts = RecordCounts {
        records: 0,
        per_rule: vec![RuleCount::default(); rules.len()],
        groups_by_severity: [("error", 0), ("warning", 0), ("info", 0)]
            .into_iter()
            .collect(),
    };
    for (ri, rule) in rules.iter().enumerate() {
        let mut mine: Vec<&Found> = found.iter().filter(|f| f.rule == ri).collect();
        // A stable sort, as `sort_by`: the same order (D240).
        mine.par_sort_by(|a, b| {
            (a.at_pm, a.bbox, a.marker.sort_key()).cmp(&(b.at_pm, b.bbox, b.marker.sort_key()))
        });
        let radius_pm = (rule.dedup_radius_nm * 1000.0).round() as i64;
        let roots = group(&mine, radius_pm);
        let mut members: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (i, r) in roots.iter().enumerate() {
            members.entry(*r).or_default().push(i);
        }
        counts.per_rule[ri].groups = members.len();
        *counts
            .groups_by_severity
            .entry(severity_name(rule.severity))
            .or_default() += members.len();
        // Groups are independent: a chunk of them is written on every compute thread, then
        // handed on in order (D240), so memory is a chunk's records, not the report's.
        let groups: Vec<(usize, &Vec<usize>)> = members.iter().map(|(r, l)| (*r, l)).collect();
        for chunk in groups.chunks(GROUP_CHUNK) {
            let written: Vec<Vec<P>> = chunk
                .par_iter()
                .map(|&(root, list)| {
                    let placed = place_group(&mine, root, list, ctx);
                    let mut records = Vec::with_capacity(placed.len());
                    write_group(&placed, mine[root], rule, ctx, &mut records);
                    records.into_iter().map(prepare).collect()
                })
                .collect();
            for records in written {
                counts.per_rule[ri].records += records.len();
                counts.records += records.len();
                for record in records {
                    emit(record);
                }
            }
        }
    }
    counts
}

/// One record per (violation, tile it touches) of a group whose canonical violation is
/// `mine[root]`; the canonical record is the canonical violation's record in the tile
/// holding its location, and comes first.
fn place_group<'f>(
    mine: &[&'f Found],
    root: usize,
    list: &[usize],
    ctx: &RecordContext<'_>,
) -> Vec<Placed<'f>> {
    let canonical = mine[root];
    let home = (
        (canonical.at_pm.0 as f64 / 1000.0 / ctx.dbu_nm).floor() as i64,
        (canonical.at_pm.1 as f64 / 1000.0 / ctx.dbu_nm).floor() as i64,
    );
    let home_tile = (
        home.0.div_euclid(ctx.tile_dbu),
        home.1.div_euclid(ctx.tile_dbu),
    );
    let mut placed: Vec<Placed<'f>> = Vec::new();
    for &m in list {
        let f = mine[m];
        for t in tiles_of(f.bbox, ctx.tile_dbu) {
            placed.push((m == root && t == home_tile, f, t));
        }
    }
    if !placed.iter().any(|g| g.0) {
        // The location rounds into a tile the marker does not touch (half-dbu centres):
        // the canonical violation's first tile holds the canonical record.
        if let Some(first) = placed.iter_mut().find(|g| std::ptr::eq(g.1, canonical)) {
            first.0 = true;
        }
    }
    placed.sort_by_key(|g| !g.0);
    placed
}

/// Appends the records of one group (as placed by [`place_group`]) to `records`.
fn write_group(
    placed: &[Placed<'_>],
    canonical: &Found,
    rule: &Rule,
    ctx: &RecordContext<'_>,
    records: &mut Vec<ViolationRecord>,
) {
    let dbu_nm = ctx.dbu_nm;
    let gid = group_id(ctx.deck_hash, rule.dedup_radius_nm, canonical.at_pm, rule);
    let group_size = placed.len();
    let mut canonical_vid = String::new();
    for (index, &(is_canonical, f, t)) in placed.iter().enumerate() {
        let tid = tile_id(t);
        let origin = [
            r3((t.0 * ctx.tile_dbu) as f64 * dbu_nm),
            r3((t.1 * ctx.tile_dbu) as f64 * dbu_nm),
        ];
        let loc = [f.at_pm.0 as f64 / 1000.0, f.at_pm.1 as f64 / 1000.0];
        let (frame, transforms) = ctx.stitch.map_or_else(
            || ("input_layout_native".to_owned(), Vec::new()),
            |g| g.frame_of(loc),
        );
        let vid = ViolationId::new(
            ctx.layout_sha256,
            ctx.deck_hash,
            &rule.id,
            f.at_pm,
            &tid,
            &gid,
            index,
        )
        .to_string();
        if is_canonical {
            canonical_vid.clone_from(&vid);
        }
        let b = f.bbox;
        records.push(ViolationRecord {
            violation_id: vid,
            violation_group_id: gid.clone(),
            rule_id: rule.id.clone(),
            rule_deck: ctx.deck_name.to_owned(),
            rule_kind: rule.kind.as_str().to_owned(),
            applies_to: applies_to_name(rule.applies_to).to_owned(),
            severity: severity_name(rule.severity).to_owned(),
            layer: rule.layer.to_string(),
            coordinate_frame: frame.clone(),
            location_nm: loc,
            bbox_nm: [
                r3(b.left as f64 * dbu_nm),
                r3(b.bottom as f64 * dbu_nm),
                r3(b.right as f64 * dbu_nm),
                r3(b.top as f64 * dbu_nm),
            ],
            measured: f.measured,
            required: rule.value,
            unit: unit(rule.kind).to_owned(),
            marker: f.marker.clone(),
            transforms,
            context: TileContext {
                tile_id: tid,
                tile_origin_nm: origin,
                tile_size_nm: r3(ctx.tile_dbu as f64 * dbu_nm),
                tile_local_nm: [r3(loc[0] - origin[0]), r3(loc[1] - origin[1])],
            },
            dedup_strategy: if is_canonical {
                DedupStrategy::Canonical
            } else {
                DedupStrategy::Shadow
            },
            dedup_provenance: DedupProvenance {
                rule_deck_hash: ctx.deck_hash.to_owned(),
                radius_nm: rule.dedup_radius_nm,
                rule_id: rule.id.clone(),
                canonical_location_nm: [
                    canonical.at_pm.0 as f64 / 1000.0,
                    canonical.at_pm.1 as f64 / 1000.0,
                ],
                group_size,
                canonical_violation_id: String::new(),
            },
        });
    }
    let n = records.len();
    for record in &mut records[n - group_size..] {
        record
            .dedup_provenance
            .canonical_violation_id
            .clone_from(&canonical_vid);
    }
}
