//! The session's violation cache (seed 000 §5 fast path; docs/DECISIONS.md D45).
//!
//! `evaluate` at `report_level: detailed` records, for every violation it returned, the
//! evaluation that produced it (its resolved arguments: layout path, deck, layer, cell,
//! clip, pixel size, model, tile size) and the record's grouping. `optimize(violation_id)`
//! looks the id up here and needs no other argument. The session is the MCP connection,
//! which for stdio is this host process: the cache lives in [`crate::state::HostState`]
//! and dies with it. It holds at most [`MAX_RECORDS`] records; the oldest evaluations go
//! first. A miss is not an error by itself: `optimize` re-resolves the id from its parts
//! when the caller pins the layout (tools/optimize.rs).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use reticle_protocol::args::EvaluateArgs;
use reticle_protocol::sync::lock;
use serde::Deserialize;
use serde_json::Value;

/// Most records remembered per session (about 300 bytes each).
pub const MAX_RECORDS: usize = 200_000;

/// One `evaluate` call whose records are cached.
#[derive(Debug)]
pub struct Evaluation {
    /// Its arguments after host resolution (canonical paths), without `report_level`,
    /// `limits` and the host-only arguments: the type the tool parsed them into (D156).
    pub args: EvaluateArgs,
    /// The layout's SHA-256, as the report gave it.
    pub layout_sha256: String,
}

/// What the cache keeps of one record.
#[derive(Debug, Clone, PartialEq)]
pub struct CachedRecord {
    /// `violation_group_id`.
    pub group_id: String,
    /// `canonical` or `shadow`.
    pub dedup_strategy: String,
    /// The id of the group's canonical record.
    pub canonical_violation_id: String,
    /// The rule.
    pub rule_id: String,
}

#[derive(Debug, Default)]
struct CachedEvaluations {
    evaluations: VecDeque<(u64, Arc<Evaluation>, Vec<String>)>,
    index: HashMap<String, (u64, CachedRecord)>,
    next: u64,
    /// Tiled evaluations (any page of their records resolves through them, D181), newest
    /// last, with the deck hash of their report; at most [`MAX_REGIONS`].
    regions: VecDeque<(Arc<Evaluation>, String, String)>,
    /// The first 16 hex digits of the layout hashes whose records were dropped (so a miss
    /// on one of them is `CACHE_EVICTED`, and on anything else is not).
    evicted_layouts: std::collections::HashSet<String>,
}

/// Most tiled evaluations remembered per session.
pub const MAX_REGIONS: usize = 64;

fn first16(s: &str) -> String {
    s.trim_start_matches("sha256:").chars().take(16).collect()
}

/// Violation id → the evaluation and record it came from, for one session.
#[derive(Debug, Default)]
pub struct ViolationCache {
    inner: Mutex<CachedEvaluations>,
}

