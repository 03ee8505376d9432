//! The private host ↔ worker protocol: length-prefixed msgpack frames on a Unix socket.
//!
//! Frame = 4-byte big-endian payload length, then the `rmp-serde` encoding of one
//! [`HostMessage`] or [`WorkerMessage`]. The worker speaks first with
//! [`WorkerMessage::Hello`]. Tool arguments and results travel as JSON text so the
//! bytes a worker produces are the bytes the client receives (gate G3): the host
//! validates them against the tool's output schema and forwards them unmodified.

use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};

use crate::error::ToolError;

/// Version of this wire protocol; the host refuses a worker whose hello differs.
pub const WIRE_VERSION: u32 = 1;

/// Largest frame either side accepts (64 MiB). Images travel as files, not frames.
pub const MAX_WIRE_FRAME: usize = 64 * 1024 * 1024;

/// Environment variable through which the host gives a worker its socket path.
pub const WORKER_SOCKET_ENV: &str = "RETICLE_WORKER_SOCKET";

/// Environment variable through which the host gives a worker its own pid, so the
/// worker can tell, right after arming its parent-death signal, whether the parent it
/// was started by is already gone (then it exits at once instead of running orphaned).
pub const WORKER_PARENT_PID_ENV: &str = "RETICLE_WORKER_PARENT_PID";

/// Environment variable through which the host gives a pool worker its share of the
/// machine's cores: the threads of the worker's compute pool. Workers of one pool run side
/// by side, so each takes cores ÷ workers (at least one) instead of every core: threads of
/// two workers no longer contend for the same cores, and a worker's per-thread scratch (so
/// its resident set) no longer depends on how the scheduler interleaved them (D222).
pub const WORKER_THREADS_ENV: &str = "RETICLE_WORKER_THREADS";

/// The folder, inside a whole-layout job's artifact directory, that holds its per-tile
/// intermediates (`tile_<ix>_<iy>.json`, `simulate`'s `.blk` blocks): tile ops write there,
/// the merge reads there, and the host's fan-out removes it once the merge has answered,
/// so the directory the caller named holds only the results (docs/DECISIONS.md D190).
pub const TILES_DIR: &str = ".tiles";

/// Messages from the host to a worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum HostMessage {
    /// Run one job. A worker runs one job at a time.
    Run(RunRequest),
    /// Stop the named job cooperatively (the host also kills the process group
    /// when it must free the device at once).
    Cancel {
        /// The job to stop.
        job_id: String,
    },
    /// Liveness probe; answered by [`WorkerMessage::Pong`].
    Ping {
        /// Echoed back.
        seq: u64,
    },
    /// Finish the current job, then exit 0.
    Shutdown,
}

/// One job for a worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRequest {
    /// Host-assigned job id (`job_<uuid>`), echoed on every message about the job.
    pub job_id: String,
    /// The operation, by tool name (`"simulate"`, `"evaluate"`, `"open_layout"`, ...).
    pub op: String,
    /// The validated tool arguments as JSON text, after host-side resolution
    /// (session ids replaced by layout paths and hashes, paths made absolute).
    pub args_json: String,
    /// Where and under which limits the job runs.
    pub context: JobContext,
}

/// Where and under which limits a job runs. Everything a worker may touch is named here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobContext {
    /// Directory (already created by the host) where the job may write artifacts.
    pub artifact_dir: Option<String>,
    /// Canonical directories the job may read from.
    pub allowed_roots: Vec<String>,
    /// Resource limits.
    pub limits: JobLimits,
}

/// Resource limits a worker enforces inside one job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobLimits {
    /// Largest layout file read, in bytes.
    pub max_layout_bytes: u64,
    /// Most shapes a query returns or a flattening produces.
    pub max_shapes: u64,
    /// Most raster pixels one job may allocate per image.
    pub max_raster_pixels: u64,
}

impl Default for JobLimits {
    fn default() -> Self {
        Self {
            max_layout_bytes: 512 * 1024 * 1024,
            max_shapes: 5_000_000,
            max_raster_pixels: 64 * 1024 * 1024,
        }
    }
}

