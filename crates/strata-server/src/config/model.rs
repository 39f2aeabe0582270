//! The configuration's value ([`Config`]) and the types of its settings:
//! a leaf that the directives table, CONFIG REWRITE and every reader of
//! the configuration use.

use std::path::PathBuf;

use crate::log::Level;
use strata_engine::storage::log::FsyncPolicy;

/// Output buffer limits of one client class (`client-output-buffer-limit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputLimit {
    pub hard_bytes: u64,
    pub soft_bytes: u64,
    pub soft_seconds: u64,
}

#[derive(Clone, Debug)]
pub struct Config {
    pub port: u16,
    pub bind: Vec<String>,
    pub dir: PathBuf,
    pub requirepass: String,
    pub databases: usize,
    pub maxclients: u64,
    pub timeout_s: u64,
    pub tcp_keepalive_s: u64,
    pub protected_mode: bool,
    pub loglevel: Level,
    pub logfile: String,
    pub output_limit_normal: OutputLimit,
    pub output_limit_replica: OutputLimit,
    pub output_limit_pubsub: OutputLimit,
    pub query_buffer_limit_bytes: u64,
    pub proto_max_bulk_len: u64,
    pub threads: usize,
    pub hz: u64,
    /// `busy-reply-threshold` (alias `lua-time-limit`): how long a script
    /// runs before other clients get -BUSY.
    pub busy_reply_threshold_ms: u64,
    /// Accepted for compatibility (Strata has no replicas yet).
    pub repl_ping_replica_period_s: u64,
    /// `notify-keyspace-events` as flags (`notify` module).
    pub notify_keyspace_events: u32,
    /// Keys remembered for client-side caching at most (0: no limit).
    pub tracking_table_max_keys: u64,
    /// Log every change (`appendonly`); off makes Strata a pure cache
    /// (checkpoints by SAVE or save points still work).
    pub appendonly: bool,
    pub appendfsync: FsyncPolicy,
    /// Save points: checkpoint after `seconds` if at least `changes`
    /// changes happened (redis.conf `save`).
    pub save_points: Vec<(u64, u64)>,
    /// Checkpoint (and so compact the log) when the log has grown by this
    /// percentage of the last checkpoint's size …
    pub auto_rewrite_percentage: u64,
    /// … and is at least this many bytes.
    pub auto_rewrite_min_bytes: u64,
    pub log_segment_bytes: u64,
    /// Write rate of background checkpoints, bytes per second (0: none).
    pub checkpoint_rate_bytes: u64,
    /// `cluster-migration-max-rate`: bytes per second a slot move copies
    /// at most (0: no limit).
    pub migration_rate_bytes: u64,
    /// Microseconds of delay per key loaded at start (Redis' testing knob
    /// `key-load-delay`).
    pub key_load_delay_us: u64,
    /// The config file given on the command line, if any (INFO server).
    pub config_file: Option<PathBuf>,
    /// RAM budget in bytes (0: none). docs/tiering.md.
    pub maxmemory: u64,
    pub maxmemory_policy: MaxmemoryPolicy,
    /// `lfu-log-factor` and `lfu-decay-time`: how the LFU policies count
    /// accesses (`strata_engine::keyspace::access`).
    pub lfu_log_factor: u32,
    pub lfu_decay_time: u32,
    /// Entries sampled per eviction step.
    pub maxmemory_samples: usize,
    /// Disk budget for the data directory in bytes (0: none).
    pub maxdisk: u64,
    /// Threads reading cold values when io_uring is off or unavailable.
    pub tiering_io_threads: usize,
    /// Read cold values through io_uring (falls back to threads).
    pub tiering_io_uring: bool,
    /// Write log segments with O_DIRECT where the file system allows it.
    pub log_direct_io: bool,
    /// Commands slower than this many microseconds go to the slow log
    /// (0: all; negative: none).
    pub slowlog_log_slower_than: i64,
    /// Entries the slow log keeps.
    pub slowlog_max_len: u64,
    /// Detach from the terminal at start (`daemonize yes`).
    pub daemonize: bool,
    /// The TLS listener's settings (`tls.rs`).
    pub tls: crate::net::tls::TlsSettings,
    /// `metrics-port`: Prometheus metrics over HTTP on the `bind`
    /// addresses (`metrics.rs`); 0: off.
    pub metrics_port: u16,
    /// `metrics-bind`: the addresses the metrics endpoint listens on
    /// (loopback by default, whatever `bind` says: INFO's figures are not
    /// for every network the server is reachable from).
    pub metrics_bind: Vec<String>,
    /// `latency-monitor-threshold`: events at least this many ms long go
    /// to the latency monitor (LATENCY); 0: off.
    pub latency_monitor_threshold: u64,
    /// `latency-tracking`: per-command latency histograms (LATENCY
    /// HISTOGRAM, INFO latencystats, metrics).
    pub latency_tracking: bool,
    /// `latency-tracking-info-percentiles`: INFO latencystats' percentiles.
    pub latency_tracking_info_percentiles: Vec<f64>,
    /// `unixsocket`: also listen on this unix socket ("": no);
    /// `unixsocketperm`: its file's mode (0: as the umask makes it).
    pub unixsocket: String,
    pub unixsocketperm: u32,
    /// `supervised`: `no`, `upstart`, `systemd` or `auto` (`supervise.rs`).
    pub supervised: String,
    /// Who may run DEBUG (`enable-debug-command`): `no` (Redis 7's
    /// default), `yes`, or `local` (loopback clients).
    pub enable_debug_command: Gate,
    /// Where the process id is written at start and removed at exit.
    pub pidfile: String,
    /// The listening sockets' accept queue.
    pub tcp_backlog: u32,
    /// `rename-command old new` lines, in order (`new` empty: disabled).
    pub rename_commands: Vec<(String, String)>,
    /// `maxmemory-clients`: what all clients' buffers may hold together.
    pub maxmemory_clients: ClientsLimit,
    /// `user <name> rules…` lines, in order (`crate::acl`).
    pub users: Vec<Vec<String>>,
    pub aclfile: String,
    /// `acl-pubsub-default allchannels`: new users may use every channel.
    pub acl_pubsub_allchannels: bool,
    pub acllog_max_len: u64,
    /// Values of the Redis directives Strata accepts without using them
    /// (`crate::config_accepted`), by name; unset ones show their default.
    pub accepted: std::collections::BTreeMap<&'static str, String>,
    /// Replication's settings among `accepted`, parsed.
    pub replication: ReplicationSettings,
    /// Cluster mode's settings among `accepted`, parsed.
    pub cluster: ClusterSettings,
    /// When a hash converts from packed to table (fields; bytes of a
    /// field or value).
    pub hash_max_listpack_entries: u64,
    pub hash_max_listpack_value: u64,
    /// When lists, sets and sorted sets change encoding (redis.conf's
    /// names); `list-compress-depth` is accepted and reported, but nodes
    /// are not compressed.
    pub collection_limits: strata_engine::types::limits::CollectionLimits,
    pub list_compress_depth: u64,
    /// Bytes past which a HyperLogLog leaves the sparse encoding.
    pub hll_sparse_max_bytes: u64,
    /// Where a stream's nodes end (entries; bytes, roughly): approximate
    /// trimming removes whole nodes. 0 is no limit.
    pub stream_node_max_entries: u64,
    pub stream_node_max_bytes: u64,
}

