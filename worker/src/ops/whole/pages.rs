//! `evaluate.page`: a page of a merged report's `violations.jsonl` after a cursor,
//! optionally only the records meeting a box or of one rule, with the counts in that box.
//! The file and its cursors are [`crate::records_file`].

use std::path::PathBuf;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::artifacts;
use crate::attempt::AttemptCtx;
use crate::op::{Op, OpResult, parse_args, payload};
use crate::records_file::{
    DEFAULT_PAGE_RECORDS, Filter, MAX_PAGE_RECORDS, PageRequest, counts, read_page,
};
use crate::tiled::region_box;

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

    fn run(&self, ctx: &AttemptCtx<'_>, args_json: &str) -> OpResult {
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
        payload(Value::Object(out))
    }
}