/// What a worker runs on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendDescription {
    /// `"cpu"` or `"gpu"`.
    pub kind: String,
    /// Adapter name.
    pub adapter: String,
}

/// The first message a worker sends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerHello {
    /// Must equal [`WIRE_VERSION`].
    pub wire_version: u32,
    /// The worker binary's version (`CARGO_PKG_VERSION`).
    pub worker_version: String,
    /// Process id.
    pub pid: u32,
    /// Imaging backend chosen at start (`RETICLE_BACKEND=auto|gpu|cpu`).
    pub backend: BackendDescription,
}

/// Messages from a worker to the host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum WorkerMessage {
    /// Sent once, first.
    Hello(WorkerHello),
    /// Progress of the running job; `done` never decreases within a job.
    Progress {
        /// The job.
        job_id: String,
        /// Units done.
        done: u64,
        /// Units in total.
        total: u64,
        /// Short human text ("corner 2/3").
        message: String,
    },
    /// The job finished: either the exact JSON text of the tool's structured
    /// result, or a tool error (errors are values).
    Result {
        /// The job.
        job_id: String,
        /// Outcome.
        outcome: JobOutcome,
    },
    /// Answer to [`HostMessage::Ping`], with live resource figures.
    Pong {
        /// Echoed.
        seq: u64,
        /// Bytes held in GPU buffers now.
        device_bytes: u64,
        /// Jobs this worker has finished.
        jobs_run: u64,
    },
    /// The worker hit an operational fault outside a tool's own error handling: an
    /// undecodable host frame, a lost device. With a `job_id` the job is broken; the
    /// worker exits after sending a fault that is `fatal`.
    Fault {
        /// The job the fault hit, if any.
        job_id: Option<String>,
        /// Short human text.
        message: String,
        /// Whether the worker exits right after sending this.
        fatal: bool,
    },
}

/// How a job ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum JobOutcome {
    /// The tool's `structuredContent` as compact JSON text.
    Ok {
        /// JSON text.
        payload_json: String,
    },
    /// The tool failed with a typed error.
    Err {
        /// The error.
        error: ToolError,
    },
}

/// Errors reading or writing a frame.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The peer closed the socket (clean EOF at a frame boundary).
    #[error("peer closed the connection")]
    Closed,
    /// I/O failure.
    #[error("wire I/O: {0}")]
    Io(#[from] io::Error),
    /// A frame header announced more than [`MAX_WIRE_FRAME`] bytes.
    #[error("frame of {0} bytes exceeds the {MAX_WIRE_FRAME}-byte limit")]
    TooLarge(usize),
    /// The payload is not a valid message.
    #[error("undecodable frame: {0}")]
    Decode(#[from] rmp_serde::decode::Error),
    /// The message could not be encoded.
    #[error("unencodable message: {0}")]
    Encode(#[from] rmp_serde::encode::Error),
}

/// Encodes one message as a complete frame (header + payload).
pub fn encode_frame<T: Serialize>(message: &T) -> Result<Vec<u8>, WireError> {
    let payload = rmp_serde::to_vec_named(message)?;
    if payload.len() > MAX_WIRE_FRAME {
        return Err(WireError::TooLarge(payload.len()));
    }
    let len = u32::try_from(payload.len()).map_err(|_| WireError::TooLarge(payload.len()))?;
    let mut frame = Vec::with_capacity(4 + payload.len());
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&payload);
    Ok(frame)
}

/// Decodes a frame's payload length from its 4-byte header, enforcing the limit.
pub fn frame_len(header: [u8; 4]) -> Result<usize, WireError> {
    let len = u32::from_be_bytes(header) as usize;
    if len > MAX_WIRE_FRAME {
        return Err(WireError::TooLarge(len));
    }
    Ok(len)
}

/// Decodes one message from a frame payload (without its header).
pub fn decode_payload<T: for<'de> Deserialize<'de>>(payload: &[u8]) -> Result<T, WireError> {
    Ok(rmp_serde::from_slice(payload)?)
}

/// Writes one message as a frame to a blocking writer.
pub fn write_message<T: Serialize>(writer: &mut impl Write, message: &T) -> Result<(), WireError> {
    writer.write_all(&encode_frame(message)?)?;
    writer.flush()?;
    Ok(())
}

/// Reads one message from a blocking reader; [`WireError::Closed`] on EOF at a frame boundary.
pub fn read_message<T: for<'de> Deserialize<'de>>(reader: &mut impl Read) -> Result<T, WireError> {
    let mut header = [0u8; 4];
    match reader.read_exact(&mut header) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Err(WireError::Closed),
        Err(e) => return Err(e.into()),
    }
    let len = frame_len(header)?;
    let mut payload = vec![0u8; len];
    reader.read_exact(&mut payload)?;
    decode_payload(&payload)
}

