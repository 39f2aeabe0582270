//! Configuration: redis.conf syntax and names.
//!
//! One [`DIRECTIVES`] table describes every option once — its name, whether
//! CONFIG SET may change it at run time, how to print it and how to parse
//! it. The config file, `--name value` command-line arguments, CONFIG GET
//! and CONFIG SET all go through that table, so they cannot disagree.
//!
//! Running connections read the configuration through [`SharedConfig`]: a
//! snapshot `Arc<Config>` plus a generation counter, so the hot path costs
//! one relaxed atomic load per batch and CONFIG SET never blocks a reader.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

use crate::log::Level;
use strata_engine::log::FsyncPolicy;

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
    /// Microseconds of delay per key loaded at start (Redis' testing knob
    /// `key-load-delay`).
    pub key_load_delay_us: u64,
    /// The config file given on the command line, if any (INFO server).
    pub config_file: Option<PathBuf>,
    /// RAM budget in bytes (0: none). docs/tiering.md.
    pub maxmemory: u64,
    pub maxmemory_policy: MaxmemoryPolicy,
    /// `lfu-log-factor` and `lfu-decay-time`: how the LFU policies count
    /// accesses (`strata_engine::access`).
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
    pub tls: crate::tls::TlsSettings,
    /// `metrics-port`: Prometheus metrics over HTTP on the `bind`
    /// addresses (`metrics.rs`); 0: off.
    pub metrics_port: u16,
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
    /// Values of the Redis directives Strata accepts without using them
    /// (`crate::config_accepted`), by name; unset ones show their default.
    pub accepted: std::collections::BTreeMap<&'static str, String>,
    /// When a hash converts from packed to table (fields; bytes of a
    /// field or value).
    pub hash_max_listpack_entries: u64,
    pub hash_max_listpack_value: u64,
    /// When lists, sets and sorted sets change encoding (redis.conf's
    /// names); `list-compress-depth` is accepted and reported, but nodes
    /// are not compressed.
    pub collection_limits: strata_engine::limits::CollectionLimits,
    pub list_compress_depth: u64,
    /// Bytes past which a HyperLogLog leaves the sparse encoding.
    pub hll_sparse_max_bytes: u64,
}

impl Config {
    /// The hash encoding limits for the engine.
    pub fn hash_limits(&self) -> strata_engine::hash::Limits {
        strata_engine::hash::Limits {
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
    pub fn is_lfu(self) -> bool {
        matches!(
            self,
            MaxmemoryPolicy::AllKeysLfu | MaxmemoryPolicy::VolatileLfu
        )
    }

    /// What eviction does under this policy (None: nothing, noeviction).
    pub fn eviction(self) -> Option<strata_engine::eviction::EvictionPolicy> {
        use strata_engine::eviction::{EvictionPolicy, KeyRank};
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
            key_load_delay_us: 0,
            config_file: None,
            maxmemory: 0,
            maxmemory_policy: MaxmemoryPolicy::Tiered,
            enable_debug_command: Gate::No,
            supervised: "no".into(),
            unixsocket: String::new(),
            unixsocketperm: 0,
            latency_monitor_threshold: 0,
            metrics_port: 0,
            tls: crate::tls::TlsSettings::default(),
            latency_tracking: true,
            latency_tracking_info_percentiles: vec![50.0, 99.0, 99.9],
            lfu_log_factor: 10,
            lfu_decay_time: 1,
            maxmemory_samples: 5,
            hash_max_listpack_entries: 128,
            hash_max_listpack_value: 64,
            collection_limits: Default::default(),
            list_compress_depth: 0,
            hll_sparse_max_bytes: 3000,
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
            rename_commands: Vec::new(),
        }
    }
}

type Setter = fn(&mut Config, &[String]) -> Result<(), String>;

/// One configuration option.
pub struct Directive {
    pub name: &'static str,
    pub mutable: bool,
    pub get: fn(&Config) -> String,
    set: Setter,
}

fn one(args: &[String]) -> Result<&str, String> {
    match args {
        [value] => Ok(value),
        _ => Err("wrong number of arguments".into()),
    }
}

fn parse_int(args: &[String], min: u64, max: u64) -> Result<u64, String> {
    let value: i64 = one(args)?
        .parse()
        .map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
    if value < min as i64 || value as u64 > max {
        return Err(format!(
            "argument must be between {min} and {max} inclusive"
        ));
    }
    Ok(value as u64)
}

fn parse_signed(args: &[String], min: i64, max: i64) -> Result<i64, String> {
    let value: i64 = one(args)?
        .parse()
        .map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
    if value < min || value > max {
        return Err(format!(
            "argument must be between {min} and {max} inclusive"
        ));
    }
    Ok(value)
}

fn parse_yes_no(args: &[String]) -> Result<bool, String> {
    match one(args)?.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err("argument must be 'yes' or 'no'".into()),
    }
}

/// Parses a redis.conf memory value: `1k` = 1000, `1kb` = 1024, likewise
/// m/mb and g/gb; a plain number is bytes.
pub fn parse_memory(text: &str) -> Option<u64> {
    let lower = text.to_ascii_lowercase();
    let units: [(&str, u64); 6] = [
        ("kb", 1024),
        ("mb", 1 << 20),
        ("gb", 1 << 30),
        ("k", 1000),
        ("m", 1_000_000),
        ("g", 1_000_000_000),
    ];
    let (digits, multiplier) = units
        .iter()
        .find_map(|(suffix, mult)| lower.strip_suffix(suffix).map(|d| (d, *mult)))
        .unwrap_or((lower.as_str(), 1));
    digits.parse::<u64>().ok()?.checked_mul(multiplier)
}

