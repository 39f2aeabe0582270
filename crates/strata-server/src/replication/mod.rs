//! Replication: a Strata primary serves Redis' replication protocol to
//! replicas (Strata, or redis-server itself, or `redis-cli --rdb`), and a
//! Strata replica follows a primary (Strata, or a running redis-server:
//! the way a live Redis moves in).
//!
//! The wire is Redis' (docs/replication.md): the replica sends PING,
//! optional AUTH, `REPLCONF listening-port`/`capa`, then `PSYNC`; the
//! primary answers `+FULLRESYNC <replid> <offset>`, sends an RDB file as
//! one bulk (`$<len>\r\n` and the bytes), then the commands that change
//! the data, for ever; the replica sends `REPLCONF ACK <offset>` every
//! second. The offset counts the bytes of that command stream.
//!
//! What is Strata's own:
//! - **No fork.** The RDB file is written from a copy made shard by shard
//!   ([`strata_engine::copy`]): one shard locked at a time, each key
//!   serialised straight into a file under the data directory, which is
//!   then sent from disk. Writers go on meanwhile; the primary's memory
//!   grows by the changes made during the copy (bounded by
//!   `client-output-buffer-limit replica`), not by a copy-on-write image.
//! - **The stream is the record stream.** The primary does not re-send
//!   the commands clients sent; it translates the records they committed
//!   ([`translate`]): effects with every time and random choice made, in
//!   commit order, one group (command, MULTI, script) as one MULTI/EXEC.
//!   Which records follow a copy is exact: those numbered at or above
//!   the `L_s` of their key's shard.
//! - **One stream, one backlog** ([`backlog`]): a producer thread makes
//!   the stream once for every replica, so offsets are shared; PSYNC
//!   continues from the backlog (`+CONTINUE`), WAIT maps a change to the
//!   offset that holds it, and a replica keeps its primary's stream byte
//!   for byte so its own replicas and, after a promotion, its former
//!   siblings continue without a copy. FAILOVER is [`failover`].
//! - One thread per replica on the primary ([`primary`]) and one for the
//!   link on a replica ([`link`]): blocking sockets with timeouts, apart
//!   from the network threads.
//!
//! - **A restarted replica continues.** The position in its primary's
//!   stream (ID, offset, database selected) ends every log group the
//!   stream's commands commit ([`strata_engine::repl_position`]), so after
//!   a restart, even a `kill -9`, the replica asks to continue from
//!   exactly what its data holds ([`Position`]).
//!
//! Not yet (docs/replication.md, "Limits"): a backlog on disk (it is in
//! RAM), replication over TLS or unix sockets, diskless transfers.

pub mod backlog;
pub mod failover;
pub mod link;
pub mod primary;
pub mod snapshot;
pub mod spill;
pub mod translate;

use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64};
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;

/// The backlog keeps this much stream (its recent part in RAM, all of it
/// on disk) unless `repl-backlog-size` is set: Redis' 1 MB default sends a
/// replica that is a moment behind under load into a full
/// synchronisation, and one away for a minute always.
pub const BACKLOG_DEFAULT_BYTES: usize = 1 << 30;

/// A replica attached to this server, as INFO and ROLE show it.
pub struct Attached {
    pub client_id: u64,
    pub ip: String,
    pub listening_port: AtomicU64,
    pub state: AtomicU8,
    /// Stream offset sent so far.
    pub sent: AtomicU64,
    /// Offset the replica last acknowledged.
    pub acked: AtomicU64,
    /// Offset up to which the replica has synced the stream's changes to
    /// its own log (`FACK`; 0: it said none).
    pub acked_synced: AtomicU64,
    /// When it last acknowledged (Unix ms).
    pub acked_at_ms: AtomicU64,
    /// Asks the sender thread to stop (CLIENT KILL, REPLICAOF, shutdown).
    pub stop: AtomicBool,
}

/// States of an [`Attached`] replica.
pub const STATE_WAIT_BGSAVE: u8 = 0;
pub const STATE_SEND_BULK: u8 = 1;
pub const STATE_ONLINE: u8 = 2;

