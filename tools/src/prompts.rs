//! The workflows an engineer runs, as MCP prompts (issue 30 item 3, D203): `prompts/list`,
//! `prompts/get` and the completions of their arguments (`completion/complete`).
//!
//! A prompt is a user message that names the tools to call, in order, with the
//! arguments filled in; it runs nothing itself. Completions come from what the client
//! has: the shipped decks, its jobs (failed ones first for a postmortem), its cached
//! violation ids and its layout sessions.

use reticle_transport::era::RpcError;
use serde_json::{Map, Value, json};

use crate::context::ToolShared;

/// The decks shipped with reticle, by name (`reticle_eval::deck::SHIPPED_DECKS`; the
/// host does not link the evaluation crate, a test keeps the two equal).
pub const SHIPPED_DECKS: [&str; 3] = ["iccad13_m1", "nangate45_m1v1", "nangate45_m1_litho"];
/// Most values one completion returns (the spec's bound).
const MAX_COMPLETIONS: usize = 100;

/// One argument of a prompt.
struct Arg {
    name: &'static str,
    description: &'static str,
    required: bool,
}

/// One prompt.
struct Prompt {
    name: &'static str,
    title: &'static str,
    description: &'static str,
    args: &'static [Arg],
    /// The user message, with `{name}` replaced by each argument (or its default).
    render: fn(&Map<String, Value>) -> String,
}

const fn arg(name: &'static str, description: &'static str, required: bool) -> Arg {
    Arg {
        name,
        description,
        required,
    }
}

/// The optional `deck` argument of the prompts that evaluate.
const DECK_ARG: Arg = arg(
    "deck",
    "Shipped deck name or deck JSON path (default iccad13_m1)",
    false,
);

/// The optional `region_um` argument of the prompts that evaluate a region.
const REGION_ARG: Arg = arg(
    "region_um",
    "Region as x0,y0,x1,y1 in µm (default: the whole layer)",
    false,
);

const PROMPTS: [Prompt; 4] = [
    Prompt {
        name: "check_layout",
        title: "Check a layout or a region against a deck",
        description: "Evaluate a layout (or one region of it) against a rule deck and summarize \
                      what prints wrong, with the heat map.",
        args: &[
            arg(
                "layout",
                "Layout file (GDSII, OASIS or ICCAD .glp) under the allowed roots",
                true,
            ),
            DECK_ARG,
            REGION_ARG,
        ],
        render: check_layout,
    },
    Prompt {
        name: "fix_hotspots",
        title: "Find and fix the worst hotspots in a region",
        description: "Evaluate a region, pick its worst violation groups, repair each with \
                      optimize and compare before and after.",
        args: &[
            arg("layout", "Layout file under the allowed roots", true),
            DECK_ARG,
            REGION_ARG,
            arg("count", "How many hotspots to fix (default 3)", false),
        ],
        render: fix_hotspots,
    },
    Prompt {
        name: "explain_violation",
        title: "Explain a violation",
        description: "Explain one violation record: the rule, what was measured against what \
                      limit, where, its group, and what would fix it.",
        args: &[arg(
            "violation_id",
            "A violation_id from an evaluate or violations result",
            true,
        )],
        render: explain_violation,
    },
    Prompt {
        name: "job_postmortem",
        title: "Postmortem of a failed job",
        description: "Reconstruct why a job failed from its record, the host's telemetry and \
                      the operator's event log, and say what to change.",
        args: &[arg("job_id", "The job (job_…) to examine", true)],
        render: job_postmortem,
    },
];

fn get<'a>(args: &'a Map<String, Value>, name: &str, default: &'a str) -> &'a str {
    args.get(name)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .unwrap_or(default)
}

fn region_clause(args: &Map<String, Value>) -> String {
    match get(args, "region_um", "") {
        "" => "over the whole evaluated layer (`tiling: \"auto\"` tiles it when it is larger than one window)".into(),
        region => format!("inside the region `box_um: [{region}]`"),
    }
}

fn check_layout(args: &Map<String, Value>) -> String {
    format!(
        "Check the layout `{layout}` against the deck `{deck}` {region}.\n\n\
         1. Call `evaluate` with `layout: \"{layout}\"`, `deck: \"{deck}\"`{box_arg}, \
         `report_level: \"detailed\"` and `wait: true`.\n\
         2. Report the counts by rule and severity, the worst violation groups (rule, \
         location, measured value against the limit) and the metrics (EPE, PV band).\n\
         3. Show the heat map: the result carries it as an image and links the full-size \
         file (a `reticle://artifacts/…` resource); say where the violations cluster.\n\
         4. If the records are paged, read the rest with `violations(job_id, cursor)` before \
         concluding. Do not repair anything: propose the next step (`fix_hotspots`).",
        layout = get(args, "layout", "?"),
        deck = get(args, "deck", "iccad13_m1"),
        region = region_clause(args),
        box_arg = box_arg(args),
    )
}

