//! Redis 7 directives Strata accepts without having a use for them.
//!
//! An operator moving from Redis brings a redis.conf: Debian's stock one
//! sets 71 directives, most of them about RDB files, AOF rewrites,
//! replication or the allocator, which Strata does not have. Each one of
//! Redis 7's directives that has no setting of its own in
//! `crate::config::DIRECTIVES` is listed here with its alias, whether
//! CONFIG SET may change it, the kind of value it takes and its Redis
//! default, so that:
//!
//! - a config file or `--name value` with it starts the server, the value
//!   checked as Redis checks it, and start-up logs one warning line per
//!   directive set, saying why it has no effect ([`note`]);
//! - CONFIG GET shows it (the value set, else Redis' default) and CONFIG
//!   SET changes it where Redis allows, answering Redis' errors otherwise;
//! - a value that asks for something Strata cannot do and that would be
//!   unsafe to ignore (a replica address without a port) stops
//!   start-up with the reason
//!   ([`refused`]) rather than run without it.
//!
//! `include`, `rename-command` and `user` lines are `crate::config`'s own.

use crate::config::parse_memory;

/// The values a directive takes.
pub enum Kind {
    /// `yes` or `no`.
    Bool,
    /// An integer in the range.
    Int(i64, i64),
    /// A memory value (`1mb`, `64k`, bytes) in the range; shown in bytes.
    Memory(i64, i64),
    /// One of these words.
    Enum(&'static [&'static str]),
    /// Any text (several words are kept as given).
    Text,
}

/// One directive Strata accepts and does not use.
pub struct Accepted {
    pub name: &'static str,
    /// Redis' older name (`slave-…` and the like).
    pub alias: Option<&'static str>,
    /// CONFIG SET may change it (as in Redis).
    pub mutable: bool,
    pub kind: Kind,
    /// Redis 7's default, as CONFIG GET shows it.
    pub default: &'static str,
}

const fn accepted(
    name: &'static str,
    alias: Option<&'static str>,
    mutable: bool,
    kind: Kind,
    default: &'static str,
) -> Accepted {
    Accepted {
        name,
        alias,
        mutable,
        kind,
        default,
    }
}

