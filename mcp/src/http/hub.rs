//! The clients of the shared host: legacy sessions by `Mcp-Session-Id`, stateless
//! clients by token; the limit on how many there are, their idle expiry, and their end
//! when the host stops.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reticle_protocol::sync::lock;

use super::auth::Principal;
use super::client::{Client, ClientKey};
use crate::server::Server;
use reticle_dispatch::Dispatcher;
use reticle_dispatch::workers::WorkerPool;
use reticle_tools::ToolRegistry;
use reticle_tools::confine::AllowedRoots;
use reticle_tools::scope::ClientScope;
use reticle_tools::state::HostState;
use reticle_transport::writer::Outbound;

/// Bounds on the clients of one host.
#[derive(Debug, Clone, Copy)]
pub struct HttpLimits {
    /// The largest request body, in bytes (seed 001's 1 MiB frame guard).
    pub max_body: usize,
    /// Clients (sessions and stateless token clients) at once.
    pub max_clients: usize,
    /// A client with nothing in flight and no stream open for this long is ended.
    pub idle: Duration,
    /// How long a legacy request whose stream dropped waits for a `Last-Event-ID`
    /// reconnect before it is cancelled.
    pub resume_grace: Duration,
}

/// What every client's server shares.
pub struct HostParts {
    /// Host-wide state (ledger, counters, event log).
    pub state: Arc<HostState>,
    /// The worker pool.
    pub workers: Arc<WorkerPool>,
    /// The one dispatcher.
    pub dispatcher: Arc<Dispatcher>,
    /// The tools.
    pub tools: Arc<ToolRegistry>,
    /// How long finished jobs stay pollable.
    pub job_ttl: Duration,
}

/// Why no client could be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooManyClients {
    /// The limit.
    pub max: usize,
}

/// The host's clients.
pub struct Hub {
    host: HostParts,
    /// Every client, by key.
    clients: Mutex<HashMap<ClientKey, Arc<Client>>>,
    /// The limits.
    pub limits: HttpLimits,
    /// Set when the host stops: no new client is made.
    closed: std::sync::atomic::AtomicBool,
}

impl Hub {
    /// No clients yet.
    pub fn new(host: HostParts, limits: HttpLimits) -> Self {
        Self {
            host,
            clients: Mutex::default(),
            limits,
            closed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The shared parts.
    pub fn host(&self) -> &HostParts {
        &self.host
    }

    fn start(&self, key: ClientKey, principal: Arc<Principal>) -> Arc<Client> {
        let (out, outgoing) = Outbound::channel();
        let config = self.host.state.config();
        let scope = Arc::new(ClientScope::new(
            AllowedRoots::for_token(principal.roots.as_deref(), config),
            config,
        ));
        let server = Server::with_dispatcher(
            out,
            Arc::clone(&self.host.state),
            scope,
            Arc::clone(&self.host.tools),
            self.host.job_ttl,
            Arc::clone(&self.host.workers),
            Arc::clone(&self.host.dispatcher),
        );
        self.host.state.events.record(
            "session.start",
            serde_json::json!({"transport": "http", "client": format!("{key:?}"), "principal": principal.name}),
        );
        Client::start(key, principal, server, outgoing, self.limits.resume_grace)
    }

    /// A new legacy session for `principal` (an `initialize`).
    ///
    /// # Errors
    /// [`TooManyClients`] at the limit.
    pub fn new_session(&self, principal: &Arc<Principal>) -> Result<Arc<Client>, TooManyClients> {
        let mut clients = lock(&self.clients);
        if clients.len() >= self.limits.max_clients || self.is_closed() {
            return Err(TooManyClients {
                max: self.limits.max_clients,
            });
        }
        let key = ClientKey::Session(uuid::Uuid::new_v4().simple().to_string());
        let client = self.start(key.clone(), Arc::clone(principal));
        clients.insert(key, Arc::clone(&client));
        Ok(client)
    }

    /// The session `id` if it exists and belongs to `principal` (another token's session
    /// is as unknown as one that never existed).
    pub fn session(&self, id: &str, principal: &Principal) -> Option<Arc<Client>> {
        let clients = lock(&self.clients);
        let client = clients.get(&ClientKey::Session(id.to_owned()))?;
        (client.principal.name == principal.name).then(|| Arc::clone(client))
    }

    /// The stateless client of `principal`, started on its first request.
    ///
    /// # Errors
    /// [`TooManyClients`] at the limit.
    pub fn stateless(&self, principal: &Arc<Principal>) -> Result<Arc<Client>, TooManyClients> {
        let key = ClientKey::Stateless(principal.name.clone());
        let mut clients = lock(&self.clients);
        if let Some(client) = clients.get(&key) {
            return Ok(Arc::clone(client));
        }
        if clients.len() >= self.limits.max_clients || self.is_closed() {
            return Err(TooManyClients {
                max: self.limits.max_clients,
            });
        }
        let client = self.start(key.clone(), Arc::clone(principal));
        clients.insert(key, Arc::clone(&client));
        Ok(client)
    }

    fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The stateless client of `principal`, if it has made one request already.
    pub fn existing_stateless(&self, principal: &Principal) -> Option<Arc<Client>> {
        lock(&self.clients)
            .get(&ClientKey::Stateless(principal.name.clone()))
            .cloned()
    }

    /// Ends session `id` (a DELETE): `false` when there is no such session of `principal`.
    pub fn end_session(&self, id: &str, principal: &Principal) -> bool {
        let key = ClientKey::Session(id.to_owned());
        let client = {
            let mut clients = lock(&self.clients);
            match clients.get(&key) {
                Some(c) if c.principal.name == principal.name => clients.remove(&key),
                _ => None,
            }
        };
        match client {
            Some(client) => {
                client.end("the client ended its session (HTTP DELETE)", Duration::ZERO);
                true
            }
            None => false,
        }
    }

    /// Ends the clients idle for longer than the limit.
    pub fn expire_idle(&self) {
        let idle: Vec<Arc<Client>> = {
            let mut clients = lock(&self.clients);
            let keys: Vec<ClientKey> = clients
                .iter()
                .filter(|(_, c)| c.is_idle(self.limits.idle))
                .map(|(k, _)| k.clone())
                .collect();
            keys.iter().filter_map(|k| clients.remove(k)).collect()
        };
        for client in idle {
            client.end(
                &format!("the client was idle for {} s", self.limits.idle.as_secs()),
                Duration::ZERO,
            );
        }
    }

    /// How many clients there are.
    pub fn len(&self) -> usize {
        lock(&self.clients).len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        lock(&self.clients).is_empty()
    }

    /// Ends every client (the host stops): requests get `grace`, then are cancelled with
    /// their jobs. Returns when all have ended.
    pub async fn end_all(&self, why: &str, grace: Duration) {
        self.closed
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let clients: Vec<Arc<Client>> = lock(&self.clients).drain().map(|(_, c)| c).collect();
        let tasks: Vec<_> = clients.iter().map(|c| c.end(why, grace)).collect();
        // Each client's requests answer on their open streams within the grace; its
        // router closes the streams once the last answer is routed (bounded: a job that
        // keeps a sender alive must not hold the exit).
        for (client, [server, router]) in clients.iter().zip(tasks) {
            if let Some(server) = server {
                let _ = server.await;
            }
            if let Some(router) = router {
                let _ = tokio::time::timeout(Duration::from_secs(1), router).await;
            }
            client.close_streams();
        }
    }
}
