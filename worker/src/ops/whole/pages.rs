//! `evaluate.page`: a page of a merged report's `violations.jsonl` after a cursor,
//! optionally only the records meeting a box or of one rule, with the counts in that box.
//! A cursor is the byte offset of the next line and how many records came before
//! (`v1.<offset>.<index>`); it is refused unless it points at the start of a line.

use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use reticle_protocol::error::{ErrorCode, ToolError};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{artifacts, internal, region_box};
use crate::job::JobCtx;
use crate::ops::{Op, parse_args};

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
pub(super) struct RecordWriter {
    tmp: PathBuf,
    target: PathBuf,
    out: std::io::BufWriter<std::fs::File>,
    bytes: u64,
    hash: sha2::Sha256,
}

impl RecordWriter {
    pub(super) fn create(dir: &Path) -> Result<Self, ToolError> {
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

    pub(super) fn write(&mut self, record: &Value) -> Result<(), ToolError> {
        use sha2::Digest as _;
        use std::io::Write as _;
        let mut line = serde_json::to_vec(record).map_err(|e| internal(format!("record: {e}")))?;
        line.push(b'\n');
        self.out
            .write_all(&line)
            .map_err(|e| internal(format!("cannot write {}: {e}", self.tmp.display())))?;
        self.hash.update(&line);
        self.bytes += line.len() as u64;
        Ok(())
    }

    /// Renames the file into place; its description as `artifacts::write` gives one.
    pub(super) fn finish(self) -> Result<Value, ToolError> {
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
        Ok(json!({"path": target, "sha256": sha, "bytes": bytes}))
    }
}

/// Which records a page holds.
#[derive(Debug, Default, Clone)]
pub(super) struct Filter {
    /// Only records whose box meets this box (nm).
    box_nm: Option<[f64; 4]>,
    /// Only records of this rule.
    rule_id: Option<String>,
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

pub(super) struct PageRequest {
    pub(super) cursor: Option<String>,
    pub(super) limit: usize,
    /// Most records returned over every page of this listing.
    pub(super) cap: usize,
    pub(super) filter: Filter,
}

pub(super) struct Page {
    pub(super) records: Vec<Value>,
    pub(super) next_cursor: Option<String>,
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

pub(super) fn read_page(dir: &Path, req: &PageRequest) -> Result<Page, ToolError> {
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

/// Counts of the records meeting `filter`, by rule and in all.
fn counts(dir: &Path, filter: &Filter) -> Result<Value, ToolError> {
    let file = std::fs::File::open(dir.join(VIOLATIONS_FILE)).map_err(|e| {
        ToolError::new(
            ErrorCode::NotFound,
            format!("the job's violations are gone: {e}"),
        )
    })?;
    let mut by_rule: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
    let (mut records, mut groups) = (0u64, 0u64);
    for line in BufReader::new(file).lines() {
        let line = line.map_err(|e| internal(e.to_string()))?;
        let record: Value =
            serde_json::from_str(&line).map_err(|e| internal(format!("violations file: {e}")))?;
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

/// `evaluate.page`'s arguments.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PageArgs {
    #[serde(default)]
    cursor: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    box_um: Option<[f64; 4]>,
    #[serde(default)]
    rule_id: Option<String>,
    #[serde(default)]
    max_records: Option<usize>,
}

/// The `evaluate.page` op.
pub struct PageOp;

impl Op for PageOp {
    fn name(&self) -> &'static str {
        "evaluate.page"
    }

    fn run(&self, ctx: &JobCtx<'_>, args_json: &str) -> Result<Value, ToolError> {
        let args: PageArgs = parse_args(self.name(), args_json)?;
        let dir: PathBuf = artifacts::dir(ctx)?;
        if let Some(b) = args.box_um {
            region_box(b, 1.0)?;
        }
        let filter = Filter {
            box_nm: args.box_um.map(|b| b.map(|v| v * 1000.0)),
            rule_id: args.rule_id,
        };
        let limit = args
            .limit
            .unwrap_or(DEFAULT_PAGE_RECORDS)
            .clamp(1, MAX_PAGE_RECORDS);
        let page = read_page(
            &dir,
            &PageRequest {
                cursor: args.cursor.clone(),
                limit,
                cap: args.max_records.unwrap_or(usize::MAX),
                filter: filter.clone(),
            },
        )?;
        let mut out = Map::new();
        if args.cursor.is_none() {
            out.insert("counts".into(), counts(&dir, &filter)?);
        }
        out.insert("returned".into(), json!(page.records.len()));
        out.insert(
            "next_cursor".into(),
            page.next_cursor.map_or(Value::Null, Value::String),
        );
        out.insert("violations".into(), Value::Array(page.records));
        Ok(Value::Object(out))
    }
}
