//! Each listed `violation_id`'s group, before and after a region optimize
//! (`optimize(violation_ids)`, issue 28; docs/DECISIONS.md D211).
//!
//! The region's re-evaluation before is the input as drawn on the same tile grid (anchored
//! at the layout origin, D57), so an id's record is there with the same rule and location
//! (and, unless its group reaches past the re-evaluated box, the same id). The id's group
//! is the one holding that record; it is resolved when no group of its rule comes within
//! the same-group distance of it after — the comparison every other group gets
//! ([`compare_groups`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr;

use reticle_eval::optimize::region::{GroupBox, compare_groups};
use reticle_protocol::ViolationId;
use reticle_protocol::error::ToolError;
use reticle_protocol::optimize_result::{IdResolution, IdStatus};

use crate::tiled::internal;

/// How far (nm) a record's location may lie from an id's to be its record (the id writes
/// the location in pm; records round it to the same value, so only float noise remains).
const SAME_LOCATION_NM: f64 = 0.5;

/// The group of each id among the records of `dir`'s `violations.jsonl`: by the id itself,
/// else by rule and location.
fn groups_of_ids(
    dir: &Path,
    ids: &[(String, ViolationId)],
) -> Result<Vec<Option<String>>, ToolError> {
    let all = crate::records_file::records(dir).map_err(|e| {
        let path = dir.join(crate::records_file::VIOLATIONS_FILE);
        internal(format!("cannot read {}: {e}", path.display()))
    })?;
    let by_text: BTreeMap<&str, usize> = ids
        .iter()
        .enumerate()
        .map(|(i, (t, _))| (t.as_str(), i))
        .collect();
    let mut exact: Vec<Option<String>> = vec![None; ids.len()];
    let mut near: Vec<Option<String>> = vec![None; ids.len()];
    for r in all {
        let r = r?;
        let group = r["violation_group_id"].as_str().unwrap_or("").to_owned();
        if let Some(&i) = r["violation_id"].as_str().and_then(|t| by_text.get(t)) {
            exact[i] = Some(group.clone());
        }
        let (Some(x), Some(y)) = (r["location_nm"][0].as_f64(), r["location_nm"][1].as_f64())
        else {
            continue;
        };
        let rule = r["rule_id"].as_str().unwrap_or("");
        for (i, (_, id)) in ids.iter().enumerate() {
            let [ix, iy] = id.location_nm();
            if near[i].is_none()
                && id.rule_id == rule
                && (ix - x).abs() <= SAME_LOCATION_NM
                && (iy - y).abs() <= SAME_LOCATION_NM
            {
                near[i] = Some(group.clone());
            }
        }
    }
    Ok(exact.into_iter().zip(near).map(|(e, n)| e.or(n)).collect())
}

/// The status of each of `texts` (ids as given): its group in the evaluation before (in
/// `before_dir`, grouped as `before`) and whether a group of its rule remains `after`
/// within `tol_nm`.
///
/// # Errors
/// `INTERNAL_ERROR` when the records cannot be read; `INVALID_INPUT` for a malformed id
/// (the host parsed them already).
pub(crate) fn id_statuses(
    texts: &[String],
    before_dir: &Path,
    before: &[GroupBox],
    after: &[GroupBox],
    tol_nm: f64,
) -> Result<Vec<IdStatus>, ToolError> {
    let mut ids = Vec::with_capacity(texts.len());
    for t in texts {
        let id = ViolationId::from_str(t).map_err(|e| {
            crate::tiled::invalid(
                format!("not a violation_id: {e}"),
                serde_json::json!({"violation_id": t}),
            )
        })?;
        ids.push((t.clone(), id));
    }
    let groups = groups_of_ids(before_dir, &ids)?;
    Ok(ids
        .into_iter()
        .zip(groups)
        .map(|((text, id), group)| {
            let found = group.and_then(|g| before.iter().find(|b| b.group_id == g));
            let status = match found {
                None => IdResolution::NotFound,
                Some(g) => {
                    let (by_rule, _) =
                        compare_groups(std::slice::from_ref(g), after, tol_nm, &|_| false);
                    if by_rule.get(&g.rule_id).is_some_and(|r| r.resolved == 1) {
                        IdResolution::Resolved
                    } else {
                        IdResolution::Remaining
                    }
                }
            };
            IdStatus {
                violation_id: text,
                rule_id: id.rule_id.clone(),
                status,
                resolved: (status != IdResolution::NotFound)
                    .then_some(status == IdResolution::Resolved),
                group_id_before: found.map(|g| g.group_id.clone()),
            }
        })
        .collect())
}
