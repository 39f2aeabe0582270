//! One line per directive saying what it does, for `strata-server
//! --help`. Kept beside the directive table; a test checks that every
//! directive has its line.

/// What directive `name` does ("" for a name that is not a directive).
pub(crate) fn meaning(name: &str) -> &'static str {
    match name {
        "port" => "TCP port (0: any free port, shown in the log)",
        "bind" => "addresses to listen on; a leading '-' makes one optional",
        "dir" => "data directory: the log, checkpoints, the cache store",
        "requirepass" => "password of the default user (ACL); empty: none",
        "databases" => "number of databases SELECT reaches",
        "maxclients" => "connections beyond this are refused",
        "timeout" => "close clients idle this many seconds (0: never)",
        "tcp-keepalive" => "TCP keepalive interval in seconds (0: off)",
        "protected-mode" => "without a password, refuse clients not on loopback",
        "loglevel" => "debug, verbose, notice or warning",
        "logfile" => "log file; empty: standard output",
        "client-output-buffer-limit" => {
            "per class (normal, replica, pubsub): hard limit, soft limit, soft seconds"
        }
        "client-query-buffer-limit" => "largest unparsed input per client",
        "proto-max-bulk-len" => "largest bulk string a client may send",
        "threads" => "network threads (default: one per core)",
        "appendonly" => "log every write (no: a cache that loads only checkpoints)",
        "slowlog-log-slower-than" => "microseconds from which a command goes to SLOWLOG (-1: off)",
        "slowlog-max-len" => "entries SLOWLOG keeps",
        "tls-port" => "serve TLS on this port beside `port` (0: off)",
        "tls-cert-file" => "the server's certificate chain (PEM)",
        "tls-key-file" => "the server's private key (PEM)",
        "tls-key-file-pass" => "not supported: encrypted keys are refused",
        "tls-ca-cert-file" => "CA certificates that sign client certificates",
        "tls-ca-cert-dir" => "a directory of CA certificates",
        "tls-protocols" => "TLSv1.2 and/or TLSv1.3 (empty: both)",
        "tls-ciphers" => "TLS 1.2 cipher suites (OpenSSL names)",
        "tls-ciphersuites" => "TLS 1.3 cipher suites",
        "tls-auth-clients" => "client certificates: yes (required), optional or no",
        "tls-prefer-server-ciphers" => "the server's cipher order wins",
        "tls-session-caching" => "resume TLS sessions",
        "tls-session-cache-size" => "TLS sessions kept for resumption",
        "metrics-port" => "serve Prometheus metrics on /metrics (0: off)",
        "metrics-bind" => "addresses the metrics endpoint listens on (default: loopback only)",
        "latency-monitor-threshold" => "ms from which LATENCY records an event (0: off)",
        "latency-tracking" => "per-command latency histograms",
        "latency-tracking-info-percentiles" => "percentiles INFO latencystats shows",
        "daemonize" => "detach from the terminal at start",
        "unixsocket" => "also listen on this unix socket",
        "unixsocketperm" => "the unix socket file's mode (octal)",
        "supervised" => "tell systemd when ready and stopping (systemd, auto, no)",
        "enable-debug-command" => "who may run DEBUG: no, yes or local",
        "pidfile" => "file holding the process id while running",
        "aclfile" => "file of ACL `user` lines (ACL LOAD / ACL SAVE)",
        "acl-pubsub-default" => "channels new ACL users get: resetchannels or allchannels",
        "acllog-max-len" => "entries ACL LOG keeps",
        "tcp-backlog" => "accept queue of the listening sockets",
        "maxmemory-clients" => {
            "all clients' buffers together (bytes or % of maxmemory; 0: no limit); the largest are closed beyond it"
        }
        "appendfsync" => "when the log is fsynced: always, everysec or no",
        "save" => "checkpoint after <seconds> if <changes> changes (pairs)",
        "auto-aof-rewrite-percentage" => "checkpoint when the log grew by this % (0: off)",
        "auto-aof-rewrite-min-size" => "... and by at least this much",
        "log-segment-size" => "largest log segment file",
        "key-load-delay" => "microseconds of delay per key loaded (testing)",
        "checkpoint-max-rate" => "bytes per second checkpoints write (0: no limit)",
        "cluster-migration-max-rate" => "bytes per second a slot move copies (0: no limit)",
        "maxmemory" => "RAM budget (0: none); see maxmemory-policy",
        "maxmemory-policy" => "tiered (values go to disk) or one of Redis' eviction policies",
        "lfu-log-factor" => "how slowly the LFU counter grows",
        "lfu-decay-time" => "minutes per step the LFU counter decays",
        "maxmemory-samples" => "entries sampled per shard per eviction step",
        "hash-max-listpack-entries" | "hash-max-ziplist-entries" => {
            "hashes up to this many fields stay compact"
        }
        "hash-max-listpack-value" | "hash-max-ziplist-value" => {
            "hashes with values up to this size stay compact"
        }
        "list-max-listpack-size" | "list-max-ziplist-size" => {
            "list node size: entries (>0) or -1..-5 for 4..64 KB"
        }
        "list-compress-depth" => "list nodes kept uncompressed at each end (0: none compressed)",
        "set-max-intset-entries" => "integer sets up to this size stay compact",
        "set-max-listpack-entries" => "sets up to this many members stay compact",
        "set-max-listpack-value" => "sets with members up to this size stay compact",
        "zset-max-listpack-entries" | "zset-max-ziplist-entries" => {
            "sorted sets up to this many members stay compact"
        }
        "zset-max-listpack-value" | "zset-max-ziplist-value" => {
            "sorted sets with members up to this size stay compact"
        }
        "hll-sparse-max-bytes" => "HyperLogLogs stay sparse up to this size",
        "stream-node-max-entries" => "stream node entries; `~` trimming removes whole nodes",
        "stream-node-max-bytes" => "stream node bytes; `~` trimming removes whole nodes",
        "maxdisk" => "disk budget for `dir` (0: none); writes fail with -OOM at it",
        "tiering-io-uring" => "read cold values through io_uring",
        "tiering-io-threads" => "reader threads when io_uring is off",
        "log-direct-io" => "write log segments with O_DIRECT",
        "hz" => "background cycles per second (active expiry, eviction)",
        "busy-reply-threshold" | "lua-time-limit" => {
            "ms after which a running script makes others get -BUSY"
        }
        "notify-keyspace-events" => "keyspace notification classes (Redis' letters)",
        "tracking-table-max-keys" => "keys CLIENT TRACKING remembers (0: no limit)",
        "repl-ping-replica-period" => "accepted for replication tools (no replication)",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_directive_says_what_it_does() {
        for directive in super::super::DIRECTIVES {
            assert!(
                !super::meaning(directive.name).is_empty(),
                "{} has no line in meanings.rs",
                directive.name
            );
        }
    }
}