/// A memory argument within `min..=max`, with Redis' message otherwise.
fn parse_memory_arg(args: &[String], min: u64, max: u64) -> Result<u64, String> {
    let value =
        parse_memory(one(args)?).ok_or_else(|| "argument must be a memory value".to_string())?;
    if !(min..=max).contains(&value) {
        return Err(format!(
            "argument must be between {min} and {max} inclusive"
        ));
    }
    Ok(value)
}

/// A directive whose value is `yes` or `no`, kept in a `bool` field.
macro_rules! yes_no_directive {
    ($name:literal, $mutable:expr, $field:ident) => {
        Directive {
            name: $name,
            mutable: $mutable,
            get: |c| yes_no(c.$field),
            set: |c, a| {
                c.$field = parse_yes_no(a)?;
                Ok(())
            },
        }
    };
}

/// A collection encoding threshold (`strata_engine::limits`): a count or
/// size from 0 to LLONG_MAX.
macro_rules! collection_limit {
    ($name:literal, $field:ident) => {
        Directive {
            name: $name,
            mutable: true,
            get: |c| c.collection_limits.$field.to_string(),
            set: |c, a| {
                c.collection_limits.$field = parse_int(a, 0, i64::MAX as u64)? as usize;
                Ok(())
            },
        }
    };
}

/// Redis' upper bound of most memory settings (LLONG_MAX).
const MEMORY_ARG_MAX: u64 = i64::MAX as u64;

/// The largest `proto-max-bulk-len`: a key and a value of that size, and
/// the record header, still fit one log record (32-bit length). Redis
/// allows up to LLONG_MAX.
pub const PROTO_MAX_BULK_LEN_MAX: u64 =
    (strata_engine::record::RECORD_BYTES_MAX - strata_engine::record::HEADER_BYTES) as u64 / 2;

/// Splits single arguments holding several space-separated values, so
/// `--bind "127.0.0.1 ::1"` and `bind 127.0.0.1 ::1` mean the same.
fn words(args: &[String]) -> Vec<String> {
    args.iter()
        .flat_map(|a| a.split_whitespace().map(str::to_owned))
        .collect()
}

fn format_output_limits(c: &Config) -> String {
    let class = |name: &str, l: &OutputLimit| {
        format!(
            "{name} {} {} {}",
            l.hard_bytes, l.soft_bytes, l.soft_seconds
        )
    };
    [
        class("normal", &c.output_limit_normal),
        class("slave", &c.output_limit_replica),
        class("pubsub", &c.output_limit_pubsub),
    ]
    .join(" ")
}