pub static ACCEPTED: &[Accepted] = &[
    accepted("rdbchecksum", None, false, Kind::Bool, "yes"),
    accepted("io-threads-do-reads", None, false, Kind::Bool, "no"),
    accepted("always-show-logo", None, false, Kind::Bool, "no"),
    accepted("rdbcompression", None, true, Kind::Bool, "yes"),
    accepted("rdb-del-sync-files", None, true, Kind::Bool, "no"),
    accepted("activerehashing", None, true, Kind::Bool, "yes"),
    accepted("stop-writes-on-bgsave-error", None, true, Kind::Bool, "yes"),
    accepted("set-proc-title", None, false, Kind::Bool, "yes"),
    accepted("dynamic-hz", None, true, Kind::Bool, "yes"),
    accepted("lazyfree-lazy-eviction", None, true, Kind::Bool, "no"),
    accepted("lazyfree-lazy-expire", None, true, Kind::Bool, "no"),
    accepted("lazyfree-lazy-server-del", None, true, Kind::Bool, "no"),
    accepted("lazyfree-lazy-user-del", None, true, Kind::Bool, "no"),
    accepted("lazyfree-lazy-user-flush", None, true, Kind::Bool, "no"),
    accepted("repl-disable-tcp-nodelay", None, true, Kind::Bool, "no"),
    accepted("repl-diskless-sync", None, true, Kind::Bool, "yes"),
    accepted(
        "aof-rewrite-incremental-fsync",
        None,
        true,
        Kind::Bool,
        "yes",
    ),
    accepted("no-appendfsync-on-rewrite", None, true, Kind::Bool, "no"),
    accepted(
        "cluster-require-full-coverage",
        None,
        true,
        Kind::Bool,
        "yes",
    ),
    accepted("rdb-save-incremental-fsync", None, true, Kind::Bool, "yes"),
    accepted("aof-load-truncated", None, true, Kind::Bool, "yes"),
    accepted("aof-use-rdb-preamble", None, true, Kind::Bool, "yes"),
    accepted("aof-timestamp-enabled", None, true, Kind::Bool, "no"),
    accepted(
        "cluster-replica-no-failover",
        Some("cluster-slave-no-failover"),
        true,
        Kind::Bool,
        "no",
    ),
    accepted(
        "replica-lazy-flush",
        Some("slave-lazy-flush"),
        true,
        Kind::Bool,
        "no",
    ),
    accepted(
        "replica-serve-stale-data",
        Some("slave-serve-stale-data"),
        true,
        Kind::Bool,
        "yes",
    ),
    accepted(
        "replica-read-only",
        Some("slave-read-only"),
        true,
        Kind::Bool,
        "yes",
    ),
    accepted(
        "replica-ignore-maxmemory",
        Some("slave-ignore-maxmemory"),
        true,
        Kind::Bool,
        "yes",
    ),
    accepted("jemalloc-bg-thread", None, true, Kind::Bool, "yes"),
    accepted("activedefrag", None, true, Kind::Bool, "no"),
    accepted("syslog-enabled", None, false, Kind::Bool, "no"),
    accepted("cluster-enabled", None, false, Kind::Bool, "no"),
    accepted(
        "cluster-allow-reads-when-down",
        None,
        true,
        Kind::Bool,
        "no",
    ),
    accepted(
        "cluster-allow-pubsubshard-when-down",
        None,
        true,
        Kind::Bool,
        "yes",
    ),
    accepted("crash-log-enabled", None, true, Kind::Bool, "yes"),
    accepted("crash-memcheck-enabled", None, true, Kind::Bool, "yes"),
    accepted("use-exit-on-panic", None, true, Kind::Bool, "no"),
    accepted("disable-thp", None, false, Kind::Bool, "yes"),
    accepted(
        "cluster-allow-replica-migration",
        None,
        true,
        Kind::Bool,
        "yes",
    ),
    accepted("replica-announced", None, true, Kind::Bool, "yes"),
    accepted("aof-disable-auto-gc", None, true, Kind::Bool, "no"),
    accepted(
        "replica-ignore-disk-write-errors",
        None,
        true,
        Kind::Bool,
        "no",
    ),
    accepted(
        "replica-announce-ip",
        Some("slave-announce-ip"),
        true,
        Kind::Text,
        "",
    ),
    accepted("masteruser", None, true, Kind::Text, ""),
    accepted("cluster-announce-ip", None, true, Kind::Text, ""),
    accepted("cluster-config-file", None, false, Kind::Text, "nodes.conf"),
    accepted("cluster-announce-hostname", None, true, Kind::Text, ""),
    accepted("syslog-ident", None, false, Kind::Text, "redis"),
    accepted("dbfilename", None, true, Kind::Text, "dump.rdb"),
    accepted("appendfilename", None, false, Kind::Text, "appendonly.aof"),
    accepted("appenddirname", None, false, Kind::Text, "appendonlydir"),
    accepted("server_cpulist", None, false, Kind::Text, ""),
    accepted("bio_cpulist", None, false, Kind::Text, ""),
    accepted("aof_rewrite_cpulist", None, false, Kind::Text, ""),
    accepted("bgsave_cpulist", None, false, Kind::Text, ""),
    accepted("ignore-warnings", None, true, Kind::Text, ""),
    accepted(
        "proc-title-template",
        None,
        true,
        Kind::Text,
        "{title} {listen-addr} {server-mode}",
    ),
    accepted("bind-source-addr", None, true, Kind::Text, ""),
    accepted("masterauth", None, true, Kind::Text, ""),
    accepted(
        "syslog-facility",
        None,
        false,
        Kind::Enum(&[
            "user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7",
        ]),
        "local0",
    ),
    accepted(
        "repl-diskless-load",
        None,
        true,
        Kind::Enum(&["disabled", "on-empty-db", "swapdb"]),
        "disabled",
    ),
    accepted(
        "oom-score-adj",
        None,
        true,
        Kind::Enum(&["no", "yes", "relative", "absolute"]),
        "no",
    ),
    accepted(
        "sanitize-dump-payload",
        None,
        true,
        Kind::Enum(&["no", "yes", "clients"]),
        "no",
    ),
    accepted(
        "enable-protected-configs",
        None,
        false,
        Kind::Enum(&["no", "yes", "local"]),
        "no",
    ),
    accepted(
        "enable-module-command",
        None,
        false,
        Kind::Enum(&["no", "yes", "local"]),
        "no",
    ),
    accepted(
        "cluster-preferred-endpoint-type",
        None,
        true,
        Kind::Enum(&["ip", "hostname", "unknown-endpoint"]),
        "ip",
    ),
    accepted(
        "propagation-error-behavior",
        None,
        true,
        Kind::Enum(&["ignore", "panic", "panic-on-replicas"]),
        "ignore",
    ),
    accepted(
        "shutdown-on-sigint",
        None,
        true,
        Kind::Enum(&["default", "save", "nosave", "now", "force"]),
        "default",
    ),
    accepted(
        "shutdown-on-sigterm",
        None,
        true,
        Kind::Enum(&["default", "save", "nosave", "now", "force"]),
        "default",
    ),
    accepted("io-threads", None, false, Kind::Int(1, 128), "1"),
    accepted(
        "cluster-replica-validity-factor",
        Some("cluster-slave-validity-factor"),
        true,
        Kind::Int(0, i32::MAX as i64),
        "10",
    ),
    accepted(
        "cluster-migration-barrier",
        None,
        true,
        Kind::Int(0, i32::MAX as i64),
        "1",
    ),
    accepted("active-defrag-cycle-min", None, true, Kind::Int(1, 99), "1"),
    accepted(
        "active-defrag-cycle-max",
        None,
        true,
        Kind::Int(1, 99),
        "25",
    ),
    accepted(
        "active-defrag-threshold-lower",
        None,
        true,
        Kind::Int(0, 1000),
        "10",
    ),
    accepted(
        "active-defrag-threshold-upper",
        None,
        true,
        Kind::Int(0, 1000),
        "100",
    ),
    accepted(
        "replica-priority",
        Some("slave-priority"),
        true,
        Kind::Int(0, i32::MAX as i64),
        "100",
    ),
    accepted(
        "repl-diskless-sync-delay",
        None,
        true,
        Kind::Int(0, i32::MAX as i64),
        "5",
    ),
    accepted(
        "maxmemory-eviction-tenacity",
        None,
        true,
        Kind::Int(0, 100),
        "10",
    ),
    accepted(
        "replica-announce-port",
        Some("slave-announce-port"),
        true,
        Kind::Int(0, 65535),
        "0",
    ),
    accepted("cluster-port", None, false, Kind::Int(0, 65535), "0"),
    accepted(
        "cluster-announce-bus-port",
        None,
        true,
        Kind::Int(0, 65535),
        "0",
    ),
    accepted(
        "cluster-announce-port",
        None,
        true,
        Kind::Int(0, 65535),
        "0",
    ),
    accepted(
        "cluster-announce-tls-port",
        None,
        true,
        Kind::Int(0, 65535),
        "0",
    ),
    accepted(
        "repl-timeout",
        None,
        true,
        Kind::Int(1, i32::MAX as i64),
        "60",
    ),
    accepted(
        "rdb-key-save-delay",
        None,
        true,
        Kind::Int(i32::MIN as i64, i32::MAX as i64),
        "0",
    ),
    accepted("active-expire-effort", None, true, Kind::Int(1, 10), "1"),
    accepted(
        "min-replicas-to-write",
        Some("min-slaves-to-write"),
        true,
        Kind::Int(0, i32::MAX as i64),
        "0",
    ),
    accepted(
        "min-replicas-max-lag",
        Some("min-slaves-max-lag"),
        true,
        Kind::Int(0, i32::MAX as i64),
        "10",
    ),
    accepted(
        "watchdog-period",
        None,
        true,
        Kind::Int(0, i32::MAX as i64),
        "0",
    ),
    accepted(
        "shutdown-timeout",
        None,
        true,
        Kind::Int(0, i32::MAX as i64),
        "10",
    ),
    accepted(
        "repl-diskless-sync-max-replicas",
        None,
        true,
        Kind::Int(0, i32::MAX as i64),
        "0",
    ),
    accepted(
        "socket-mark-id",
        None,
        false,
        Kind::Int(0, u32::MAX as i64),
        "0",
    ),
    accepted(
        "active-defrag-max-scan-fields",
        None,
        true,
        Kind::Int(1, i64::MAX),
        "1000",
    ),
    // Strata's default, not Redis' 15000: a failover 2 s after a primary
    // stops answering, its lease (1 s) ended before (docs/cluster.md).
    accepted(
        "cluster-node-timeout",
        None,
        true,
        Kind::Int(0, i64::MAX),
        "2000",
    ),
    accepted(
        "repl-backlog-size",
        None,
        true,
        Kind::Memory(1, i64::MAX),
        "1048576",
    ),
    accepted(
        "cluster-link-sendbuf-limit",
        None,
        true,
        Kind::Memory(0, i64::MAX),
        "0",
    ),
    accepted(
        "active-defrag-ignore-bytes",
        None,
        true,
        Kind::Memory(1, i64::MAX),
        "104857600",
    ),
    accepted(
        "repl-backlog-ttl",
        None,
        true,
        Kind::Int(0, i64::MAX),
        "3600",
    ),
    accepted(
        "loading-process-events-interval-bytes",
        None,
        true,
        Kind::Int(1024, i32::MAX as i64),
        "2097152",
    ),
    accepted(
        "tls-session-cache-timeout",
        None,
        true,
        Kind::Int(0, i32::MAX as i64),
        "300",
    ),
    accepted("tls-cluster", None, true, Kind::Bool, "no"),
    accepted("tls-replication", None, true, Kind::Bool, "no"),
    accepted("tls-client-cert-file", None, true, Kind::Text, ""),
    accepted("tls-client-key-file", None, true, Kind::Text, ""),
    accepted("tls-client-key-file-pass", None, true, Kind::Text, ""),
    accepted("tls-dh-params-file", None, true, Kind::Text, ""),
    accepted("oom-score-adj-values", None, true, Kind::Text, "0 200 800"),
    accepted("replicaof", Some("slaveof"), false, Kind::Text, ""),
];

