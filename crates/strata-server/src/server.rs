//! The server's shared state ([`Server`]): the keyspace and the services
//! every connection reaches (configuration, command table, ACL, clients,
//! pub/sub, scripts, statistics), the pauses and the shutdown request.
//! [`crate::startup`] builds it and runs the threads around it.

use std::sync::Arc;
use std::sync::atomic::{
    AtomicBool, AtomicU8, AtomicU16, AtomicU64, AtomicUsize,
    Ordering::{Relaxed, SeqCst},
};
use std::time::Instant;

use strata_engine::Keyspace;
use tokio::sync::Notify;

use crate::config::SharedConfig;
use crate::data::persistence::Persistence;
use crate::data::tiering::Tiering;
use crate::events::blocking::Blocking;
use crate::net::client::ClientRegistry;
use crate::observe::stats::{GlobalStats, ThreadStats};

pub struct Server {
    pub config: Arc<SharedConfig>,
    pub keyspace: Arc<Keyspace>,
    pub persistence: Arc<Persistence>,
    pub tiering: Arc<Tiering>,
    /// Clients blocked on keys and the thread that wakes them.
    pub blocking: Arc<Blocking>,
    pub clients: ClientRegistry,
    pub stats: GlobalStats,
    pub thread_stats: Vec<Arc<ThreadStats>>,
    pub started: Instant,
    pub run_id: String,
    pub executable: String,
    port: AtomicU16,
    paused_until_ms: AtomicU64,
    /// CLIENT PAUSE: until when (ms), and whether only writes wait.
    client_pause_until_ms: AtomicU64,
    client_pause_writes_only: AtomicBool,
    /// Wakes the connections that wait for a pause when CLIENT UNPAUSE
    /// ends it early.
    pub unpaused: Notify,
    /// Connections whose next command waits for a pause.
    pub paused_clients: AtomicUsize,
    /// Commands between their pause check and their commit
    /// (`crate::write_gate`).
    pub write_gate: crate::write_gate::WriteGate,
    /// DEBUG SET-ACTIVE-EXPIRE: whether the cron reclaims expired keys.
    pub active_expire: Arc<AtomicBool>,
    /// DEBUG PAUSE-CRON: the periodic work Redis' serverCron does stops
    /// (active expiry, the tracking table's trim, the ops/s samples);
    /// memory-bound work (tiering, the census) goes on.
    pub cron_paused: Arc<AtomicBool>,
    /// DEBUG SET-DISABLE-DENY-SCRIPTS: scripts may call `noscript`
    /// commands (`commands::scripting` keeps the script commands out).
    pub deny_scripts_disabled: AtomicBool,
    /// Channels and their subscribers.
    pub pubsub: Arc<crate::events::pubsub::PubSub>,
    /// The change feed while keyspace notifications need it.
    pub notify_feed: Arc<crate::events::feed_slot::FeedSlot>,
    /// Clients tracking keys (client-side caching).
    pub tracking: Arc<crate::events::tracking::Tracking>,
    /// What clients hold in buffers (`maxmemory-clients`).
    pub client_memory: crate::net::client_eviction::ClientMemory,
    /// ACL users and the log of denials.
    pub acl: crate::acl::Acl,
    /// Lua scripts: the cache and the ones running.
    pub scripts: Arc<crate::scripting::Scripts>,
    /// Function libraries (FUNCTION LOAD, FCALL).
    pub functions: Arc<crate::functions::Functions>,
    /// SLOWLOG's entries.
    pub slowlog: crate::observe::slowlog::SlowLog,
    /// MONITOR's clients.
    pub monitors: crate::events::monitor::Monitors,
    /// Replicas served and the primary followed (`crate::replication`).
    pub replication: Arc<crate::replication::Replication>,
    /// Cluster mode's topology (`crate::cluster`), disabled unless
    /// `cluster-enabled yes`.
    pub cluster: crate::cluster::Cluster,
    /// The TLS configuration new connections on `tls-port` get (CONFIG
    /// SET of the tls-* settings replaces it).
    pub tls: parking_lot::RwLock<Option<Arc<rustls::ServerConfig>>>,
    /// CONFIG SET `port` / `bind`: new TCP listeners for the accept loop.
    pub relisten: crate::net::socket::Relisten,
    /// `used_memory` once the server was set up, before any data
    /// (INFO `used_memory_startup`, MEMORY STATS `startup.allocated`).
    pub startup_memory: u64,
    /// How the coming shutdown saves ([`ShutdownSave`] as u8).
    shutdown_save: AtomicU8,
    shutdown_signal: Notify,
}

