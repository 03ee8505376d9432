//! The operator's event log: an append-only JSONL file in which every request, job
//! transition, worker fault and restart, rollout step and reexec is one record, so a
//! postmortem can reconstruct a session from the file alone (`reticle ctl events`).
//!
//! Records are `{"seq", "ts", "ts_unix_ms", "pid", "event", …fields}`; `seq` grows by one
//! per record over the life of the host, across self-reexec (the snapshot carries it), so
//! a reader can tell a gap from a rotation. The file is size-capped: when the next
//! record would push it past `max_bytes` it is renamed to `events.jsonl.1` (older files
//! shift up to `.keep`, the oldest is deleted) and a new file is started. Writes are
//! whole lines under one lock, so a reader never sees half a record from us.
//!
//! This is not the `tracing` log (`reticle.jsonl`, free-form diagnostics): events have a
//! fixed vocabulary (`EVENT_KINDS`) and are what `telemetry` counts are recounted from.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use reticle_protocol::sync::lock;
use serde_json::{Map, Value, json};

/// File name of the live event log inside the log directory.
pub const EVENTS_FILE: &str = "events.jsonl";

/// Every `event` value the host writes.
pub const EVENT_KINDS: [&str; 14] = [
    "host.start",
    "host.stop",
    "session.end",
    "request",
    "request.probe",
    "frame.rejected",
    "job",
    "worker.ready",
    "worker.fault",
    "worker.restart",
    "worker.retired",
    "rollout",
    "reexec",
    "control",
];

/// Where the log goes and how big it may grow.
#[derive(Debug, Clone)]
pub struct EventLogConfig {
    /// Directory of `events.jsonl` (created 0700 when missing).
    pub dir: PathBuf,
    /// Size cap of one file.
    pub max_bytes: u64,
    /// Rotated files kept.
    pub keep: u32,
}

impl EventLogConfig {
    /// `dir` with the caps `RETICLE_EVENTS_MAX_BYTES` / `RETICLE_EVENTS_KEEP` set
    /// ([`reticle_config::ServeSettings`]: a value that does not parse is ignored with a
    /// warning).
    pub fn configured(dir: PathBuf, serve: &reticle_config::ServeSettings) -> Self {
        Self {
            dir,
            max_bytes: serve.events_max_bytes,
            keep: serve.events_keep,
        }
    }
}

/// The open `events.jsonl` and its size so far.
struct EventFile {
    file: File,
    size: u64,
}

/// The host's event log. Without a directory (`--no-log-file`) records are counted
/// but not written.
pub struct EventLog {
    config: Option<EventLogConfig>,
    sink: Mutex<Option<EventFile>>,
    seq: AtomicU64,
}

impl std::fmt::Debug for EventLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLog")
            .field("path", &self.path())
            .field("seq", &self.seq())
            .finish()
    }
}

/// Milliseconds since the Unix epoch.
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// RFC 3339 UTC time with milliseconds.
pub fn iso_now() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
}

impl EventLog {
    /// An event log that only counts (no file).
    pub fn disabled() -> Self {
        Self {
            config: None,
            sink: Mutex::new(None),
            seq: AtomicU64::new(0),
        }
    }

    /// Opens (appending) the log in `config.dir`, continuing after `seq` (0 for a new
    /// host; the snapshot's value after a reexec). A directory that cannot be created or
    /// a file that cannot be opened leaves the log counting only, with a warning.
    pub fn open(config: EventLogConfig, seq: u64) -> Self {
        let sink = Self::open_sink(&config);
        Self {
            config: Some(config),
            sink: Mutex::new(sink),
            seq: AtomicU64::new(seq),
        }
    }

    fn open_sink(config: &EventLogConfig) -> Option<EventFile> {
        use std::os::unix::fs::DirBuilderExt;
        let opened = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&config.dir)
            .and_then(|()| open_append(&config.dir.join(EVENTS_FILE)))
            .and_then(|file| {
                let size = file.metadata()?.len();
                Ok(EventFile { file, size })
            });
        match opened {
            Ok(sink) => Some(sink),
            Err(e) => {
                tracing::warn!(dir = %config.dir.display(), error = %e, "event log unavailable; events are counted only");
                None
            }
        }
    }

    /// The live file, when the log writes one.
    pub fn path(&self) -> Option<PathBuf> {
        self.config.as_ref().map(|c| c.dir.join(EVENTS_FILE))
    }

    /// The configuration, when the log writes files.
    pub fn config(&self) -> Option<&EventLogConfig> {
        self.config.as_ref()
    }

    /// The sequence number of the last record written (0: none yet).
    pub fn seq(&self) -> u64 {
        self.seq.load(Ordering::SeqCst)
    }

    /// Appends one record of kind `event` with `fields` (an object; other values are
    /// stored under `"data"`). Returns the record's `seq`.
    pub fn record(&self, event: &str, fields: Value) -> u64 {
        let mut sink = lock(&self.sink);
        // Numbered under the lock: seq order is file order.
        let seq = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
        let mut record = Map::new();
        record.insert("seq".into(), json!(seq));
        record.insert("ts".into(), json!(iso_now()));
        record.insert("ts_unix_ms".into(), json!(unix_ms()));
        record.insert("pid".into(), json!(std::process::id()));
        record.insert("event".into(), json!(event));
        match fields {
            Value::Object(fields) => {
                for (k, v) in fields {
                    record.entry(k).or_insert(v);
                }
            }
            Value::Null => {}
            other => {
                record.insert("data".into(), other);
            }
        }
        let Some(config) = &self.config else {
            return seq;
        };
        let mut line = Value::Object(record).to_string();
        line.push('\n');
        if let Some(s) = sink.as_ref()
            && s.size > 0
            && s.size + line.len() as u64 > config.max_bytes
        {
            *sink = None;
            if let Err(e) = rotate(config) {
                tracing::warn!(error = %e, "event log rotation failed");
            }
            *sink = Self::open_sink(config);
        }
        if let Some(s) = sink.as_mut() {
            match s.file.write_all(line.as_bytes()) {
                Ok(()) => s.size += line.len() as u64,
                Err(e) => tracing::warn!(error = %e, "event log write failed"),
            }
        }
        seq
    }

    /// Forces written records to the disk (before a reexec or exit).
    pub fn sync(&self) {
        let sink = lock(&self.sink);
        if let Some(s) = sink.as_ref() {
            let _ = s.file.sync_data();
        }
    }
}

