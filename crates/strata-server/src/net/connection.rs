//! One client connection.
//!
//! The loop: read what the socket has → run every complete command in the
//! buffer (pipelining) → write all their replies with as few syscalls as the
//! socket allows → wait for the socket, a kill, or the idle timeout.
//!
//! Limits (DESIGN.md invariant 5):
//! - input: more than `client-query-buffer-limit` bytes without a complete
//!   command closes the connection; protocol limits come from the parser;
//! - output: replies not yet accepted by the socket are the client's output
//!   buffer. Over the `client-output-buffer-limit` hard limit, or over the
//!   soft limit for longer than its seconds, the client is disconnected and
//!   logged, as in Redis. With no limit configured (Redis' default for
//!   normal clients) the connection stops reading new commands once
//!   [`OUTPUT_PENDING_BYTES_MAX`] are pending, so a client that never reads
//!   stalls itself instead of growing server memory.
//!
//! Durability (DESIGN.md invariant 1): a command that changed data has
//! committed its records to the log by the time it returns; the connection
//! notes the LSN, and no reply after it leaves before the log says that
//! LSN is written (`everysec`, `no`) or synced (`always`). Replies keep
//! request order, so earlier replies wait too. When the log's pending
//! bytes pass their limit, connections wait before running more commands.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use strata_engine::tiering::fetch::ColdFetch;
use strata_resp::{Limits, ProtocolError, ReplyWriter, RequestParser};

use crate::commands::Node;
use crate::commands::{ColdCommand, ColdValues, Dispatched, dispatch};
use crate::config::{Config, OutputLimit};
use crate::net::client::ClientInfo;
use crate::net::session::{Block, Session};
use crate::observe::stats::{ThreadStats, bump};
use crate::server::Admitted;
use crate::util::now_ms;
use crate::{log_notice, log_verbose, log_warning};

/// Pending output at which a connection without a configured hard limit
/// stops executing further commands until the client reads.
const OUTPUT_PENDING_BYTES_MAX: usize = 1 << 20;
/// Free space kept in the read buffer before each read.
const READ_CHUNK_BYTES: usize = 16 * 1024;
/// How often an idle connection rereads the configuration (for `timeout`).
const CONFIG_RECHECK_INTERVAL: Duration = Duration::from_secs(1);
/// Read buffers larger than this are released when they become empty, so an
/// idle connection that once sent a huge value does not keep its memory.
const READ_BUFFER_RETAINED_BYTES_MAX: usize = 64 * 1024;
/// A connection idle this long with nothing buffered gives its read and
/// write buffers back (as Redis frees an idle client's query buffer after
/// 2 s): a pool of idle connections costs its sockets and little else.
/// The next request allocates them again.
const IDLE_BUFFERS_RELEASED_AFTER: Duration = Duration::from_secs(2);

enum Closed {
    ClientQuit,
    Hangup,
    Killed,
    Protocol(ProtocolError),
    QueryBufferLimit,
    OutputBufferLimit,
    IdleTimeout,
    Io(std::io::Error),
    /// SYNC or PSYNC: the socket now belongs to a replica's sender.
    BecameReplica,
    /// Under `appendfsync always`, replies that wait for an fsync after
    /// the log's fsync failed: they can never be covered, so they are
    /// not sent (Redis exits then; this server goes on serving reads).
    Unsynced,
}

impl std::fmt::Display for Closed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Closed::ClientQuit => write!(f, "client quit"),
            Closed::Hangup => write!(f, "client closed connection"),
            Closed::Killed => write!(f, "killed"),
            Closed::Protocol(e) => write!(f, "{e}"),
            Closed::QueryBufferLimit => write!(f, "max query buffer length reached"),
            Closed::OutputBufferLimit => write!(f, "output buffer limit reached"),
            Closed::IdleTimeout => write!(f, "idle timeout"),
            Closed::Io(e) => write!(f, "{e}"),
            Closed::BecameReplica => write!(f, "became a replica"),
            Closed::Unsynced => write!(f, "its writes cannot be synced (the log's fsync failed)"),
        }
    }
}

struct Connection {
    server: Arc<Node>,
    stats: Arc<ThreadStats>,
    stream: crate::net::socket::Stream,
    session: Session,
    parser: RequestParser,
    input: BytesMut,
    output: BytesMut,
    config: Arc<Config>,
    config_generation: u64,
    /// Since when the pending output has been above the soft limit.
    soft_limit_since: Option<Instant>,
    /// The output held more than [`READ_BUFFER_RETAINED_BYTES_MAX`] since
    /// it was last replaced: once sent, its allocation is given back.
    output_grew: bool,
    /// The same for the input buffer.
    input_grew: bool,
    last_active: Instant,
    /// The timer [`Connection::wait`] sleeps on, kept from one wait to
    /// the next and moved only when its deadline changes: making a new
    /// one per wait cost a timer-wheel insertion and removal per request.
    timer: std::pin::Pin<Box<tokio::time::Sleep>>,
    /// The deadline `timer` is set to.
    timer_at: Instant,
    /// When an idle connection next rereads the configuration.
    recheck_at: Instant,
    /// Highest LSN committed by this connection's commands whose replies
    /// are in `output`.
    awaiting_lsn: u64,
    /// A command waiting for its cold values to be read (tiering).
    parked: Option<Parked>,
    /// Commands parsed ahead of a parked one (their cold values are read
    /// together with its), run before anything else in the input.
    backlog: std::collections::VecDeque<Vec<Bytes>>,
    /// A protocol error met while parsing ahead: reported once the
    /// commands before it have run.
    deferred_error: Option<ProtocolError>,
    /// A blocking command that found nothing and waits (`crate::events::blocking`).
    blocked: Option<(Vec<Bytes>, Block)>,
    /// Commands are left in the input because one before them woke
    /// blocked clients, which run first (`crate::events::blocking`): the main loop
    /// goes on with them without waiting for the socket.
    run_after_woken: bool,
    /// Where `crate::net::busy` serves this connection while a script on its
    /// thread is busy.
    busy_slot: Arc<crate::net::busy::Slot>,
    /// The TLS session of a connection on `tls-port` (`crate::net::tls`): the
    /// socket carries its records, `input` and `output` the plain text.
    tls: Option<Box<rustls::ServerConnection>>,
}