impl ViolationCache {
    fn inner(&self) -> std::sync::MutexGuard<'_, CachedEvaluations> {
        lock(&self.inner)
    }

    /// Records the violations of an `evaluate` payload produced from `args`; returns how
    /// many were cached. Payloads without `violations` (aggregate) cache nothing.
    pub fn insert(&self, args: EvaluateArgs, payload: &Value) -> usize {
        let Some(records) = payload["violations"].as_array() else {
            return 0;
        };
        if records.is_empty() {
            return 0;
        }
        let evaluation = Arc::new(Evaluation {
            args,
            layout_sha256: payload["layout"]["sha256"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        });
        let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let mut inner = self.inner();
        inner.next += 1;
        let seq = inner.next;
        let mut ids = Vec::with_capacity(records.len());
        for r in records.iter().take(MAX_RECORDS) {
            let id = s(&r["violation_id"]);
            let record = CachedRecord {
                group_id: s(&r["violation_group_id"]),
                dedup_strategy: s(&r["dedup_strategy"]),
                canonical_violation_id: s(&r["dedup_provenance"]["canonical_violation_id"]),
                rule_id: s(&r["rule_id"]),
            };
            inner.index.insert(id.clone(), (seq, record));
            ids.push(id);
        }
        let cached = ids.len();
        inner.evaluations.push_back((seq, evaluation, ids));
        let mut total: usize = inner.evaluations.iter().map(|e| e.2.len()).sum();
        while total > MAX_RECORDS && inner.evaluations.len() > 1 {
            let Some((old, gone, old_ids)) = inner.evaluations.pop_front() else {
                break;
            };
            inner.evicted_layouts.insert(first16(&gone.layout_sha256));
            total -= old_ids.len();
            for id in old_ids {
                if inner.index.get(&id).is_some_and(|(s, _)| *s == old) {
                    inner.index.remove(&id);
                }
            }
        }
        cached
    }

    /// Remembers a tiled evaluation (its arguments and report) so that every record of
    /// it, on any page of `violations`, resolves for `optimize` without other arguments:
    /// the id's layout and deck hashes name it (D181).
    pub fn insert_region(&self, args: EvaluateArgs, payload: &Value) {
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let evaluation = Arc::new(Evaluation {
            args,
            layout_sha256: text(&payload["layout"]["sha256"]),
        });
        let mut inner = self.inner();
        inner.regions.push_back((
            evaluation,
            text(&payload["deck"]["hash"]),
            text(&payload["artifacts"]["dir"]),
        ));
        while inner.regions.len() > MAX_REGIONS {
            if let Some((gone, _, _)) = inner.regions.pop_front() {
                inner.evicted_layouts.insert(first16(&gone.layout_sha256));
            }
        }
    }

    /// The newest tiled evaluation made on the layout and with the deck whose hashes
    /// start with `layout16` and `deck16` (a `violation_id`'s).
    pub fn region_for(&self, layout16: &str, deck16: &str) -> Option<Arc<Evaluation>> {
        let inner = self.inner();
        inner
            .regions
            .iter()
            .rev()
            .find(|(e, deck, _)| first16(&e.layout_sha256) == layout16 && first16(deck) == deck16)
            .map(|(e, _, _)| Arc::clone(e))
    }

    /// The tiled evaluation whose files are in `dir` (an evaluate job's
    /// `artifacts.dir`): what `optimize(job_id)` targets.
    pub fn region_in(&self, dir: &str) -> Option<Arc<Evaluation>> {
        let inner = self.inner();
        inner
            .regions
            .iter()
            .rev()
            .find(|(_, _, d)| !d.is_empty() && d == dir)
            .map(|(e, _, _)| Arc::clone(e))
    }

    /// Whether records of the layout whose hash starts with `layout16` were cached and
    /// then dropped to make room.
    pub fn was_evicted(&self, layout16: &str) -> bool {
        self.inner().evicted_layouts.contains(layout16)
    }

    /// The evaluation and record of `violation_id`, if this session has it.
    pub fn get(&self, violation_id: &str) -> Option<(Arc<Evaluation>, CachedRecord)> {
        let inner = self.inner();
        let (seq, record) = inner.index.get(violation_id)?;
        let evaluation = inner
            .evaluations
            .iter()
            .find(|e| e.0 == *seq)
            .map(|e| Arc::clone(&e.1))?;
        Some((evaluation, record.clone()))
    }

    /// The cached violation ids, newest evaluation first (the completions of a prompt's
    /// `violation_id`).
    pub fn ids(&self) -> Vec<String> {
        let inner = self.inner();
        inner
            .evaluations
            .iter()
            .rev()
            .flat_map(|e| e.2.iter().cloned())
            .collect()
    }

    /// The cache as plain JSON (a host reexec carries it: the connection, and so the
    /// session of seed 000 §5, survives the reexec).
    pub fn export(&self) -> Value {
        let inner = self.inner();
        let evaluations: Vec<Value> = inner
            .evaluations
            .iter()
            .map(|(_, evaluation, ids)| {
                let records: Vec<Value> = ids
                    .iter()
                    .filter_map(|id| {
                        let (_, r) = inner.index.get(id)?;
                        Some(serde_json::json!({
                            "violation_id": id, "violation_group_id": r.group_id,
                            "dedup_strategy": r.dedup_strategy, "rule_id": r.rule_id,
                            "dedup_provenance": {"canonical_violation_id": r.canonical_violation_id},
                        }))
                    })
                    .collect();
                serde_json::json!({
                    "args": evaluation.args,
                    "payload": {"layout": {"sha256": evaluation.layout_sha256}, "violations": records},
                })
            })
            .collect();
        Value::Array(evaluations)
    }

    /// Refills the cache from [`Self::export`]'s JSON, oldest evaluation first (an
    /// evaluation whose arguments do not parse is left out, with a warning).
    pub fn import(&self, exported: &Value) {
        for evaluation in exported.as_array().into_iter().flatten() {
            match EvaluateArgs::deserialize(&evaluation["args"]) {
                Ok(args) => {
                    self.insert(args, &evaluation["payload"]);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "a carried evaluation's arguments do not parse")
                }
            }
        }
    }

    /// Records cached now.
    pub fn len(&self) -> usize {
        self.inner().index.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn evaluate_args(layout: &str) -> EvaluateArgs {
        serde_json::from_value(json!({ "layout": layout })).unwrap()
    }

    fn payload(ids: &[&str]) -> Value {
        json!({
            "layout": {"sha256": "ab"},
            "violations": ids.iter().map(|id| json!({
                "violation_id": id, "violation_group_id": "g", "dedup_strategy": "shadow",
                "rule_id": "R", "dedup_provenance": {"canonical_violation_id": "c"},
            })).collect::<Vec<_>>(),
        })
    }

    #[test]
    fn hits_misses_and_aggregate_payloads() {
        let c = ViolationCache::default();
        let args = evaluate_args("/x.gds");
        assert_eq!(c.insert(args.clone(), &json!({"layout": {}})), 0);
        assert_eq!(c.insert(args, &payload(&["a", "b"])), 2);
        let (e, r) = c.get("b").unwrap();
        assert_eq!(e.args.layout, "/x.gds");
        assert_eq!(e.layout_sha256, "ab");
        assert_eq!(r.canonical_violation_id, "c");
        assert!(c.get("z").is_none());
    }

    #[test]
    fn a_tiled_evaluation_answers_for_its_layout_and_deck_and_eviction_is_remembered() {
        let c = ViolationCache::default();
        let args = evaluate_args("/x.gds");
        let report = |layout: &str| {
            json!({"layout": {"sha256": layout}, "deck": {"hash": "sha256:dddddddddddddddd99"},
                   "artifacts": {"dir": format!("/jobs/{layout}")}})
        };
        c.insert_region(args, &report("0123456789abcdef77"));
        assert!(c.region_in("/jobs/0123456789abcdef77").is_some());
        assert!(c.region_in("/jobs/other").is_none());
        let e = c
            .region_for("0123456789abcdef", "dddddddddddddddd")
            .unwrap();
        assert_eq!(e.args.layout, "/x.gds");
        assert!(
            c.region_for("0123456789abcdee", "dddddddddddddddd")
                .is_none()
        );
        assert!(
            c.region_for("0123456789abcdef", "ddddddddddddddd0")
                .is_none()
        );
        assert!(!c.was_evicted("0123456789abcdef"));
        for i in 0..MAX_REGIONS {
            c.insert_region(evaluate_args(""), &report(&format!("{i:016x}")));
        }
        assert!(
            c.region_for("0123456789abcdef", "dddddddddddddddd")
                .is_none()
        );
        assert!(c.was_evicted("0123456789abcdef"));
        assert!(!c.was_evicted("fedcba9876543210"));
    }

    #[test]
    fn export_and_import_keep_every_record() {
        let c = ViolationCache::default();
        let args = evaluate_args("/x.gds");
        c.insert(args, &payload(&["a", "b"]));
        let again = ViolationCache::default();
        again.import(&c.export());
        assert_eq!(again.len(), 2);
        let (e, r) = again.get("a").unwrap();
        assert_eq!(
            (e.args.layout.as_str(), e.layout_sha256.as_str()),
            ("/x.gds", "ab")
        );
        assert_eq!(r, c.get("a").unwrap().1);
    }

    #[test]
    fn the_oldest_evaluations_are_evicted_first() {
        let c = ViolationCache::default();
        let big: Vec<String> = (0..MAX_RECORDS).map(|i| format!("v{i}")).collect();
        let refs: Vec<&str> = big.iter().map(String::as_str).collect();
        c.insert(evaluate_args(""), &payload(&["old"]));
        c.insert(evaluate_args(""), &payload(&refs));
        assert!(c.get("old").is_none(), "evicted");
        assert!(c.get("v0").is_some());
        assert_eq!(c.len(), MAX_RECORDS);
    }
}