impl Config {
    /// The hash encoding limits for the engine.
    pub fn hash_limits(&self) -> strata_engine::types::hash::Limits {
        strata_engine::types::hash::Limits {
            max_packed_entries: self.hash_max_listpack_entries as usize,
            max_packed_value: self.hash_max_listpack_value as usize,
        }
    }
}

/// `maxmemory-policy`: `tiered` moves values to disk and keeps keys; the
/// others are Redis' and delete keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaxmemoryPolicy {
    Tiered,
    NoEviction,
    AllKeysLru,
    AllKeysLfu,
    AllKeysRandom,
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    VolatileTtl,
}

impl MaxmemoryPolicy {
    const ALL: [(MaxmemoryPolicy, &'static str); 9] = [
        (MaxmemoryPolicy::Tiered, "tiered"),
        (MaxmemoryPolicy::NoEviction, "noeviction"),
        (MaxmemoryPolicy::AllKeysLru, "allkeys-lru"),
        (MaxmemoryPolicy::AllKeysLfu, "allkeys-lfu"),
        (MaxmemoryPolicy::AllKeysRandom, "allkeys-random"),
        (MaxmemoryPolicy::VolatileLru, "volatile-lru"),
        (MaxmemoryPolicy::VolatileLfu, "volatile-lfu"),
        (MaxmemoryPolicy::VolatileRandom, "volatile-random"),
        (MaxmemoryPolicy::VolatileTtl, "volatile-ttl"),
    ];

    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(p, _)| *p == self)
            .map(|(_, n)| *n)
            .expect("every policy is listed")
    }

    pub fn parse(text: &str) -> Option<MaxmemoryPolicy> {
        Self::ALL
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(text))
            .map(|(p, _)| *p)
    }

    /// Whether keys count accesses rather than time them (`*-lfu`).
    pub fn is_lru(self) -> bool {
        matches!(
            self,
            MaxmemoryPolicy::AllKeysLru | MaxmemoryPolicy::VolatileLru
        )
    }

    pub fn is_lfu(self) -> bool {
        matches!(
            self,
            MaxmemoryPolicy::AllKeysLfu | MaxmemoryPolicy::VolatileLfu
        )
    }

    /// What eviction does under this policy (None: nothing, noeviction).
    pub fn eviction(self) -> Option<strata_engine::tiering::eviction::EvictionPolicy> {
        use strata_engine::tiering::eviction::{EvictionPolicy, KeyRank};
        let keys = |volatile_only, rank| {
            Some(EvictionPolicy::Keys {
                volatile_only,
                rank,
            })
        };
        match self {
            MaxmemoryPolicy::Tiered => Some(EvictionPolicy::Values),
            MaxmemoryPolicy::NoEviction => None,
            MaxmemoryPolicy::AllKeysLru => keys(false, KeyRank::Idle),
            MaxmemoryPolicy::AllKeysLfu => keys(false, KeyRank::Rare),
            MaxmemoryPolicy::AllKeysRandom => keys(false, KeyRank::Random),
            MaxmemoryPolicy::VolatileLru => keys(true, KeyRank::Idle),
            MaxmemoryPolicy::VolatileLfu => keys(true, KeyRank::Rare),
            MaxmemoryPolicy::VolatileRandom => keys(true, KeyRank::Random),
            MaxmemoryPolicy::VolatileTtl => keys(true, KeyRank::Ttl),
        }
    }
}