/// The entry of `name` (or of its alias), in any case.
pub fn find(name: &str) -> Option<&'static Accepted> {
    ACCEPTED.iter().find(|a| {
        a.name.eq_ignore_ascii_case(name)
            || a.alias
                .is_some_and(|alias| alias.eq_ignore_ascii_case(name))
    })
}

impl Accepted {
    /// Checks `args` as Redis would and gives the value as CONFIG GET
    /// shows it, or Redis' error text.
    pub fn parse(&self, args: &[String]) -> Result<String, String> {
        if let Kind::Text = self.kind {
            return Ok(args.join(" "));
        }
        let [value] = args else {
            return Err("wrong number of arguments".into());
        };
        let between =
            |min: i64, max: i64| format!("argument must be between {min} and {max} inclusive");
        match self.kind {
            Kind::Bool => match value.to_ascii_lowercase().as_str() {
                word @ ("yes" | "no") => Ok(word.to_owned()),
                _ => Err("argument must be 'yes' or 'no'".into()),
            },
            Kind::Int(min, max) => {
                let n: i64 = value
                    .parse()
                    .map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
                if !(min..=max).contains(&n) {
                    return Err(between(min, max));
                }
                Ok(n.to_string())
            }
            Kind::Memory(min, max) => {
                let n = parse_memory(value)
                    .and_then(|n| i64::try_from(n).ok())
                    .ok_or_else(|| "argument must be a memory value".to_string())?;
                if !(min..=max).contains(&n) {
                    return Err(between(min, max));
                }
                Ok(n.to_string())
            }
            Kind::Enum(words) => {
                let lower = value.to_ascii_lowercase();
                match words.iter().find(|w| **w == lower) {
                    Some(word) => Ok((*word).to_owned()),
                    None => Err(format!(
                        "argument(s) must be one of the following: {}",
                        words.join(", ")
                    )),
                }
            }
            Kind::Text => unreachable!("handled above"),
        }
    }
}