fn set_output_limits(c: &mut Config, args: &[String]) -> Result<(), String> {
    let args = words(args);
    if args.is_empty() || !args.len().is_multiple_of(4) {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    let mut updated = c.clone();
    for group in args.chunks(4) {
        let memory = |s: &str| {
            parse_memory(s).ok_or_else(|| {
                "Error in hard, soft or soft_seconds setting in buffer limit configuration."
                    .to_string()
            })
        };
        let limit = OutputLimit {
            hard_bytes: memory(&group[1])?,
            soft_bytes: memory(&group[2])?,
            soft_seconds: group[3].parse().map_err(|_| {
                "Error in hard, soft or soft_seconds setting in buffer limit configuration."
                    .to_string()
            })?,
        };
        match group[0].to_ascii_lowercase().as_str() {
            "normal" => updated.output_limit_normal = limit,
            "slave" | "replica" => updated.output_limit_replica = limit,
            "pubsub" => updated.output_limit_pubsub = limit,
            _ => {
                return Err("Invalid client class specified in buffer limit configuration.".into());
            }
        }
    }
    *c = updated;
    Ok(())
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

pub static DIRECTIVES: &[Directive] = &[
    Directive {
        name: "port",
        mutable: false,
        get: |c| c.port.to_string(),
        set: |c, a| {
            c.port = parse_int(a, 0, 65535)? as u16;
            Ok(())
        },
    },
    Directive {
        name: "bind",
        mutable: false,
        get: |c| c.bind.join(" "),
        set: |c, a| {
            let list = words(a);
            if list.is_empty() {
                return Err("wrong number of arguments".into());
            }
            c.bind = list;
            Ok(())
        },
    },
    Directive {
        name: "dir",
        mutable: false,
        get: |c| c.dir.display().to_string(),
        set: |c, a| {
            c.dir = PathBuf::from(one(a)?);
            Ok(())
        },
    },
    Directive {
        name: "requirepass",
        mutable: true,
        get: |c| c.requirepass.clone(),
        set: |c, a| {
            c.requirepass = one(a)?.to_owned();
            Ok(())
        },
    },
    Directive {
        name: "databases",
        mutable: false,
        get: |c| c.databases.to_string(),
        set: |c, a| {
            c.databases = parse_int(a, 1, i32::MAX as u64)? as usize;
            Ok(())
        },
    },
    Directive {
        name: "maxclients",
        mutable: true,
        get: |c| c.maxclients.to_string(),
        set: |c, a| {
            c.maxclients = parse_int(a, 1, u32::MAX as u64)?;
            Ok(())
        },
    },
    Directive {
        name: "timeout",
        mutable: true,
        get: |c| c.timeout_s.to_string(),
        set: |c, a| {
            c.timeout_s = parse_int(a, 0, i32::MAX as u64)?;
            Ok(())
        },
    },
    Directive {
        name: "tcp-keepalive",
        mutable: true,
        get: |c| c.tcp_keepalive_s.to_string(),
        set: |c, a| {
            c.tcp_keepalive_s = parse_int(a, 0, i32::MAX as u64)?;
            Ok(())
        },
    },
    yes_no_directive!("protected-mode", true, protected_mode),
    Directive {
        name: "loglevel",
        mutable: true,
        get: |c| c.loglevel.name().into(),
        set: |c, a| {
            c.loglevel = Level::parse(one(a)?).ok_or_else(|| {
                "argument(s) must be one of the following: debug, verbose, notice, warning"
                    .to_string()
            })?;
            Ok(())
        },
    },
    Directive {
        name: "logfile",
        mutable: false,
        get: |c| c.logfile.clone(),
        set: |c, a| {
            c.logfile = one(a)?.to_owned();
            Ok(())
        },
    },
    Directive {
        name: "client-output-buffer-limit",
        mutable: true,
        get: format_output_limits,
        set: set_output_limits,
    },
    Directive {
        name: "client-query-buffer-limit",
        mutable: true,
        get: |c| c.query_buffer_limit_bytes.to_string(),
        set: |c, a| {
            c.query_buffer_limit_bytes = parse_memory_arg(a, 1 << 20, MEMORY_ARG_MAX)?;
            Ok(())
        },
    },
    Directive {
        name: "proto-max-bulk-len",
        mutable: true,
        get: |c| c.proto_max_bulk_len.to_string(),
        set: |c, a| {
            c.proto_max_bulk_len = parse_memory_arg(a, 1 << 20, PROTO_MAX_BULK_LEN_MAX)?;
            Ok(())
        },
    },
    Directive {
        name: "threads",
        mutable: false,
        get: |c| c.threads.to_string(),
        set: |c, a| {
            c.threads = parse_int(a, 1, 128)? as usize;
            Ok(())
        },
    },
    // Persistence (docs/storage.md). Turning the log on or off needs a
    // restart: the log must cover every change since the last checkpoint.
    yes_no_directive!("appendonly", false, appendonly),
    // The slow log (SLOWLOG).
    Directive {
        name: "slowlog-log-slower-than",
        mutable: true,
        get: |c| c.slowlog_log_slower_than.to_string(),
        set: |c, a| {
            c.slowlog_log_slower_than = parse_signed(a, -1, i64::MAX)?;
            Ok(())
        },
    },
    Directive {
        name: "slowlog-max-len",
        mutable: true,
        get: |c| c.slowlog_max_len.to_string(),
        set: |c, a| {
            c.slowlog_max_len = parse_int(a, 0, i64::MAX as u64)?;
            Ok(())
        },
    },
    // TLS (tls.rs): CONFIG SET of the files and options rebuilds the TLS
    // configuration for new connections (tls-port needs a restart).
    Directive {
        name: "tls-port",
        mutable: false,
        get: |c| c.tls.port.to_string(),
        set: |c, a| {
            c.tls.port = parse_int(a, 0, 65535)? as u16;
            Ok(())
        },
    },
    Directive {
        name: "tls-cert-file",
        mutable: true,
        get: |c| c.tls.cert_file.clone(),
        set: |c, a| {
            c.tls.cert_file = one(a)?.to_owned();
            Ok(())
        },
    },
    Directive {
        name: "tls-key-file",
        mutable: true,
        get: |c| c.tls.key_file.clone(),
        set: |c, a| {
            c.tls.key_file = one(a)?.to_owned();
            Ok(())
        },
    },
    Directive {
        name: "tls-key-file-pass",
        mutable: true,
        get: |c| c.tls.key_file_pass.clone(),
        set: |c, a| {
            c.tls.key_file_pass = one(a)?.to_owned();
            Ok(())
        },
    },
    Directive {
        name: "tls-ca-cert-file",
        mutable: true,
        get: |c| c.tls.ca_cert_file.clone(),
        set: |c, a| {
            c.tls.ca_cert_file = one(a)?.to_owned();
            Ok(())
        },
    },
    Directive {
        name: "tls-ca-cert-dir",
        mutable: true,
        get: |c| c.tls.ca_cert_dir.clone(),
        set: |c, a| {
            c.tls.ca_cert_dir = one(a)?.to_owned();
            Ok(())
        },
    },
    Directive {
        name: "tls-protocols",
        mutable: true,
        get: |c| c.tls.protocols.clone(),
        set: |c, a| {
            c.tls.protocols = one(a)?.to_owned();
            Ok(())
        },
    },
    Directive {
        name: "tls-ciphers",
        mutable: true,
        get: |c| c.tls.ciphers.clone(),
        set: |c, a| {
            c.tls.ciphers = one(a)?.to_owned();
            Ok(())
        },
    },
    Directive {
        name: "tls-ciphersuites",
        mutable: true,
        get: |c| c.tls.ciphersuites.clone(),
        set: |c, a| {
            c.tls.ciphersuites = one(a)?.to_owned();
            Ok(())
        },
    },
    Directive {
        name: "tls-auth-clients",
        mutable: true,
        get: |c| c.tls.auth_clients.name().into(),
        set: |c, a| {
            c.tls.auth_clients = crate::tls::ClientAuth::parse(one(a)?).ok_or_else(|| {
                "argument(s) must be one of the following: no, yes, optional".to_string()
            })?;
            Ok(())
        },
    },
    Directive {
        name: "tls-prefer-server-ciphers",
        mutable: true,
        get: |c| yes_no(c.tls.prefer_server_ciphers),
        set: |c, a| {
            c.tls.prefer_server_ciphers = parse_yes_no(a)?;
            Ok(())
        },
    },
    Directive {
        name: "tls-session-caching",
        mutable: true,
        get: |c| yes_no(c.tls.session_caching),
        set: |c, a| {
            c.tls.session_caching = parse_yes_no(a)?;
            Ok(())
        },
    },
    Directive {
        name: "tls-session-cache-size",
        mutable: true,
        get: |c| c.tls.session_cache_size.to_string(),
        set: |c, a| {
            c.tls.session_cache_size = parse_int(a, 0, i32::MAX as u64)? as usize;
            Ok(())
        },
    },
    Directive {
        name: "metrics-port",
        mutable: false,
        get: |c| c.metrics_port.to_string(),
        set: |c, a| {
            c.metrics_port = parse_int(a, 0, 65535)? as u16;
            Ok(())
        },
    },
    Directive {
        name: "latency-monitor-threshold",
        mutable: true,
        get: |c| c.latency_monitor_threshold.to_string(),
        set: |c, a| {
            c.latency_monitor_threshold = parse_int(a, 0, i64::MAX as u64)?;
            Ok(())
        },
    },
    yes_no_directive!("latency-tracking", true, latency_tracking),
    Directive {
        name: "latency-tracking-info-percentiles",
        mutable: true,
        get: |c| {
            c.latency_tracking_info_percentiles
                .iter()
                .map(|p| format_percentile(*p))
                .collect::<Vec<_>>()
                .join(" ")
        },
        set: |c, a| {
            let mut percentiles = Vec::new();
            for word in a.iter().flat_map(|w| w.split_whitespace()) {
                let p: f64 = word
                    .parse()
                    .ok()
                    .filter(|p: &f64| (0.0..=100.0).contains(p))
                    .ok_or("latency-tracking-info-percentiles should be a list of percentiles between 0 and 100")?;
                percentiles.push(p);
            }
            c.latency_tracking_info_percentiles = percentiles;
            Ok(())
        },
    },
    // Process set-up, as redis-server does it.
    yes_no_directive!("daemonize", false, daemonize),
    Directive {
        name: "unixsocket",
        mutable: false,
        get: |c| c.unixsocket.clone(),
        set: |c, a| {
            c.unixsocket = one(a)?.to_owned();
            Ok(())
        },
    },
    Directive {
        name: "unixsocketperm",
        mutable: false,
        get: |c| format!("{:o}", c.unixsocketperm),
        set: |c, a| {
            let text = one(a)?;
            c.unixsocketperm = u32::from_str_radix(text, 8)
                .ok()
                .filter(|mode| *mode <= 0o777)
                .ok_or("argument must be between 0 and 777 inclusive")?;
            Ok(())
        },
    },
    Directive {
        name: "supervised",
        mutable: false,
        get: |c| c.supervised.clone(),
        set: |c, a| {
            let value = one(a)?.to_ascii_lowercase();
            if !["no", "upstart", "systemd", "auto"].contains(&value.as_str()) {
                return Err(
                    "argument(s) must be one of the following: upstart, systemd, auto, no".into(),
                );
            }
            c.supervised = value;
            Ok(())
        },
    },
    Directive {
        name: "enable-debug-command",
        mutable: false,
        get: |c| c.enable_debug_command.name().into(),
        set: |c, a| {
            c.enable_debug_command = Gate::parse(one(a)?).ok_or_else(|| {
                "argument(s) must be one of the following: no, yes, local".to_string()
            })?;
            Ok(())
        },
    },
    Directive {
        name: "pidfile",
        mutable: false,
        get: |c| c.pidfile.clone(),
        set: |c, a| {
            c.pidfile = one(a)?.to_owned();
            Ok(())
        },
    },
    Directive {
        name: "tcp-backlog",
        mutable: false,
        get: |c| c.tcp_backlog.to_string(),
        set: |c, a| {
            c.tcp_backlog = parse_int(a, 0, i32::MAX as u64)? as u32;
            Ok(())
        },
    },
    Directive {
        name: "appendfsync",
        mutable: true,
        get: |c| c.appendfsync.name().into(),
        set: |c, a| {
            c.appendfsync = FsyncPolicy::parse(one(a)?).ok_or_else(|| {
                "argument(s) must be one of the following: everysec, always, no".to_string()
            })?;
            Ok(())
        },
    },
    Directive {
        name: "save",
        mutable: true,
        get: |c| {
            c.save_points
                .iter()
                .map(|(seconds, changes)| format!("{seconds} {changes}"))
                .collect::<Vec<_>>()
                .join(" ")
        },
        set: |c, a| {
            let words = words(a);
            if !words.len().is_multiple_of(2) {
                return Err("Invalid save parameters".into());
            }
            let mut points = Vec::new();
            for pair in words.chunks(2) {
                let seconds = pair[0].parse().map_err(|_| "Invalid save parameters")?;
                let changes = pair[1].parse().map_err(|_| "Invalid save parameters")?;
                points.push((seconds, changes));
            }
            c.save_points = points;
            Ok(())
        },
    },
    Directive {
        name: "auto-aof-rewrite-percentage",
        mutable: true,
        get: |c| c.auto_rewrite_percentage.to_string(),
        set: |c, a| {
            c.auto_rewrite_percentage = parse_int(a, 0, i64::MAX as u64)?;
            Ok(())
        },
    },
    Directive {
        name: "auto-aof-rewrite-min-size",
        mutable: true,
        get: |c| c.auto_rewrite_min_bytes.to_string(),
        set: |c, a| {
            c.auto_rewrite_min_bytes = parse_memory_arg(a, 0, MEMORY_ARG_MAX)?;
            Ok(())
        },
    },
    Directive {
        name: "log-segment-size",
        mutable: false,
        get: |c| c.log_segment_bytes.to_string(),
        set: |c, a| {
            // Locations of values in the log hold a 32-bit offset.
            c.log_segment_bytes = parse_memory_arg(a, 4096, u32::MAX as u64 / 2)?;
            Ok(())
        },
    },
    Directive {
        name: "key-load-delay",
        mutable: true,
        get: |c| c.key_load_delay_us.to_string(),
        set: |c, a| {
            c.key_load_delay_us = parse_int(a, 0, 1_000_000)?;
            Ok(())
        },
    },
    Directive {
        name: "checkpoint-max-rate",
        mutable: true,
        get: |c| c.checkpoint_rate_bytes.to_string(),
        set: |c, a| {
            c.checkpoint_rate_bytes = parse_memory_arg(a, 0, MEMORY_ARG_MAX)?;
            Ok(())
        },
    },
    // Tiering and eviction (docs/tiering.md).
    Directive {
        name: "maxmemory",
        mutable: true,
        get: |c| c.maxmemory.to_string(),
        set: |c, a| {
            c.maxmemory = parse_memory_arg(a, 0, u64::MAX)?;
            Ok(())
        },
    },
    Directive {
        name: "maxmemory-policy",
        mutable: true,
        get: |c| c.maxmemory_policy.name().into(),
        set: |c, a| {
            c.maxmemory_policy = MaxmemoryPolicy::parse(one(a)?).ok_or_else(|| {
                // Redis 7's list and order, then Strata's own policy.
                "argument(s) must be one of the following: volatile-lru, volatile-lfu, \
                 volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, \
                 noeviction, tiered"
                    .to_string()
            })?;
            Ok(())
        },
    },
    Directive {
        name: "lfu-log-factor",
        mutable: true,
        get: |c| c.lfu_log_factor.to_string(),
        set: |c, a| {
            c.lfu_log_factor = parse_int(a, 0, i32::MAX as u64)? as u32;
            Ok(())
        },
    },
    Directive {
        name: "lfu-decay-time",
        mutable: true,
        get: |c| c.lfu_decay_time.to_string(),
        set: |c, a| {
            c.lfu_decay_time = parse_int(a, 0, i32::MAX as u64)? as u32;
            Ok(())
        },
    },
    Directive {
        name: "maxmemory-samples",
        mutable: true,
        get: |c| c.maxmemory_samples.to_string(),
        set: |c, a| {
            c.maxmemory_samples = parse_int(a, 1, 64)? as usize;
            Ok(())
        },
    },
    // Collection encodings, under their redis.conf names and the old
    // `ziplist` names Redis 7 keeps as aliases.
    Directive {
        name: "hash-max-listpack-entries",
        mutable: true,
        get: |c| c.hash_max_listpack_entries.to_string(),
        set: set_hash_entries,
    },
    Directive {
        name: "hash-max-ziplist-entries",
        mutable: true,
        get: |c| c.hash_max_listpack_entries.to_string(),
        set: set_hash_entries,
    },
    Directive {
        name: "hash-max-listpack-value",
        mutable: true,
        get: |c| c.hash_max_listpack_value.to_string(),
        set: set_hash_value,
    },
    Directive {
        name: "hash-max-ziplist-value",
        mutable: true,
        get: |c| c.hash_max_listpack_value.to_string(),
        set: set_hash_value,
    },
    Directive {
        name: "list-max-listpack-size",
        mutable: true,
        get: |c| c.collection_limits.list_listpack_size.to_string(),
        set: set_list_listpack_size,
    },
    Directive {
        name: "list-max-ziplist-size",
        mutable: true,
        get: |c| c.collection_limits.list_listpack_size.to_string(),
        set: set_list_listpack_size,
    },
    Directive {
        name: "list-compress-depth",
        mutable: true,
        get: |c| c.list_compress_depth.to_string(),
        set: |c, a| {
            c.list_compress_depth = parse_int(a, 0, i32::MAX as u64)?;
            Ok(())
        },
    },
    collection_limit!("set-max-intset-entries", set_intset_entries),
    collection_limit!("set-max-listpack-entries", set_listpack_entries),
    collection_limit!("set-max-listpack-value", set_listpack_value),
    collection_limit!("zset-max-listpack-entries", zset_listpack_entries),
    collection_limit!("zset-max-ziplist-entries", zset_listpack_entries),
    collection_limit!("zset-max-listpack-value", zset_listpack_value),
    collection_limit!("zset-max-ziplist-value", zset_listpack_value),
    Directive {
        name: "hll-sparse-max-bytes",
        mutable: true,
        get: |c| c.hll_sparse_max_bytes.to_string(),
        set: |c, a| {
            c.hll_sparse_max_bytes = parse_int(a, 0, i64::MAX as u64)?;
            Ok(())
        },
    },
    Directive {
        name: "maxdisk",
        mutable: true,
        get: |c| c.maxdisk.to_string(),
        set: |c, a| {
            c.maxdisk = parse_memory_arg(a, 0, MEMORY_ARG_MAX)?;
            Ok(())
        },
    },
    yes_no_directive!("tiering-io-uring", false, tiering_io_uring),
    yes_no_directive!("log-direct-io", true, log_direct_io),
    Directive {
        name: "tiering-io-threads",
        mutable: false,
        get: |c| c.tiering_io_threads.to_string(),
        set: |c, a| {
            c.tiering_io_threads = parse_int(a, 1, 1024)? as usize;
            Ok(())
        },
    },
    Directive {
        name: "hz",
        mutable: true,
        get: |c| c.hz.to_string(),
        set: |c, a| {
            c.hz = parse_int(a, 1, 500)?;
            Ok(())
        },
    },
    Directive {
        name: "busy-reply-threshold",
        mutable: true,
        get: |c| c.busy_reply_threshold_ms.to_string(),
        set: set_busy_reply_threshold,
    },
    Directive {
        name: "lua-time-limit",
        mutable: true,
        get: |c| c.busy_reply_threshold_ms.to_string(),
        set: set_busy_reply_threshold,
    },
    Directive {
        name: "notify-keyspace-events",
        mutable: true,
        get: |c| crate::notify::flags_to_string(c.notify_keyspace_events),
        set: |c, a| {
            c.notify_keyspace_events = crate::notify::parse_flags(one(a)?)
                .ok_or("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")?;
            Ok(())
        },
    },
    Directive {
        name: "tracking-table-max-keys",
        mutable: true,
        get: |c| c.tracking_table_max_keys.to_string(),
        set: |c, a| {
            c.tracking_table_max_keys = parse_int(a, 0, i64::MAX as u64)?;
            Ok(())
        },
    },
    Directive {
        name: "repl-ping-replica-period",
        mutable: true,
        get: |c| c.repl_ping_replica_period_s.to_string(),
        set: |c, a| {
            c.repl_ping_replica_period_s = parse_int(a, 1, i32::MAX as u64)?;
            Ok(())
        },
    },
];

fn set_busy_reply_threshold(c: &mut Config, a: &[String]) -> Result<(), String> {
    c.busy_reply_threshold_ms = parse_int(a, 0, i64::MAX as u64)?;
    Ok(())
}

fn set_list_listpack_size(c: &mut Config, a: &[String]) -> Result<(), String> {
    c.collection_limits.list_listpack_size = parse_signed(a, i32::MIN as i64, i32::MAX as i64)?;
    Ok(())
}

fn set_hash_entries(c: &mut Config, a: &[String]) -> Result<(), String> {
    c.hash_max_listpack_entries = parse_int(a, 0, i64::MAX as u64)?;
    Ok(())
}

fn set_hash_value(c: &mut Config, a: &[String]) -> Result<(), String> {
    c.hash_max_listpack_value = parse_int(a, 0, i64::MAX as u64)?;
    Ok(())
}

pub fn directive(name: &str) -> Option<&'static Directive> {
    DIRECTIVES
        .iter()
        .find(|d| d.name.eq_ignore_ascii_case(name))
}

impl Config {
    /// Applies one option, as read from a file or the command line.
    pub fn apply(&mut self, name: &str, args: &[String]) -> Result<(), String> {
        if let Some(directive) = directive(name) {
            return (directive.set)(self, args);
        }
        if let Some(accepted) = crate::config_accepted::find(name) {
            return self.set_accepted(accepted, args);
        }
        if name.eq_ignore_ascii_case("rename-command") {
            let [old, new] = args else {
                return Err("wrong number of arguments".into());
            };
            self.rename_commands.push((old.clone(), new.clone()));
            return Ok(());
        }
        Err(match name.to_ascii_lowercase().as_str() {
            "user" => "ACL users are not supported yet: refusing to start without them",
            "loadmodule" => "modules are not supported",
            _ => "Bad directive or wrong number of arguments",
        }
        .into())
    }

    /// Sets a directive Strata accepts without using it (see
    /// `crate::config_accepted`).
    fn set_accepted(
        &mut self,
        accepted: &'static crate::config_accepted::Accepted,
        args: &[String],
    ) -> Result<(), String> {
        let value = accepted.parse(args)?;
        if let Some(why) = crate::config_accepted::refused(accepted.name, &value) {
            return Err(why.into());
        }
        self.accepted.insert(accepted.name, value);
        Ok(())
    }

    /// Hands the engine the settings it reads on every command: hash and
    /// collection encodings, and how keys record access (LRU or LFU).
    pub fn apply_to_engine(&self, keyspace: &strata_engine::Keyspace) {
        keyspace.hash_limits().set(self.hash_limits());
        strata_engine::limits::set(self.collection_limits);
        strata_engine::access::set_lfu(
            self.maxmemory_policy.is_lfu(),
            self.lfu_log_factor,
            self.lfu_decay_time,
        );
        strata_engine::latency::set_threshold_ms(self.latency_monitor_threshold);
    }

    /// The value of an accepted directive: as set, else Redis' default.
    pub fn accepted_value(&self, accepted: &crate::config_accepted::Accepted) -> String {
        self.accepted
            .get(accepted.name)
            .cloned()
            .unwrap_or_else(|| accepted.default.to_owned())
    }

    /// Builds the configuration from `strata-server [file] [--name value ...]`,
    /// as redis-server takes it.
    pub fn from_args(args: &[String]) -> Result<Config, String> {
        let mut config = Config::default();
        let mut rest = args;
        if let Some(first) = rest.first().filter(|a| !a.starts_with("--")) {
            let path = PathBuf::from(first);
            config.load_file(&path, 0)?;
            config.config_file = Some(std::fs::canonicalize(&path).unwrap_or(path));
            rest = &rest[1..];
        }
        let mut i = 0;
        while i < rest.len() {
            let Some(name) = rest[i].strip_prefix("--") else {
                return Err(format!(
                    "Unexpected argument '{}': options are written --name value",
                    rest[i]
                ));
            };
            let mut values = Vec::new();
            i += 1;
            while i < rest.len() && !rest[i].starts_with("--") {
                values.push(rest[i].clone());
                i += 1;
            }
            config
                .apply(name, &values)
                .map_err(|e| format!("--{name}: {e}"))?;
        }
        Ok(config)
    }

    fn load_file(&mut self, path: &PathBuf, depth: usize) -> Result<(), String> {
        const INCLUDE_DEPTH_MAX: usize = 16;
        if depth > INCLUDE_DEPTH_MAX {
            return Err("include nesting too deep".into());
        }
        let text = std::fs::read_to_string(path).map_err(|e| {
            format!(
                "Fatal error, can't open config file '{}': {e}",
                path.display()
            )
        })?;
        for (number, line) in text.lines().enumerate() {
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let fatal = |why: &str| {
                format!(
                    "\n*** FATAL CONFIG FILE ERROR ***\nReading the configuration file, at line {}\n>>> '{trimmed}'\n{why}",
                    number + 1
                )
            };
            let parts = strata_resp::split_args(trimmed.as_bytes())
                .ok_or_else(|| fatal("Unbalanced quotes in configuration line"))?;
            let parts: Vec<String> = parts
                .iter()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect();
            let (name, args) = parts.split_first().expect("non-empty line has a word");
            if name.eq_ignore_ascii_case("include") {
                let [file] = args else {
                    return Err(fatal("Bad directive or wrong number of arguments"));
                };
                self.load_file(&PathBuf::from(file), depth + 1)?;
                continue;
            }
            self.apply(name, args).map_err(|e| fatal(&e))?;
        }
        Ok(())
    }
}

/// `strata-server --help`: usage, then every option of [`DIRECTIVES`] and
/// `crate::config_accepted` with its default, from the tables themselves.
pub fn help() -> String {
    let defaults = Config::default();
    let mut text = String::from(
        "Usage: strata-server [/path/to/strata.conf] [--option value ...]\n\
         Options take redis.conf's names and syntax, in the file or as --name value,\n\
         e.g.: strata-server --port 7777 --dir ./data\n\n\
         Options (default; 'runtime' if CONFIG SET may change it):\n",
    );
    for directive in DIRECTIVES {
        let value = (directive.get)(&defaults);
        let runtime = if directive.mutable { ", runtime" } else { "" };
        text.push_str(&format!("  --{:<34} {value:?}{runtime}\n", directive.name));
    }
    text.push_str("\nAccepted from redis.conf without effect in Strata (start-up logs why):\n");
    for accepted in crate::config_accepted::ACCEPTED {
        let runtime = if accepted.mutable { ", runtime" } else { "" };
        text.push_str(&format!(
            "  --{:<34} {:?}{runtime}\n",
            accepted.name, accepted.default
        ));
    }
    text
}

/// The first words of a directive that takes several arguments on its
/// line, written unquoted by CONFIG REWRITE.
const MULTI_WORD: &[&str] = &[
    "bind",
    "save",
    "client-output-buffer-limit",
    "replicaof",
    "oom-score-adj-values",
    "latency-tracking-info-percentiles",
];

/// A value as a config file line writes it: quoted (with escapes) when it
/// is empty or holds spaces, quotes or control characters.
fn quoted(value: &str) -> String {
    let plain = !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\'' && b != b'\\');
    if plain {
        return value.to_owned();
    }
    let mut out = String::from("\"");
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One directive's line for CONFIG REWRITE.
fn config_line(name: &str, value: &str) -> String {
    if MULTI_WORD.contains(&name) && !value.is_empty() {
        format!("{name} {value}")
    } else {
        format!("{name} {}", quoted(value))
    }
}

/// Marks the lines CONFIG REWRITE adds at the end of the file.
const REWRITE_MARKER: &str = "# Generated by CONFIG REWRITE";

/// CONFIG REWRITE's new text for the config file `old`: its comments,
/// blank lines, `include`s and order kept; each directive's first line
/// set to the running value and its later lines (a second `save` …)
/// dropped; then every directive not in the file whose running value
/// differs from its default, after [`REWRITE_MARKER`] (written once). As
/// Redis does.
pub fn rewritten(old: &str, config: &Config) -> String {
    let defaults = Config::default();
    // (name, running value, default value) of every directive.
    let mut values: Vec<(&'static str, String, String)> = DIRECTIVES
        .iter()
        .map(|d| (d.name, (d.get)(config), (d.get)(&defaults)))
        .collect();
    values.extend(
        crate::config_accepted::ACCEPTED
            .iter()
            .map(|a| (a.name, config.accepted_value(a), a.default.to_owned())),
    );
    let canonical = |name: &str| -> Option<&'static str> {
        directive(name)
            .map(|d| d.name)
            .or_else(|| crate::config_accepted::find(name).map(|a| a.name))
    };
    let mut written = std::collections::HashSet::new();
    let mut out = String::new();
    // An earlier rewrite's marker stays where it is (and is not added
    // again), so rewriting twice changes nothing.
    let marked = old.lines().any(|line| line.trim() == REWRITE_MARKER);
    for line in old.lines() {
        let trimmed = line.trim();
        let first = trimmed.split_whitespace().next().unwrap_or("");
        let name = match canonical(first) {
            Some(name) if !trimmed.starts_with('#') => name,
            _ => {
                out.push_str(line);
                out.push('\n');
                continue;
            }
        };
        if written.insert(name) {
            let (_, value, _) = values.iter().find(|(n, _, _)| *n == name).expect("listed");
            out.push_str(&config_line(name, value));
            out.push('\n');
        }
    }
    let generated: Vec<String> = values
        .iter()
        .filter(|(name, value, default)| !written.contains(name) && value != default)
        .map(|(name, value, _)| config_line(name, value))
        .collect();
    if !generated.is_empty() {
        if !marked {
            if !out.is_empty() && !out.ends_with("\n\n") {
                out.push('\n');
            }
            out.push_str(REWRITE_MARKER);
            out.push('\n');
        }
        for line in generated {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

/// CONFIG REWRITE: replaces the config file with [`rewritten`]'s text,
/// through a temporary file in the same directory, synced and renamed over
/// it, so a crash leaves the old file or the new one.
pub fn rewrite_file(config: &Config) -> Result<(), String> {
    let Some(path) = &config.config_file else {
        return Err("The server is running without a config file".into());
    };
    let failed = |e: std::io::Error| format!("Rewriting config file: {e}");
    let old = std::fs::read_to_string(path).map_err(failed)?;
    let text = rewritten(&old, config);
    let temp = path.with_extension("rewrite.tmp");
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temp, path)?;
        if let Some(dir) = path.parent() {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        failed(e)
    })
}

/// The live configuration shared by all threads.
pub struct SharedConfig {
    current: RwLock<Arc<Config>>,
    generation: AtomicU64,
}

impl SharedConfig {
    pub fn new(config: Config) -> Self {
        SharedConfig {
            current: RwLock::new(Arc::new(config)),
            generation: AtomicU64::new(0),
        }
    }

    pub fn get(&self) -> Arc<Config> {
        self.current.read().clone()
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// CONFIG SET without a check (tests).
    #[cfg(test)]
    pub fn set_many(&self, pairs: &[(String, String)]) -> Result<(), String> {
        self.set_many_checked(pairs, |_, _| Ok(()))
    }

    /// CONFIG SET: applies every (name, value) pair or none of them, with
    /// `check(old, new)` run on the result before it replaces the running
    /// configuration: its error leaves everything as it was (TLS files
    /// that do not load, say).
    pub fn set_many_checked(
        &self,
        pairs: &[(String, String)],
        check: impl FnOnce(&Config, &Config) -> Result<(), String>,
    ) -> Result<(), String> {
        let mut current = self.current.write();
        let mut updated = (**current).clone();
        for (name, value) in pairs {
            let failed = |e: String| {
                format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {e}")
            };
            let Some(directive) = directive(name) else {
                let Some(accepted) = crate::config_accepted::find(name) else {
                    return Err(format!(
                        "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
                    ));
                };
                if !accepted.mutable {
                    return Err(failed("can't set immutable config".into()));
                }
                updated
                    .set_accepted(accepted, std::slice::from_ref(value))
                    .map_err(failed)?;
                continue;
            };
            if !directive.mutable {
                return Err(format!(
                    "ERR CONFIG SET failed (possibly related to argument '{name}') - can't set immutable config"
                ));
            }
            (directive.set)(&mut updated, std::slice::from_ref(value)).map_err(|e| {
                format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {e}")
            })?;
        }
        check(&current, &updated)?;
        crate::log::set_level(updated.loglevel);
        *current = Arc::new(updated);
        self.generation.fetch_add(1, Ordering::Release);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn memory_units_follow_redis_conf() {
        assert_eq!(parse_memory("1k"), Some(1000));
        assert_eq!(parse_memory("1KB"), Some(1024));
        assert_eq!(parse_memory("2mb"), Some(2 << 20));
        assert_eq!(parse_memory("1g"), Some(1_000_000_000));
        assert_eq!(parse_memory("12"), Some(12));
        assert_eq!(parse_memory("x"), None);
    }

    #[test]
    fn command_line_like_redis_server() {
        let c = Config::from_args(&strings(&[
            "--port",
            "7000",
            "--bind",
            "0.0.0.0",
            "::",
            "--client-output-buffer-limit",
            "normal 1mb 512kb 10",
        ]))
        .unwrap();
        assert_eq!(c.port, 7000);
        assert_eq!(c.bind, vec!["0.0.0.0", "::"]);
        assert_eq!(
            c.output_limit_normal,
            OutputLimit {
                hard_bytes: 1 << 20,
                soft_bytes: 512 << 10,
                soft_seconds: 10
            }
        );
        assert!(Config::from_args(&strings(&["--nosuch", "1"])).is_err());
        assert!(Config::from_args(&strings(&["--port", "70000"])).is_err());
    }

    #[test]
    fn config_file_with_quotes_and_include() {
        let dir = std::env::temp_dir().join(format!("strata-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let included = dir.join("inc.conf");
        std::fs::write(&included, "maxclients 77\n").unwrap();
        let main = dir.join("main.conf");
        std::fs::write(
            &main,
            format!(
                "# comment\nrequirepass \"p a ss\"\ninclude {}\nprotected-mode no\n",
                included.display()
            ),
        )
        .unwrap();
        let c = Config::from_args(&strings(&[main.to_str().unwrap(), "--port", "1234"])).unwrap();
        assert_eq!(
            (
                c.requirepass.as_str(),
                c.maxclients,
                c.protected_mode,
                c.port
            ),
            ("p a ss", 77, false, 1234)
        );
        std::fs::write(&main, "port abc\n").unwrap();
        let err = Config::from_args(&strings(&[main.to_str().unwrap()])).unwrap_err();
        assert!(
            err.contains("at line 1") && err.contains("parsed into an integer"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn persistence_settings() {
        let c = Config::default();
        assert!(c.appendonly);
        assert_eq!(c.appendfsync, FsyncPolicy::EverySec);
        assert_eq!(
            (directive("save").unwrap().get)(&c),
            "3600 1 300 100 60 10000"
        );
        let c = Config::from_args(&strings(&[
            "--appendonly",
            "no",
            "--save",
            "",
            "--appendfsync",
            "always",
        ]))
        .unwrap();
        assert_eq!(
            (
                (directive("appendonly").unwrap().get)(&c),
                (directive("save").unwrap().get)(&c),
                c.appendfsync
            ),
            ("no".into(), String::new(), FsyncPolicy::Always)
        );
        let c = Config::from_args(&strings(&["--save", "900 1 60 5"])).unwrap();
        assert_eq!(c.save_points, vec![(900, 1), (60, 5)]);
        assert!(Config::from_args(&strings(&["--save", "900"])).is_err());
        assert!(Config::from_args(&strings(&["--appendfsync", "sometimes"])).is_err());
    }

    #[test]
    fn config_set_is_all_or_nothing() {
        let shared = SharedConfig::new(Config::default());
        let err = shared
            .set_many(&[
                ("maxclients".into(), "5".into()),
                ("port".into(), "1".into()),
            ])
            .unwrap_err();
        assert!(err.contains("immutable"), "{err}");
        assert_eq!(shared.get().maxclients, 10_000);
        shared
            .set_many(&[("maxclients".into(), "5".into())])
            .unwrap();
        assert_eq!((shared.get().maxclients, shared.generation()), (5, 1));
    }
}
