//! The operator's event log (`src/events.rs`): numbered records, rotation, reopening,
//! torn lines, `--since`.

use std::path::Path;

use reticle_dispatch::events::{
    EVENTS_FILE, EventLog, EventLogConfig, Since, files_oldest_first, read_since,
};
use serde_json::{Value, json};

fn config(dir: &Path, max_bytes: u64, keep: u32) -> EventLogConfig {
    EventLogConfig {
        dir: dir.to_path_buf(),
        max_bytes,
        keep,
    }
}

#[test]
fn records_are_numbered_lines_and_read_back_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let log = EventLog::open(config(dir.path(), 1 << 20, 2), 0);
    for i in 0..5 {
        assert_eq!(log.record("request", json!({"i": i})), i + 1);
    }
    let (records, skipped) = read_since(dir.path(), &Since::All);
    assert_eq!(skipped, 0);
    let seqs: Vec<u64> = records.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, vec![1, 2, 3, 4, 5]);
    assert_eq!(records[2]["i"], 2);
    assert_eq!(records[2]["event"], "request");
    let (after, _) = read_since(dir.path(), &Since::Seq(3));
    assert_eq!(after.len(), 2);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(log.path().unwrap())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn rotation_caps_each_file_and_keeps_the_newest() {
    let dir = tempfile::tempdir().unwrap();
    let cap = 4096;
    let log = EventLog::open(config(dir.path(), cap, 2), 0);
    let pad = "x".repeat(300);
    for i in 0..100 {
        log.record("request", json!({"i": i, "pad": pad}));
    }
    let files = files_oldest_first(dir.path());
    assert_eq!(files.len(), 3, "{files:?}");
    for f in &files {
        assert!(std::fs::metadata(f).unwrap().len() <= cap);
    }
    let (records, skipped) = read_since(dir.path(), &Since::All);
    assert_eq!(skipped, 0);
    // What survives is a contiguous run that ends with the last record.
    let seqs: Vec<u64> = records.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert_eq!(*seqs.last().unwrap(), 100);
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1));
    assert!(seqs.len() < 100, "older records were rotated away");
}

#[test]
fn a_reopened_log_continues_the_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let first = EventLog::open(config(dir.path(), 1 << 20, 1), 0);
    first.record("host.start", Value::Null);
    let seq = first.seq();
    drop(first);
    let second = EventLog::open(config(dir.path(), 1 << 20, 1), seq);
    assert_eq!(second.record("reexec", json!({"step": "restored"})), 2);
    assert_eq!(read_since(dir.path(), &Since::All).0.len(), 2);
}

#[test]
fn torn_lines_are_skipped_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(EVENTS_FILE),
        b"{\"seq\":1,\"event\":\"request\",\"ts_unix_ms\":5}\n{\"seq\":2,\"ev",
    )
    .unwrap();
    let (records, skipped) = read_since(dir.path(), &Since::All);
    assert_eq!((records.len(), skipped), (1, 1));
}

#[test]
fn since_accepts_seq_times_and_durations() {
    let now = 1_700_000_000_000;
    assert_eq!(Since::parse("seq:7", now), Ok(Since::Seq(7)));
    assert_eq!(Since::parse("7", now), Ok(Since::Seq(7)));
    assert_eq!(Since::parse("10m", now), Ok(Since::UnixMs(now - 600_000)));
    assert_eq!(Since::parse("2h", now), Ok(Since::UnixMs(now - 7_200_000)));
    assert_eq!(
        Since::parse("2023-11-14T22:13:20Z", now),
        Ok(Since::UnixMs(1_700_000_000_000))
    );
    assert!(Since::parse("yesterday", now).is_err());
}