/// Why a value of `name` cannot be accepted, when ignoring it would leave
/// the operator with a server that silently lacks what was asked for.
pub fn refused(name: &str, value: &str) -> Option<&'static str> {
    match (name, value) {
        ("replicaof", primary) if !primary.is_empty() => {
            let words: Vec<&str> = primary.split_whitespace().collect();
            let port_ok = words.len() == 2 && words[1].parse::<u16>().is_ok_and(|p| p > 0);
            (!port_ok).then_some("replicaof needs the primary's host and port")
        }
        _ => None,
    }
}

/// Why `name` has no effect in Strata (start-up's warning line).
pub fn note(name: &str) -> Option<&'static str> {
    if USED.contains(&name) {
        return None;
    }
    let starts = |prefixes: &[&str]| prefixes.iter().any(|p| name.starts_with(p));
    Some(note_unused(name, starts))
}

/// Directives kept in this table (their values are Redis' in every way)
/// that replication (`crate::replication`) or cluster mode
/// (`crate::cluster`) reads.
pub const USED: &[&str] = &[
    "replicaof",
    "masterauth",
    "masteruser",
    "replica-read-only",
    "replica-serve-stale-data",
    "repl-timeout",
    "min-replicas-to-write",
    "min-replicas-max-lag",
    "cluster-enabled",
    "cluster-config-file",
    "cluster-require-full-coverage",
    "cluster-allow-reads-when-down",
    "cluster-allow-pubsubshard-when-down",
    "cluster-announce-ip",
    "cluster-announce-hostname",
    "cluster-announce-port",
    "cluster-announce-bus-port",
    "cluster-port",
    "cluster-preferred-endpoint-type",
    "cluster-node-timeout",
];

