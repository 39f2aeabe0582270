//! The one table of options ([`DIRECTIVES`]): each directive's name,
//! whether CONFIG SET may change it, how it prints and how it parses, with
//! the value parsers they share.

use super::model::*;
use std::path::PathBuf;

use crate::log::Level;
use strata_engine::storage::log::FsyncPolicy;

type Setter = fn(&mut Config, &[String]) -> Result<(), String>;

/// One configuration option.
pub struct Directive {
    pub name: &'static str,
    pub mutable: bool,
    pub get: fn(&Config) -> String,
    pub(super) set: Setter,
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

/// A collection encoding threshold (`strata_engine::types::limits`): a count or
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
pub(crate) const PROTO_MAX_BULK_LEN_MAX: u64 = (strata_engine::storage::record::RECORD_BYTES_MAX
    - strata_engine::storage::record::HEADER_BYTES)
    as u64
    / 2;

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
        mutable: true,
        get: |c| c.port.to_string(),
        set: |c, a| {
            c.port = parse_int(a, 0, 65535)? as u16;
            Ok(())
        },
    },
    Directive {
        name: "bind",
        mutable: true,
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
    // Settable at runtime only where the log runs (a server started with
    // `appendonly yes`): `no` then stops promising it, the log goes on
    // (commands::server::config_set says why).
    yes_no_directive!("appendonly", true, appendonly),
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
            c.tls.auth_clients = crate::net::tls::ClientAuth::parse(one(a)?).ok_or_else(|| {
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
        name: "metrics-bind",
        mutable: false,
        get: |c| c.metrics_bind.join(" "),
        set: |c, a| {
            let list = words(a);
            if list.is_empty() {
                return Err("wrong number of arguments".into());
            }
            c.metrics_bind = list;
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
    // ACL (acl/): the users' file, what new users get for channels, and
    // how many denials ACL LOG keeps. `user` lines are `Config::users`.
    Directive {
        name: "aclfile",
        mutable: false,
        get: |c| c.aclfile.clone(),
        set: |c, a| {
            c.aclfile = one(a)?.to_owned();
            Ok(())
        },
    },
    Directive {
        name: "acl-pubsub-default",
        mutable: true,
        get: |c| {
            if c.acl_pubsub_allchannels {
                "allchannels"
            } else {
                "resetchannels"
            }
            .into()
        },
        set: |c, a| {
            c.acl_pubsub_allchannels = match one(a)?.to_ascii_lowercase().as_str() {
                "allchannels" => true,
                "resetchannels" => false,
                _ => {
                    return Err(
                        "argument(s) must be one of the following: allchannels, resetchannels"
                            .into(),
                    );
                }
            };
            Ok(())
        },
    },
    Directive {
        name: "acllog-max-len",
        mutable: true,
        get: |c| c.acllog_max_len.to_string(),
        set: |c, a| {
            c.acllog_max_len = parse_int(a, 0, i64::MAX as u64)?;
            Ok(())
        },
    },
    // Client eviction (`crate::net::client_eviction`).
    Directive {
        name: "maxmemory-clients",
        mutable: true,
        get: |c| match c.maxmemory_clients {
            ClientsLimit::Bytes(bytes) => bytes.to_string(),
            ClientsLimit::Percent(percent) => format!("{percent}%"),
        },
        set: |c, a| {
            let value = one(a)?;
            let bad = || "argument must be a memory or percent value".to_string();
            c.maxmemory_clients = match value.strip_suffix('%') {
                Some(percent) => match percent.parse::<u64>() {
                    Ok(p) if p <= 100 => ClientsLimit::Percent(p),
                    Ok(_) => return Err("percentage argument must be less or equal to 100".into()),
                    Err(_) => return Err(bad()),
                },
                None => ClientsLimit::Bytes(parse_memory(value).ok_or_else(bad)?),
            };
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
    // How fast CLUSTER MIGRATION copies slots (docs/cluster.md).
    Directive {
        name: "cluster-migration-max-rate",
        mutable: true,
        get: |c| c.migration_rate_bytes.to_string(),
        set: |c, a| {
            c.migration_rate_bytes = parse_memory_arg(a, 0, MEMORY_ARG_MAX)?;
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
        name: "stream-node-max-entries",
        mutable: true,
        get: |c| c.stream_node_max_entries.to_string(),
        set: |c, a| {
            c.stream_node_max_entries = parse_int(a, 0, i64::MAX as u64)?;
            Ok(())
        },
    },
    Directive {
        name: "stream-node-max-bytes",
        mutable: true,
        get: |c| c.stream_node_max_bytes.to_string(),
        set: |c, a| {
            c.stream_node_max_bytes = parse_memory_arg(a, 0, MEMORY_ARG_MAX)?;
            Ok(())
        },
    },
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
        get: |c| crate::events::notify::classes::flags_to_string(c.notify_keyspace_events),
        set: |c, a| {
            c.notify_keyspace_events = crate::events::notify::classes::parse_flags(one(a)?)
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
