//! One Server-Sent Events stream of a client: a request's response stream or the
//! standalone stream of a legacy session's GET.
//!
//! Events are buffered (bounded) with their ids, so a client that lost its connection
//! can `GET` with `Last-Event-ID` and get what followed (2025-11-25 resumability); at
//! most one reader is attached at a time (a new one takes over, the old one ends), so no
//! message is delivered on two connections. A reader that goes away before the stream
//! finished reports it (the request may be cancelled, [`super::client`]).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use axum::body::{Body, Bytes};
use reticle_protocol::sync::lock;
use serde_json::Value;
use tokio::sync::watch;

/// Events kept for a reconnecting reader, per stream (the oldest go first; the final
/// response is the last event, so it is always kept).
const MAX_BUFFERED: usize = 1024;
/// A comment line this often keeps proxies from closing a quiet stream and lets the
/// server notice a client that went away (its write fails).
pub const KEEPALIVE: Duration = Duration::from_millis(250);
/// The reconnection delay the priming event asks a client for (`retry:`), in ms.
pub const RETRY_MS: u64 = 250;

/// What a stream tells its owner when its reader leaves before the end.
pub trait DetachListener: Send + Sync {
    /// The reader of `stream` went away before the stream finished.
    fn detached(&self, stream: &Arc<EventStream>);
}

#[derive(Debug, Default)]
struct StreamBuffer {
    events: VecDeque<(u64, Bytes)>,
    next_seq: u64,
    finished: bool,
    /// The attached reader's generation (0: none attached).
    reader: u64,
    /// The last event any reader yielded.
    delivered: u64,
    readers_so_far: u64,
}

/// A buffered, resumable SSE stream.
#[derive(Debug)]
pub struct EventStream {
    /// The stream's number within its client (event ids are `<stream>-<seq>`).
    pub id: u64,
    /// The JSON-RPC id of the request this stream answers (`None`: standalone).
    pub request_id: Option<Value>,
    /// Events carry ids and can be replayed (legacy sessions); a 2026-07-28 stream
    /// cannot be resumed, and its disconnect is its cancellation.
    pub resumable: bool,
    inner: Mutex<StreamBuffer>,
    changed: watch::Sender<u64>,
}