/// A percentile as Redis prints it: `50`, `99.9` (no trailing zeros).
pub fn format_percentile(p: f64) -> String {
    let text = format!("{p:.6}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// Who may run a protected command (`enable-debug-command`), as Redis 7
/// decides it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    No,
    Yes,
    /// Clients on a loopback address.
    Local,
}

impl Gate {
    pub fn name(self) -> &'static str {
        match self {
            Gate::No => "no",
            Gate::Yes => "yes",
            Gate::Local => "local",
        }
    }

    pub fn parse(text: &str) -> Option<Gate> {
        match text.to_ascii_lowercase().as_str() {
            "no" => Some(Gate::No),
            "yes" => Some(Gate::Yes),
            "local" => Some(Gate::Local),
            _ => None,
        }
    }

    /// Whether a client may pass (`local`: 127.0.0.1, ::1 or the unix
    /// socket, as Redis judges it).
    pub fn allows(self, local: bool) -> bool {
        match self {
            Gate::No => false,
            Gate::Yes => true,
            Gate::Local => local,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            port: 6379,
            bind: vec!["127.0.0.1".into(), "-::1".into()],
            dir: PathBuf::from("./data"),
            requirepass: String::new(),
            databases: 16,
            maxclients: 10_000,
            timeout_s: 0,
            tcp_keepalive_s: 300,
            protected_mode: true,
            loglevel: Level::Notice,
            logfile: String::new(),
            output_limit_normal: OutputLimit {
                hard_bytes: 0,
                soft_bytes: 0,
                soft_seconds: 0,
            },
            output_limit_replica: OutputLimit {
                hard_bytes: 256 << 20,
                soft_bytes: 64 << 20,
                soft_seconds: 60,
            },
            output_limit_pubsub: OutputLimit {
                hard_bytes: 32 << 20,
                soft_bytes: 8 << 20,
                soft_seconds: 60,
            },
            query_buffer_limit_bytes: 1 << 30,
            proto_max_bulk_len: 512 << 20,
            threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            hz: 10,
            repl_ping_replica_period_s: 10,
            busy_reply_threshold_ms: 5000,
            notify_keyspace_events: 0,
            tracking_table_max_keys: 1_000_000,
            appendonly: true,
            appendfsync: FsyncPolicy::EverySec,
            save_points: vec![(3600, 1), (300, 100), (60, 10_000)],
            auto_rewrite_percentage: 100,
            auto_rewrite_min_bytes: 64 << 20,
            log_segment_bytes: 64 << 20,
            checkpoint_rate_bytes: 256 << 20,
            migration_rate_bytes: 0,
            key_load_delay_us: 0,
            config_file: None,
            maxmemory: 0,
            // Redis' default, which queue libraries (BullMQ, Sidekiq, RQ)
            // check for; `tiered` is one setting away.
            maxmemory_policy: MaxmemoryPolicy::NoEviction,
            enable_debug_command: Gate::No,
            supervised: "no".into(),
            unixsocket: String::new(),
            unixsocketperm: 0,
            latency_monitor_threshold: 0,
            metrics_port: 0,
            metrics_bind: vec!["127.0.0.1".into(), "-::1".into()],
            tls: crate::net::tls::TlsSettings::default(),
            latency_tracking: true,
            latency_tracking_info_percentiles: vec![50.0, 99.0, 99.9],
            lfu_log_factor: 10,
            lfu_decay_time: 1,
            maxmemory_samples: 5,
            // Redis 7's default (its redis.conf and its built-in value).
            hash_max_listpack_entries: 512,
            hash_max_listpack_value: 64,
            collection_limits: Default::default(),
            list_compress_depth: 0,
            hll_sparse_max_bytes: 3000,
            stream_node_max_entries: 100,
            stream_node_max_bytes: 4096,
            maxdisk: 0,
            tiering_io_threads: 32,
            tiering_io_uring: true,
            log_direct_io: true,
            slowlog_log_slower_than: 10_000,
            slowlog_max_len: 128,
            daemonize: false,
            pidfile: String::new(),
            tcp_backlog: 511,
            accepted: Default::default(),
            replication: Default::default(),
            cluster: Default::default(),
            rename_commands: Vec::new(),
            users: Vec::new(),
            maxmemory_clients: ClientsLimit::Bytes(0),
            aclfile: String::new(),
            acl_pubsub_allchannels: false,
            acllog_max_len: 128,
        }
    }
}

