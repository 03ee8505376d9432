//! Command-line subcommands other than `serve`. Their stdout is theirs (they
//! are not the MCP server), written through an explicit handle.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use serde_json::{Value, json};

use reticle_assets::{self as assets, SchemaCatalog};
use reticle_dispatch::supervisor::SupervisorConfig;

/// `reticle bench ...`: `output-schema` ([`crate::bench`]), `chip` ([`crate::bench_chip`])
/// and `repair` ([`crate::bench_repair`]) run in the host; every other benchmark runs
/// `reticle-worker bench ...` (the engine lives in the worker binary, never in the host)
/// with this process's stdio, and returns its exit status.
pub fn bench(args: &[String], config: &reticle_config::Config) -> ExitCode {
    if args.first().map(String::as_str) == Some("output-schema") {
        return crate::bench::output_schema(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("chip") {
        return crate::bench_chip::chip(&args[1..], config);
    }
    if args.first().map(String::as_str) == Some("repair") {
        return crate::bench_repair::repair(&args[1..], config);
    }
    if args.first().map(String::as_str) == Some("http") {
        return crate::bench_http::http(&args[1..]);
    }
    let worker = match SupervisorConfig::configured(config) {
        Ok(config) => config.worker_exe,
        Err(e) => {
            eprintln!("reticle bench: {e}");
            return ExitCode::from(2);
        }
    };
    match std::process::Command::new(&worker)
        .arg("bench")
        .args(args)
        .status()
    {
        Ok(status) => match status.code() {
            Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
            None => ExitCode::FAILURE,
        },
        Err(e) => {
            eprintln!("reticle bench: cannot run {}: {e}", worker.display());
            ExitCode::from(2)
        }
    }
}

/// `reticle config`: the effective settings of this environment, as a table or JSON.
pub fn print_config(config: &reticle_config::Config, json: bool) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    let written = if json {
        writeln!(stdout, "{}", config.settings_json())
    } else {
        write!(stdout, "{}", config.settings_table())
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}

/// `reticle validate`: exit 0 valid, 1 invalid, 2 I/O or parse error (seed 001 §10).
pub fn validate(path: &Path, schema: Option<&str>, schemas_dir: Option<&Path>) -> ExitCode {
    let (code, result) = validate_file(path, schema, schemas_dir);
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{result}");
    ExitCode::from(code)
}

fn io_error(reason: &str, detail: String) -> (u8, Value) {
    (2, json!({"ok": false, "reason": reason, "detail": detail}))
}

fn validate_file(path: &Path, schema: Option<&str>, schemas_dir: Option<&Path>) -> (u8, Value) {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) => return io_error("io_error", format!("{}: {e}", path.display())),
    };
    let document: Value = match serde_json::from_slice(&bytes) {
        Ok(document) => document,
        Err(e) => return io_error("parse_error", format!("{}: {e}", path.display())),
    };
    let catalog = SchemaCatalog::load(schemas_dir);
    let Some(name) = schema.or_else(|| document.get("$schema").and_then(Value::as_str)) else {
        return io_error(
            "schema_missing",
            "pass --schema NAME or put \"$schema\": NAME in the file".into(),
        );
    };
    let Some(entry) = catalog.get(name) else {
        return io_error("not_found", format!("no schema named {name}"));
    };
    // `$schema` names the schema; it is not part of the document being checked.
    let mut instance = document;
    if schema.is_none()
        && let Some(object) = instance.as_object_mut()
    {
        object.remove("$schema");
    }
    match assets::validate(&entry.schema, &instance) {
        Err(e) => io_error("schema_invalid", e),
        Ok(errors) if errors.is_empty() => (0, json!({"ok": true, "schema": entry.name})),
        Ok(errors) => (
            1,
            json!({"ok": false, "reason": "validation_failed", "schema": entry.name, "errors": assets::errors_json(&errors)}),
        ),
    }
}