/// TLS records the session may hold unsent before it takes no more plain
/// text: the rest of the output waits in `output`, under its limits.
const TLS_PENDING_BYTES_MAX: usize = 64 * 1024;
/// TLS bytes one read takes off the socket at most. Records read are all
/// decrypted at once (rustls), so nothing is left inside the session
/// that only a socket event could bring out.
const TLS_READ_PER_CALL_BYTES_MAX: usize = 1 << 20;

/// The socket as `std::io` sees it, for rustls: never blocks, says
/// `WouldBlock` instead.
struct NonBlocking<'a>(&'a crate::net::socket::Stream);

impl std::io::Read for NonBlocking<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.try_read(buf)
    }
}

impl std::io::Write for NonBlocking<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.try_write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Commands parsed ahead of one that must read cold values, so that a
/// pipeline's reads are in flight together rather than one by one.
const LOOKAHEAD_COMMANDS_MAX: usize = 32;

/// A command whose keys have values on disk only, and those values.
struct Parked {
    args: Vec<Bytes>,
    cold: ColdFetch,
    /// Its table index when dispatch admitted it and noted `cold` under
    /// its locks: it runs with them once read, without a second dispatch
    /// (EXEC is dispatched again).
    admitted: Option<usize>,
}

/// Removes a client from the client list when its connection task ends,
/// however it ends: also when a command panics (the task unwinds), so a
/// failed connection never lingers in CLIENT LIST or counts toward
/// `maxclients`.
struct Registered {
    server: Arc<Node>,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        crate::net::busy::unregister(self.id);
        self.server.monitors.remove(self.id);
        self.server.pubsub.forget(self.id);
        self.server.tracking.disable(&self.server.keyspace, self.id);
        if let Some(client) = self.server.clients.unregister(self.id) {
            self.server.client_memory.forget(&client);
        }
    }
}

pub async fn serve(server: Arc<Node>, stats: Arc<ThreadStats>, admitted: Admitted) {
    let Admitted {
        stream,
        client,
        tls,
    } = admitted;
    let tls = match tls.map(rustls::ServerConnection::new) {
        None => None,
        Some(Ok(mut session)) => {
            session.set_buffer_limit(Some(TLS_PENDING_BYTES_MAX));
            Some(Box::new(session))
        }
        Some(Err(e)) => {
            log_warning!("TLS session for {}: {e}", client.addr);
            return;
        }
    };
    let _registered = Registered {
        server: server.clone(),
        id: client.id,
    };
    let Ok(stream) = stream.into_tokio() else {
        return;
    };
    // A busy script's thread answers idle plain connections itself
    // (`crate::net::busy`); a TLS one's bytes only its session can write.
    let busy_slot = crate::net::busy::register(
        client.clone(),
        if tls.is_some() {
            -1
        } else {
            stream.as_raw_fd()
        },
    );
    let config_generation = server.config.generation();
    let config = server.config.get();
    // As in Redis: a connection made while the default user has no password
    // is authenticated, and stays so if a password is set later.
    let session = Session::new(client.clone(), &server.acl);
    let recheck_at = Instant::now() + CONFIG_RECHECK_INTERVAL;
    let mut connection = Connection {
        session,
        server: server.clone(),
        stats,
        stream,
        parser: RequestParser::new(),
        input: BytesMut::with_capacity(READ_CHUNK_BYTES),
        output: BytesMut::with_capacity(READ_CHUNK_BYTES),
        config,
        config_generation,
        soft_limit_since: None,
        output_grew: false,
        input_grew: false,
        last_active: Instant::now(),
        timer: Box::pin(tokio::time::sleep_until(recheck_at.into())),
        timer_at: recheck_at,
        recheck_at,
        awaiting_lsn: 0,
        parked: None,
        backlog: std::collections::VecDeque::new(),
        deferred_error: None,
        blocked: None,
        run_after_woken: false,
        busy_slot,
        tls,
    };
    let reason = connection.run(&client).await;
    if let Closed::BecameReplica = reason {
        hand_to_replica_sender(connection, client, _registered);
        return;
    }
    match &reason {
        Closed::OutputBufferLimit => log_notice!(
            "Client id={} addr={} closed for overcoming of output buffer limits.",
            client.id,
            client.addr
        ),
        Closed::QueryBufferLimit => log_notice!(
            "Closing client id={} addr={} that reached max query buffer length",
            client.id,
            client.addr
        ),
        Closed::Unsynced => log_warning!(
            "Closing client id={} addr={}: its writes cannot be synced (the log's fsync failed)",
            client.id,
            client.addr
        ),
        Closed::Protocol(e) => log_verbose!(
            "Protocol error from client id={} addr={}: {e}",
            client.id,
            client.addr
        ),
        other => log_verbose!(
            "Client id={} addr={} closed: {other}",
            client.id,
            client.addr
        ),
    }
}

/// After SYNC or PSYNC: the connection's socket goes to a thread that
/// serves the replica (`crate::replication::primary`), with the client's
/// registration, so it stays in CLIENT LIST until the replica goes.
fn hand_to_replica_sender(connection: Connection, client: Arc<ClientInfo>, registered: Registered) {
    let Connection {
        server,
        stream,
        session,
        tls,
        ..
    } = connection;
    let request = session.sync_request.clone().expect("set by SYNC or PSYNC");
    let stream = match (stream, tls) {
        (crate::net::socket::Stream::Tcp(tcp), None) => tcp.into_std(),
        _ => {
            log_warning!(
                "Replica {} asked for a synchronization over a unix socket or TLS, which Strata does not serve yet",
                client.addr
            );
            return;
        }
    };
    match stream {
        Ok(stream) => {
            crate::replication::primary::serve(server, stream, client, request, registered)
        }
        Err(e) => log_warning!("Replica {}: {e}", client.addr),
    }
}

impl Connection {
    fn refresh_config(&mut self) {
        let generation = self.server.config.generation();
        if generation != self.config_generation {
            self.config = self.server.config.get();
            self.config_generation = generation;
        }
    }

    fn output_limit(&self) -> OutputLimit {
        if self.session.subscriptions > 0 {
            self.config.output_limit_pubsub
        } else {
            self.config.output_limit_normal
        }
    }

    /// Moves published messages waiting for this subscriber to the output.
    fn take_messages(&mut self) {
        if let Some(mailbox) = self.session.client.existing_mailbox() {
            mailbox.drain_into(&mut self.output);
        }
    }

