//! Seed 003's layout observer tools end to end: sessions, queries, measurements, renders,
//! KLayout DRC and every seed 003 error code, through the built `reticle` binary.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use reticle_tests::{Host, check_jsonrpc_line, fixtures_dir, repo_root};
use serde_json::{Value, json};

mod drc;
mod errors;
mod sessions;

struct Observer {
    host: Host,
    artifacts: tempfile::TempDir,
    next_id: u64,
}

impl Observer {
    fn start(extra: &[(&str, &str)]) -> Self {
        let artifacts = tempfile::tempdir().unwrap();
        let root = repo_root();
        let art = artifacts.path().join("root");
        let mut env = vec![
            ("RETICLE_ALLOWED_ROOTS", root.to_str().unwrap().to_owned()),
            ("RETICLE_BACKEND", "cpu".to_owned()),
            (
                "KLAYOUT_MCP_ARTIFACT_ROOT",
                art.to_str().unwrap().to_owned(),
            ),
        ];
        for (k, v) in extra {
            env.retain(|(key, _)| key != k);
            env.push((k, (*v).to_owned()));
        }
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        Self {
            host: Host::start_with(&env),
            artifacts,
            next_id: 0,
        }
    }

    /// The full `CallToolResult`.
    fn call_raw(&mut self, tool: &str, args: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.host.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": args}}));
        // Generous: a query that walks a million placements takes seconds on a loaded
        // two-core machine before it fails with QUERY_TOO_LARGE.
        loop {
            let line = self
                .host
                .recv_line(Duration::from_secs(120))
                .unwrap_or_else(|| panic!("no answer to {tool}; stderr:\n{}", self.host.stderr()));
            let message = check_jsonrpc_line(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
            if message.get("id") == Some(&id) {
                return message["result"].clone();
            }
        }
    }

    /// `structuredContent` of a successful call.
    fn ok(&mut self, tool: &str, args: Value) -> Value {
        let result = self.call_raw(tool, args.clone());
        assert_eq!(
            result["isError"],
            false,
            "{tool}({args}) failed: {result}\nstderr:\n{}",
            self.host.stderr()
        );
        result["structuredContent"].clone()
    }

    /// The error object of a failed call, checking its code.
    fn err(&mut self, tool: &str, args: Value, code: &str) -> Value {
        let result = self.call_raw(tool, args.clone());
        assert_eq!(
            result["isError"], true,
            "{tool}({args}) succeeded: {result}"
        );
        let error = result["structuredContent"]["error"].clone();
        assert_eq!(error["code"], code, "{tool}({args}): {error}");
        assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()));
        assert!(error["details"].is_object());
        error
    }

    fn open(&mut self, path: &Path) -> Value {
        self.ok("open_layout", json!({"path": path}))
    }
}

fn demo_gds() -> PathBuf {
    fixtures_dir().join("layouts/observer_demo.gds")
}

fn decode_png(bytes: &[u8]) -> (u32, u32, Vec<u8>) {
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    let mut reader = decoder.read_info().expect("png header");
    let mut buf = vec![0; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut buf).expect("png frame");
    assert_eq!(info.color_type, png::ColorType::Rgba);
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf)
}

fn pixel(rgba: &[u8], width: u32, x: u32, y: u32) -> [u8; 4] {
    let i = ((y * width + x) * 4) as usize;
    [rgba[i], rgba[i + 1], rgba[i + 2], rgba[i + 3]]
}

fn mbox(l: f64, b: f64, r: f64, t: f64) -> Value {
    json!({"left": l, "bottom": b, "right": r, "top": t})
}
