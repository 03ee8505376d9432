//! The single owner of the protocol stream.
//!
//! [`claim_stdout`] moves the process's stdout to a private descriptor and
//! points fd 1 at stderr, so a stray `print!` anywhere in the process (ours or
//! a dependency's) lands in the logs instead of corrupting the JSON-RPC stream.
//! Only the writer thread holds the private descriptor; everyone else sends
//! whole messages through [`Outbound`], and the thread writes each as exactly
//! one line.

use std::fs::File;
use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;

use tokio::sync::mpsc;

/// Messages that may wait for the writer before senders feel backpressure.
const QUEUE_DEPTH: usize = 256;

/// Takes stdout away from the rest of the process and returns it.
///
/// After this call fd 1 refers to stderr. The returned descriptor is close-on-exec, so
/// no child process (a worker, KLayout) inherits the protocol stream.
pub fn claim_stdout() -> io::Result<File> {
    use std::os::fd::AsFd;
    let protocol = io::stdout().as_fd().try_clone_to_owned()?;
    nix::unistd::dup2_stdout(io::stderr()).map_err(io::Error::from)?;
    Ok(File::from(protocol))
}

/// Points fd 1 back at the protocol stream (before a self-reexec, so the next image
/// finds the client's stdout where a fresh start would).
///
/// # Errors
/// When `dup2` fails.
pub fn restore_stdout(protocol: &File) -> io::Result<()> {
    nix::unistd::dup2_stdout(protocol).map_err(io::Error::from)
}

/// One serialized message on its way to the client, and the request it belongs to.
#[derive(Debug)]
pub struct Outgoing {
    /// The JSON-RPC message, one line of compact JSON (no newline).
    pub bytes: Vec<u8>,
    /// The key (`id.to_string()`) of the client request this notification belongs to,
    /// when it was sent on that request's behalf. stdio ignores it; Streamable HTTP sends
    /// the message on that request's response stream.
    pub related: Option<Arc<str>>,
    /// For a response: the key of the request it answers (so a router need not parse it).
    pub response_to: Option<String>,
}

/// Cloneable handle for sending messages to the client.
#[derive(Debug, Clone)]
pub struct Outbound {
    tx: mpsc::Sender<Outgoing>,
    written: Arc<AtomicU64>,
    related: Option<Arc<str>>,
}

impl Outbound {
    /// A stream whose messages are read from the returned receiver (a Streamable HTTP
    /// client's router; the stdio writer thread is the other reader).
    pub fn channel() -> (Outbound, mpsc::Receiver<Outgoing>) {
        let (tx, rx) = mpsc::channel(QUEUE_DEPTH);
        let out = Outbound {
            tx,
            written: Arc::new(AtomicU64::new(0)),
            related: None,
        };
        (out, rx)
    }

    /// The same stream, with every message sent through the copy marked as belonging
    /// to the request with key `request` (`id.to_string()`).
    #[must_use]
    pub fn for_request(&self, request: Option<&str>) -> Outbound {
        Outbound {
            related: request.map(Arc::from),
            ..self.clone()
        }
    }

    /// Queues one JSON-RPC message. Returns `false` when the writer has stopped
    /// (the client closed its end).
    pub async fn send(&self, message: &serde_json::Value) -> bool {
        // Compact serde_json output never contains a raw newline: control
        // characters inside strings are escaped, so one message is one line.
        let bytes = match serde_json::to_vec(message) {
            Ok(bytes) => bytes,
            Err(e) => {
                tracing::error!(error = %e, "could not serialize an outbound message");
                return false;
            }
        };
        let related = self.related.clone();
        let response_to = message
            .get("method")
            .is_none()
            .then(|| message.get("id").map(serde_json::Value::to_string))
            .flatten();
        self.tx
            .send(Outgoing {
                bytes,
                related,
                response_to,
            })
            .await
            .is_ok()
    }

    /// The counter of messages written, for whoever reads the channel to bump (an HTTP
    /// router holds it instead of a sender, so the channel closes with the server).
    pub fn written_counter(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.written)
    }

    /// Messages written to the stream so far.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }
}

/// The writer thread; join it after every [`Outbound`] is dropped to flush.
#[derive(Debug)]
pub struct Writer {
    thread: JoinHandle<()>,
}

impl Writer {
    /// Starts the writer thread on `sink`.
    pub fn spawn(sink: impl Write + Send + 'static) -> (Outbound, Writer) {
        let (out, rx) = Outbound::channel();
        let counter = Arc::clone(&out.written);
        let thread = std::thread::Builder::new()
            .name("stdout-writer".into())
            .spawn(move || write_loop(rx, sink, &counter))
            .unwrap_or_else(|e| panic!("cannot start the stdout writer thread: {e}"));
        (out, Writer { thread })
    }

    /// Waits until every queued message is written (all senders must be gone).
    pub fn join(self) {
        if self.thread.join().is_err() {
            tracing::error!("stdout writer thread panicked");
        }
    }
}

fn write_loop(mut rx: mpsc::Receiver<Outgoing>, mut sink: impl Write, written: &AtomicU64) {
    while let Some(Outgoing {
        bytes: mut line, ..
    }) = rx.blocking_recv()
    {
        line.push(b'\n');
        if let Err(e) = sink.write_all(&line).and_then(|()| sink.flush()) {
            // The client is gone; keep draining so senders never block forever.
            tracing::warn!(error = %e, "stdout closed; dropping outbound messages");
            while rx.blocking_recv().is_some() {}
            return;
        }
        written.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn one_message_per_line_even_with_newlines_in_strings() {
        let sink = Shared::default();
        let (out, writer) = Writer::spawn(sink.clone());
        let msg =
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {"text": "a\nb\r\u{2028}"}});
        assert!(out.send(&msg).await);
        assert!(out.send(&msg).await);
        drop(out);
        tokio::task::spawn_blocking(move || writer.join())
            .await
            .unwrap();
        let bytes = sink.0.lock().unwrap().clone();
        let lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
        assert_eq!(lines.len(), 3, "two lines and the empty tail");
        for line in &lines[..2] {
            let back: serde_json::Value = serde_json::from_slice(line).unwrap();
            assert_eq!(back, msg);
        }
    }
}
