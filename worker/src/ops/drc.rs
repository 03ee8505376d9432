//! DRC ops: `drc.run` runs KLayout in batch mode on the session layout's copy in a run
//! directory the host created; `drc.markers` parses the run's `.lyrdb` and renders a crop
//! per marker.
//!
//! KLayout gets an argument vector (never a shell), the caller's parameters as `-rd
//! name=value` data, an explicit environment (nothing inherited), the run directory as its
//! working directory and home, and a wall-time limit. It runs in the worker's process group,
//! so cancelling the job (the host kills the group) kills KLayout too.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use quick_xml::events::Event;
use reticle_layout::observe::MicronBox;
use reticle_layout::observe::render::{AnnotationSpec, RenderSpec, RenderStyle, render_view};
use reticle_layout::observe::units::round_um;
use reticle_protocol::error::{ErrorCode, ToolError};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::attempt::AttemptCtx;
use crate::layouts::{LayoutRef, load, observe_error};
use crate::op::{Op, OpResult, cancelled, parse_args, payload};

/// Name of the report KLayout writes in the run directory (`$report` in the deck).
pub const REPORT_FILE: &str = "report.lyrdb";
/// Largest `.lyrdb` parsed.
const MAX_REPORT_BYTES: u64 = 256 * 1024 * 1024;
/// Most markers one report may hold.
const MAX_MARKERS: usize = 1_000_000;
/// Side of a marker crop (pixels).
const CROP_PX: u32 = 256;
/// Environment KLayout runs with: nothing else is inherited.
const CHILD_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

fn drc_failed(message: impl Into<String>, details: Value) -> ToolError {
    ToolError::new(ErrorCode::DrcRunFailed, message).with_details(details)
}

/// One marker of a report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DrcMarker {
    /// Category path (`rule` or `parent.rule`).
    pub rule: String,
    /// Cell the item belongs to.
    pub cell: String,
    /// Box of the marker's geometry (µm).
    pub box_um: MicronBox,
    /// The item's first value as KLayout wrote it (`edge-pair: (…)|(…)`).
    pub value: String,
}

