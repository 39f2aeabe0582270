//! Connected clients as other connections see them: CLIENT LIST/INFO/KILL,
//! INFO clients and `maxclients` read this registry. The connection task
//! owns everything else about its client; what is shared here is atomics
//! (updated once per command, never contended) and a mutex for the
//! rarely-changed names.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use strata_resp::Protocol;
use tokio::sync::Notify;

use crate::config::OutputLimit;

#[derive(Clone)]
pub struct Names {
    pub name: String,
    pub lib_name: String,
    pub lib_ver: String,
    /// The ACL user the client authenticated as (CLIENT LIST's `user`).
    pub user: String,
}

impl Default for Names {
    fn default() -> Self {
        Names {
            name: String::new(),
            lib_name: String::new(),
            lib_ver: String::new(),
            user: "default".into(),
        }
    }
}

pub struct ClientInfo {
    pub id: u64,
    /// The peer and local TCP addresses; for a unix-socket client,
    /// placeholders, its socket's path being in `unix_socket`.
    pub addr: SocketAddr,
    pub laddr: SocketAddr,
    /// The path of the unix socket the client came through.
    pub unix_socket: Option<Arc<str>>,
    pub fd: i32,
    pub created: Instant,
    pub last_active_ms: AtomicU64,
    pub db: AtomicUsize,
    pub resp: AtomicU8,
    /// Command table index + 1 of the last command run; 0 for none.
    pub last_command: AtomicUsize,
    pub query_buffer_bytes: AtomicUsize,
    /// Room left in the query buffer (CLIENT LIST `qbuf-free`).
    pub query_buffer_free: AtomicUsize,
    pub output_buffer_bytes: AtomicUsize,
    pub names: Mutex<Names>,
    pub no_evict: AtomicBool,
    /// What the client holds in buffers, as last published
    /// (`crate::net::client_eviction`; CLIENT LIST's `tot-mem`).
    pub memory_bytes: AtomicU64,
    pub no_touch: AtomicBool,
    /// [`ROLE_NORMAL`], [`ROLE_REPLICA`] (a replica's connection to this
    /// server) or [`ROLE_MASTER`] (this replica's link to its primary).
    pub role: AtomicU8,
    /// Subscriptions (CLIENT LIST's `sub`, `psub`, `ssub`).
    pub subscribed_channels: AtomicUsize,
    pub subscribed_patterns: AtomicUsize,
    pub subscribed_shard: AtomicUsize,
    /// Commands queued since MULTI; -1 outside MULTI (CLIENT LIST's `multi`).
    pub multi: std::sync::atomic::AtomicI64,
    /// Keys under WATCH (CLIENT LIST's `watch`).
    pub watched_keys: AtomicUsize,
    /// Whether the client waits in a blocking command (CLIENT LIST's `b`).
    pub blocked: AtomicBool,
    /// CLIENT UNBLOCK's request: 0 none, [`UNBLOCK_TIMEOUT`] or
    /// [`UNBLOCK_ERROR`].
    unblock: AtomicU8,
    unblock_signal: Notify,
    killed: AtomicBool,
    kill_signal: Notify,
    /// Set when the connection closes after its pending replies (QUIT):
    /// from then on it is as good as gone to other clients.
    closing: AtomicBool,
    /// Where pushes wait for the connection (`crate::events::pubsub::Mailbox`),
    /// made on first need: a subscription, MONITOR, tracking, or another
    /// client's tracking redirected here.
    mailbox: OnceLock<Arc<Mailbox>>,
}

/// CLIENT UNBLOCK … TIMEOUT: answer as if the timeout had passed.
pub const UNBLOCK_TIMEOUT: u8 = 1;
/// CLIENT UNBLOCK … ERROR: answer `-UNBLOCKED`.
pub const UNBLOCK_ERROR: u8 = 2;

impl ClientInfo {
    pub fn kill(&self) {
        self.killed.store(true, Relaxed);
        self.kill_signal.notify_one();
    }

    /// Asks a blocked client to stop waiting (CLIENT UNBLOCK); false when
    /// it is not blocked.
    pub fn unblock(&self, how: u8) -> bool {
        if !self.blocked.load(Relaxed) {
            return false;
        }
        self.unblock.store(how, Relaxed);
        self.unblock_signal.notify_one();
        true
    }

    /// The pending CLIENT UNBLOCK request, cleared (0 for none).
    pub fn take_unblock(&self) -> u8 {
        self.unblock.swap(0, Relaxed)
    }

    pub async fn unblocked(&self) {
        self.unblock_signal.notified().await
    }

    pub fn is_killed(&self) -> bool {
        self.killed.load(Relaxed)
    }

    /// Notes that the connection closes once its replies are out (QUIT):
    /// a client that redirects its tracking here hears
    /// `tracking-redir-broken` at once, as Redis, which frees the client
    /// before it runs another command, says it.
    pub fn mark_closing(&self) {
        self.closing.store(true, Relaxed);
    }