impl Attached {
    /// A replica just asking to synchronise (`client_id` its connection).
    pub fn new(client_id: u64, ip: String, listening_port: u16, now_ms: u64) -> Self {
        Attached {
            client_id,
            ip,
            listening_port: u64::from(listening_port).into(),
            state: STATE_WAIT_BGSAVE.into(),
            sent: 0.into(),
            acked: 0.into(),
            acked_synced: 0.into(),
            acked_at_ms: now_ms.into(),
            stop: false.into(),
        }
    }

    /// The replica acknowledged `offset`, and `synced` of it on disk.
    pub fn acknowledge(&self, offset: u64, synced: Option<u64>, now_ms: u64) {
        self.acked.fetch_max(offset, Relaxed);
        if let Some(synced) = synced {
            self.acked_synced.fetch_max(synced, Relaxed);
        }
        self.acked_at_ms.store(now_ms, Relaxed);
    }

    fn state_name(&self) -> &'static str {
        match self.state.load(Relaxed) {
            STATE_WAIT_BGSAVE => "wait_bgsave",
            STATE_SEND_BULK => "send_bulk",
            _ => "online",
        }
    }
}

/// A replica's place in its primary's stream, as its log keeps it
/// ([`strata_engine::repl_position`]): the primary's replication ID, the
/// offset the data holds every command below, and the database the
/// stream has selected there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Position {
    pub replid: String,
    pub offset: u64,
    pub db: usize,
}

impl Position {
    /// The image of a position (into `out`, replaced): offset (8 bytes),
    /// database (2), ID; little-endian.
    pub fn encode(out: &mut Vec<u8>, replid: &str, offset: u64, db: usize) {
        out.clear();
        out.extend_from_slice(&offset.to_le_bytes());
        out.extend_from_slice(&(db as u16).to_le_bytes());
        out.extend_from_slice(replid.as_bytes());
    }

    pub fn decode(image: &[u8]) -> Option<Position> {
        let offset = u64::from_le_bytes(image.get(..8)?.try_into().ok()?);
        let db = u16::from_le_bytes(image.get(8..10)?.try_into().ok()?) as usize;
        let replid = std::str::from_utf8(image.get(10..)?).ok()?;
        (!replid.is_empty()).then(|| Position {
            replid: replid.to_string(),
            offset,
            db,
        })
    }
}

/// Where this server replicates from, when it is a replica.
pub struct Upstream {
    pub host: String,
    pub port: u16,
    pub link: Arc<link::LinkState>,
}

/// The server's replication state.
pub struct Replication {
    /// The replication ID this server's stream carries.
    replid: Mutex<String>,
    /// The previous ID (a promoted replica's old primary's) and the
    /// offset up to which it holds.
    replid2: Mutex<(String, i64)>,
    /// The stream and its recent history (`master_repl_offset` is its
    /// end; on a replica, what it applied).
    pub backlog: backlog::Backlog,
    /// The producer thread runs (from the first replica on).
    stream_started: AtomicBool,
    /// WAIT asked for acknowledgements: the producer sends GETACK.
    getack: AtomicBool,
    /// Changes numbered below this are a primary's, applied while this
    /// server was its replica: the producer leaves them out.
    own_from: AtomicU64,
    /// Held while the link applies a batch of its primary's stream; a full
    /// synchronisation served by a replica holds it while it copies.
    applying: Mutex<()>,
    /// Whether this server holds some primary's history (it synchronised,
    /// or was promoted): its reconnections ask to continue it.
    synced: AtomicBool,
    replicas: Mutex<Vec<Arc<Attached>>>,
    upstream: Mutex<Option<Upstream>>,
    /// Whether `upstream` is set: what every command's admission reads.
    following: AtomicBool,
    /// Full syncs served (INFO stats' `sync_full`), partial ones
    /// (`sync_partial_ok`) and partial ones refused (`sync_partial_err`).
    pub full_syncs: AtomicU64,
    pub partial_syncs: AtomicU64,
    pub partial_refused: AtomicU64,
    /// The server, for the threads REPLICAOF starts.
    server: OnceLock<Weak<crate::server::Server>>,
    /// Woken by every acknowledgement (WAIT waits on it).
    pub acked: tokio::sync::Notify,
    /// FAILOVER's state (`failover::NO_FAILOVER` …) and its ABORT.
    pub failover_state: AtomicU8,
    pub failover_abort: AtomicBool,
    /// The full synchronisation copy being made, which another replica
    /// asking meanwhile shares.
    pub sharing: Mutex<Weak<primary::SharedCopy>>,
}