/// Shifts `events.jsonl.{k}` → `.{k+1}` (deleting the oldest) and the live file to `.1`.
fn rotate(config: &EventLogConfig) -> io::Result<()> {
    let path = |k: u32| {
        if k == 0 {
            config.dir.join(EVENTS_FILE)
        } else {
            config.dir.join(format!("{EVENTS_FILE}.{k}"))
        }
    };
    if config.keep == 0 {
        return std::fs::remove_file(path(0));
    }
    let _ = std::fs::remove_file(path(config.keep));
    for k in (0..config.keep).rev() {
        match std::fs::rename(path(k), path(k + 1)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The event files in `dir`, oldest first (rotated files by descending suffix, then the
/// live file).
pub fn files_oldest_first(dir: &Path) -> Vec<PathBuf> {
    let mut rotated: Vec<(u32, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let k: u32 = name
                .strip_prefix(EVENTS_FILE)?
                .strip_prefix('.')?
                .parse()
                .ok()?;
            Some((k, entry.path()))
        })
        .collect();
    rotated.sort_by_key(|r| std::cmp::Reverse(r.0));
    let mut files: Vec<PathBuf> = rotated.into_iter().map(|(_, p)| p).collect();
    let live = dir.join(EVENTS_FILE);
    if live.exists() {
        files.push(live);
    }
    files
}

/// Which records [`read_since`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Since {
    /// Everything still on disk.
    All,
    /// Records with `seq` greater than this.
    Seq(u64),
    /// Records at or after this Unix time in milliseconds.
    UnixMs(u64),
}

impl Since {
    /// Parses `--since`: a sequence number (`seq:120` or a bare integer below 10¹²),
    /// an RFC 3339 time, or a duration back from now (`30s`, `10m`, `2h`, `1d`).
    ///
    /// # Errors
    /// A message naming the accepted forms.
    pub fn parse(raw: &str, now_ms: u64) -> Result<Self, String> {
        let raw = raw.trim();
        if raw.is_empty() || raw == "all" {
            return Ok(Self::All);
        }
        if let Some(seq) = raw.strip_prefix("seq:") {
            return seq
                .parse()
                .map(Self::Seq)
                .map_err(|_| format!("`{raw}`: seq:N needs an integer"));
        }
        if let Ok(n) = raw.parse::<u64>() {
            return Ok(if n < 1_000_000_000_000 {
                Self::Seq(n)
            } else {
                Self::UnixMs(n)
            });
        }
        let units = [
            ('s', 1_000u64),
            ('m', 60_000),
            ('h', 3_600_000),
            ('d', 86_400_000),
        ];
        if let Some((unit, scale)) = units.iter().find(|(u, _)| raw.ends_with(*u))
            && let Ok(n) = raw[..raw.len() - unit.len_utf8()].parse::<u64>()
        {
            return Ok(Self::UnixMs(
                now_ms.saturating_sub(n.saturating_mul(*scale)),
            ));
        }
        if let Ok(t) =
            time::OffsetDateTime::parse(raw, &time::format_description::well_known::Rfc3339)
        {
            let ms = t.unix_timestamp_nanos() / 1_000_000;
            return Ok(Self::UnixMs(u64::try_from(ms).unwrap_or(0)));
        }
        Err(format!(
            "`{raw}` is not a --since value: use seq:N, an RFC 3339 time, or a duration like 30s, 10m, 2h, 1d"
        ))
    }

    fn admits(&self, record: &Value) -> bool {
        match self {
            Self::All => true,
            Self::Seq(after) => record["seq"].as_u64().is_some_and(|s| s > *after),
            Self::UnixMs(from) => record["ts_unix_ms"].as_u64().is_some_and(|t| t >= *from),
        }
    }
}

/// Reads the records in `dir` admitted by `since`, oldest first. Lines that are not JSON
/// objects (a torn last line after a crash) are skipped and counted in the second value.
pub fn read_since(dir: &Path, since: &Since) -> (Vec<Value>, u64) {
    let mut records = Vec::new();
    let mut skipped = 0;
    for file in files_oldest_first(dir) {
        let Ok(file) = File::open(&file) else {
            continue;
        };
        for line in BufReader::new(file).split(b'\n') {
            let Ok(line) = line else { break };
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<Value>(&line) {
                Ok(record) if record.is_object() => {
                    if since.admits(&record) {
                        records.push(record);
                    }
                }
                _ => skipped += 1,
            }
        }
    }
    (records, skipped)
}
