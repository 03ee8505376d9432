//! Replays every JSON-RPC transcript in `examples/mcp/transcripts/` against the built
//! `reticle` binary and compares the answers modulo ids and timings.
//!
//! A transcript is NDJSON, one step per line (format in `examples/mcp/README.md`):
//! - `{"comment": …}`: ignored;
//! - `{"requires_tools": [..]}`: skip the file (saying why) unless `tools/list` has them;
//! - `{"send": MESSAGE}`: written to stdin (a notification, or a request whose answer
//!   the next `recv` checks);
//! - `{"recv": MESSAGE}`: the next message with that `id` must match (notifications in
//!   between are skipped);
//! - `{"until": {"send": REQUEST, "pointer": P, "in": [..], "max": N}}`: sends REQUEST
//!   (every 50 ms, at most N times) until the answer's value at JSON pointer P is one of
//!   `in`; the last answer is what the following `recv` checks.
//!
//! In expectations, the string `"{{*}}"` matches any value (timings, pids), a string that
//! is exactly `"{{name}}"` binds `name` to the actual value the first time and must equal
//! it afterwards, and `{{name}}` inside a longer string is replaced by its binding.
//! Sent messages get the same substitutions; `${REPO}` is the repository root and
//! `${ARTIFACTS}` the host's artifact root (a temporary directory).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use reticle_tests::{Host, check_jsonrpc_value, repo_root};
use serde_json::{Value, json};

fn transcripts_dir() -> PathBuf {
    repo_root().join("examples/mcp/transcripts")
}

struct Replay {
    host: Host,
    bindings: BTreeMap<String, Value>,
    last: Option<Value>,
    file: String,
    /// The host's artifact root (`${ARTIFACTS}` in transcripts).
    artifacts: tempfile::TempDir,
}

impl Replay {
    fn substitute(&self, value: &Value) -> Value {
        match value {
            Value::String(s) => {
                let root = repo_root();
                let mut out = s
                    .replace("${REPO}", &root.display().to_string())
                    .replace("${ARTIFACTS}", &self.artifacts.path().display().to_string());
                if let Some(name) = whole_placeholder(&out)
                    && let Some(bound) = self.bindings.get(name)
                {
                    return bound.clone();
                }
                for (name, bound) in &self.bindings {
                    let text = bound
                        .as_str()
                        .map_or_else(|| bound.to_string(), str::to_owned);
                    out = out.replace(&format!("{{{{{name}}}}}"), &text);
                }
                Value::String(out)
            }
            Value::Array(items) => Value::Array(items.iter().map(|v| self.substitute(v)).collect()),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), self.substitute(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    /// Binds every whole-string placeholder of `expected` to the value at the same place
    /// in `actual` (first pass, so a placeholder inside a longer string earlier in the
    /// message, e.g. porcelain text before `structuredContent`, already has its value).
    fn bind(&mut self, expected: &Value, actual: &Value) {
        match (expected, actual) {
            (Value::String(s), _) => {
                if let Some(name) = whole_placeholder(s) {
                    self.bindings
                        .entry(name.to_owned())
                        .or_insert_with(|| actual.clone());
                }
            }
            (Value::Object(e), Value::Object(a)) => {
                for (k, v) in e {
                    if let Some(actual) = a.get(k) {
                        self.bind(v, actual);
                    }
                }
            }
            (Value::Array(e), Value::Array(a)) => {
                for (e, a) in e.iter().zip(a) {
                    self.bind(e, a);
                }
            }
            _ => {}
        }
    }

    /// Compares `actual` with `expected`, binding placeholders; the error names the
    /// JSON pointer of the first difference.
    fn matches(&mut self, expected: &Value, actual: &Value, at: &str) -> Result<(), String> {
        if let Value::String(s) = expected {
            if s == "{{*}}" {
                return Ok(());
            }
            if let Some(name) = whole_placeholder(s) {
                if let Some(bound) = self.bindings.get(name) {
                    return if bound == actual {
                        Ok(())
                    } else {
                        Err(format!("{at}: {{{{{name}}}}} is {bound}, got {actual}"))
                    };
                }
                self.bindings.insert(name.to_owned(), actual.clone());
                return Ok(());
            }
        }
        match (expected, actual) {
            (Value::Object(e), Value::Object(a)) => {
                let ek: Vec<&String> = e.keys().collect();
                let ak: Vec<&String> = a.keys().collect();
                if ek != ak {
                    return Err(format!("{at}: keys {ek:?} expected, got {ak:?}"));
                }
                for (k, v) in e {
                    self.matches(v, &a[k], &format!("{at}/{k}"))?;
                }
                Ok(())
            }
            (Value::Array(e), Value::Array(a)) => {
                if e.len() != a.len() {
                    return Err(format!("{at}: {} items expected, got {}", e.len(), a.len()));
                }
                for (i, (e, a)) in e.iter().zip(a).enumerate() {
                    self.matches(e, a, &format!("{at}/{i}"))?;
                }
                Ok(())
            }
            (Value::String(_), _) => {
                let expected = self.substitute(expected);
                if &expected == actual {
                    Ok(())
                } else {
                    Err(format!("{at}: expected {expected}, got {actual}"))
                }
            }
            _ if expected == actual => Ok(()),
            _ => Err(format!("{at}: expected {expected}, got {actual}")),
        }
    }

    /// The answer to request `id`, skipping notifications.
    fn answer(&mut self, id: &Value) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let line = self
                .host
                .recv_line(deadline.saturating_duration_since(Instant::now()))
                .unwrap_or_else(|| {
                    panic!(
                        "{}: no answer to {id}; stderr:\n{}",
                        self.file,
                        self.host.stderr()
                    )
                });
            let message: Value = serde_json::from_str(&line).expect("stdout line is JSON");
            check_jsonrpc_value(&message).unwrap_or_else(|e| panic!("{e}: {message}"));
            if message.get("id") == Some(id) {
                return message;
            }
        }
    }

