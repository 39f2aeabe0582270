//! Replication's state as the server holds it ([`Replication`]): the
//! stream's IDs and backlog, the replicas attached, the primary followed
//! and its link's state, FAILOVER's state; and the producer thread that
//! makes the stream from committed groups. It reaches the keyspace and
//! the configuration it was given, never the server: the threads that
//! serve replicas and follow a primary ([`super::primary`],
//! [`super::link`], [`super::failover`]) sit above dispatch and reach it.

use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use strata_engine::Keyspace;

use super::backlog;
use super::shared::SharedCopy;
use super::translate::{self, Translator, write_command};
use crate::config::SharedConfig;
use crate::util::now_ms;

/// The backlog keeps this much stream (its recent part in RAM, all of it
/// on disk) unless `repl-backlog-size` is set: Redis' 1 MB default sends a
/// replica that is a moment behind under load into a full
/// synchronisation, and one away for a minute always.
pub const BACKLOG_DEFAULT_BYTES: usize = 1 << 30;
/// How long [`Replication::drop_replicas_after_sending`] lets senders
/// send what was committed before it.
const DROP_FLUSH_MAX: Duration = Duration::from_millis(200);

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
/// ([`strata_engine::storage::repl_position`]): the primary's replication ID, the
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
    pub link: Arc<LinkState>,
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
    /// Where the last `REPLCONF GETACK` starts in the stream: a replica
    /// answers it with an offset at least this (0: none sent yet).
    getack_at: AtomicU64,
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
    /// The data the stream is made of, and the configuration (whom this
    /// server follows, the backlog's size, the ping period).
    keyspace: Arc<Keyspace>,
    config: Arc<SharedConfig>,
    /// Woken by every acknowledgement (WAIT waits on it).
    pub acked: tokio::sync::Notify,
    /// FAILOVER's state (`NO_FAILOVER` …) and its ABORT.
    pub failover_state: AtomicU8,
    pub failover_abort: AtomicBool,
    /// The full synchronisation copy being made, which another replica
    /// asking meanwhile shares.
    pub sharing: Mutex<Weak<SharedCopy>>,
    /// CLUSTER MIGRATION's tasks on this node.
    pub migrations: super::slot_tasks::Tasks,
}