/// `maxmemory-clients`: bytes, or a percentage of `maxmemory`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientsLimit {
    Bytes(u64),
    Percent(u64),
}

/// The replication settings dispatch reads on every command, parsed once
/// when one of them is set (they live among the accepted directives,
/// whose values are text).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicationSettings {
    pub min_replicas_to_write: usize,
    pub min_replicas_max_lag_s: u64,
    pub serve_stale_data: bool,
    /// `replica-read-only`.
    pub read_only: bool,
}

impl Default for ReplicationSettings {
    fn default() -> Self {
        ReplicationSettings {
            min_replicas_to_write: 0,
            min_replicas_max_lag_s: 10,
            serve_stale_data: true,
            read_only: true,
        }
    }
}

impl ReplicationSettings {
    pub(super) fn of(config: &Config) -> Self {
        ReplicationSettings {
            min_replicas_to_write: config.setting("min-replicas-to-write").parse().unwrap_or(0),
            min_replicas_max_lag_s: config.setting("min-replicas-max-lag").parse().unwrap_or(10),
            serve_stale_data: config.setting("replica-serve-stale-data") != "no",
            read_only: config.setting("replica-read-only") != "no",
        }
    }
}

/// The `cluster-*` directives cluster mode reads (`crate::cluster`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterSettings {
    pub enabled: bool,
    /// `cluster-config-file`, relative to `dir` unless absolute.
    pub config_file: String,
    pub require_full_coverage: bool,
    pub allow_reads_when_down: bool,
    pub allow_pubsubshard_when_down: bool,
    pub announce_ip: String,
    pub announce_hostname: String,
    /// 0: the server's own port.
    pub announce_port: u16,
    /// 0: `cluster-port`, else the port plus 10 000.
    pub announce_bus_port: u16,
    pub bus_port: u16,
    /// `cluster-preferred-endpoint-type`: `ip`, `hostname` or
    /// `unknown-endpoint`.
    pub preferred_endpoint: String,
    /// `cluster-node-timeout`.
    pub node_timeout_ms: u64,
}

impl Default for ClusterSettings {
    fn default() -> Self {
        ClusterSettings {
            enabled: false,
            config_file: "nodes.conf".into(),
            require_full_coverage: true,
            allow_reads_when_down: false,
            allow_pubsubshard_when_down: true,
            announce_ip: String::new(),
            announce_hostname: String::new(),
            announce_port: 0,
            announce_bus_port: 0,
            bus_port: 0,
            preferred_endpoint: "ip".into(),
            node_timeout_ms: 2000,
        }
    }
}

impl ClusterSettings {
    pub(super) fn of(config: &Config) -> Self {
        let yes = |name: &str| config.setting(name) == "yes";
        let port = |name: &str| config.setting(name).parse().unwrap_or(0);
        ClusterSettings {
            enabled: yes("cluster-enabled"),
            config_file: config.setting("cluster-config-file"),
            require_full_coverage: yes("cluster-require-full-coverage"),
            allow_reads_when_down: yes("cluster-allow-reads-when-down"),
            allow_pubsubshard_when_down: yes("cluster-allow-pubsubshard-when-down"),
            announce_ip: config.setting("cluster-announce-ip"),
            announce_hostname: config.setting("cluster-announce-hostname"),
            announce_port: port("cluster-announce-port"),
            announce_bus_port: port("cluster-announce-bus-port"),
            bus_port: port("cluster-port"),
            preferred_endpoint: config.setting("cluster-preferred-endpoint-type"),
            node_timeout_ms: config
                .setting("cluster-node-timeout")
                .parse()
                .unwrap_or(2000),
        }
    }
}
