//! A merged report's records file (`violations.jsonl`, one JSON object per line) and its
//! pages: the writer the merge uses, and the reader `evaluate.page` and the merge's first
//! page use. A cursor is the byte offset of the next line and how many records came before
//! (`v1.<offset>.<index>`); it is refused unless it points at the start of a line.

use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use reticle_protocol::error::{ErrorCode, ToolError};
use reticle_protocol::files::FileRef;
use serde_json::{Value, json};

use crate::tiled::internal;

/// Records on one page unless the caller asks for fewer.
pub const DEFAULT_PAGE_RECORDS: usize = 200;
/// Most records on one page.
pub const MAX_PAGE_RECORDS: usize = 1000;
/// Most bytes of records on one page, so a response stays well under the 1 MiB frame.
pub const MAX_PAGE_BYTES: usize = 384 * 1024;
/// The file every record of a merged report goes to.
pub const VIOLATIONS_FILE: &str = "violations.jsonl";

/// Writes records to `violations.jsonl` one JSON object per line as they come, through a
/// temporary file renamed into place at the end (a merge re-run replaces a whole file).
pub(crate) struct RecordWriter {
    tmp: PathBuf,
    target: PathBuf,
    out: std::io::BufWriter<std::fs::File>,
    bytes: u64,
    hash: sha2::Sha256,
}

impl RecordWriter {
    pub(crate) fn create(dir: &Path) -> Result<Self, ToolError> {
        let target = dir.join(VIOLATIONS_FILE);
        let tmp = dir.join(format!(".{VIOLATIONS_FILE}.{}.tmp", std::process::id()));
        let file = std::fs::File::create(&tmp)
            .map_err(|e| internal(format!("cannot write {}: {e}", tmp.display())))?;
        Ok(Self {
            tmp,
            target,
            out: std::io::BufWriter::new(file),
            bytes: 0,
            hash: sha2::Sha256::default(),
        })
    }

    /// Writes one record already serialized (`line`, without its newline).
    pub(crate) fn write_line(&mut self, line: &[u8]) -> Result<(), ToolError> {
        use sha2::Digest as _;
        use std::io::Write as _;
        for part in [line, b"\n"] {
            self.out
                .write_all(part)
                .map_err(|e| internal(format!("cannot write {}: {e}", self.tmp.display())))?;
            self.hash.update(part);
        }
        self.bytes += line.len() as u64 + 1;
        Ok(())
    }

    /// Renames the file into place; its description as `artifacts::write` gives one.
    pub(crate) fn finish(self) -> Result<FileRef, ToolError> {
        use sha2::Digest as _;
        use std::io::Write as _;
        let Self {
            tmp,
            target,
            mut out,
            bytes,
            hash,
        } = self;
        out.flush()
            .map_err(|e| internal(format!("cannot write {}: {e}", tmp.display())))?;
        drop(out);
        std::fs::rename(&tmp, &target)
            .map_err(|e| internal(format!("cannot write {}: {e}", target.display())))?;
        let sha: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
        Ok(crate::artifacts::file_ref(&target, sha, bytes))
    }
}

/// Which records a page holds.
#[derive(Debug, Default, Clone)]
pub(crate) struct Filter {
    /// Only records whose box meets this box (nm).
    pub(crate) box_nm: Option<[f64; 4]>,
    /// Only records of this rule.
    pub(crate) rule_id: Option<String>,
}

impl Filter {
    fn keeps(&self, record: &Value) -> bool {
        if let Some(rule) = &self.rule_id
            && record["rule_id"].as_str() != Some(rule.as_str())
        {
            return false;
        }
        if let Some([l, b, r, t]) = self.box_nm {
            let c = |i: usize| record["bbox_nm"][i].as_f64().unwrap_or(f64::NAN);
            return c(0) <= r && c(2) >= l && c(1) <= t && c(3) >= b;
        }
        true
    }
}

pub(crate) struct PageRequest {
    pub(crate) cursor: Option<String>,
    pub(crate) limit: usize,
    /// Most records returned over every page of this listing.
    pub(crate) cap: usize,
    pub(crate) filter: Filter,
}

pub(crate) struct Page {
    pub(crate) records: Vec<Value>,
    pub(crate) next_cursor: Option<String>,
}