/// Whether `name` may be the name of a file the host or a worker writes into an artifact
/// directory: non-empty, not hidden, only ASCII letters, digits, `_`, `-` and `.` (so no
/// separator, no `..` component, nothing a shell or a viewer could misread). Names are
/// generated by the writer, never taken from a caller; this is the last check before
/// the write.
#[must_use]
pub fn is_plain_artifact_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn only_plain_generated_names_are_artifact_names() {
        for ok in ["aerial.png", "mask_opt-1.gds", "a"] {
            assert!(is_plain_artifact_name(ok), "{ok}");
        }
        for bad in ["", ".hidden", "../x", "a/b", "..", "a b", "é.png", "a\0b"] {
            assert!(!is_plain_artifact_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn round_trip_every_message_kind() {
        let msgs = vec![
            WorkerMessage::Hello(WorkerHello {
                wire_version: WIRE_VERSION,
                worker_version: "0.1.0".into(),
                pid: 42,
                backend: BackendDescription {
                    kind: "cpu".into(),
                    adapter: "x".into(),
                },
            }),
            WorkerMessage::Progress {
                job_id: "j".into(),
                done: 1,
                total: 3,
                message: "m".into(),
            },
            WorkerMessage::Result {
                job_id: "j".into(),
                outcome: JobOutcome::Ok {
                    payload_json: r#"{"a":1.5}"#.into(),
                },
            },
            WorkerMessage::Result {
                job_id: "j".into(),
                outcome: JobOutcome::Err {
                    error: ToolError::new(ErrorCode::InvalidBox, "bad"),
                },
            },
            WorkerMessage::Pong {
                seq: 7,
                device_bytes: 1 << 33,
                jobs_run: 3,
            },
            WorkerMessage::Fault {
                job_id: None,
                message: "undecodable frame".into(),
                fatal: true,
            },
        ];
        let mut buf = Vec::new();
        for m in &msgs {
            write_message(&mut buf, m).unwrap();
        }
        let mut r = buf.as_slice();
        for m in &msgs {
            let back: WorkerMessage = read_message(&mut r).unwrap();
            assert_eq!(&back, m);
        }
        assert!(matches!(
            read_message::<WorkerMessage>(&mut r),
            Err(WireError::Closed)
        ));
    }

    #[test]
    fn oversized_header_is_rejected_before_allocation() {
        let header = u32::MAX.to_be_bytes();
        let mut bytes = header.to_vec();
        bytes.extend_from_slice(b"xx");
        assert!(matches!(
            read_message::<HostMessage>(&mut bytes.as_slice()),
            Err(WireError::TooLarge(_))
        ));
    }

    #[test]
    fn host_messages_round_trip() {
        let run = HostMessage::Run(RunRequest {
            job_id: "job_1".into(),
            op: "simulate".into(),
            args_json: "{}".into(),
            context: JobContext {
                artifact_dir: Some("/tmp/a".into()),
                allowed_roots: vec!["/tmp".into()],
                limits: JobLimits::default(),
            },
        });
        for m in [
            run,
            HostMessage::Cancel { job_id: "j".into() },
            HostMessage::Ping { seq: 1 },
            HostMessage::Shutdown,
        ] {
            let frame = encode_frame(&m).unwrap();
            let back: HostMessage = read_message(&mut frame.as_slice()).unwrap();
            assert_eq!(back, m);
        }
    }
}
