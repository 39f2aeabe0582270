//! Configuration: redis.conf syntax and names.
//!
//! One [`DIRECTIVES`] table describes every option once — its name, whether
//! CONFIG SET may change it at run time, how to print it and how to parse
//! it. The config file, `--name value` command-line arguments, CONFIG GET
//! and CONFIG SET all go through that table, so they cannot disagree.
//!
//! The table and its parsers are in `directives.rs`; CONFIG REWRITE is in
//! `rewrite.rs`.
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

mod directives;
mod meanings;
mod rewrite;

pub use directives::{DIRECTIVES, directive, parse_memory};
pub use rewrite::rewrite_file;

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
            metrics_bind: vec!["127.0.0.1".into(), "-::1".into()],
            tls: crate::tls::TlsSettings::default(),
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

impl Config {
    /// What all clients' buffers may hold together (0: no limit).
    pub fn clients_limit_bytes(&self) -> u64 {
        match self.maxmemory_clients {
            ClientsLimit::Bytes(bytes) => bytes,
            ClientsLimit::Percent(percent) => self.maxmemory.saturating_mul(percent) / 100,
        }
    }

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
        if name.eq_ignore_ascii_case("user") {
            if args.is_empty() {
                return Err("wrong number of arguments".into());
            }
            if self.users.iter().any(|line| line[0] == args[0]) {
                return Err(
                    "Duplicate user found. A user can only be defined once in config files".into(),
                );
            }
            self.users.push(args.to_vec());
            return Ok(());
        }
        Err(match name.to_ascii_lowercase().as_str() {
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
        text.push_str(&format!("      {}\n", meanings::meaning(directive.name)));
    }
    text.push_str(
        "  user <name> <rules...>               (none)\n      an ACL user, as in redis.conf (repeatable)\n",
    );
    text.push_str("\nAccepted from redis.conf without effect in Strata:\n");
    for accepted in crate::config_accepted::ACCEPTED {
        let runtime = if accepted.mutable { ", runtime" } else { "" };
        text.push_str(&format!(
            "  --{:<34} {:?}{runtime}\n      {}\n",
            accepted.name,
            accepted.default,
            crate::config_accepted::note(accepted.name)
        ));
    }
    text
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
