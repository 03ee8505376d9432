//! One client of the shared host: a legacy session (`Mcp-Session-Id`) or the stateless
//! (2026-07-28) requests of one token. It owns an MCP [`Server`] of its own (its job
//! table, scope, journal and stream) over the host's state, tools, workers and
//! dispatcher, and routes what that server sends to the right HTTP response: a
//! request's response and its notifications to that request's stream (or JSON body),
//! anything else to the session's standalone GET stream.
//!
//! A request whose connection goes away is cancelled as on stdio (its waited job is
//! cancelled, its worker killed): at once for a 2026-07-28 stream or a JSON response,
//! after the resume grace for a legacy stream, which the client may take up again with
//! `Last-Event-ID` in the meantime.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use reticle_protocol::sync::lock;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::auth::Principal;
use super::stream::{DetachListener, EventStream};
use crate::server::{ClientEnd, Server};
use reticle_transport::frame::Frame;
use reticle_transport::writer::Outgoing;

/// Messages a client may have queued for its server before a POST waits.
const FRAME_QUEUE: usize = 64;
/// Finished streams kept for a late `Last-Event-ID` (beyond them the oldest go).
const KEPT_FINISHED_STREAMS: usize = 64;

/// Which kind of client this is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ClientKey {
    /// A legacy-era session, by its `Mcp-Session-Id`.
    Session(String),
    /// The 2026-07-28 requests of one token, by the token's name.
    Stateless(String),
}

#[derive(Default)]
struct Routes {
    /// Requests answered on a stream, by request key (`id.to_string()`).
    by_request: HashMap<String, Arc<EventStream>>,
    /// Every stream a `Last-Event-ID` may name, by number.
    by_number: HashMap<u64, Arc<EventStream>>,
    /// Requests answered with one JSON body, by request key.
    json: HashMap<String, oneshot::Sender<Bytes>>,
    /// The standalone stream of a legacy session (server requests, unrelated
    /// notifications); `None` for a stateless client.
    standalone: Option<Arc<EventStream>>,
}

/// What a submitted request will be answered with.
pub enum Reply {
    /// An SSE stream (its body).
    Stream(Body),
    /// One JSON body, when it comes; dropping this before cancels the request.
    Json(JsonReply),
}

/// A JSON answer still to come. Dropped before it came (the client's connection closed),
/// it cancels its request.
pub struct JsonReply {
    rx: Option<oneshot::Receiver<Bytes>>,
    client: Arc<Client>,
    id: Value,
}

impl JsonReply {
    /// The response, or `None` when the client ended before it was sent.
    pub async fn wait(mut self) -> Option<Bytes> {
        // The receiver stays in `self` while it waits: if this future is dropped (the
        // connection closed), `Drop` still sees it and cancels the request.
        let answer = self.rx.as_mut()?.await.ok();
        self.rx = None;
        answer
    }
}

impl Drop for JsonReply {
    fn drop(&mut self) {
        if self.rx.is_some() {
            self.client.cancel(
                &self.id,
                "the client's connection closed before the response",
            );
        }
    }
}

/// One client of the shared host.
pub struct Client {
    /// What the client is keyed by.
    pub key: ClientKey,
    /// Whose token it uses.
    pub principal: Arc<Principal>,
    frames: mpsc::Sender<Frame>,
    end: Mutex<Option<oneshot::Sender<ClientEnd>>>,
    /// The server's task (it owns the server: when it ends, the server's stream closes).
    task: Mutex<Option<JoinHandle<()>>>,
    /// The router's task: it ends once everything the server sent has been routed.
    router: Mutex<Option<JoinHandle<()>>>,
    routes: Mutex<Routes>,
    last_seen: Mutex<Instant>,
    next_stream: AtomicU64,
    resume_grace: Duration,
    me: Weak<Client>,
}