    /// Pending output above which no further command is executed.
    fn output_pause_bytes(&self) -> usize {
        let limit = self.output_limit();
        match (limit.hard_bytes, limit.soft_bytes) {
            (0, 0) => OUTPUT_PENDING_BYTES_MAX,
            (0, soft) => soft as usize,
            (hard, _) => hard as usize,
        }
    }

    async fn run(&mut self, client: &ClientInfo) -> Closed {
        loop {
            if client.is_killed() {
                return Closed::Killed;
            }
            self.refresh_config();
            // What was just read counts before it runs: a large argument
            // is memory the client holds (Redis counts argv so).
            if self.evicted(client) {
                return Closed::Killed;
            }
            let now = now_ms();
            let until = self.paused_until(now);
            if until > now {
                // A client with a command waiting counts as blocked
                // (INFO's blocked_clients), as Redis counts it.
                let waiting = !self.backlog.is_empty() || !self.input.is_empty();
                let _counted =
                    waiting.then(|| crate::server::Counted::new(&self.server.paused_clients));
                let unpaused = self.server.unpaused.notified();
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(until - now)) => {}
                    _ = unpaused => {}
                    _ = client.killed() => {}
                }
                continue;
            }
            if self.log_backlogged() {
                if let Err(closed) = self.wait_log_progress(client).await {
                    return closed;
                }
                continue;
            }
            // A blocked command waits before anything after it runs (it
            // may have blocked in a pipeline run after a cold read).
            if let Some((args, block)) = self.blocked.take() {
                if let Err(closed) = self.run_blocked(client, args, block).await {
                    return closed;
                }
                continue;
            }
            if let Err(closed) = self.execute_buffered(client, now) {
                // Try to deliver the error reply before closing.
                if self.settle(client).await.is_ok() {
                    let _ = self.flush();
                }
                return closed;
            }
            if let Some(parked) = self.parked.take() {
                self.run_parked(parked).await;
                continue;
            }
            if self.blocked.is_some() {
                continue;
            }
            if self.server.debug_paused_until_ms() > now {
                // DEBUG SLEEP: its reply (and everything after) waits.
                // (CLIENT PAUSE answers at once; only what follows waits.)
                continue;
            }
            if let Err(closed) = self.settle(client).await {
                return closed;
            }
            self.take_messages();
            // What the commands consumed no longer counts before their
            // replies go out: a client that has its answer must not find
            // another client evicted for memory this one gave back.
            self.publish_memory(client);
            if let Err(e) = self.flush() {
                return Closed::Io(e);
            }
            if let Some(mailbox) = self.session.client.existing_mailbox() {
                mailbox.output_bytes.store(self.output.len(), Relaxed);
            }
            if let Err(closed) = self.check_output_limits() {
                return closed;
            }
            if self.session.close_after_reply && !self.output_pending() {
                return Closed::ClientQuit;
            }
            if self.session.sync_request.is_some() && !self.output_pending() {
                return Closed::BecameReplica;
            }
            if client.is_killed() {
                return Closed::Killed;
            }
            client.output_buffer_bytes.store(self.output.len(), Relaxed);
            if self.input.is_empty() && (1..READ_CHUNK_BYTES).contains(&self.input.capacity()) {
                // The requests were split off its front: take the space
                // back now (no allocation, as the next read would), so
                // `qbuf-free` says what the buffer holds.
                self.input.reserve(READ_CHUNK_BYTES);
            }
            client.query_buffer_bytes.store(self.input.len(), Relaxed);
            (client.query_buffer_free).store(self.input.capacity() - self.input.len(), Relaxed);
            if self.evicted(client) {
                return Closed::Killed;
            }
            if std::mem::take(&mut self.run_after_woken) {
                continue;
            }
            if let Err(closed) = self.wait(client, now).await {
                return closed;
            }
        }
    }

    /// The next command is one CLIENT PAUSE WRITE holds.
    /// Until when (Unix ms) this connection waits before its next
    /// command: DEBUG SLEEP or CLIENT PAUSE ALL; or CLIENT PAUSE WRITE
    /// with a command that may write next (held at the backlog's front).
    fn paused_until(&self, now: u64) -> u64 {
        let paused_until = self.server.paused_until_ms();
        match self.server.writes_paused_until(now) {
            Some(until) if self.write_waits(now) => until.max(paused_until),
            _ => paused_until,
        }
    }

    /// Runs a blocked command again, inside the write gate; false (once
    /// the pause is over) if a pause held it.
    async fn retry_blocked(&mut self, args: &[Bytes]) -> bool {
        let server = self.server.clone();
        let inside = server.write_gate.enter();
        if self.held_by_write_pause(args, now_ms()) {
            drop(inside);
            self.wait_write_pause().await;
            return false;
        }
        self.session.block_retry = true;
        // A blocked command is not deferred: it runs, reading under the
        // lock what is on disk.
        let _ = self.run_command(args, now_ms(), ColdValues::ReadUnderLock);
        self.session.block_retry = false;
        true
    }

    /// Waits while CLIENT PAUSE WRITE (or a hold of writes) lasts.
    async fn wait_write_pause(&self) {
        let now = now_ms();
        if let Some(until) = self.server.writes_paused_until(now) {
            let unpaused = self.server.unpaused.notified();
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(until - now)) => {}
                _ = unpaused => {}
            }
        }
    }

    fn write_waits(&self, now: u64) -> bool {
        self.backlog
            .front()
            .is_some_and(|args| self.held_by_write_pause(args, now))
    }

    /// Whether CLIENT PAUSE WRITE holds `args` now: a command that may
    /// write, or EXEC of a transaction that queued one (commands inside
    /// MULTI are only queued, so they go on).
    fn held_by_write_pause(&self, args: &[Bytes], now: u64) -> bool {
        if self.server.writes_paused_until(now).is_none() {
            return false;
        }
        let table = &self.server.commands;
        match &self.session.multi {
            Some(multi) => {
                table.is_exec(&args[0]) && crate::commands::pause::may_write(multi, &self.server)
            }
            None => crate::commands::held_by_write_pause(&self.server, args),
        }
    }

    /// Whether every reply in `output` may leave: the log has made the
    /// changes behind them durable under the current policy.
    fn replies_durable(&self) -> bool {
        match self.server.keyspace.log() {
            Some(log) => log.durable_lsn() >= self.awaiting_lsn,
            None => true,
        }
    }

    fn log_backlogged(&self) -> bool {
        self.server
            .keyspace
            .log()
            .is_some_and(|log| log.backlogged())
    }

    /// Waits until the replies in `output` may be sent.
    async fn settle(&mut self, client: &ClientInfo) -> Result<(), Closed> {
        if !self.session.woken.is_empty() {
            // Blocked clients these commands woke run first, as in Redis.
            strata_engine::feed::wake_deferred();
            crate::events::blocking::await_runs(&mut self.session.woken).await;
        }
        if self.replies_durable() && self.output.is_empty() {
            strata_engine::feed::wake_deferred();
            return Ok(());
        }
        // Let this thread's other ready connections run their commands
        // first, then write: all their records with one syscall (group
        // commit without a thread hop), and the replies one after another
        // as Redis writes every client's before it sleeps. A reply written
        // as soon as its commands ran wakes the client, which sends its
        // next requests and sleeps again before the next reply: a wake-up
        // per reply, which cost XADD at pipeline 16 a fifth of its CPU.
        tokio::task::yield_now().await;
        // The change feed's readers (the replication stream, keyspace
        // events) are woken once for every commit of this turn.
        strata_engine::feed::wake_deferred();
        if self.replies_durable() {
            return Ok(());
        }
        if let Some(log) = self.server.keyspace.log() {
            log.flush_now();
        }
        if self.replies_durable() {
            return Ok(());
        }
        let Some(log) = self.server.keyspace.log() else {
            return Ok(());
        };
        tokio::select! {
            _ = log.wait_durable(self.awaiting_lsn) => {}
            _ = client.killed() => return Err(Closed::Killed),
        }
        if !self.replies_durable() && log.fsync_failed() {
            return Err(Closed::Unsynced);
        }
        Ok(())
    }

    /// Waits for the log writer to make progress (backpressure).
    async fn wait_log_progress(&mut self, client: &ClientInfo) -> Result<(), Closed> {
        let Some(log) = self.server.keyspace.log() else {
            return Ok(());
        };
        tokio::select! {
            _ = log.wait_progress() => Ok(()),
            _ = tokio::time::sleep(Duration::from_millis(100)) => Ok(()),
            _ = client.killed() => Err(Closed::Killed),
        }
    }

    /// Publishes what this client holds and, over `maxmemory-clients`,
    /// evicts the largest clients; whether this one was among them.
    fn evicted(&self, client: &ClientInfo) -> bool {
        let limit = self.config.clients_limit_bytes();
        match self.publish_memory(client) {
            Some(total) if total > limit => {
                self.server.client_memory.evict(&self.server.clients, limit);
                client.is_killed()
            }
            _ => false,
        }
    }

    /// Publishes what this client holds in buffers while `maxmemory-clients`
    /// is set; the total of all clients (None without a limit).
    fn publish_memory(&self, client: &ClientInfo) -> Option<u64> {
        if self.config.clients_limit_bytes() == 0 {
            // Nothing published: no shared counter touched per turn
            // while there is no limit (a figure from when there was one
            // is withdrawn once).
            if client.memory_bytes.load(Relaxed) != 0 {
                self.server.client_memory.forget(client);
            }
            return None;
        }
        let queued = self.session.multi.as_ref().map_or(0, |m| m.bytes());
        let bytes = (self.input.len() + self.output.len() + queued) as u64;
        Some(self.server.client_memory.publish(client, bytes))
    }

    /// Waits until the socket can make progress (or a pause holding the
    /// next command ends), then reads what it has. `now`: when this turn
    /// of the connection's loop began (Unix ms).
    async fn wait(&mut self, client: &ClientInfo, now: u64) -> Result<(), Closed> {
        let want_read =
            self.output.len() < self.output_pause_bytes() && !self.session.close_after_reply;
        let want_write = self.output_pending();
        let idle_deadline = match self.config.timeout_s {
            0 => None,
            seconds => Some(self.last_active + Duration::from_secs(seconds)),
        };
        let soft_deadline = self
            .soft_limit_since
            .map(|since| since + Duration::from_secs(self.output_limit().soft_seconds));
        // Without a deadline of its own, an idle connection still looks at
        // the configuration now and then: CONFIG SET timeout must reach
        // clients that are already idle (Redis' clientsCron does the same).
        // A command held by a pause runs when the pause ends or is lifted
        // (a planned cluster failover lifts its pause within
        // milliseconds), not at the next recheck.
        let left = self.paused_until(now).saturating_sub(now);
        let paused = left > 0;
        let pause_ends = paused.then(|| {
            Instant::now()
                + Duration::from_millis(left.min(CONFIG_RECHECK_INTERVAL.as_millis() as u64))
        });
        let unpaused = self.server.unpaused.notified();
        let wake_at = [
            idle_deadline,
            soft_deadline,
            Some(self.recheck_at),
            pause_ends,
        ]
        .into_iter()
        .flatten()
        .min()
        .expect("the recheck is always set");
        if wake_at != self.timer_at {
            self.timer.as_mut().reset(wake_at.into());
            self.timer_at = wake_at;
        }
        let message = client.message();
        // While it waits with nothing buffered, a busy script on this
        // thread may answer its requests (`crate::net::busy`).
        let idle = want_read && !want_write && self.servable_while_busy();
        self.busy_slot.set_idle(idle, &self.session);
        let mut timer_fired = false;
        let woken = tokio::select! {
            _ = message => Ok(false),
            _ = unpaused, if paused => Ok(false),
            readable = self.stream.readable(), if want_read => readable.map(|_| true).map_err(Closed::Io),
            writable = self.stream.writable(), if want_write => writable.map(|_| false).map_err(Closed::Io),
            // Also a nudge (`crate::net::busy`, a mailbox made), not a kill.
            _ = client.killed_or_nudged() => match client.is_killed() {
                true => Err(Closed::Killed),
                false => Ok(false),
            },
            _ = &mut self.timer => {
                timer_fired = true;
                let now = Instant::now();
                if now >= self.recheck_at {
                    self.recheck_at = now + CONFIG_RECHECK_INTERVAL;
                }
                if idle_deadline.is_some_and(|d| now >= d) && self.output.is_empty() {
                    return Err(Closed::IdleTimeout);
                }
                Ok(false)
            }
        };
        if idle {
            self.busy_slot.set_idle(false, &self.session);
            let multi = self.busy_slot.take(&mut self.input, &mut self.output);
            self.take_multi(multi);
        }
        if timer_fired {
            self.release_idle_buffers(client);
        }
        match woken? {
            true => self.read(),
            false => Ok(()),
        }
    }

    /// Gives the read and write buffers back once the connection has been
    /// idle for [`IDLE_BUFFERS_RELEASED_AFTER`] with nothing in them. The
    /// timer's recheck brings a connection here every second (not every
    /// request: no clock read on the request path).
    fn release_idle_buffers(&mut self, client: &ClientInfo) {
        let held = self.input.capacity() + self.output.capacity();
        if held == 0
            || self.last_active.elapsed() < IDLE_BUFFERS_RELEASED_AFTER
            || !self.input.is_empty()
            || self.parser.in_request()
            || self.parser.buffered_bytes() > 0
            || self.output_pending()
        {
            return;
        }
        self.input = BytesMut::new();
        self.output = BytesMut::new();
        client.query_buffer_free.store(0, Relaxed);
    }

    /// Takes over what `crate::net::busy` did to the transaction while a script
    /// was busy: ended it (and its WATCHes), began or failed one.
    fn take_multi(&mut self, multi: crate::net::busy::MultiNow) {
        if multi.ended {
            crate::commands::transactions::end(&mut self.session);
        }
        if let Some(dirty) = multi.open {
            let session = &mut self.session;
            let queue = session.multi.get_or_insert_with(Default::default);
            queue.dirty |= dirty;
            let queued = queue.queued.len() as i64;
            session.client.multi.store(queued, Relaxed);
        }
    }

    /// Output not yet on the socket: replies, or a TLS session's records.
    fn output_pending(&self) -> bool {
        !self.output.is_empty() || self.tls.as_ref().is_some_and(|t| t.wants_write())
    }

    /// Whether nothing is buffered for this connection and its session is
    /// plain (not TLS), so that `crate::net::busy` may answer its next requests.
    fn servable_while_busy(&self) -> bool {
        let session = &self.session;
        self.tls.is_none()
            && self.input.is_empty()
            && !self.parser.in_request()
            && self.parked.is_none()
            && self.backlog.is_empty()
            && self.blocked.is_none()
            && self.deferred_error.is_none()
            && session.authenticated
            && session.subscriptions == 0
            && !session.replies_off
            && !session.skip_next_reply
            && !session.close_after_reply
    }

    fn read(&mut self) -> Result<(), Closed> {
        // Reserve for a large bulk string in few steps, but never more than
        // the bytes already received: a client announcing a 512 MB value and
        // sending nothing must not make the server allocate 512 MB.
        let hint = self.parser.bytes_needed_hint(&self.input);
        let wanted = hint.min(self.input.len()).max(READ_CHUNK_BYTES);
        if self.input.capacity() - self.input.len() < wanted {
            self.input.reserve(wanted);
        }
        let received = match self.tls.as_mut() {
            Some(tls) => read_tls(tls, &self.stream, &mut self.input),
            None => {
                let offered = self.input.capacity() - self.input.len();
                let received = self.stream.try_read_buf(&mut self.input);
                if matches!(received, Ok(n) if n > 0 && n < offered) {
                    self.stream.forget_readable();
                }
                received
            }
        };
        match received {
            Ok(0) => Err(Closed::Hangup),
            Ok(n) => {
                bump(&self.stats.net_input_bytes, n as u64);
                bump(&self.stats.reads_processed, 1);
                self.last_active = Instant::now();
                self.session.client.last_active_ms.store(now_ms(), Relaxed);
                self.input_grew |= self.input.capacity() > READ_BUFFER_RETAINED_BYTES_MAX;
                let buffered = self.input.len() + self.parser.buffered_bytes();
                if buffered as u64 > self.config.query_buffer_limit_bytes {
                    return Err(Closed::QueryBufferLimit);
                }
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(()),
            Err(e) => Err(Closed::Io(e)),
        }
    }

    /// Runs every complete command in the input buffer, stopping early when
    /// output is backing up or the server is paused.
    fn execute_buffered(&mut self, client: &ClientInfo, now: u64) -> Result<(), Closed> {
        let limits = self.parser_limits();
        let pause_bytes = self.output_pause_bytes();
        while !self.session.close_after_reply && self.session.sync_request.is_none() {
            if self.output.len() >= pause_bytes {
                // Hand what we have to the socket; only what it does not
                // take counts against the client's limits. Replies still
                // waiting for the log go out from the main loop.
                if !self.replies_durable() {
                    break;
                }
                self.flush().map_err(Closed::Io)?;
                if self.output.len() >= pause_bytes {
                    break;
                }
            }
            let next = match self.backlog.pop_front() {
                Some(args) => Ok(Some(args)),
                None => match self.deferred_error.take() {
                    Some(error) => Err(error),
                    None => self.parser.next(&mut self.input, &limits),
                },
            };
            let args = match next {
                Ok(Some(args)) => args,
                Ok(None) => break,
                Err(error) => {
                    ReplyWriter::new(&mut self.output, self.session.protocol)
                        .error(&format!("ERR {error}"));
                    self.server.stats.record_error("ERR");
                    return Err(Closed::Protocol(error));
                }
            };
            let server = self.server.clone();
            let inside = server.write_gate.enter();
            if self.held_by_write_pause(&args, now) {
                // CLIENT PAUSE WRITE: it waits (see `run`), and all after it.
                self.backlog.push_front(args);
                break;
            }
            // Dispatch finds out under its locks whether a value the
            // command reads is on disk, and then does not run it: asking
            // first would cost every command a second lock and lookup.
            let ran = self.run_command(&args, now, ColdValues::Defer);
            drop(inside);
            if let Err(admitted) = ran {
                // Read its cold values off the locks, then run it.
                let (cold, admitted) = match admitted {
                    Some(cold) => {
                        let ColdCommand { id, fetch } = *cold;
                        (fetch, Some(id))
                    }
                    None => (self.cold_values(&args, now).unwrap_or_default(), None),
                };
                self.park(args, cold, admitted);
                break;
            }
            if let Some(block) = self.session.block.take() {
                self.blocked = Some((args, block));
                break;
            }
            self.parser.recycle(args);
            if client.is_killed() {
                break;
            }
            if !self.session.woken.is_empty()
                && (!self.input.is_empty() || !self.backlog.is_empty())
            {
                // The clients it woke run before the next command, as in
                // Redis (a pipelined LPUSH then BLPOP serves the client
                // that waited, not this one).
                self.run_after_woken = true;
                break;
            }
            if self.server.paused_until_ms() > now {
                break;
            }
            let hard = self.output_limit().hard_bytes;
            if hard > 0 && self.output.len() as u64 > hard {
                if !self.replies_durable() {
                    break;
                }
                self.flush().map_err(Closed::Io)?;
                if self.output.len() as u64 > hard {
                    return Err(Closed::OutputBufferLimit);
                }
            }
        }
        // As for the output (see `flush`): capacity() of a buffer whose
        // front was consumed understates what it holds.
        if self.input.is_empty()
            && (self.input_grew || self.input.capacity() > READ_BUFFER_RETAINED_BYTES_MAX)
        {
            self.input = BytesMut::with_capacity(READ_CHUNK_BYTES);
            self.input_grew = false;
        }
        Ok(())
    }

    /// Runs one command (see [`dispatch`]); an error when a value it
    /// reads is on disk and it did not run ([`ColdValues::Defer`]), with
    /// what dispatch noted for it when it admitted it.
    fn run_command(
        &mut self,
        args: &[Bytes],
        now: u64,
        cold: ColdValues,
    ) -> Result<(), Option<Box<ColdCommand>>> {
        // A lowered tracking-table-max-keys applies before any command (as
        // in Redis, whose cron may be paused); invalidations that sends this
        // client come before the command's reply.
        let server = &self.server;
        if server.tracking.trim(
            self.config.tracking_table_max_keys as usize,
            self.config.output_limit_pubsub,
        ) {
            self.take_messages();
        }
        let reply_at = self.output.len();
        let dispatched = dispatch(
            &self.server,
            &mut self.session,
            &mut self.output,
            &self.config,
            &self.stats,
            now,
            args,
            cold,
        );
        let session = &mut self.session;
        if (session.replies_off || session.skip_reply) && !std::mem::take(&mut session.replied_push)
        {
            // CLIENT REPLY OFF or SKIP: the reply is not sent.
            self.output.truncate(reply_at);
        }
        match dispatched {
            Dispatched::Ran(committed) => {
                session.skip_reply = std::mem::take(&mut session.skip_next_reply);
                if let Some(lsn) = committed {
                    self.awaiting_lsn = self.awaiting_lsn.max(lsn);
                }
                Ok(())
            }
            Dispatched::Cold(admitted) => Err(admitted),
        }
    }

    /// What the request parser accepts from this connection now.
    fn parser_limits(&self) -> Limits {
        Limits {
            bulk_len_bytes_max: self.config.proto_max_bulk_len,
            auth_required: !self.session.authenticated && self.server.acl.auth_required(),
            ..Limits::default()
        }
    }

    /// Parks `args` until its cold values are read, with the rest of the
    /// pipeline already received parsed ahead (so their cold values are
    /// read together with this command's).
    fn park(&mut self, args: Vec<Bytes>, cold: ColdFetch, admitted: Option<usize>) {
        let limits = self.parser_limits();
        self.parked = Some(Parked {
            args,
            cold,
            admitted,
        });
        while self.backlog.len() < LOOKAHEAD_COMMANDS_MAX && self.deferred_error.is_none() {
            match self.parser.next(&mut self.input, &limits) {
                Ok(Some(args)) => self.backlog.push_back(args),
                Ok(None) => break,
                Err(error) => self.deferred_error = Some(error),
            }
        }
    }

    /// The values `args` reads that are on disk only (None: nothing to
    /// read first).
    fn cold_values(&self, args: &[Bytes], now: u64) -> Option<ColdFetch> {
        if self.server.keyspace.tier().cold_keys() == 0 || !self.session.authenticated {
            return None;
        }
        let mut cold = ColdFetch::new(self.session.db);
        self.want_values(&mut cold, args, now);
        (!cold.is_empty()).then_some(cold)
    }

    /// Adds the values `args` reads to `cold` (those on disk only).
    fn want_values(&self, cold: &mut ColdFetch, args: &[Bytes], now: u64) {
        for key in self.server.commands.value_keys(args) {
            cold.want(&self.server.keyspace, key, now);
        }
        // EXEC reads what its queued commands read.
        if args[0].eq_ignore_ascii_case(b"exec") {
            for key in crate::commands::transactions::value_keys(&self.server, &self.session) {
                cold.want(&self.server.keyspace, &key, now);
            }
        }
    }

    /// Reads a parked command's cold values (all in flight together, this
    /// thread free meanwhile) and runs it with them: an admitted command
    /// puts them into their entries, runs and takes out again what was
    /// only lent to it, all under its own locks (dispatch,
    /// [`ColdValues::Fetched`]); EXEC's are installed first and EXEC is
    /// dispatched again.
    async fn run_parked(&mut self, parked: Parked) {
        let Parked {
            args,
            mut cold,
            admitted,
        } = parked;
        let own = cold.len();
        let now = now_ms();
        // The commands parsed ahead read their cold values in the same go
        // (with the database selected now; a SELECT among them only means
        // a later command reads its value itself).
        if self.server.keyspace.tier().cold_keys() > 0 {
            for ahead in &self.backlog {
                self.want_values(&mut cold, ahead, now);
            }
        }
        let server = self.server.clone();
        let reading = Instant::now();
        let mut results = server.tiering.readers.read(&cold).await;
        strata_engine::latency::sample("cold-read", reading.elapsed());
        let now = now_ms();
        let ahead = cold.split_off(own);
        let ahead_results = results.split_off(own.min(results.len()));
        // A command parsed ahead meets its own failure when it runs (its
        // value is still cold and is read again).
        let (lent_ahead, _) = ahead.install(&server.keyspace, ahead_results, now);
        // A write pause that began during the read holds it now.
        let inside = loop {
            let inside = server.write_gate.enter();
            if !self.held_by_write_pause(&args, now_ms()) {
                break inside;
            }
            drop(inside);
            self.wait_write_pause().await;
        };
        let now = now_ms();
        let ran = match admitted {
            Some(id) => {
                let fetched =
                    ColdValues::Fetched(Box::new((ColdCommand { id, fetch: cold }, results)));
                self.run_command(&args, now, fetched)
            }
            None => self.run_exec_parked(&args, cold, results, now),
        };
        drop(inside);
        if ran.is_ok() {
            match self.session.block.take() {
                Some(block) => self.blocked = Some((args, block)),
                None => self.run_backlog(now),
            }
        }
        lent_ahead.release(&server.keyspace, now);
    }

    /// EXEC's part of [`Connection::run_parked`]: its queued commands'
    /// values are installed, then EXEC is dispatched again and runs even
    /// if one left RAM meanwhile (then read under the lock), so that it
    /// always makes progress. A value that could not be read is read
    /// under the lock again, and the command that needs it answers the
    /// error inside EXEC's reply, as any command's error there.
    fn run_exec_parked(
        &mut self,
        args: &[Bytes],
        cold: ColdFetch,
        results: Vec<strata_engine::tiering::fetch::ReadResult>,
        now: u64,
    ) -> Result<(), Option<Box<ColdCommand>>> {
        let server = self.server.clone();
        let (lent, _failed) = cold.install(&server.keyspace, results, now);
        let ran = self.run_command(args, now, ColdValues::ReadUnderLock);
        lent.release(&server.keyspace, now);
        ran
    }

    /// Waits in a blocking command (see `crate::events::blocking`): sends the
    /// replies before it, takes a place in its keys' queues, and runs it
    /// again whenever woken until it replies, times out or is unblocked.
    /// Meanwhile what the client sends is buffered (within its limit), not
    /// run; a hangup or a kill ends the wait.
    async fn run_blocked(
        &mut self,
        client: &ClientInfo,
        args: Vec<Bytes>,
        mut block: Block,
    ) -> Result<(), Closed> {
        let args = match block.rerun.take() {
            Some(rerun) => {
                self.parser.recycle(args);
                rerun
            }
            None => args,
        };
        self.settle(client).await?;
        self.flush().map_err(Closed::Io)?;
        let server = self.server.clone();
        let ticket = server
            .blocking
            .register(self.session.db, &block.keys, block.on_nokey);
        client.blocked.store(true, Relaxed);
        client.take_unblock();
        self.session.block_waiter = Some(ticket.shared_waiter());
        let deadline = block
            .deadline_ms
            .map(|at| Instant::now() + Duration::from_millis(at.saturating_sub(now_ms())));
        let mut woken_before = false;
        let result = loop {
            if let Err(closed) = wait_out_pause(&server, client).await {
                break Err(closed);
            }
            // Listening for replicas' acknowledgements (WAIT) starts before
            // the run, so one that lands between the run and the wait below
            // still wakes it: `notify_waiters` keeps no permit, and a WAIT
            // that missed the acknowledgement to its GETACK waited for the
            // replica's next one (once a second).
            let mut acked = std::pin::pin!(server.replication.acked.notified());
            acked.as_mut().enable();
            // Run again first: the feed is subscribed now, so a change
            // after this run wakes the ticket. A wake-up runs it only if
            // one of its keys exists, looked at without effects: an
            // expired key is left for a command that reads it to delete
            // (and log), as Redis does.
            if !woken_before
                || block.on_nokey
                || block.keys.is_empty()
                || self.any_key_live(&block.keys)
            {
                if !self.retry_blocked(&args).await {
                    continue;
                }
                if self.session.block.take().is_none() {
                    break Ok(());
                }
            }
            woken_before = true;
            // It found nothing: whoever woke it goes on.
            self.session.woken.retain(|w| !w.is(ticket.waiter()));
            crate::events::blocking::await_runs(&mut self.session.woken).await;
            ticket.waiter().ran();
            let mut timed_out = false;
            tokio::select! {
                _ = ticket.waiter().woken() => {}
                _ = acked.as_mut(), if block.on_ack => {}
                _ = sleep_until_opt(deadline) => timed_out = true,
                _ = client.unblocked() => {}
                _ = client.killed() => break Err(Closed::Killed),
                readable = self.stream.readable() => {
                    if let Err(closed) = readable.map_err(Closed::Io).and_then(|_| self.read()) {
                        break Err(closed);
                    }
                }
            }
            let unblock = client.take_unblock();
            if unblock == crate::net::client::UNBLOCK_ERROR
                || timed_out
                || unblock == crate::net::client::UNBLOCK_TIMEOUT
            {
                // Its one call (runs that blocked again counted none).
                if let Some(id) = server.commands.lookup(&args[0]) {
                    bump(&self.stats.commands[id].calls, 1);
                }
            }
            let mut reply = ReplyWriter::new(&mut self.output, self.session.protocol);
            match unblock {
                crate::net::client::UNBLOCK_ERROR => {
                    reply.error("UNBLOCKED client unblocked via CLIENT UNBLOCK");
                    break Ok(());
                }
                crate::net::client::UNBLOCK_TIMEOUT => timed_out = true,
                _ => {}
            }
            if timed_out {
                if let crate::net::session::TimeoutReply::Rerun = block.timeout_reply {
                    self.session.block_timed_out = true;
                    let _ = self.run_command(&args, now_ms(), ColdValues::ReadUnderLock);
                    self.session.block_timed_out = false;
                    self.session.block = None;
                } else {
                    block.timeout_reply.write_to(&mut reply);
                }
                break Ok(());
            }
        };
        client.blocked.store(false, Relaxed);
        self.session.block_waiter = None;
        // The clients its run woke, and those it passes its turn to, run
        // before whoever woke it goes on (a chain of BLMOVEs is served
        // whole before the first push answers).
        let leaving = ticket.leave(&mut self.session.woken);
        crate::events::blocking::await_runs(&mut self.session.woken).await;
        drop(leaving);
        self.parser.recycle(args);
        result
    }

    /// Whether one of `keys` exists, unexpired, in this client's database
    /// (nothing is deleted or logged: see `run_blocked`).
    fn any_key_live(&self, keys: &[Bytes]) -> bool {
        let keyspace = &self.server.keyspace;
        let now = now_ms();
        keys.iter().any(|bytes| {
            let key = keyspace.key(bytes);
            keyspace.lock(key).is_live(self.session.db, key, now) == Some(true)
        })
    }

    /// Runs the commands parsed ahead while the values read for them are
    /// in RAM, stopping where the main loop has to decide (a value still
    /// cold, the connection killed, paused or closing, output backing up).
    fn run_backlog(&mut self, now: u64) {
        let pause_bytes = self.output_pause_bytes();
        let server = self.server.clone();
        while let Some(args) = self.backlog.pop_front() {
            let inside = server.write_gate.enter();
            let stop = self.session.close_after_reply
                || self.session.client.is_killed()
                || self.server.paused_until_ms() > now
                || self.held_by_write_pause(&args, now)
                || self.output.len() >= pause_bytes;
            if stop {
                self.backlog.push_front(args);
                return;
            }
            let ran = self.run_command(&args, now, ColdValues::Defer);
            drop(inside);
            if ran.is_err() {
                // Dispatched again from the main loop, which parks it.
                self.backlog.push_front(args);
                return;
            }
            if let Some(block) = self.session.block.take() {
                // A blocking command found nothing: the main loop waits
                // for it before anything after it runs.
                self.blocked = Some((args, block));
                return;
            }
        }
    }

    /// Writes as much pending output as the socket takes without blocking.
    fn flush(&mut self) -> std::io::Result<()> {
        self.output_grew |= self.output.len() > READ_BUFFER_RETAINED_BYTES_MAX;
        let pending_before = self.output.len();
        if let Some(tls) = self.tls.as_mut() {
            write_tls(tls, &self.stream, &mut self.output, &self.stats)?;
        }
        let closing = self.session.close_after_reply && self.tls.is_none();
        if closing {
            self.stream.hold_until_shutdown();
        }
        while self.tls.is_none() && !self.output.is_empty() {
            match self.stream.try_write(&self.output) {
                Ok(n) => {
                    bump(&self.stats.net_output_bytes, n as u64);
                    bump(&self.stats.writes_processed, 1);
                    let _ = self.output.split_to(n);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        if self.config.timeout_s != 0 && self.output.len() < pending_before {
            // A reply going out is activity too (Redis' lastinteraction):
            // a slow command's client is idle from its answer, not from
            // its request.
            self.last_active = Instant::now();
        }
        if closing && self.output.is_empty() {
            // QUIT's reply is out: the close follows it at once.
            self.stream.shutdown_write();
        }
        // Sent bytes are split off the front, so an emptied buffer's
        // capacity() understates the allocation it keeps: a burst of
        // replies (a long pipeline) would hold its megabytes for ever.
        if self.output.is_empty()
            && (self.output_grew || self.output.capacity() > READ_BUFFER_RETAINED_BYTES_MAX)
        {
            self.output = BytesMut::with_capacity(READ_CHUNK_BYTES);
            self.output_grew = false;
        }
        Ok(())
    }

    fn check_output_limits(&mut self) -> Result<(), Closed> {
        let limit = self.output_limit();
        let pending = self.output.len() as u64;
        if limit.hard_bytes > 0 && pending > limit.hard_bytes {
            return Err(Closed::OutputBufferLimit);
        }
        if limit.soft_bytes > 0 && pending > limit.soft_bytes {
            let since = *self.soft_limit_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= Duration::from_secs(limit.soft_seconds) {
                return Err(Closed::OutputBufferLimit);
            }
        } else {
            self.soft_limit_since = None;
        }
        Ok(())
    }
}

/// Nothing runs while DEBUG SLEEP or CLIENT PAUSE holds the server: a
/// woken blocked client runs after the pause, as in Redis (or is killed).
async fn wait_out_pause(server: &Node, client: &ClientInfo) -> Result<(), Closed> {
    let paused_until = server.paused_until_ms();
    if paused_until <= now_ms() {
        return Ok(());
    }
    let unpaused = server.unpaused.notified();
    let left = Duration::from_millis(paused_until.saturating_sub(now_ms()));
    tokio::select! {
        _ = tokio::time::sleep(left) => Ok(()),
        _ = unpaused => Ok(()),
        _ = client.killed() => Err(Closed::Killed),
    }
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
        None => std::future::pending().await,
    }
}

/// Reads what the socket has through the TLS session into `input`:
/// the plain text's length, or 0 when the peer closed. Handshake and
/// alert records the session answers go out with the next flush.
fn read_tls(
    tls: &mut rustls::ServerConnection,
    stream: &crate::net::socket::Stream,
    input: &mut BytesMut,
) -> std::io::Result<usize> {
    use std::io::Read;
    let mut closed = false;
    // Bytes taken off the socket in this call: past this, the rest waits
    // for the next call (the socket stays readable), as a plain read
    // takes one chunk at a time.
    let mut taken = 0;
    while taken < TLS_READ_PER_CALL_BYTES_MAX {
        match tls.read_tls(&mut NonBlocking(stream)) {
            Ok(0) => {
                closed = true;
                break;
            }
            Ok(n) => taken += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
        if let Err(e) = tls.process_new_packets() {
            // The alert telling the peer why is queued; send it if we can.
            let _ = tls.write_tls(&mut NonBlocking(stream));
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e));
        }
        if !tls.wants_read() {
            break;
        }
    }
    let before = input.len();
    let mut chunk = [0u8; READ_CHUNK_BYTES];
    loop {
        match tls.reader().read(&mut chunk) {
            Ok(0) => {
                closed = true;
                break;
            }
            Ok(n) => input.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
    }
    let plain = input.len() - before;
    if plain == 0 && !closed {
        // Records that held no data yet (a handshake): not a hangup.
        return Err(std::io::ErrorKind::WouldBlock.into());
    }
    Ok(plain)
}

/// Moves plain `output` into the TLS session (up to its buffer limit) and
/// its records onto the socket, as far as the socket takes them.
fn write_tls(
    tls: &mut rustls::ServerConnection,
    stream: &crate::net::socket::Stream,
    output: &mut BytesMut,
    stats: &ThreadStats,
) -> std::io::Result<()> {
    use std::io::Write;
    loop {
        if !output.is_empty() {
            let taken = tls.writer().write(output)?;
            let _ = output.split_to(taken);
        }
        if !tls.wants_write() {
            return Ok(());
        }
        match tls.write_tls(&mut NonBlocking(stream)) {
            Ok(n) => {
                bump(&stats.net_output_bytes, n as u64);
                bump(&stats.writes_processed, 1);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}