    /// Killed, or closing once its replies are out.
    pub fn is_gone(&self) -> bool {
        self.is_killed() || self.closing.load(Relaxed)
    }

    /// Wakes the connection from its wait for a request without killing
    /// it, so that it looks again: at what `crate::net::busy` kept for it, or
    /// at a mailbox another client made for it. Other waits ignore it
    /// ([`ClientInfo::killed`]).
    pub fn nudge(&self) {
        self.kill_signal.notify_one();
    }

    /// Waits until the client is killed (a nudge alone does not end it).
    pub async fn killed(&self) {
        while !self.is_killed() {
            self.kill_signal.notified().await;
        }
    }

    /// Waits until the client is killed or nudged.
    pub async fn killed_or_nudged(&self) {
        self.kill_signal.notified().await
    }

    /// The client's mailbox, made now if it has none (its connection is
    /// then nudged, to wait on it from then on).
    pub fn mailbox(self: &Arc<Self>) -> &Arc<Mailbox> {
        let mut made = false;
        let mailbox = self.mailbox.get_or_init(|| {
            made = true;
            Mailbox::new(Arc::downgrade(self), self.id)
        });
        if made {
            self.nudge();
        }
        mailbox
    }

    /// The client's mailbox if it has one.
    pub fn existing_mailbox(&self) -> Option<&Arc<Mailbox>> {
        self.mailbox.get()
    }

    /// Waits until a message arrives (forever without a mailbox: a mailbox
    /// made meanwhile nudges the connection).
    pub async fn message(&self) {
        match self.mailbox.get() {
            Some(mailbox) => mailbox.ready().await,
            None => std::future::pending().await,
        }
    }

    /// Whether the client subscribes to anything (RESP2's pub/sub mode).
    pub fn is_subscriber(&self) -> bool {
        self.subscribed_channels.load(Relaxed)
            + self.subscribed_patterns.load(Relaxed)
            + self.subscribed_shard.load(Relaxed)
            > 0
    }
}

impl ClientInfo {
    /// The peer as CLIENT LIST, CLIENT KILL ADDR and SLOWLOG show it:
    /// `ip:port`, or `path:0` for a unix socket (as Redis).
    pub fn addr_text(&self) -> String {
        match &self.unix_socket {
            Some(path) => format!("{path}:0"),
            None => self.addr.to_string(),
        }
    }

    /// The local end: `ip:port`, or the unix socket's path.
    pub fn laddr_text(&self) -> String {
        match &self.unix_socket {
            Some(path) => path.to_string(),
            None => self.laddr.to_string(),
        }
    }

    /// How MONITOR names the client: `ip:port`, or `unix:path` (Redis').
    pub fn monitor_source(&self) -> String {
        match &self.unix_socket {
            Some(path) => format!("unix:{path}"),
            None => self.addr.to_string(),
        }
    }

    /// Whether the client is local as Redis judges it (the unix socket,
    /// 127.0.0.1 or ::1): `enable-debug-command local` lets it in.
    pub fn is_local(&self) -> bool {
        // As Redis: the unix socket, 127.0.0.1 or ::1 (not all of 127/8).
        self.unix_socket.is_some()
            || self.addr.ip() == std::net::Ipv4Addr::LOCALHOST
            || self.addr.ip() == std::net::Ipv6Addr::LOCALHOST
    }
}

/// Values of [`ClientInfo::role`].
pub const ROLE_NORMAL: u8 = 0;
pub const ROLE_REPLICA: u8 = 1;
pub const ROLE_MASTER: u8 = 2;

impl ClientInfo {
    /// The client's type as CLIENT LIST TYPE and CLIENT KILL TYPE name it.
    pub fn kind(&self) -> &'static str {
        match self.role.load(Relaxed) {
            ROLE_REPLICA => "replica",
            ROLE_MASTER => "master",
            _ if self.subscribed_channels.load(Relaxed)
                + self.subscribed_patterns.load(Relaxed)
                + self.subscribed_shard.load(Relaxed)
                > 0 =>
            {
                "pubsub"
            }
            _ => "normal",
        }
    }
}

#[derive(Default)]
pub struct ClientRegistry {
    next_id: AtomicU64,
    clients: Mutex<BTreeMap<u64, Arc<ClientInfo>>>,
}