impl Client {
    /// Starts a client around `server` (whose stream is read from `outgoing`).
    pub fn start(
        key: ClientKey,
        principal: Arc<Principal>,
        server: Server,
        outgoing: mpsc::Receiver<Outgoing>,
        resume_grace: Duration,
    ) -> Arc<Self> {
        let (frames, frames_rx) = mpsc::channel(FRAME_QUEUE);
        let (end, end_rx) = oneshot::channel();
        let legacy = matches!(key, ClientKey::Session(_));
        let written = server.written_counter();
        let client = Arc::new_cyclic(|me| Self {
            key,
            principal,
            frames,
            end: Mutex::new(Some(end)),
            task: Mutex::new(None),
            router: Mutex::new(None),
            routes: Mutex::new(Routes {
                standalone: legacy.then(|| EventStream::new(0, None, true)),
                ..Routes::default()
            }),
            last_seen: Mutex::new(Instant::now()),
            next_stream: AtomicU64::new(1),
            resume_grace,
            me: me.clone(),
        });
        *lock(&client.task) = Some(tokio::spawn(server.serve_client(frames_rx, end_rx)));
        *lock(&client.router) = Some(tokio::spawn(route(
            outgoing,
            Arc::downgrade(&client),
            written,
        )));
        client
    }

    /// Notes activity (idle expiry counts from the last one).
    pub fn touch(&self) {
        *lock(&self.last_seen) = Instant::now();
    }

    /// Whether the client has been idle for `idle`: no request in flight, no stream
    /// read, nothing received.
    pub fn is_idle(&self, idle: Duration) -> bool {
        let routes = lock(&self.routes);
        let busy = !routes.by_request.is_empty()
            || !routes.json.is_empty()
            || routes.standalone.as_ref().is_some_and(|s| s.is_attached());
        !busy && lock(&self.last_seen).elapsed() >= idle
    }

    /// Hands a notification or a response (to a request of ours) to the server.
    pub async fn deliver(&self, raw: Vec<u8>) -> bool {
        self.touch();
        self.frames.send(Frame::Line(raw)).await.is_ok()
    }

    /// Hands a request to the server; its answer comes on an SSE stream (`stream`) or
    /// as one JSON body. `None` when a request with this id is still in flight.
    pub async fn request(&self, id: &Value, raw: Vec<u8>, stream: bool) -> Option<Reply> {
        self.touch();
        let key = id.to_string();
        let reply = {
            let mut routes = lock(&self.routes);
            if routes.by_request.contains_key(&key) || routes.json.contains_key(&key) {
                return None;
            }
            if stream {
                let number = self.next_stream.fetch_add(1, Ordering::Relaxed);
                let legacy = routes.standalone.is_some();
                let events = EventStream::new(number, Some(id.clone()), legacy);
                routes.by_request.insert(key, Arc::clone(&events));
                if legacy {
                    prune_finished(&mut routes.by_number);
                    routes.by_number.insert(number, Arc::clone(&events));
                }
                Reply::Stream(events.attach(0, self.listener()))
            } else {
                let (tx, rx) = oneshot::channel();
                routes.json.insert(key, tx);
                Reply::Json(JsonReply {
                    rx: Some(rx),
                    client: self.me.upgrade()?,
                    id: id.clone(),
                })
            }
        };
        if self.frames.send(Frame::Line(raw)).await.is_err() {
            // The client ended meanwhile: the stream closes, the JSON wait ends empty.
            self.close_streams();
        }
        Some(reply)
    }

    /// The standalone stream of a legacy session, resumed after `last_event` when the
    /// client names one of its events; a request stream when `last_event` names one.
    /// `None` for a stateless client or an event id of no stream of ours.
    pub fn resume(&self, last_event: Option<&str>) -> Option<Body> {
        self.touch();
        let routes = lock(&self.routes);
        let standalone = routes.standalone.clone()?;
        let Some(raw) = last_event else {
            // A new GET gets what no reader has had yet, not the history again.
            return Some(standalone.attach(standalone.delivered(), self.listener()));
        };
        let (number, seq) = EventStream::parse_event_id(raw)?;
        let stream = if number == 0 {
            standalone
        } else {
            Arc::clone(routes.by_number.get(&number)?)
        };
        Some(stream.attach(seq, self.listener()))
    }

    fn listener(&self) -> Weak<dyn DetachListener> {
        let me: Weak<dyn DetachListener> = self.me.clone();
        me
    }