fn note_unused(name: &str, starts: impl Fn(&[&str]) -> bool) -> &'static str {
    if starts(&["rdb", "dbfilename", "stop-writes-on-bgsave-error"]) {
        "Strata writes no RDB file: checkpoints and its log replace it (docs/storage.md)"
    } else if starts(&[
        "aof",
        "appendfilename",
        "appenddirname",
        "no-appendfsync-on-rewrite",
    ]) {
        "Strata's log has its own files and needs no rewrite (docs/storage.md)"
    } else if starts(&["repl", "replica", "master", "min-replicas", "slave"]) {
        "Strata's replication ships its log and has no use for it (docs/replication.md)"
    } else if starts(&["cluster"]) {
        "Strata's cluster nodes do not talk to each other yet (docs/cluster.md)"
    } else if starts(&["tls-cluster", "tls-replication", "tls-client"]) {
        "replication runs over plain TCP; TLS between servers is not built (docs/replication.md)"
    } else if name == "tls-dh-params-file" {
        "Strata's TLS (rustls) uses only ECDHE key exchange, which needs no DH parameters"
    } else if name == "tls-session-cache-timeout" {
        "resumable TLS sessions are kept in a cache of tls-session-cache-size, without a timeout of their own"
    } else if starts(&["lazyfree"]) {
        "Strata always frees big deleted values in the background (INFO lazyfree_*)"
    } else if starts(&[
        "active-defrag",
        "activedefrag",
        "activerehashing",
        "jemalloc",
        "disable-thp",
        "dynamic-hz",
        "io-threads",
    ]) || name.ends_with("_cpulist")
    {
        "Strata's allocator, tables and threads work differently (THP is always off for Strata)"
    } else {
        "Strata has no use for it"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table holds Redis' defaults: each parses as its own kind and
    /// shows unchanged, no name is listed twice or also has a setting of
    /// Strata's own, and no default is refused.
    #[test]
    fn defaults_parse_and_names_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for accepted in ACCEPTED {
            assert!(seen.insert(accepted.name), "{} twice", accepted.name);
            assert!(
                crate::config::directive(accepted.name).is_none(),
                "{} is also a directive",
                accepted.name
            );
            let args: Vec<String> = match accepted.kind {
                Kind::Text => accepted.default.split(' ').map(str::to_owned).collect(),
                _ => vec![accepted.default.to_owned()],
            };
            let args: Vec<String> = args.into_iter().filter(|a| !a.is_empty()).collect();
            assert_eq!(
                accepted.parse(&args).as_deref(),
                Ok(accepted.default),
                "{}",
                accepted.name
            );
            assert_eq!(
                refused(accepted.name, accepted.default),
                None,
                "{}",
                accepted.name
            );
        }
    }
}