/// The services a [`Server`] is made of, built by start-up.
pub struct Parts {
    pub config: crate::config::Config,
    pub keyspace: Arc<Keyspace>,
    pub persistence: Persistence,
    pub tiering: Tiering,
    pub blocking: Arc<Blocking>,
    pub acl: crate::acl::Acl,
    pub thread_stats: Vec<Arc<ThreadStats>>,
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub cluster: crate::cluster::Cluster,
}

impl Server {
    /// The server's state from its services; the counters, pauses and
    /// registries start empty.
    pub fn new(parts: Parts) -> Server {
        let port = parts.config.port;
        let run_id = crate::util::random_hex(40);
        let config = Arc::new(SharedConfig::new(parts.config));
        Server {
            replication: Arc::new(crate::replication::Replication::new(
                &run_id,
                parts.keyspace.clone(),
                config.clone(),
            )),
            keyspace: parts.keyspace,
            cluster: parts.cluster,
            blocking: parts.blocking,
            persistence: Arc::new(parts.persistence),
            tiering: Arc::new(parts.tiering),
            config,
            acl: parts.acl,
            client_memory: Default::default(),
            clients: ClientRegistry::default(),
            stats: GlobalStats::default(),
            thread_stats: parts.thread_stats,
            started: Instant::now(),
            run_id,
            executable: std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            port: AtomicU16::new(port),
            paused_until_ms: AtomicU64::new(0),
            client_pause_until_ms: AtomicU64::new(0),
            client_pause_writes_only: AtomicBool::new(false),
            unpaused: Notify::new(),
            paused_clients: AtomicUsize::new(0),
            write_gate: Default::default(),
            active_expire: Arc::new(AtomicBool::new(true)),
            cron_paused: Arc::new(AtomicBool::new(false)),
            deny_scripts_disabled: AtomicBool::new(false),
            pubsub: Arc::default(),
            tracking: Arc::default(),
            notify_feed: Arc::default(),
            scripts: Arc::default(),
            functions: Arc::default(),
            slowlog: Default::default(),
            monitors: Default::default(),
            tls: parking_lot::RwLock::new(parts.tls),
            relisten: crate::net::socket::Relisten::default(),
            startup_memory: crate::alloc::used_bytes(),
            shutdown_save: AtomicU8::new(ShutdownSave::Default as u8),
            shutdown_signal: Notify::new(),
        }
    }

    pub fn port(&self) -> u16 {
        self.port.load(Relaxed)
    }

    /// Bytes read from and written to clients since start (or RESETSTAT).
    pub fn total_net_bytes(&self) -> (u64, u64) {
        self.thread_stats.iter().fold((0, 0), |(i, o), t| {
            (
                i + t.net_input_bytes.load(Relaxed),
                o + t.net_output_bytes.load(Relaxed),
            )
        })
    }

    pub fn total_commands(&self) -> u64 {
        self.thread_stats
            .iter()
            .flat_map(|t| t.commands.iter())
            .map(|c| c.calls.load(Relaxed))
            .sum()
    }

    /// Stops command execution on every connection until `until_ms`.
    pub fn pause_until(&self, until_ms: u64) {
        self.paused_until_ms.fetch_max(until_ms, Relaxed);
    }

    /// Until when DEBUG SLEEP holds the server.
    pub fn debug_paused_until_ms(&self) -> u64 {
        self.paused_until_ms.load(Relaxed)
    }