/// A category path as KLayout writes it (`rule`, `'odd name'`, `'a.b'.c`): quoted parts
/// unquoted (`\'` escapes), parts joined with `.`.
fn unquote(s: &str) -> String {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut chars = s.trim().chars();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' if quoted => current.extend(chars.next()),
            '\'' => quoted = !quoted,
            '.' if !quoted => parts.push(std::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    parts.push(current);
    parts.join(".")
}

/// Box of every number pair in a value's text (`kind: (x,y;x,y)|(…)`), in µm.
fn value_box(value: &str) -> Option<MicronBox> {
    let body = value.split_once(':').map_or(value, |(_, b)| b);
    let nums: Vec<f64> = body
        .split(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E')))
        .filter(|t| !t.is_empty())
        .filter_map(|t| t.parse::<f64>().ok())
        .filter(|v| v.is_finite())
        .collect();
    if nums.len() < 2 {
        return None;
    }
    let (mut l, mut b, mut r, mut t) = (f64::MAX, f64::MAX, f64::MIN, f64::MIN);
    for p in nums.chunks_exact(2) {
        l = l.min(p[0]);
        r = r.max(p[0]);
        b = b.min(p[1]);
        t = t.max(p[1]);
    }
    Some(MicronBox {
        left: round_um(l),
        bottom: round_um(b),
        right: round_um(r),
        top: round_um(t),
    })
}

/// Parses a KLayout report database: every `<item>` under `<items>` with its category,
/// cell and the box of its first geometric value, in file order.
///
/// # Errors
/// `DRC_RUN_FAILED` for malformed XML or too many items.
pub fn parse_lyrdb(xml: &str) -> Result<Vec<DrcMarker>, ToolError> {
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut stack: Vec<String> = Vec::new();
    let mut markers = Vec::new();
    let mut current: Option<(String, String, Vec<String>)> = None;
    let mut text = String::new();
    loop {
        let event = reader.read_event().map_err(|e| {
            drc_failed(
                format!("the report is not valid XML: {e}"),
                json!({"position": reader.buffer_position()}),
            )
        })?;
        match event {
            Event::Start(e) => {
                let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
                if name == "item" && stack.last().is_some_and(|p| p == "items") {
                    current = Some((String::new(), String::new(), Vec::new()));
                }
                stack.push(name);
                text.clear();
            }
            Event::Text(t) => {
                let s = t
                    .decode()
                    .map_err(|e| drc_failed(format!("undecodable report text: {e}"), json!({})))?;
                text.push_str(&s);
            }
            Event::GeneralRef(r) => {
                // Entity and character references (&lt; &#60;) arrive as separate events.
                if let Ok(Some(c)) = r.resolve_char_ref() {
                    text.push(c);
                } else {
                    let resolved = match &*r {
                        b"lt" => "<",
                        b"gt" => ">",
                        b"amp" => "&",
                        b"apos" => "'",
                        b"quot" => "\"",
                        _ => "",
                    };
                    text.push_str(resolved);
                }
            }
            Event::End(_) => {
                let name = stack.pop().unwrap_or_default();
                let parent = stack.last().map(String::as_str);
                if let Some((category, cell, values)) = current.as_mut() {
                    match (name.as_str(), parent) {
                        ("category", Some("item")) => *category = unquote(&text),
                        ("cell", Some("item")) => *cell = unquote(&text),
                        ("value", Some("values")) => values.push(text.trim().to_owned()),
                        _ => {}
                    }
                }
                if name == "item"
                    && parent == Some("items")
                    && let Some((rule, cell, values)) = current.take()
                    && let Some((value, box_um)) =
                        values.iter().find_map(|v| value_box(v).map(|b| (v, b)))
                {
                    if markers.len() >= MAX_MARKERS {
                        return Err(drc_failed(
                            "the report holds too many markers",
                            json!({"limit": MAX_MARKERS}),
                        ));
                    }
                    markers.push(DrcMarker {
                        rule,
                        cell,
                        box_um,
                        value: value.clone(),
                    });
                }
                text.clear();
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(markers)
}

/// Counts per rule, sorted by rule name.
#[must_use]
pub fn rule_counts(markers: &[DrcMarker]) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for m in markers {
        *counts.entry(m.rule.clone()).or_insert(0) += 1;
    }
    counts
}

fn read_report(path: &Path) -> Result<Vec<DrcMarker>, ToolError> {
    let size = std::fs::metadata(path).map(|m| m.len()).map_err(|e| {
        drc_failed(
            format!("KLayout wrote no report at {}: {e}", path.display()),
            json!({"path": path}),
        )
    })?;
    if size > MAX_REPORT_BYTES {
        return Err(drc_failed(
            "the report is over the size limit",
            json!({"bytes": size, "limit": MAX_REPORT_BYTES}),
        ));
    }
    let xml = std::fs::read_to_string(path).map_err(|e| {
        drc_failed(
            format!("cannot read the report: {e}"),
            json!({"path": path}),
        )
    })?;
    parse_lyrdb(&xml)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunArgs {
    /// Absolute path of the KLayout binary (resolved by the host from `KLAYOUT_BIN`).
    klayout_bin: PathBuf,
    script_path: PathBuf,
    /// The session layout's copy inside the run directory.
    layout_copy: PathBuf,
    #[serde(default)]
    params: BTreeMap<String, String>,
    timeout_s: u64,
}

fn tail(path: &Path, max: usize) -> String {
    let text = std::fs::read(path).unwrap_or_default();
    let start = text.len().saturating_sub(max);
    String::from_utf8_lossy(&text[start..]).into_owned()
}

/// The `drc.run` op.
pub struct DrcRun;

impl Op for DrcRun {
    fn name(&self) -> &'static str {
        "drc.run"
    }

    fn run(&self, ctx: &AttemptCtx<'_>, args_json: &str) -> OpResult {
        let args: RunArgs = parse_args(self.name(), args_json)?;
        let script = ctx.readable(&args.script_path)?;
        let run_dir = ctx
            .context
            .artifact_dir
            .as_ref()
            .map(PathBuf::from)
            .ok_or_else(|| {
                ToolError::new(ErrorCode::InternalError, "drc.run needs a run directory")
            })?;
        let layout = ctx.artifact_readable(&args.layout_copy)?;
        for name in args.params.keys() {
            let valid = name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid || matches!(name.as_str(), "input" | "report") {
                return Err(ToolError::new(
                    ErrorCode::InvalidInput,
                    format!("parameter name {name:?} is not allowed"),
                ));
            }
        }
        let report = run_dir.join(REPORT_FILE);
        let stdout = std::fs::File::create(run_dir.join("stdout.txt"))
            .map_err(|e| drc_failed(format!("cannot create stdout.txt: {e}"), json!({})))?;
        let stderr = std::fs::File::create(run_dir.join("stderr.txt"))
            .map_err(|e| drc_failed(format!("cannot create stderr.txt: {e}"), json!({})))?;
        let mut cmd = Command::new(&args.klayout_bin);
        cmd.arg("-b")
            .arg("-r")
            .arg(&script)
            .arg("-rd")
            .arg(format!("input={}", layout.display()))
            .arg("-rd")
            .arg(format!("report={}", report.display()));
        for (k, v) in &args.params {
            cmd.arg("-rd").arg(format!("{k}={v}"));
        }
        cmd.env_clear()
            .env("PATH", CHILD_PATH)
            .env("HOME", &run_dir)
            .env("KLAYOUT_HOME", run_dir.join(".klayout"))
            .env("LANG", "C.UTF-8")
            .env("LC_ALL", "C.UTF-8")
            .current_dir(&run_dir)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr);
        let mut child = cmd.spawn().map_err(|e| {
            let missing = e.kind() == std::io::ErrorKind::NotFound;
            drc_failed(
                if missing {
                    format!(
                        "KLayout is not installed or not found at {} (set KLAYOUT_BIN)",
                        args.klayout_bin.display()
                    )
                } else {
                    format!("cannot start KLayout {}: {e}", args.klayout_bin.display())
                },
                json!({"klayout_bin": args.klayout_bin, "reason": if missing { "klayout_not_found" } else { "spawn_failed" }}),
            )
        })?;
        let deadline = Instant::now() + Duration::from_secs(args.timeout_s.max(1));
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) => {}
                Err(e) => return Err(drc_failed(format!("waiting for KLayout: {e}"), json!({}))),
            }
            if ctx.cancel.is_cancelled() {
                let _ = child.kill();
                let _ = child.wait();
                return Err(cancelled(ctx.job_id));
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(drc_failed(
                    format!(
                        "KLayout ran longer than {} s and was killed",
                        args.timeout_s
                    ),
                    json!({"timeout_s": args.timeout_s, "reason": "timeout"}),
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let code = status.code().unwrap_or(-1);
        if !status.success() {
            return Err(drc_failed(
                format!("KLayout exited with status {code}"),
                json!({"return_code": code, "stderr_tail": tail(&run_dir.join("stderr.txt"), 2000)}),
            ));
        }
        if !report.exists() {
            return Err(drc_failed(
                "KLayout wrote no report: the deck must call report(..., $report)",
                json!({"return_code": code, "stderr_tail": tail(&run_dir.join("stderr.txt"), 2000)}),
            ));
        }
        let markers = read_report(&ctx.artifact_readable(&report)?)?;
        payload(DrcRunResult {
            return_code: code,
            marker_count: markers.len(),
            rule_counts: rule_counts(&markers),
            markers,
        })
    }
}

/// `drc.run`'s answer: KLayout's exit code and the report's markers, counted per rule.
#[derive(Serialize)]
struct DrcRunResult {
    return_code: i32,
    marker_count: usize,
    rule_counts: BTreeMap<String, u64>,
    markers: Vec<DrcMarker>,
}

/// `drc.markers`'s answer: the listed markers, how many the report holds, and what was
/// left out.
#[derive(Serialize)]
struct MarkerList {
    markers: Vec<ListedMarker>,
    marker_count: usize,
    truncation: MarkerTruncation,
}

/// One listed marker: its number (from 1), the marker, and its crop when one was drawn.
#[derive(Serialize)]
struct ListedMarker {
    index: usize,
    #[serde(flatten)]
    marker: DrcMarker,
    #[serde(skip_serializing_if = "Option::is_none")]
    crop_png_base64: Option<String>,
}

/// What `drc.markers` left out: markers past `max_markers`, crops past `max_crops`.
#[derive(Serialize)]
struct MarkerTruncation {
    markers_dropped: usize,
    crops_dropped: u64,
    max_markers: usize,
    max_crops: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MarkersArgs {
    layout: LayoutRef,
    cell: String,
    report: PathBuf,
    include_crops: bool,
    crop_size_um: (f64, f64),
    max_markers: usize,
    max_crops: usize,
}

/// The `drc.markers` op.
pub struct DrcMarkers;

impl Op for DrcMarkers {
    fn name(&self) -> &'static str {
        "drc.markers"
    }

    fn run(&self, ctx: &AttemptCtx<'_>, args_json: &str) -> OpResult {
        let args: MarkersArgs = parse_args(self.name(), args_json)?;
        let markers = read_report(&ctx.artifact_readable(&args.report)?)?;
        let total = markers.len();
        let listed: Vec<DrcMarker> = markers.into_iter().take(args.max_markers).collect();
        let (cw, ch) = args.crop_size_um;
        if !(cw.is_finite() && ch.is_finite() && cw > 0.0 && ch > 0.0) {
            return Err(ToolError::new(
                ErrorCode::InvalidBox,
                "crop_size_um must be positive",
            ));
        }
        let lib = if args.include_crops {
            Some(load(ctx, &args.layout)?.0)
        } else {
            None
        };
        let listed_count = listed.len();
        let mut out = Vec::with_capacity(listed_count);
        let mut crops_dropped = 0u64;
        for (i, marker) in listed.into_iter().enumerate() {
            if ctx.cancel.is_cancelled() {
                return Err(cancelled(ctx.job_id));
            }
            let mut crop_png_base64 = None;
            if let Some(lib) = &lib {
                if i < args.max_crops {
                    crop_png_base64 = Some(crop(ctx, lib, &args.cell, &marker, (cw, ch))?);
                } else {
                    crops_dropped += 1;
                }
            }
            out.push(ListedMarker {
                index: i + 1,
                marker,
                crop_png_base64,
            });
        }
        payload(MarkerList {
            markers: out,
            marker_count: total,
            truncation: MarkerTruncation {
                markers_dropped: total - listed_count,
                crops_dropped,
                max_markers: args.max_markers,
                max_crops: args.max_crops,
            },
        })
    }
}

/// A `(cw, ch)` µm crop of `cell` centred on the marker `m`, the marker outlined one dbu
/// outside its box, as base64 PNG.
fn crop(
    ctx: &AttemptCtx<'_>,
    lib: &reticle_layout::Library,
    cell: &str,
    m: &DrcMarker,
    (cw, ch): (f64, f64),
) -> Result<String, ToolError> {
    let cx = (m.box_um.left + m.box_um.right) / 2.0;
    let cy = (m.box_um.bottom + m.box_um.top) / 2.0;
    let view = MicronBox {
        left: cx - cw / 2.0,
        bottom: cy - ch / 2.0,
        right: cx + cw / 2.0,
        top: cy + ch / 2.0,
    };
    let dbu = lib.dbu_um();
    let mut marker = m.box_um.to_dbu(dbu).or_else(|_| {
        // A degenerate marker (a point or a line): outline one dbu around it.
        MicronBox {
            left: m.box_um.left - dbu,
            bottom: m.box_um.bottom - dbu,
            right: m.box_um.right + dbu,
            top: m.box_um.top + dbu,
        }
        .to_dbu(dbu)
    });
    if let Ok(b) = marker.as_mut() {
        b.left -= 1;
        b.bottom -= 1;
        b.right += 1;
        b.top += 1;
    }
    let notes: Vec<AnnotationSpec> = marker
        .map(|bbox| AnnotationSpec::Box {
            bbox,
            color: [0xff, 0x3b, 0x30, 0xff],
        })
        .into_iter()
        .collect();
    let spec = RenderSpec {
        cell: cell.to_owned(),
        box_um: view,
        layers: None,
        width: CROP_PX,
        height: CROP_PX,
        style: RenderStyle::Light,
        max_shapes: ctx.context.limits.max_shapes,
    };
    let r = render_view(lib, &spec, &notes).map_err(|e| observe_error(&e))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(&r.png))
}