impl Replication {
    pub fn new(run_id: &str) -> Self {
        Replication {
            replid: Mutex::new(run_id.to_string()),
            replid2: Mutex::new(("0".repeat(40), -1)),
            backlog: backlog::Backlog::new(BACKLOG_DEFAULT_BYTES),
            stream_started: AtomicBool::new(false),
            getack: AtomicBool::new(false),
            own_from: AtomicU64::new(0),
            applying: Mutex::new(()),
            synced: AtomicBool::new(false),
            replicas: Mutex::new(Vec::new()),
            upstream: Mutex::new(None),
            following: AtomicBool::new(false),
            full_syncs: AtomicU64::new(0),
            partial_syncs: AtomicU64::new(0),
            partial_refused: AtomicU64::new(0),
            server: OnceLock::new(),
            acked: tokio::sync::Notify::new(),
            failover_state: AtomicU8::new(failover::NO_FAILOVER),
            failover_abort: AtomicBool::new(false),
            sharing: Mutex::new(Weak::new()),
        }
    }

    /// How many online replicas hold every change up to `seq`.
    pub fn holding(&self, seq: u64) -> usize {
        self.count_acked(seq, |r| &r.acked)
    }

    /// How many online replicas have every change up to `seq` synced to
    /// their own log (WAITAOF).
    pub fn holding_synced(&self, seq: u64) -> usize {
        self.count_acked(seq, |r| &r.acked_synced)
    }

    fn count_acked(&self, seq: u64, field: impl Fn(&Attached) -> &AtomicU64) -> usize {
        let Some(offset) = self.backlog.offset_holding(seq) else {
            return 0;
        };
        self.replicas
            .lock()
            .iter()
            .filter(|r| r.state.load(Relaxed) == STATE_ONLINE && field(r).load(Relaxed) >= offset)
            .count()
    }

    /// Asks every replica for an acknowledgement of the stream up to the
    /// change numbered `seq` (`REPLCONF GETACK *` in the stream). When
    /// the stream already holds that change the GETACK goes now, from
    /// this thread; otherwise the producer sends it after its next group
    /// (it may then come before `seq`: the waiter, woken by that
    /// acknowledgement, asks again). Requests made together share one
    /// GETACK: whoever takes the flag sends it.
    pub fn request_acks(&self, seq: u64) {
        self.getack.store(true, Relaxed);
        if self.backlog.last_seq() >= seq && self.take_getack() {
            self.send_getack();
        }
    }

    /// Appends `REPLCONF GETACK *` to the stream.
    pub fn send_getack(&self) {
        let mut bytes = Vec::new();
        translate::write_command(
            &mut bytes,
            &[b"REPLCONF".to_vec(), b"GETACK".to_vec(), b"*".to_vec()],
        );
        self.backlog.append_neutral(bytes.into());
    }