impl Replication {
    pub fn new(run_id: &str, keyspace: Arc<Keyspace>, config: Arc<SharedConfig>) -> Self {
        Replication {
            replid: Mutex::new(run_id.to_string()),
            replid2: Mutex::new(("0".repeat(40), -1)),
            backlog: backlog::Backlog::new(BACKLOG_DEFAULT_BYTES),
            stream_started: AtomicBool::new(false),
            getack: AtomicBool::new(false),
            getack_at: AtomicU64::new(0),
            own_from: AtomicU64::new(0),
            applying: Mutex::new(()),
            synced: AtomicBool::new(false),
            replicas: Mutex::new(Vec::new()),
            upstream: Mutex::new(None),
            following: AtomicBool::new(false),
            full_syncs: AtomicU64::new(0),
            partial_syncs: AtomicU64::new(0),
            partial_refused: AtomicU64::new(0),
            keyspace,
            config,
            acked: tokio::sync::Notify::new(),
            failover_state: AtomicU8::new(NO_FAILOVER),
            failover_abort: AtomicBool::new(false),
            sharing: Mutex::new(Weak::new()),
            migrations: super::slot_tasks::Tasks::default(),
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
    ///
    /// A GETACK already in the stream after that change is answered with
    /// an offset that covers it, so none is sent then: every waiting WAIT
    /// runs again when an acknowledgement comes, and each used to send
    /// a GETACK of its own, whose answers woke them all again.
    pub fn request_acks(&self, seq: u64) {
        let Some(needed) = self.backlog.offset_holding(seq) else {
            self.getack.store(true, Relaxed);
            return;
        };
        if self.getack_at.load(Relaxed) >= needed {
            return;
        }
        self.getack.store(true, Relaxed);
        if self.take_getack() {
            self.send_getack();
        }
    }

    /// Appends `REPLCONF GETACK *` to the stream.
    ///
    /// `getack_at` is raised to the stream's end before the append: the
    /// GETACK lands there or later, so a WAIT whose writes end at or
    /// before it is covered. Raised after the append, a WAIT that looked
    /// in between sent a second GETACK (the test
    /// `waits_covered_by_a_getack_on_its_way_send_no_other` counted 2
    /// once in CI, under load).
    pub fn send_getack(&self) {
        let mut bytes = Vec::new();
        translate::write_command(
            &mut bytes,
            &[b"REPLCONF".to_vec(), b"GETACK".to_vec(), b"*".to_vec()],
        );
        self.getack_at.fetch_max(self.backlog.end(), Relaxed);
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

    /// Whether this server, as a primary, streams its changes: its data
    /// is its own history up to its offset, so when it becomes a replica
    /// (a cluster failover) it may ask to continue that history, as
    /// Redis' primary caches itself as the master to continue from.
    pub fn streams_own_history(&self) -> bool {
        self.stream_started.load(Relaxed)
    }

    /// Starts the producer of the stream, once (the first replica).
    pub fn start_stream(self: &Arc<Self>) {
        if self.stream_started.swap(true, Relaxed) {
            return;
        }
        start_producer(self.clone());
    }

    /// The producer found the feed dropped changes: the stream has a hole,
    /// so a new history starts and every replica synchronises again.
    pub fn new_history(&self) {
        *self.replid.lock() = crate::util::random_hex(40);
        *self.replid2.lock() = ("0".repeat(40), -1);
        self.backlog.reset(self.backlog.end());
        self.drop_replicas();
        self.getack_at.store(0, Relaxed);
    }

    /// DEBUG CHANGE-REPL-ID: the history goes on under a new random ID and
    /// no second one (as Redis' changeReplicationId and
    /// clearReplicationId2): a replica asking to continue the old one gets
    /// a full synchronisation. Connected replicas stay connected.
    pub fn change_id(&self) {
        *self.replid.lock() = crate::util::random_hex(40);
        *self.replid2.lock() = ("0".repeat(40), -1);
    }

    /// Whether the producer should translate the change numbered `seq`.
    pub fn produces(&self, seq: u64) -> bool {
        !self.is_replica() && seq >= self.own_from.load(Relaxed)
    }

    /// A command that changes no data but goes to replicas (PUBLISH and
    /// SPUBLISH, as Redis sends them: subscribers of a replica hear what
    /// is published on its primary), in its client's database `db`. Nothing without replicas, or on a
    /// replica (its primary's stream carries them).
    pub fn propagate(&self, db: usize, args: &[&[u8]]) {
        if !self.stream_started.load(Relaxed) || self.is_replica() {
            return;
        }
        let owned: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
        let mut bytes = Vec::new();
        translate::write_command(&mut bytes, &owned);
        self.backlog.append_in_db(db as u16, &[bytes]);
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

    /// NOREPLICAS when a write must wait for good replicas this primary
    /// lacks (`min-replicas-to-write`; a replica refuses writes its own way).
    pub fn too_few_replicas(
        &self,
        now_ms: u64,
        settings: crate::config::ReplicationSettings,
    ) -> Option<&'static str> {
        if settings.min_replicas_to_write == 0 || self.is_replica() {
            return None;
        }
        let good = self.good_replicas(now_ms, settings.min_replicas_max_lag_s);
        (good < settings.min_replicas_to_write)
            .then_some("NOREPLICAS Not enough good replicas to write.")
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
    pub fn link(&self) -> Option<Arc<LinkState>> {
        self.upstream.lock().as_ref().map(|up| up.link.clone())
    }

    /// Makes this server follow `host:port` (stopping any link before);
    /// the caller starts the link thread with the state returned.
    pub fn follow(&self, host: String, port: u16) -> Arc<LinkState> {
        let link = Arc::new(LinkState::default());
        // CONFIG GET and CONFIG REWRITE show whom this server follows.
        self.config.record_replicaof(Some((&host, port)));
        let mut upstream = self.upstream.lock();
        if let Some(before) = upstream.replace(Upstream {
            host,
            port,
            link: link.clone(),
        }) {
            before.link.stop.store(true, Relaxed);
        }
        self.following.store(true, Relaxed);
        strata_engine::keyspace::replica_expiry::set_following(true);
        link
    }

    /// REPLICAOF NO ONE: stops following; the data stays, and this server
    /// starts a new history (a new replication ID, the old one kept as
    /// the second). `held`: the locks of the command that promotes, if
    /// it runs under any (REPLICAOF in a transaction): the forgotten
    /// position joins their log group.
    pub fn promote(
        self: &Arc<Self>,
        held: Option<&mut strata_engine::keyspace::shards::Locked>,
    ) -> bool {
        let mut upstream = self.upstream.lock();
        let Some(before) = upstream.take() else {
            return false;
        };
        before.link.stop.store(true, Relaxed);
        // The link applies nothing more once it lets go of `applying`:
        // every change numbered from here on is this server's own.
        let applying = self.applying.lock();
        self.following.store(false, Relaxed);
        strata_engine::keyspace::replica_expiry::set_following(false);
        drop(upstream);
        self.own_from
            .store(self.keyspace.next_change_seq(), Relaxed);
        self.config.record_replicaof(None);
        // Its own writes follow: the primary's position no longer
        // describes the data.
        self.keyspace.save_replication_position(held, &[]);
        drop(applying);
        let old = std::mem::replace(&mut *self.replid.lock(), crate::util::random_hex(40));
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
        self.getack_at.store(0, Relaxed);
        self.synced.store(true, Relaxed);
    }

    /// Takes the ID of the primary this replica now follows.
    pub fn adopt(&self, replid: &str, offset: u64) {
        *self.replid.lock() = replid.to_string();
        *self.replid2.lock() = ("0".repeat(40), -1);
        self.backlog.reset(offset);
        self.synced.store(true, Relaxed);
        self.getack_at.store(0, Relaxed);
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

    /// Tells every replica sender to stop at once (the stream has a hole:
    /// they synchronise again).
    pub fn drop_replicas(&self) {
        for replica in self.replicas.lock().iter() {
            replica.stop.store(true, Relaxed);
        }
    }

    /// Tells every replica sender to stop once it has sent what was
    /// committed so far (REPLICAOF, FAILOVER: this server becomes a
    /// replica, and its own replicas start over from the new history).
    /// As Redis' replicas have the writes it propagated before the
    /// REPLICAOF (it writes them out before it reads the next command),
    /// each sender (online, or sending its copy) is given up to
    /// [`DROP_FLUSH_MAX`] to send the stream up to the last committed
    /// change. Not for the producer's thread, which makes that stream.
    pub fn drop_replicas_after_sending(&self) {
        let replicas = self.replicas.lock().clone();
        let committed = self.keyspace.next_change_seq().saturating_sub(1);
        let deadline = Instant::now() + DROP_FLUSH_MAX;
        // Those sending their copy come online right after it: they are
        // waited for too (one whose copy is still being made gets the
        // stream from the copy's end, whatever it holds).
        let online: Vec<_> = replicas
            .iter()
            .filter(|r| matches!(r.state.load(Relaxed), STATE_SEND_BULK | STATE_ONLINE))
            .collect();
        if !online.is_empty() {
            let sent_all = || {
                self.backlog
                    .offset_holding(committed)
                    .is_some_and(|end| online.iter().all(|r| r.sent.load(Relaxed) >= end))
            };
            while committed > 0 && !sent_all() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        for replica in &replicas {
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
            &state_name(self.failover_state.load(Relaxed)),
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

/// The link's state, as INFO and ROLE show it.
pub struct LinkState {
    pub stop: AtomicBool,
    /// Synchronised and applying the stream.
    pub up: AtomicBool,
    /// Receiving or loading the RDB file.
    pub syncing: AtomicBool,
    pub last_io_ms: AtomicU64,
    pub down_since_ms: AtomicU64,
    pub sync_total: AtomicU64,
    pub sync_read: AtomicU64,
    pub priority: AtomicU64,
    /// This server was the primary and hands over (FAILOVER): its PSYNC
    /// says so and asks to continue its own history.
    pub failover: AtomicBool,
    /// Set for the link the configuration starts: its first connection
    /// continues from the position the data directory holds, if any.
    pub resume_saved: AtomicBool,
}

impl Default for LinkState {
    fn default() -> Self {
        LinkState {
            stop: false.into(),
            up: false.into(),
            syncing: false.into(),
            last_io_ms: 0.into(),
            down_since_ms: now_ms().into(),
            sync_total: 0.into(),
            sync_read: 0.into(),
            priority: 100.into(),
            failover: false.into(),
            resume_saved: false.into(),
        }
    }
}

impl LinkState {
    pub fn sync_left(&self) -> u64 {
        (self.sync_total.load(Relaxed)).saturating_sub(self.sync_read.load(Relaxed))
    }

    pub fn sync_percent(&self) -> String {
        let total = self.sync_total.load(Relaxed).max(1);
        format!(
            "{:.2}",
            self.sync_read.load(Relaxed) as f64 * 100.0 / total as f64
        )
    }
}

/// What the replica asked for.
#[derive(Clone, Debug)]
pub struct SyncRequest {
    /// PSYNC's replication ID (`?`: none) and offset (the first byte it
    /// wants, as Redis counts: one past what it has).
    pub replid: String,
    pub offset: i64,
    /// PSYNC (answered `+FULLRESYNC`) rather than the old SYNC.
    pub psync: bool,
    /// The port it listens on (REPLCONF listening-port), for INFO.
    pub listening_port: u16,
    /// `REPLCONF rdb-only 1` (`redis-cli --rdb`): the RDB file only, then
    /// the connection closes.
    pub rdb_only: bool,
    /// `REPLCONF rdb-filter-only functions` (`redis-cli
    /// --functions-rdb`): the file holds the function libraries and no key.
    pub functions_only: bool,
}

impl SyncRequest {
    /// Where the replica continues from, when the backlog can serve it:
    /// its ID is this server's (or the one before, up to where that
    /// history ended) and its offset is still held.
    pub fn continue_from(&self, replication: &Replication) -> Option<u64> {
        if !self.psync || self.offset < 1 {
            return None;
        }
        let from = self.offset as u64 - 1;
        let (replid2, second) = replication.replid2();
        let ours = self.replid == replication.replid()
            || (self.replid == replid2 && second >= 0 && self.offset <= second);
        (ours && replication.backlog.holds(from)).then_some(from)
    }
}

/// `master_failover_state` values.
pub const NO_FAILOVER: u8 = 0;
pub const WAITING_FOR_SYNC: u8 = 1;
pub const IN_PROGRESS: u8 = 2;

pub fn state_name(state: u8) -> &'static str {
    match state {
        WAITING_FOR_SYNC => "waiting-for-sync",
        IN_PROGRESS => "failover-in-progress",
        _ => "no-failover",
    }
}

/// Changes the producer may fall behind by before the stream is broken
/// (it translates as fast as the network threads commit; this is a
/// bound, not a buffer in use).
const PRODUCER_LAG_BYTES_MAX: usize = 1 << 30;

/// Groups the producer appends before it wakes the senders.
const PRODUCER_BATCH_GROUPS: usize = 256;

/// Starts the thread that turns committed groups into the stream. It
/// subscribes here, before returning: a copy taken after this call has
/// every later change in the stream (one committed before the thread ran
/// would be in neither).
fn start_producer(replication: Arc<Replication>) {
    let keyspace = &replication.keyspace;
    let changes = keyspace.subscribe_records(PRODUCER_LAG_BYTES_MAX);
    (replication.backlog).set_baseline(keyspace.next_change_seq().saturating_sub(1));
    let spawned = std::thread::Builder::new()
        .name("strata-repl-stream".into())
        .spawn(move || produce(&replication, changes));
    if let Err(e) = spawned {
        crate::log_warning!("could not start the replication stream: {e}");
    }
}

fn produce(replication: &Replication, mut changes: strata_engine::feed::Subscription) {
    let keyspace = &replication.keyspace;
    let mut pinged = Instant::now();
    loop {
        let config = replication.config.get();
        // `repl-backlog-size` as set; unset, 1 GB (on disk) rather than
        // Redis' 1 MB.
        let limit = match config.accepted.get("repl-backlog-size") {
            Some(set) => set.parse().unwrap_or(BACKLOG_DEFAULT_BYTES),
            None => BACKLOG_DEFAULT_BYTES,
        };
        replication.backlog.set_limit(limit);
        // One group, then every group already committed (up to a batch):
        // the replicas' senders are woken once for them all.
        let mut next = changes.recv_timeout(Duration::from_millis(20));
        let mut taken = 0;
        // One clock read for the batch (it dates the TTLs of RESTOREs):
        // read per group, it was 4 % of this thread's samples.
        let now = now_ms();
        // The batch's groups go into the backlog under one hold of its
        // lock, each translated from the database the one before leaves
        // selected (the backlog selects again if something else went in
        // meanwhile).
        let mut db = replication.backlog.db();
        let mut batch = Vec::new();
        loop {
            match next {
                Err(_) => {
                    replication
                        .backlog
                        .append_groups(std::mem::take(&mut batch));
                    crate::log_warning!(
                        "The replication stream fell behind the changes; replicas synchronize again"
                    );
                    changes = keyspace.subscribe_records(PRODUCER_LAG_BYTES_MAX);
                    replication.new_history();
                    replication
                        .backlog
                        .set_baseline(keyspace.next_change_seq().saturating_sub(1));
                    break;
                }
                Ok(Some(group)) if replication.produces(group.seq) => {
                    let mut translator = Translator::at(db);
                    // Commands take about what their records take.
                    let mut bytes = Vec::with_capacity(group.records.len() + 64);
                    translator.group(keyspace, now, &group.records, |_| true, &mut bytes);
                    let after = translator.db();
                    batch.push(backlog::Translated {
                        bytes: bytes.into(),
                        group,
                        db_before: db,
                        db_after: after,
                    });
                    db = after;
                }
                // A change the stream leaves out (its primary's, applied
                // while this server was a replica) is still one it has
                // passed.
                Ok(Some(group)) => {
                    replication
                        .backlog
                        .append_groups(std::mem::take(&mut batch));
                    replication.backlog.set_baseline(group.seq);
                    db = replication.backlog.db();
                }
                Ok(None) => break,
            }
            taken += 1;
            if taken == PRODUCER_BATCH_GROUPS {
                break;
            }
            next = changes.try_recv();
        }
        if !batch.is_empty() {
            replication.backlog.append_groups(batch);
        }
        replication.backlog.announce();
        if replication.is_replica() {
            continue;
        }
        // Read now, not before the wait above: a CONFIG SET meanwhile
        // (Redis' tests set 3600 before they read the stream) holds at once.
        let period = Duration::from_secs(replication.config.get().repl_ping_replica_period_s);
        let mut extra = Vec::new();
        if pinged.elapsed() >= period && !replication.replicas().is_empty() {
            write_command(&mut extra, &[b"PING".to_vec()]);
            pinged = Instant::now();
        }
        if !extra.is_empty() {
            replication.backlog.append_neutral(extra.into());
        }
        if replication.take_getack() {
            replication.send_getack();
        }
    }
}