    /// Until when every command waits: DEBUG SLEEP, or CLIENT PAUSE ALL.
    pub fn paused_until_ms(&self) -> u64 {
        let debug = self.paused_until_ms.load(Relaxed);
        match self.client_pause_writes_only.load(Relaxed) {
            true => debug,
            false => debug.max(self.client_pause_until_ms.load(Relaxed)),
        }
    }

    /// CLIENT PAUSE: commands wait until `until_ms`, only those that may
    /// write with `writes_only`. A pause during a pause lasts as long as
    /// the longer and covers all commands if either does (Redis 7).
    pub fn client_pause(&self, until_ms: u64, writes_only: bool, now_ms: u64) {
        let active = self.client_pause_until_ms.load(Relaxed) > now_ms;
        let writes_only = writes_only && (!active || self.client_pause_writes_only.load(Relaxed));
        // Sequentially consistent, as the checks in `writes_paused_until`
        // and `crate::write_gate`: a command either sees the pause or is
        // seen in the gate by whoever waits for it to end.
        self.client_pause_writes_only.store(writes_only, SeqCst);
        let until = self
            .client_pause_until_ms
            .fetch_max(until_ms, SeqCst)
            .max(until_ms);
        strata_engine::keyspace::shards::pause_expiry_until(until);
    }

    /// CLIENT UNPAUSE.
    pub fn client_unpause(&self) {
        self.client_pause_until_ms.store(0, Relaxed);
        self.client_pause_writes_only.store(false, Relaxed);
        strata_engine::keyspace::shards::pause_expiry_until(0);
        self.unpaused.notify_waiters();
    }

    /// Until when commands that may write wait, if a CLIENT PAUSE (WRITE
    /// or ALL) is on.
    pub fn writes_paused_until(&self, now_ms: u64) -> Option<u64> {
        let until = self.client_pause_until_ms.load(SeqCst);
        (until > now_ms).then_some(until)
    }

    /// Asks the server to exit, saving a final checkpoint as `save` says.
    pub fn request_shutdown(&self, save: ShutdownSave) {
        self.shutdown_save.store(save as u8, Relaxed);
        self.scripts.stopping.store(true, Relaxed);
        self.shutdown_signal.notify_one();
    }

    /// Completes when [`Server::request_shutdown`] is called.
    pub fn shutdown_notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.shutdown_signal.notified()
    }

    /// How the coming shutdown saves.
    pub fn shutdown_save(&self) -> ShutdownSave {
        match self.shutdown_save.load(Relaxed) {
            x if x == ShutdownSave::Save as u8 => ShutdownSave::Save,
            x if x == ShutdownSave::NoSave as u8 => ShutdownSave::NoSave,
            _ => ShutdownSave::Default,
        }
    }

    /// Changes to the dataset since start (rdb_changes_since_last_save
    /// counts from the last checkpoint).
    pub fn total_changes(&self) -> u64 {
        self.persistence.total_changes()
    }
}

/// Whether a shutdown writes a final checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ShutdownSave {
    /// SHUTDOWN without SAVE/NOSAVE, SIGTERM, SIGINT: as Redis, save when
    /// save points are configured; and always with the log on, where the
    /// checkpoint only compacts the log (nothing is lost without it).
    Default,
    /// SHUTDOWN SAVE: always.
    Save,
    /// SHUTDOWN NOSAVE: never.
    NoSave,
}

/// An accepted connection, registered as a client, on its way to a network
/// thread.
pub struct Admitted {
    pub stream: crate::net::socket::Accepted,
    pub client: Arc<crate::net::client::ClientInfo>,
    /// For a connection on `tls-port`: the TLS configuration to serve it.
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

/// One more in a counter for as long as it lives.
pub struct Counted<'a>(&'a AtomicUsize);

impl<'a> Counted<'a> {
    pub fn new(counter: &'a AtomicUsize) -> Counted<'a> {
        counter.fetch_add(1, Relaxed);
        Counted(counter)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}