fn box_arg(args: &Map<String, Value>) -> String {
    match get(args, "region_um", "") {
        "" => String::new(),
        region => format!(", `box_um: [{region}]`"),
    }
}

fn fix_hotspots(args: &Map<String, Value>) -> String {
    format!(
        "Find and fix the {count} worst hotspots of `{layout}` against `{deck}` {region}.\n\n\
         1. Call `evaluate` with `layout: \"{layout}\"`, `deck: \"{deck}\"`{box_arg}, \
         `report_level: \"detailed\"`, `wait: true`.\n\
         2. Rank the canonical records (`dedup_strategy: \"canonical\"`) by severity, then by \
         how far `measured` is from the limit; keep the worst {count}, one per violation group.\n\
         3. For each, call `optimize` with its `violation_id`, `scope: \"group\"` and \
         `wait: true`. Compare before and after (the result's metrics and its images): is the \
         group resolved, did a mask-rule record appear, did EPE or the PV band get worse?\n\
         4. Summarize in a table: violation, rule, resolved or not, EPE before → after, the \
         optimized mask (the linked GDSII resource). Write nothing back to the layout without \
         the user's confirmation.",
        count = get(args, "count", "3"),
        layout = get(args, "layout", "?"),
        deck = get(args, "deck", "iccad13_m1"),
        region = region_clause(args),
        box_arg = box_arg(args),
    )
}

fn explain_violation(args: &Map<String, Value>) -> String {
    format!(
        "Explain the violation `{id}`.\n\n\
         1. The id is self-describing (`rv1:`…): read the rule, layout hash, deck hash, tile \
         and location out of it.\n\
         2. Find its record: in the evaluate result that listed it, or with \
         `violations(job_id, …)` of that job. Quote the rule (`rule_id`, its kind: width, \
         space, EPE, PV band …), `measured` against the deck's limit with its unit, the \
         location in nm, the severity, and its `violation_group_id` (canonical or shadow).\n\
         3. Say in plain words why it prints that way (optical proximity, a narrow gap, a \
         line end) and whether it is a mask-rule or a printed-contour violation.\n\
         4. If a layout session is open on the same layout, `render_view` around the location \
         to show it.\n\
         5. Propose a fix: `optimize` with `violation_id: \"{id}\"` (`scope: \"group\"` for the \
         whole group), or a layout change when the drawn shape itself breaks a mask rule.",
        id = get(args, "violation_id", "?"),
    )
}

fn job_postmortem(args: &Map<String, Value>) -> String {
    format!(
        "Write a postmortem of the job `{id}`.\n\n\
         1. `poll` with `job_id: \"{id}\"` and `detail: \"full\"`: its status, error code, \
         message, `details` (limits, hints), attempts and progress when it stopped.\n\
         2. `telemetry` with `detail: \"full\"`: worker faults and restarts (fault class, \
         death cause), replays, the limits in force and the latency of the tool; and the \
         operator's event log it names (`events.path`): the records of this job's transitions \
         and of its workers around that time.\n\
         3. `health`: is the pool healthy now, which backend runs the jobs?\n\
         4. Write: what happened (a timeline), the root cause (input, a limit, a worker \
         crash, a cancel), whether a retry can work (`recoverable`, `retry_after_ms`), and \
         what to change (arguments, a limit and its setting, the deck).",
        id = get(args, "job_id", "?"),
    )
}