    fn request(&mut self, message: &Value) -> Value {
        let message = self.substitute(message);
        self.host.send(&message);
        let id = message["id"].clone();
        self.answer(&id)
    }
}

fn whole_placeholder(s: &str) -> Option<&str> {
    s.strip_prefix("{{")
        .and_then(|r| r.strip_suffix("}}"))
        .filter(|n| *n != "*" && !n.contains('{'))
}

fn tool_names(host: &mut Host) -> Vec<String> {
    let listed = host.request(json!("transcript-tools"), "tools/list", json!({}));
    listed["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Replays one file; `false` when it was skipped.
fn replay(path: &Path) -> bool {
    let file = path.file_name().unwrap().to_string_lossy().into_owned();
    let text = std::fs::read_to_string(path).unwrap();
    let steps: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| serde_json::from_str(l).unwrap_or_else(|e| panic!("{file}:{}: {e}", i + 1)))
        .collect();
    let root = repo_root().display().to_string();
    let artifacts = tempfile::tempdir().unwrap();
    let artifact_root = artifacts.path().display().to_string();
    let host = Host::start_with(&[
        ("RETICLE_ALLOWED_ROOTS", root.as_str()),
        ("RETICLE_BACKEND", "cpu"),
        ("RETICLE_LAZY_WORKERS", "true"),
        ("KLAYOUT_MCP_ARTIFACT_ROOT", artifact_root.as_str()),
    ]);
    let mut replay = Replay {
        host,
        bindings: BTreeMap::new(),
        last: None,
        file: file.clone(),
        artifacts,
    };
    for (i, step) in steps.iter().enumerate() {
        let at = format!("{file} step {}", i + 1);
        if let Some(required) = step.get("requires_tools") {
            // Needs an initialized session to list tools: the first steps of every
            // transcript are the handshake, so requirements come after it.
            let names = tool_names(&mut replay.host);
            let missing: Vec<&Value> = required
                .as_array()
                .unwrap()
                .iter()
                .filter(|t| !names.iter().any(|n| Some(n.as_str()) == t.as_str()))
                .collect();
            if !missing.is_empty() {
                eprintln!("skip {file}: this build has no tool {missing:?} (written ahead of it)");
                return false;
            }
        } else if let Some(message) = step.get("send") {
            if message.get("id").is_some() {
                replay.last = Some(replay.request(message));
            } else {
                let message = replay.substitute(message);
                replay.host.send(&message);
            }
        } else if let Some(expected) = step.get("recv") {
            let actual = replay
                .last
                .take()
                .unwrap_or_else(|| panic!("{at}: recv without a request before it"));
            replay.bind(expected, &actual);
            if let Err(e) = replay.matches(expected, &actual, "") {
                panic!("{at}: {e}\nactual: {actual}");
            }
        } else if let Some(until) = step.get("until") {
            let pointer = until["pointer"].as_str().unwrap();
            let wanted = until["in"].as_array().unwrap();
            let max = until["max"].as_u64().unwrap_or(1200);
            let mut tries = 0;
            loop {
                tries += 1;
                let answer = replay.request(&until["send"]);
                let done = answer.pointer(pointer).is_some_and(|v| wanted.contains(v));
                if done || tries >= max {
                    assert!(done, "{at}: {pointer} never reached {wanted:?}: {answer}");
                    replay.last = Some(answer);
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        } else if step.get("comment").is_none() {
            panic!("{at}: unknown step {step}");
        }
    }
    assert!(
        replay.last.is_none(),
        "{file}: the last answer was never checked"
    );
    let (status, _) = replay.host.close_and_wait();
    assert!(status.success(), "{file}: host exited with {status}");
    true
}

#[test]
fn every_transcript_replays() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(transcripts_dir())
        .expect("examples/mcp/transcripts")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    let mut replayed = Vec::new();
    for file in &files {
        if replay(file) {
            replayed.push(file.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    eprintln!("replayed {replayed:?}");
    for required in [
        "evaluate_cancel.jsonl",
        "evaluate_poll.jsonl",
        "porcelain_and_normalization.jsonl",
    ] {
        assert!(
            replayed.iter().any(|f| f == required),
            "{required} was not replayed"
        );
    }
}