/// A cursor: the byte offset of the next line and how many records were returned before.
fn parse_cursor(cursor: &str, len: u64) -> Result<(u64, usize), ToolError> {
    let bad = || {
        ToolError::new(
            ErrorCode::InvalidInput,
            "not a cursor of this job's violations",
        )
        .with_details(json!({"cursor": cursor}))
    };
    let rest = cursor.strip_prefix("v1.").ok_or_else(bad)?;
    let (offset, index) = rest.split_once('.').ok_or_else(bad)?;
    let offset: u64 = offset.parse().map_err(|_| bad())?;
    let index: usize = index.parse().map_err(|_| bad())?;
    if offset > len {
        return Err(bad());
    }
    Ok((offset, index))
}

pub(crate) fn read_page(dir: &Path, req: &PageRequest) -> Result<Page, ToolError> {
    let path = dir.join(VIOLATIONS_FILE);
    let mut file = std::fs::File::open(&path).map_err(|e| {
        ToolError::new(
            ErrorCode::NotFound,
            format!("the job's violations are gone: {e}"),
        )
    })?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let (mut offset, mut index) = match &req.cursor {
        Some(c) => parse_cursor(c, len)?,
        None => (0, 0),
    };
    if offset > 0 {
        // A cursor points at the start of a line.
        let mut prev = [0u8; 1];
        file.seek(SeekFrom::Start(offset - 1))
            .map_err(|e| internal(e.to_string()))?;
        std::io::Read::read_exact(&mut file, &mut prev).map_err(|e| internal(e.to_string()))?;
        if prev[0] != b'\n' {
            return Err(ToolError::new(
                ErrorCode::InvalidInput,
                "not a cursor of this job's violations",
            ));
        }
    }
    file.seek(SeekFrom::Start(offset))
        .map_err(|e| internal(e.to_string()))?;
    let mut reader = BufReader::new(file);
    let mut records = Vec::new();
    let mut bytes = 0usize;
    let mut line = String::new();
    loop {
        if records.len() >= req.limit || index >= req.cap || bytes >= MAX_PAGE_BYTES {
            break;
        }
        line.clear();
        let n = reader
            .read_line(&mut line)
            .map_err(|e| internal(e.to_string()))?;
        if n == 0 {
            return Ok(Page {
                records,
                next_cursor: None,
            });
        }
        offset += n as u64;
        let record: Value = serde_json::from_str(line.trim_end())
            .map_err(|e| internal(format!("violations file: {e}")))?;
        if req.filter.keeps(&record) {
            bytes += n;
            index += 1;
            records.push(record);
        }
    }
    let more = offset < len && index < req.cap;
    Ok(Page {
        records,
        next_cursor: more.then(|| format!("v1.{offset}.{index}")),
    })
}

/// The records of `dir`'s `violations.jsonl`, one by one (blank lines skipped); the file's
/// open error is the caller's to word, a bad line is `INTERNAL_ERROR` naming the file.
pub(crate) fn records(
    dir: &Path,
) -> std::io::Result<impl Iterator<Item = Result<Value, ToolError>>> {
    let path = dir.join(VIOLATIONS_FILE);
    let file = std::fs::File::open(&path)?;
    Ok(BufReader::new(file).lines().filter_map(move |line| {
        let line = match line {
            Ok(line) if line.trim().is_empty() => return None,
            Ok(line) => line,
            Err(e) => return Some(Err(internal(format!("{}: {e}", path.display())))),
        };
        Some(serde_json::from_str(&line).map_err(|e| internal(format!("{}: {e}", path.display()))))
    }))
}

/// Counts of the records meeting `filter`, by rule and in all.
pub(crate) fn counts(dir: &Path, filter: &Filter) -> Result<Value, ToolError> {
    let all = self::records(dir).map_err(|e| {
        ToolError::new(
            ErrorCode::NotFound,
            format!("the job's violations are gone: {e}"),
        )
    })?;
    let mut by_rule: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
    let (mut records, mut groups) = (0u64, 0u64);
    for record in all {
        let record = record?;
        if !filter.keeps(&record) {
            continue;
        }
        let canonical = record["dedup_strategy"] == "canonical";
        let entry = by_rule
            .entry(record["rule_id"].as_str().unwrap_or("?").to_owned())
            .or_default();
        entry.0 += 1;
        entry.1 += u64::from(canonical);
        records += 1;
        groups += u64::from(canonical);
    }
    let by_rule: Vec<Value> = by_rule
        .into_iter()
        .map(|(rule, (r, g))| json!({"rule_id": rule, "records": r, "groups": g}))
        .collect();
    Ok(json!({"records": records, "groups": groups, "by_rule": by_rule}))
}
