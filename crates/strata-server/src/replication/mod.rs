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
//! - One thread per replica on the primary ([`primary`]) and one for the
//!   link on a replica ([`link`]): blocking sockets with timeouts, apart
//!   from the network threads.
//!
//! Not yet (docs/replication.md, "Limits"): partial resynchronisation
//! (every reconnection is a full sync), WAIT counting replicas, FAILOVER,
//! `min-replicas-to-write`, replica chains' own offsets, and a disk-backed
//! backlog.

pub mod link;
pub mod primary;
pub mod snapshot;
pub mod translate;

use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64};
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;

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
    /// When it last acknowledged (Unix ms).
    pub acked_at_ms: AtomicU64,
    /// Asks the sender thread to stop (CLIENT KILL, REPLICAOF, shutdown).
    pub stop: AtomicBool,
    /// WAIT asks the sender to send `REPLCONF GETACK *` now.
    pub getack: AtomicBool,
    /// The last change (sequence number, `strata_engine::copy`) the
    /// replica holds by its acknowledgements.
    pub acked_seq: AtomicU64,
    /// (stream offset, change): once the replica acknowledges that
    /// offset, it holds every change up to that one. Written by the
    /// sender per write, consumed by acknowledgements.
    pub marks: Mutex<std::collections::VecDeque<(u64, u64)>>,
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
            acked_at_ms: now_ms.into(),
            stop: false.into(),
            getack: false.into(),
            acked_seq: 0.into(),
            marks: Mutex::new(std::collections::VecDeque::new()),
        }
    }

    /// The replica acknowledged `offset`.
    pub fn acknowledge(&self, offset: u64, now_ms: u64) {
        self.acked.store(offset, Relaxed);
        self.acked_at_ms.store(now_ms, Relaxed);
        let mut marks = self.marks.lock();
        while let Some(&(at, seq)) = marks.front() {
            if at > offset {
                break;
            }
            self.acked_seq.fetch_max(seq, Relaxed);
            marks.pop_front();
        }
    }

    fn state_name(&self) -> &'static str {
        match self.state.load(Relaxed) {
            STATE_WAIT_BGSAVE => "wait_bgsave",
            STATE_SEND_BULK => "send_bulk",
            _ => "online",
        }
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
    /// As a primary: the offset of the stream produced so far (the
    /// highest any replica was sent); as a replica: the offset applied.
    offset: AtomicU64,
    replicas: Mutex<Vec<Arc<Attached>>>,
    upstream: Mutex<Option<Upstream>>,
    /// Whether `upstream` is set: what every command's admission reads.
    following: AtomicBool,
    /// Full syncs served (INFO stats' `sync_full`).
    pub full_syncs: AtomicU64,
    /// The server, for the threads REPLICAOF starts.
    server: OnceLock<Weak<crate::server::Server>>,
    /// Woken by every acknowledgement (WAIT waits on it).
    pub acked: tokio::sync::Notify,
}

impl Replication {
    pub fn new(run_id: &str) -> Self {
        Replication {
            replid: Mutex::new(run_id.to_string()),
            replid2: Mutex::new(("0".repeat(40), -1)),
            offset: AtomicU64::new(0),
            replicas: Mutex::new(Vec::new()),
            upstream: Mutex::new(None),
            following: AtomicBool::new(false),
            full_syncs: AtomicU64::new(0),
            server: OnceLock::new(),
            acked: tokio::sync::Notify::new(),
        }
    }

    /// How many online replicas hold every change up to `seq`.
    pub fn holding(&self, seq: u64) -> usize {
        self.replicas
            .lock()
            .iter()
            .filter(|r| r.state.load(Relaxed) == STATE_ONLINE && r.acked_seq.load(Relaxed) >= seq)
            .count()
    }

    /// Asks every replica for an acknowledgement now.
    pub fn request_acks(&self) {
        for replica in self.replicas.lock().iter() {
            replica.getack.store(true, Relaxed);
        }
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
    pub fn refusal(&self, writes: bool, stale_ok: bool, serve_stale: bool) -> Option<&'static str> {
        if !self.following.load(Relaxed) {
            return None;
        }
        let link = self.link()?;
        if writes && link.read_only.load(Relaxed) {
            return Some("READONLY You can't write against a read only replica.");
        }
        if !stale_ok && !serve_stale && !link.up.load(Relaxed) {
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
        self.offset.load(Relaxed)
    }

    /// Moves the offset on to `offset` if it is further.
    pub fn advance(&self, offset: u64) {
        self.offset.fetch_max(offset, Relaxed);
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
        let mut upstream = self.upstream.lock();
        if let Some(before) = upstream.replace(Upstream {
            host,
            port,
            link: link.clone(),
        }) {
            before.link.stop.store(true, Relaxed);
        }
        self.following.store(true, Relaxed);
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
        self.following.store(false, Relaxed);
        drop(upstream);
        before.link.stop.store(true, Relaxed);
        let old = std::mem::replace(&mut *self.replid.lock(), crate::server::random_hex(40));
        *self.replid2.lock() = (old, self.offset() as i64 + 1);
        true
    }

    /// A replica's applied offset.
    pub fn adopt_offset(&self, offset: u64) {
        self.offset.store(offset, Relaxed);
    }

    /// Takes the ID of the primary this replica now follows.
    pub fn adopt(&self, replid: &str, offset: u64) {
        *self.replid.lock() = replid.to_string();
        self.offset.store(offset, Relaxed);
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
    pub fn info(&self, out: &mut String, now_ms: u64) {
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
                line(
                    out,
                    "slave_read_only",
                    &u8::from(link.read_only.load(Relaxed)),
                );
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
        line(out, "master_failover_state", &"no-failover");
        line(out, "master_replid", &self.replid());
        let (replid2, second) = self.replid2.lock().clone();
        line(out, "master_replid2", &replid2);
        line(out, "master_repl_offset", &self.offset());
        line(out, "second_repl_offset", &second);
        line(out, "repl_backlog_active", &0);
        line(out, "repl_backlog_size", &1_048_576);
        line(out, "repl_backlog_first_byte_offset", &0);
        line(out, "repl_backlog_histlen", &0);
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