impl ClientRegistry {
    pub fn register(
        &self,
        addr: SocketAddr,
        laddr: SocketAddr,
        unix_socket: Option<Arc<str>>,
        fd: i32,
        now_ms: u64,
    ) -> Arc<ClientInfo> {
        let id = self.next_id.fetch_add(1, Relaxed) + 1;
        let client = Arc::new(ClientInfo {
            id,
            addr,
            laddr,
            unix_socket,
            fd,
            created: Instant::now(),
            last_active_ms: AtomicU64::new(now_ms),
            db: AtomicUsize::new(0),
            resp: AtomicU8::new(2),
            last_command: AtomicUsize::new(0),
            query_buffer_bytes: AtomicUsize::new(0),
            query_buffer_free: AtomicUsize::new(0),
            output_buffer_bytes: AtomicUsize::new(0),
            names: Mutex::new(Names::default()),
            no_evict: AtomicBool::new(false),
            memory_bytes: AtomicU64::new(0),
            no_touch: AtomicBool::new(false),
            role: AtomicU8::new(ROLE_NORMAL),
            blocked: AtomicBool::new(false),
            watched_keys: AtomicUsize::new(0),
            multi: std::sync::atomic::AtomicI64::new(-1),
            subscribed_channels: AtomicUsize::new(0),
            subscribed_patterns: AtomicUsize::new(0),
            subscribed_shard: AtomicUsize::new(0),
            unblock: AtomicU8::new(0),
            unblock_signal: Notify::new(),
            killed: AtomicBool::new(false),
            kill_signal: Notify::new(),
            closing: AtomicBool::new(false),
            mailbox: OnceLock::new(),
        });
        self.clients.lock().insert(id, client.clone());
        client
    }

    /// Removes a client whose connection ended; it reads as killed from
    /// then on (to a tracking client redirecting to it, say).
    pub fn unregister(&self, id: u64) -> Option<Arc<ClientInfo>> {
        let client = self.clients.lock().remove(&id)?;
        client.kill();
        Some(client)
    }

    pub fn get(&self, id: u64) -> Option<Arc<ClientInfo>> {
        self.clients.lock().get(&id).cloned()
    }

    pub fn count(&self) -> usize {
        self.clients.lock().len()
    }

    /// All clients, ordered by id.
    pub fn snapshot(&self) -> Vec<Arc<ClientInfo>> {
        self.clients.lock().values().cloned().collect()
    }
}

/// Messages waiting for one client's connection: what it subscribed to,
/// invalidations (its own or redirected to it) and MONITOR lines. The
/// client owns it ([`ClientInfo::mailbox`]), hence the weak link back.
pub struct Mailbox {
    client: Weak<ClientInfo>,
    /// The client's id.
    pub id: u64,
    state: Mutex<MailboxState>,
    /// Unsent bytes of the connection's own output, which count toward
    /// the same limit.
    pub output_bytes: AtomicUsize,
    ready: Notify,
}

#[derive(Default)]
struct MailboxState {
    messages: VecDeque<Bytes>,
    bytes: usize,
    soft_since: Option<Instant>,
}

impl Mailbox {
    pub(crate) fn new(client: Weak<ClientInfo>, id: u64) -> Arc<Mailbox> {
        Arc::new(Mailbox {
            client,
            id,
            state: Mutex::new(MailboxState::default()),
            output_bytes: AtomicUsize::new(0),
            ready: Notify::new(),
        })
    }

    /// Queues `message` unless that takes the subscriber over its limit,
    /// which disconnects it instead.
    pub(crate) fn deliver(&self, message: Bytes, limit: OutputLimit) {
        let Some(client) = self.client.upgrade() else {
            return;
        };
        let mut state = self.state.lock();
        if client.is_killed() {
            return;
        }
        let pending = (state.bytes + message.len() + self.output_bytes.load(Relaxed)) as u64;
        let over_hard = limit.hard_bytes > 0 && pending > limit.hard_bytes;
        let over_soft = limit.soft_bytes > 0 && pending > limit.soft_bytes;
        let soft_expired = over_soft
            && state
                .soft_since
                .get_or_insert_with(Instant::now)
                .elapsed()
                .as_secs()
                >= limit.soft_seconds;
        if !over_soft {
            state.soft_since = None;
        }
        if over_hard || soft_expired {
            state.messages.clear();
            state.bytes = 0;
            drop(state);
            crate::log_notice!(
                "Client id={} addr={} closed for overcoming of output buffer limits.",
                client.id,
                client.addr
            );
            client.kill();
            return;
        }
        state.bytes += message.len();
        state.messages.push_back(message);
        drop(state);
        self.ready.notify_one();
    }

    /// The protocol the subscriber speaks now (HELLO may change it).
    pub(crate) fn protocol(&self) -> Protocol {
        match self.client.upgrade().map(|c| c.resp.load(Relaxed)) {
            Some(3) => Protocol::Resp3,
            _ => Protocol::Resp2,
        }
    }

    /// Moves every waiting message to `out`.
    pub fn drain_into(&self, out: &mut BytesMut) {
        let mut state = self.state.lock();
        for message in state.messages.drain(..) {
            out.extend_from_slice(&message);
        }
        state.bytes = 0;
    }

    /// Drops every waiting message (RESET).
    pub fn clear(&self) {
        let mut state = self.state.lock();
        state.messages.clear();
        state.bytes = 0;
    }

    /// Waits until a message arrives.
    pub async fn ready(&self) {
        self.ready.notified().await
    }
}