/// `prompts/list`: every prompt with its arguments.
#[must_use]
pub fn list() -> Value {
    let prompts: Vec<Value> = PROMPTS
        .iter()
        .map(|p| {
            json!({
                "name": p.name,
                "title": p.title,
                "description": p.description,
                "arguments": p.args.iter().map(|a| json!({
                    "name": a.name, "description": a.description, "required": a.required,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({ "prompts": prompts })
}

/// `prompts/get`: the prompt's messages with `arguments` filled in.
///
/// # Errors
/// `-32602` for an unknown prompt, a missing required argument or a non-string argument.
pub fn get_prompt(name: &str, arguments: &Map<String, Value>) -> Result<Value, RpcError> {
    let prompt = PROMPTS
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| RpcError::invalid_params(format!("Unknown prompt: {name}")))?;
    if let Some((key, _)) = arguments.iter().find(|(_, v)| !v.is_string()) {
        return Err(RpcError::invalid_params(format!(
            "prompt argument {key} must be a string"
        )));
    }
    if let Some(missing) = prompt
        .args
        .iter()
        .find(|a| a.required && get(arguments, a.name, "").is_empty())
    {
        return Err(RpcError::invalid_params(format!(
            "prompt {name} needs the argument {}",
            missing.name
        )));
    }
    Ok(json!({
        "description": prompt.description,
        "messages": [{"role": "user", "content": {"type": "text", "text": (prompt.render)(arguments)}}],
    }))
}

/// `completion/complete` for a prompt's argument: values that start with what was typed.
///
/// # Errors
/// `-32602` for an unknown prompt or argument, or a reference that is not a prompt.
pub fn complete(shared: &ToolShared, params: &Map<String, Value>) -> Result<Value, RpcError> {
    let reference = &params["ref"];
    if reference["type"] != "ref/prompt" {
        return Err(RpcError::invalid_params(
            "completion is offered for prompt arguments (ref/prompt) only",
        ));
    }
    let name = reference["name"].as_str().unwrap_or("");
    let prompt = PROMPTS
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| RpcError::invalid_params(format!("Unknown prompt: {name}")))?;
    let argument = params["argument"]["name"].as_str().unwrap_or("");
    if !prompt.args.iter().any(|a| a.name == argument) {
        return Err(RpcError::invalid_params(format!(
            "prompt {name} has no argument {argument}"
        )));
    }
    let typed = params["argument"]["value"].as_str().unwrap_or("");
    let candidates: Vec<String> = match argument {
        "deck" => SHIPPED_DECKS.iter().map(|d| (*d).to_owned()).collect(),
        "job_id" => job_ids(shared, name == "job_postmortem"),
        "violation_id" => shared.scope.violations.ids(),
        "count" => ["1", "3", "5", "10"].map(str::to_owned).to_vec(),
        _ => Vec::new(),
    };
    let matching: Vec<String> = candidates
        .into_iter()
        .filter(|c| c.starts_with(typed))
        .collect();
    let total = matching.len();
    let values: Vec<String> = matching.into_iter().take(MAX_COMPLETIONS).collect();
    Ok(json!({"completion": {
        "values": values,
        "total": total,
        "hasMore": total > MAX_COMPLETIONS,
    }}))
}

/// The client's job ids, newest first; failed and cancelled ones first when `failed_first`.
fn job_ids(shared: &ToolShared, failed_first: bool) -> Vec<String> {
    let mut views = Vec::new();
    let mut cursor: Option<String> = None;
    while let Ok((page, next)) = shared.jobs.list_page(cursor.as_deref(), 500) {
        views.extend(page);
        match next {
            Some(next) if views.len() < 5000 => cursor = Some(next),
            _ => break,
        }
    }
    views.reverse();
    if failed_first {
        views.sort_by_key(|v| {
            !matches!(
                v.status,
                reticle_dispatch::jobs::JobStatus::Failed
                    | reticle_dispatch::jobs::JobStatus::Cancelled
            )
        });
    }
    views.into_iter().map(|v| v.job_id).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_prompt_renders_with_its_required_arguments_and_refuses_without() {
        let listed = list();
        assert!(listed["prompts"].as_array().unwrap().len() >= 4);
        for prompt in &PROMPTS {
            let mut args = Map::new();
            for a in prompt.args.iter().filter(|a| a.required) {
                args.insert(a.name.into(), json!(format!("VALUE_OF_{}", a.name)));
            }
            let got = get_prompt(prompt.name, &args).unwrap();
            let text = got["messages"][0]["content"]["text"].as_str().unwrap();
            for a in prompt.args.iter().filter(|a| a.required) {
                assert!(
                    text.contains(&format!("VALUE_OF_{}", a.name)),
                    "{}",
                    prompt.name
                );
                let mut missing = args.clone();
                missing.remove(a.name);
                assert!(
                    get_prompt(prompt.name, &missing).is_err(),
                    "{}",
                    prompt.name
                );
            }
        }
        assert!(get_prompt("nope", &Map::new()).is_err());
    }

    #[test]
    fn the_shipped_decks_are_the_evaluation_crates() {
        // The host does not link reticle-eval: read its deck table as text.
        let source = include_str!("../../eval/src/deck.rs");
        let table = &source[source.find("SHIPPED_DECKS").unwrap()..];
        let table = &table[..table.find("];").unwrap()];
        let names: Vec<&str> = table
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with('"') && l.ends_with("\","))
            .map(|l| l.trim_matches(|c| c == '"' || c == ','))
            .collect();
        assert_eq!(names, SHIPPED_DECKS, "update prompts::SHIPPED_DECKS");
    }
}