    /// Pauses the link's applying while the guard lives (a replica
    /// serving a full synchronisation copies a still dataset); nothing
    /// on a primary.
    pub fn pause_applying(&self) -> Option<parking_lot::MutexGuard<'_, ()>> {
        self.is_replica().then(|| self.applying.lock())
    }

    /// The link holds this while it applies a batch.
    pub fn applying(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.applying.lock()
    }

    /// The previous replication ID and the offset its history ends at
    /// (−1: none).
    pub fn replid2(&self) -> (String, i64) {
        self.replid2.lock().clone()
    }

    /// Whether this server holds some primary's history.
    pub fn synced(&self) -> bool {
        self.synced.load(Relaxed)
    }

    /// Starts the producer of the stream, once (the first replica).
    pub fn start_stream(&self) {
        if self.stream_started.swap(true, Relaxed) {
            return;
        }
        if let Some(server) = self.server() {
            backlog::start_producer(server);
        }
    }

    /// The producer found the feed dropped changes: the stream has a hole,
    /// so a new history starts and every replica synchronises again.
    pub fn new_history(&self) {
        *self.replid.lock() = crate::server::random_hex(40);
        *self.replid2.lock() = ("0".repeat(40), -1);
        self.backlog.reset(self.backlog.end());
        self.drop_replicas();
    }

    /// Whether the producer should translate the change numbered `seq`.
    pub fn produces(&self, seq: u64) -> bool {
        !self.is_replica() && seq >= self.own_from.load(Relaxed)
    }

    /// A command that changes no data but goes to replicas (PUBLISH and
    /// SPUBLISH, as Redis sends them: subscribers of a replica hear what
    /// is published on its primary). Nothing without replicas, or on a
    /// replica (its primary's stream carries them).
    pub fn propagate(&self, args: &[&[u8]]) {
        if !self.stream_started.load(Relaxed) || self.is_replica() {
            return;
        }
        let owned: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
        let mut bytes = Vec::new();
        translate::write_command(&mut bytes, &owned);
        self.backlog.append_neutral(bytes.into());
    }

    /// The producer takes a GETACK request.
    pub fn take_getack(&self) -> bool {
        self.getack.swap(false, Relaxed)
    }

    /// Replicas that acknowledged within `max_lag_s` (min-replicas-max-lag).
    pub fn good_replicas(&self, now_ms: u64, max_lag_s: u64) -> usize {
        self.replicas
            .lock()
            .iter()
            .filter(|r| {
                r.state.load(Relaxed) == STATE_ONLINE
                    && now_ms.saturating_sub(r.acked_at_ms.load(Relaxed)) <= max_lag_s * 1000
            })
            .count()
    }

    /// Start-up hands the server over once it is built.
    pub fn set_server(&self, server: &Arc<crate::server::Server>) {
        let _ = self.server.set(Arc::downgrade(server));
        let dir = server.config.get().dir.join("replication").join("backlog");
        self.backlog.spill_to(&dir);
    }

    pub fn server(&self) -> Option<Arc<crate::server::Server>> {
        self.server.get()?.upgrade()
    }

    /// The primary followed (host, port).
    pub fn following(&self) -> Option<(String, u16)> {
        let upstream = self.upstream.lock();
        upstream.as_ref().map(|up| (up.host.clone(), up.port))
    }

    /// Whether the link to the primary is up (false on a primary).
    pub fn link_up(&self) -> bool {
        self.link().is_some_and(|link| link.up.load(Relaxed))
    }

    /// A refusal for a client's command on a replica: writes on a
    /// read-only replica, and (with `replica-serve-stale-data no`) all but
    /// `stale` commands while the link is down.
    pub fn refusal(
        &self,
        writes: bool,
        stale_ok: bool,
        settings: crate::config::ReplicationSettings,
    ) -> Option<&'static str> {
        if !self.following.load(Relaxed) {
            return None;
        }
        let link = self.link()?;
        if writes && settings.read_only {
            return Some("READONLY You can't write against a read only replica.");
        }
        if !stale_ok && !settings.serve_stale_data && !link.up.load(Relaxed) {
            return Some(
                "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
            );
        }
        None
    }

    pub fn replid(&self) -> String {
        self.replid.lock().clone()
    }

    pub fn offset(&self) -> u64 {
        self.backlog.end()
    }

    /// Whether this server follows a primary.
    pub fn is_replica(&self) -> bool {
        self.following.load(Relaxed)
    }

    /// The primary's link, when this server is a replica.
    pub fn link(&self) -> Option<Arc<link::LinkState>> {
        self.upstream.lock().as_ref().map(|up| up.link.clone())
    }

    /// Makes this server follow `host:port` (stopping any link before);
    /// the caller starts the link thread with the state returned.
    pub fn follow(&self, host: String, port: u16) -> Arc<link::LinkState> {
        let link = Arc::new(link::LinkState::default());
        // CONFIG GET and CONFIG REWRITE show whom this server follows.
        if let Some(server) = self.server() {
            server.config.record_replicaof(Some((&host, port)));
        }
        let mut upstream = self.upstream.lock();
        if let Some(before) = upstream.replace(Upstream {
            host,
            port,
            link: link.clone(),
        }) {
            before.link.stop.store(true, Relaxed);
        }
        self.following.store(true, Relaxed);
        strata_engine::replica_expiry::set_following(true);
        link
    }

    /// REPLICAOF NO ONE: stops following; the data stays, and this server
    /// starts a new history (a new replication ID, the old one kept as
    /// the second).
    pub fn promote(&self) -> bool {
        let mut upstream = self.upstream.lock();
        let Some(before) = upstream.take() else {
            return false;
        };
        before.link.stop.store(true, Relaxed);
        // The link applies nothing more once it lets go of `applying`:
        // every change numbered from here on is this server's own.
        let applying = self.applying.lock();
        self.following.store(false, Relaxed);
        strata_engine::replica_expiry::set_following(false);
        drop(upstream);
        if let Some(server) = self.server() {
            self.own_from
                .store(server.keyspace.next_change_seq(), Relaxed);
            server.config.record_replicaof(None);
            // Its own writes follow: the primary's position no longer
            // describes the data.
            server.keyspace.save_replication_position(&[]);
        }
        drop(applying);
        let old = std::mem::replace(&mut *self.replid.lock(), crate::server::random_hex(40));
        *self.replid2.lock() = (old, self.offset() as i64 + 1);
        self.synced.store(true, Relaxed);
        self.start_stream();
        true
    }

    /// The link applied its primary's stream up to `bytes`: they join
    /// this server's stream (its replicas', and its own if promoted).
    /// `db`: the database the primary's stream has selected after them.
    pub fn applied(&self, bytes: &[u8], db: usize) {
        let db = u16::try_from(db).ok();
        self.backlog.append(bytes.into(), None, db, db);
    }

    /// +CONTINUE with a new ID: the primary's history goes on under it
    /// (it was promoted); the old one is the second.
    pub fn continue_as(&self, replid: &str) {
        let mut current = self.replid.lock();
        if *current != replid {
            let old = std::mem::replace(&mut *current, replid.to_string());
            *self.replid2.lock() = (old, self.offset() as i64 + 1);
        }
    }

    /// Takes up the position a replica's data held at start: its
    /// reconnection asks to continue from there.
    pub fn resume(&self, position: &Position) {
        *self.replid.lock() = position.replid.clone();
        *self.replid2.lock() = ("0".repeat(40), -1);
        self.backlog
            .reset_in(position.offset, u16::try_from(position.db).ok());
        self.synced.store(true, Relaxed);
    }

    /// Takes the ID of the primary this replica now follows.
    pub fn adopt(&self, replid: &str, offset: u64) {
        *self.replid.lock() = replid.to_string();
        *self.replid2.lock() = ("0".repeat(40), -1);
        self.backlog.reset(offset);
        self.synced.store(true, Relaxed);
    }

    pub fn attach(&self, replica: Arc<Attached>) {
        self.replicas.lock().push(replica);
    }

    pub fn detach(&self, client_id: u64) {
        self.replicas.lock().retain(|r| r.client_id != client_id);
    }

    pub fn replicas(&self) -> Vec<Arc<Attached>> {
        self.replicas.lock().clone()
    }

    /// Tells every replica sender to stop (REPLICAOF makes this server a
    /// replica: its own replicas start over from the new history).
    pub fn drop_replicas(&self) {
        for replica in self.replicas.lock().iter() {
            replica.stop.store(true, Relaxed);
        }
    }

    /// INFO's replication section.
    pub fn info(&self, out: &mut String, now_ms: u64, read_only: bool) {
        let line = |out: &mut String, name: &str, value: &dyn std::fmt::Display| {
            let _ = write!(out, "{name}:{value}\r\n");
        };
        let upstream = self.upstream.lock();
        match upstream.as_ref() {
            Some(up) => {
                let link = &up.link;
                line(out, "role", &"slave");
                line(out, "master_host", &up.host);
                line(out, "master_port", &up.port);
                let up_now = link.up.load(Relaxed);
                line(
                    out,
                    "master_link_status",
                    &if up_now { "up" } else { "down" },
                );
                let last_io = link.last_io_ms.load(Relaxed);
                let ago = if last_io == 0 {
                    -1
                } else {
                    (now_ms.saturating_sub(last_io) / 1000) as i64
                };
                line(out, "master_last_io_seconds_ago", &ago);
                let syncing = link.syncing.load(Relaxed);
                line(out, "master_sync_in_progress", &u8::from(syncing));
                line(out, "slave_read_repl_offset", &self.offset());
                line(out, "slave_repl_offset", &self.offset());
                if syncing {
                    line(
                        out,
                        "master_sync_total_bytes",
                        &link.sync_total.load(Relaxed),
                    );
                    line(out, "master_sync_read_bytes", &link.sync_read.load(Relaxed));
                    line(out, "master_sync_left_bytes", &link.sync_left());
                    line(out, "master_sync_perc", &link.sync_percent());
                    line(out, "master_sync_last_io_seconds_ago", &ago.max(0));
                }
                if !up_now {
                    let down = link.down_since_ms.load(Relaxed);
                    line(
                        out,
                        "master_link_down_since_seconds",
                        &(now_ms.saturating_sub(down) / 1000),
                    );
                }
                line(out, "slave_priority", &link.priority.load(Relaxed));
                line(out, "slave_read_only", &u8::from(read_only));
                line(out, "replica_announced", &1);
            }
            None => line(out, "role", &"master"),
        }
        drop(upstream);
        let replicas = self.replicas();
        line(out, "connected_slaves", &replicas.len());
        for (n, replica) in replicas.iter().enumerate() {
            let lag = now_ms.saturating_sub(replica.acked_at_ms.load(Relaxed)) / 1000;
            line(
                out,
                &format!("slave{n}"),
                &format_args!(
                    "ip={},port={},state={},offset={},lag={}",
                    replica.ip,
                    replica.listening_port.load(Relaxed),
                    replica.state_name(),
                    replica.acked.load(Relaxed),
                    lag
                ),
            );
        }
        line(
            out,
            "master_failover_state",
            &failover::state_name(self.failover_state.load(Relaxed)),
        );
        line(out, "master_replid", &self.replid());
        let (replid2, second) = self.replid2.lock().clone();
        line(out, "master_replid2", &replid2);
        line(out, "master_repl_offset", &self.offset());
        line(out, "second_repl_offset", &second);
        let active = self.stream_started.load(Relaxed) || self.synced();
        line(out, "repl_backlog_active", &u8::from(active));
        line(out, "repl_backlog_size", &self.backlog.limit());
        line(
            out,
            "repl_backlog_first_byte_offset",
            &(self.backlog.start() + 1),
        );
        line(out, "repl_backlog_histlen", &self.backlog.held());
    }

    /// INFO stats' synchronisation counters.
    pub fn stats(&self, out: &mut String) {
        let _ = write!(
            out,
            "sync_full:{}\r\nsync_partial_ok:{}\r\nsync_partial_err:{}\r\n",
            self.full_syncs.load(Relaxed),
            self.partial_syncs.load(Relaxed),
            self.partial_refused.load(Relaxed)
        );
    }

    /// ROLE's reply.
    pub fn role(&self, out: &mut strata_resp::ReplyWriter) {
        let upstream = self.upstream.lock();
        if let Some(up) = upstream.as_ref() {
            out.array(5);
            out.bulk(b"slave");
            out.bulk(up.host.as_bytes());
            out.int(i64::from(up.port));
            let state = if up.link.up.load(Relaxed) {
                "connected"
            } else if up.link.syncing.load(Relaxed) {
                "sync"
            } else {
                "connect"
            };
            out.bulk(state.as_bytes());
            out.int(self.offset() as i64);
            return;
        }
        drop(upstream);
        let replicas = self.replicas();
        out.array(3);
        out.bulk(b"master");
        out.int(self.offset() as i64);
        out.array(replicas.len());
        for replica in replicas {
            out.array(3);
            out.bulk(replica.ip.as_bytes());
            out.bulk(replica.listening_port.load(Relaxed).to_string().as_bytes());
            out.bulk(replica.acked.load(Relaxed).to_string().as_bytes());
        }
    }
}