    /// Cancels request `id` as `notifications/cancelled` would (its task aborted, a
    /// job it waits on cancelled), and forgets where its answer was to go.
    pub fn cancel(&self, id: &Value, reason: &str) {
        let key = id.to_string();
        {
            let mut routes = lock(&self.routes);
            routes.json.remove(&key);
            if let Some(stream) = routes.by_request.remove(&key) {
                stream.close();
            }
        }
        tracing::info!(client = ?self.key, request_id = %id, reason, "request cancelled: its connection closed");
        let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                          "params": {"requestId": id, "reason": reason}});
        let frames = self.frames.clone();
        tokio::spawn(async move {
            let _ = frames
                .send(Frame::Line(note.to_string().into_bytes()))
                .await;
        });
    }

    /// Ends the client: its requests get `grace`, then they and its jobs are cancelled
    /// with `why`. Without a grace its streams close now; with one they stay open for the
    /// answers still to come and close when the router has routed the last of them.
    /// Returns the server's and the router's tasks, to await for the end.
    pub fn end(&self, why: &str, grace: Duration) -> [Option<JoinHandle<()>>; 2] {
        if let Some(end) = lock(&self.end).take() {
            tracing::info!(client = ?self.key, reason = why, "client ended");
            let _ = end.send(ClientEnd {
                why: why.to_owned(),
                grace,
            });
        }
        if grace.is_zero() {
            self.close_streams();
        }
        [lock(&self.task).take(), lock(&self.router).take()]
    }

    /// Closes every stream of the client and releases its JSON waiters.
    pub fn close_streams(&self) {
        let mut routes = lock(&self.routes);
        for stream in routes.by_request.values().chain(routes.standalone.iter()) {
            stream.close();
        }
        // Waiting JSON answers end empty (the handler answers that the session ended).
        routes.json.clear();
    }

    /// Where a message the server sent goes.
    fn dispatch(&self, outgoing: Outgoing) {
        let mut routes = lock(&self.routes);
        if let Some(key) = outgoing.response_to {
            if let Some(tx) = routes.json.remove(&key) {
                let _ = tx.send(Bytes::from(outgoing.bytes));
            } else if let Some(stream) = routes.by_request.remove(&key) {
                stream.push(&outgoing.bytes, true);
            } else {
                tracing::debug!(client = ?self.key, id = %key, "a response nobody waits for any more");
            }
            return;
        }
        if let Some(related) = outgoing.related.as_deref() {
            if let Some(stream) = routes.by_request.get(related) {
                stream.push(&outgoing.bytes, false);
                return;
            }
            if routes.json.contains_key(related) {
                // A JSON answer has no room for notifications.
                return;
            }
        }
        match &routes.standalone {
            Some(standalone) => standalone.push(&outgoing.bytes, false),
            None => tracing::debug!(client = ?self.key, "a notification with no stream to go on"),
        }
    }
}

impl DetachListener for Client {
    fn detached(&self, stream: &Arc<EventStream>) {
        let Some(id) = stream.request_id.clone() else {
            return;
        };
        let grace = if stream.resumable {
            self.resume_grace
        } else {
            Duration::ZERO
        };
        let me = self.me.clone();
        let stream = Arc::clone(stream);
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            if stream.is_attached() || stream.is_finished() {
                tracing::debug!(
                    stream = stream.id,
                    attached = stream.is_attached(),
                    finished = stream.is_finished(),
                    "a dropped stream was resumed or finished in its grace"
                );
                return;
            }
            if let Some(client) = me.upgrade() {
                client.cancel(&id, "the client's connection closed");
            }
        });
    }
}

fn prune_finished(streams: &mut HashMap<u64, Arc<EventStream>>) {
    if streams.len() < KEPT_FINISHED_STREAMS {
        return;
    }
    let mut finished: Vec<u64> = streams
        .iter()
        .filter(|(_, s)| s.is_finished() && !s.is_attached())
        .map(|(n, _)| *n)
        .collect();
    finished.sort_unstable();
    for number in finished
        .iter()
        .take(finished.len().saturating_sub(KEPT_FINISHED_STREAMS / 2))
    {
        streams.remove(number);
    }
}

/// Reads the client's server stream and routes each message until the server and every
/// job of it are gone; then no answer can come any more, and the client's streams close.
async fn route(
    mut outgoing: mpsc::Receiver<Outgoing>,
    client: Weak<Client>,
    written: Arc<std::sync::atomic::AtomicU64>,
) {
    while let Some(message) = outgoing.recv().await {
        let Some(client) = client.upgrade() else {
            return;
        };
        written.fetch_add(1, Ordering::Relaxed);
        client.dispatch(message);
    }
    if let Some(client) = client.upgrade() {
        client.close_streams();
    }
}