impl EventStream {
    /// A new stream.
    pub fn new(id: u64, request_id: Option<Value>, resumable: bool) -> Arc<Self> {
        Arc::new(Self {
            id,
            request_id,
            resumable,
            inner: Mutex::new(StreamBuffer {
                next_seq: 1,
                ..StreamBuffer::default()
            }),
            changed: watch::channel(0).0,
        })
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, StreamBuffer> {
        lock(&self.inner)
    }

    /// Appends a JSON-RPC message; `last` finishes the stream (the final response).
    pub fn push(&self, message: &[u8], last: bool) {
        {
            let mut inner = self.inner();
            if inner.finished {
                return;
            }
            let seq = inner.next_seq;
            inner.next_seq += 1;
            let mut event = Vec::with_capacity(message.len() + 32);
            if self.resumable {
                event.extend_from_slice(format!("id: {}-{seq}\n", self.id).as_bytes());
            }
            event.extend_from_slice(b"event: message\ndata: ");
            event.extend_from_slice(message);
            event.extend_from_slice(b"\n\n");
            inner.events.push_back((seq, Bytes::from(event)));
            if inner.events.len() > MAX_BUFFERED {
                inner.events.pop_front();
            }
            inner.finished |= last;
        }
        self.changed.send_modify(|v| *v += 1);
    }

    /// Ends the stream without a response (the client's session ended).
    pub fn close(&self) {
        self.inner().finished = true;
        self.changed.send_modify(|v| *v += 1);
    }

    /// The sequence number of the last event a reader yielded (0: none).
    pub fn delivered(&self) -> u64 {
        self.inner().delivered
    }

    /// Whether a reader is attached now.
    pub fn is_attached(&self) -> bool {
        self.inner().reader != 0
    }

    /// Whether the final event was pushed.
    pub fn is_finished(&self) -> bool {
        self.inner().finished
    }

    /// Attaches a new reader that starts after event `after` (0: from the start) and
    /// returns the HTTP body that streams it. A reader attached before ends.
    pub fn attach(self: &Arc<Self>, after: u64, owner: Weak<dyn DetachListener>) -> Body {
        let generation = {
            let mut inner = self.inner();
            inner.readers_so_far += 1;
            inner.reader = inner.readers_so_far;
            inner.reader
        };
        self.changed.send_modify(|v| *v += 1);
        let reader = AttachedReader {
            stream: Arc::clone(self),
            changes: self.changed.subscribe(),
            next: after + 1,
            generation,
            primed: false,
            done: false,
            owner,
        };
        Body::from_stream(futures_util::stream::unfold(
            reader,
            |mut reader| async move {
                reader
                    .next_chunk()
                    .await
                    .map(|chunk| (Ok::<_, std::convert::Infallible>(chunk), reader))
            },
        ))
    }

    /// The sequence number of an event id `<stream>-<seq>` of this stream.
    pub fn parse_event_id(raw: &str) -> Option<(u64, u64)> {
        let (stream, seq) = raw.trim().split_once('-')?;
        Some((stream.parse().ok()?, seq.parse().ok()?))
    }
}

/// The attached reader: yields the events after `next`, keep-alive comments while
/// nothing comes, and ends after the final event (or when another reader takes over).
struct AttachedReader {
    stream: Arc<EventStream>,
    changes: watch::Receiver<u64>,
    next: u64,
    generation: u64,
    primed: bool,
    done: bool,
    owner: Weak<dyn DetachListener>,
}

impl AttachedReader {
    async fn next_chunk(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        if !self.primed {
            self.primed = true;
            // The priming event (SEP-1699): an id and empty data, so a client whose
            // connection drops before the first message can still resume.
            if self.stream.resumable {
                let priming = format!(
                    "id: {}-{}\nretry: {RETRY_MS}\ndata: \n\n",
                    self.stream.id,
                    self.next - 1
                );
                return Some(Bytes::from(priming));
            }
        }
        loop {
            self.changes.borrow_and_update();
            {
                let mut inner = self.stream.inner();
                if inner.reader != self.generation {
                    // Another reader took over (a reconnect): this one ends quietly.
                    self.done = true;
                    return None;
                }
                if let Some((seq, event)) = inner.events.iter().find(|(seq, _)| *seq >= self.next) {
                    let (seq, event) = (*seq, event.clone());
                    self.next = seq + 1;
                    inner.delivered = inner.delivered.max(seq);
                    return Some(event);
                }
                if inner.finished {
                    self.done = true;
                    return None;
                }
            }
            tokio::select! {
                changed = self.changes.changed() => if changed.is_err() {
                    self.done = true;
                    return None;
                },
                () = tokio::time::sleep(KEEPALIVE) => return Some(Bytes::from_static(b":\n\n")),
            }
        }
    }
}

impl Drop for AttachedReader {
    fn drop(&mut self) {
        let still_mine = {
            let mut inner = self.stream.inner();
            let mine = inner.reader == self.generation;
            if mine {
                inner.reader = 0;
            }
            mine && !inner.finished
        };
        tracing::debug!(
            stream = self.stream.id,
            still_mine,
            done = self.done,
            "SSE reader dropped"
        );
        if still_mine
            && !self.done
            && let Some(owner) = self.owner.upgrade()
        {
            owner.detached(&self.stream);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    struct Count(std::sync::atomic::AtomicUsize);
    impl DetachListener for Count {
        fn detached(&self, _stream: &Arc<EventStream>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    async fn collect(body: Body) -> String {
        let mut out = Vec::new();
        let mut stream = body.into_data_stream();
        while let Some(chunk) = stream.next().await {
            out.extend_from_slice(&chunk.unwrap());
        }
        String::from_utf8(out).unwrap()
    }

    #[tokio::test]
    async fn events_replay_after_the_last_event_id_and_the_stream_ends_on_its_response() {
        let owner: Arc<dyn DetachListener> = Arc::new(Count(0.into()));
        let stream = EventStream::new(7, Some(serde_json::json!(1)), true);
        stream.push(br#"{"a":1}"#, false);
        stream.push(br#"{"a":2}"#, false);
        stream.push(br#"{"id":1,"result":{}}"#, true);
        let all = collect(stream.attach(0, Arc::downgrade(&owner))).await;
        assert!(all.starts_with("id: 7-0\nretry: 250\ndata: \n\n"), "{all}");
        assert!(
            all.contains("id: 7-1\nevent: message\ndata: {\"a\":1}\n\n"),
            "{all}"
        );
        assert_eq!(
            stream.delivered(),
            3,
            "a new plain reader starts after what was delivered"
        );
        let resumed = collect(stream.attach(1, Arc::downgrade(&owner))).await;
        assert!(!resumed.contains("\"a\":1"), "{resumed}");
        assert!(
            resumed.contains("id: 7-2") && resumed.contains("id: 7-3"),
            "{resumed}"
        );
        assert_eq!(EventStream::parse_event_id("7-3"), Some((7, 3)));
        assert_eq!(EventStream::parse_event_id("x"), None);
    }

    #[tokio::test]
    async fn a_reader_dropped_before_the_end_reports_its_detach() {
        let count = Arc::new(Count(0.into()));
        let owner: Arc<dyn DetachListener> = count.clone();
        let stream = EventStream::new(1, Some(serde_json::json!(1)), false);
        let mut body = stream.attach(0, Arc::downgrade(&owner)).into_data_stream();
        stream.push(b"{}", false);
        assert_eq!(
            body.next().await.unwrap().unwrap(),
            "event: message\ndata: {}\n\n"
        );
        assert!(stream.is_attached());
        drop(body);
        assert!(!stream.is_attached());
        assert_eq!(count.0.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}
