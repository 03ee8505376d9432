//! What a tool returns, and the output-schema check every result passes.
//!
//! A tool answers [`ToolOutput::Started`] (a job was started; the call returns its id
//! and status) or [`ToolOutput::Finished`] (the payload: a synchronous tool's result, or
//! a waited job's report with its `job_id`/`status`). The check runs for every result, in
//! every build: a payload that breaks its schema becomes an `INTERNAL_ERROR` of fault
//! class `invariant` with the schema errors in `details.errors`, never a silent pass.
//!
//! A job tool's output schema names both shapes (`protocol/schemas/<tool>.output.json`):
//! `$defs.job_started` (the envelope), `$defs.result` (the finished payload, as the job
//! stores it and `poll` returns it) and `$defs.finished` (the result plus the job fields,
//! what a waited call returns); the top level accepts either answer. The job's payload is
//! checked against `result` before it is stored in the job table, so `poll` and
//! `tasks/result` return a payload that passed; the call's answer against the shape its
//! variant says.

use libmcp::FaultClass;
use reticle_protocol::{ErrorCode, SCHEMA_VERSION, ToolError};
use serde_json::{Value, json};

use reticle_dispatch::jobs::{JobProgress, JobStatus, JobView};

/// A job that started (or was re-created after a reexec); the call returns at once.
#[derive(Debug, Clone, PartialEq)]
pub struct JobStarted {
    /// The job (a task id too).
    pub job_id: String,
    /// Its status when the call returns (`queued` unless it moved already).
    pub status: JobStatus,
    /// Its progress then.
    pub progress: JobProgress,
}

impl JobStarted {
    /// The started job as the view shows it now.
    #[must_use]
    pub fn of(view: &JobView) -> Self {
        Self {
            job_id: view.job_id.clone(),
            status: view.status,
            progress: view.progress.clone(),
        }
    }

    /// The envelope a client gets: `{schema_version, job_id, status, progress}`.
    #[must_use]
    pub fn to_payload(&self) -> Value {
        json!({
            "schema_version": SCHEMA_VERSION,
            "job_id": self.job_id,
            "status": self.status,
            "progress": self.progress,
        })
    }
}

/// What a tool's handler answers.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutput {
    /// A job was started; the client polls it (or follows its task).
    Started(JobStarted),
    /// The result.
    Finished(Value),
}

impl From<Value> for ToolOutput {
    fn from(payload: Value) -> Self {
        Self::Finished(payload)
    }
}

impl ToolOutput {
    /// The payload that goes into `structuredContent`.
    #[must_use]
    pub fn into_payload(self) -> Value {
        match self {
            Self::Started(started) => started.to_payload(),
            Self::Finished(payload) => payload,
        }
    }
}

/// Every violation of `schema` by `instance`, as sorted `{path, msg}` pairs
/// (RFC 6901 pointers; seed 001 §5 ordering).
pub fn schema_errors(validator: &jsonschema::Validator, instance: &Value) -> Vec<Value> {
    match reticle_assets::errors_json(&reticle_assets::violations(validator, instance)) {
        Value::Array(errors) => errors,
        _ => Vec::new(),
    }
}

/// The validators of the shapes a job tool's schema defines.
struct JobShapes {
    started: jsonschema::Validator,
    finished: jsonschema::Validator,
    result: jsonschema::Validator,
}

/// A tool's compiled output schema.
pub(crate) struct OutputSchema {
    whole: jsonschema::Validator,
    job: Option<JobShapes>,
}

impl OutputSchema {
    /// Compiles `schema` (a tool's output schema) for tool `tool`.
    ///
    /// # Panics
    /// When the schema is invalid: a build defect every test run catches.
    pub(crate) fn compile(tool: &str, schema: &Value) -> Self {
        let compile = |schema: &Value, which: &str| {
            jsonschema::validator_for(schema)
                .unwrap_or_else(|e| panic!("{tool}.output.json {which} is not a valid schema: {e}"))
        };
        // A sub-schema is checked as the whole document pointing at it, so its `$ref`s
        // into `$defs` resolve as they do for a client.
        let shape = |name: &str| {
            let mut root = schema.clone();
            if let Some(map) = root.as_object_mut() {
                for key in ["anyOf", "oneOf", "required", "properties", "$id"] {
                    map.remove(key);
                }
                map.insert("$ref".into(), json!(format!("#/$defs/{name}")));
            }
            compile(&root, name)
        };
        let defs = &schema["$defs"];
        let job = ["job_started", "finished", "result"]
            .iter()
            .all(|name| defs.get(*name).is_some())
            .then(|| JobShapes {
                started: shape("job_started"),
                finished: shape("finished"),
                result: shape("result"),
            });
        Self {
            whole: compile(schema, "root"),
            job,
        }
    }

    /// Checks a call's answer against the shape its variant says.
    ///
    /// # Errors
    /// `INTERNAL_ERROR` (fault class `invariant`) with the schema errors.
    pub(crate) fn check(&self, tool: &str, output: ToolOutput) -> Result<ToolOutput, ToolError> {
        let errors = self.errors(&output);
        if errors.is_empty() {
            Ok(output)
        } else {
            Err(violation(tool, errors))
        }
    }

    /// The violations of a call's answer, against the shape its variant says.
    pub(crate) fn errors(&self, output: &ToolOutput) -> Vec<Value> {
        let validator = match (&self.job, output) {
            (Some(job), ToolOutput::Started(_)) => &job.started,
            (Some(job), ToolOutput::Finished(_)) => &job.finished,
            (None, _) => &self.whole,
        };
        match output {
            ToolOutput::Started(started) => schema_errors(validator, &started.to_payload()),
            ToolOutput::Finished(payload) => schema_errors(validator, payload),
        }
    }

    /// The violations of a job's finished payload.
    pub(crate) fn result_errors(&self, payload: &Value) -> Vec<Value> {
        let validator = self.job.as_ref().map_or(&self.whole, |job| &job.result);
        schema_errors(validator, payload)
    }

    /// Checks a job's finished payload before the job table stores it.
    ///
    /// # Errors
    /// As [`Self::check`].
    pub(crate) fn check_result(&self, tool: &str, payload: Value) -> Result<Value, ToolError> {
        let errors = self.result_errors(&payload);
        if errors.is_empty() {
            Ok(payload)
        } else {
            Err(violation(tool, errors))
        }
    }
}

/// A result that breaks its tool's output schema: the tool broke its contract.
fn violation(tool: &str, errors: Vec<Value>) -> ToolError {
    tracing::error!(tool, ?errors, "output schema violation");
    ToolError::new(
        ErrorCode::InternalError,
        format!("{tool} produced a result that violates its output schema"),
    )
    .with_details(json!({"errors": errors}))
    .with_fault(FaultClass::Invariant, None)
}
