//! CONFIG REWRITE: the running configuration written back into the file
//! the server started with, keeping its comments, blank lines and order.

use super::directives::{DIRECTIVES, directive};
use super::model::*;

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

/// A value as a config file line writes it: quoted ([`repr`]) when it is
/// empty or holds spaces, quotes or other than printable ASCII.
fn quoted(value: &str) -> String {
    let plain = !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\'' && b != b'\\');
    match plain {
        true => value.to_owned(),
        false => repr(value),
    }
}

/// Directives holding a number of bytes, written as Redis writes them
/// (`64mb`, `1gb`, `512kb`, else bytes): Redis' memory settings and
/// Strata's own.
const MEMORY: &[&str] = &[
    "proto-max-bulk-len",
    "repl-backlog-size",
    "maxmemory",
    "cluster-link-sendbuf-limit",
    "active-defrag-ignore-bytes",
    "hash-max-listpack-value",
    "hash-max-ziplist-value",
    "stream-node-max-bytes",
    "zset-max-listpack-value",
    "zset-max-ziplist-value",
    "hll-sparse-max-bytes",
    "client-query-buffer-limit",
    "maxmemory-clients",
    "auto-aof-rewrite-min-size",
    "maxdisk",
    "log-segment-size",
];

/// Directives holding text, which Redis always writes quoted
/// (`sdscatrepr`): `appendfilename "appendonly.aof"`.
const TEXT: &[&str] = &[
    "dir",
    "aclfile",
    "unixsocket",
    "pidfile",
    "replica-announce-ip",
    "masteruser",
    "cluster-announce-ip",
    "cluster-config-file",
    "cluster-announce-hostname",
    "cluster-announce-human-nodename",
    "syslog-ident",
    "dbfilename",
    "appendfilename",
    "appenddirname",
    "server-cpulist",
    "bio-cpulist",
    "aof-rewrite-cpulist",
    "bgsave-cpulist",
    "ignore-warnings",
    "proc-title-template",
    "bind-source-addr",
    "logfile",
    "req-res-logfile",
    "locale-collate",
    "masterauth",
    "requirepass",
    "tls-cert-file",
    "tls-key-file",
    "tls-key-file-pass",
    "tls-client-cert-file",
    "tls-client-key-file",
    "tls-client-key-file-pass",
    "tls-dh-params-file",
    "tls-ca-cert-file",
    "tls-ca-cert-dir",
    "tls-protocols",
    "tls-ciphers",
    "tls-ciphersuites",
];

/// A number of bytes as Redis' CONFIG REWRITE writes it.
fn memory(bytes: u64) -> String {
    const KB: u64 = 1024;
    match bytes {
        0 => "0".into(),
        b if b % (KB * KB * KB) == 0 => format!("{}gb", b / (KB * KB * KB)),
        b if b % (KB * KB) == 0 => format!("{}mb", b / (KB * KB)),
        b if b % KB == 0 => format!("{}kb", b / KB),
        b => b.to_string(),
    }
}

/// A value always quoted, escaped as Redis' `sdscatrepr` does.
fn repr(value: &str) -> String {
    let mut out = String::from("\"");
    for byte in value.bytes() {
        match byte {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            b if b.is_ascii_graphic() || b == b' ' => out.push(b as char),
            b => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
    out
}

/// One directive's line for CONFIG REWRITE.
fn config_line(name: &str, value: &str) -> String {
    if MULTI_WORD.contains(&name) && !value.is_empty() {
        format!("{name} {value}")
    } else if TEXT.contains(&name) {
        format!("{name} {}", repr(value))
    } else if let Some(bytes) = MEMORY
        .contains(&name)
        .then(|| value.parse::<u64>().ok())
        .flatten()
    {
        format!("{name} {}", memory(bytes))
    } else {
        format!("{name} {}", quoted(value))
    }
}

/// `client-output-buffer-limit`'s lines, one per class as Redis writes
/// them (`client-output-buffer-limit replica 256mb 64mb 60`), each with
/// whether it differs from the default (then it is written even where the
/// file had no line for it).
fn output_limit_lines(value: &str, default: &str) -> Vec<(String, bool)> {
    let classes = |text: &str| -> Vec<Vec<String>> {
        let words: Vec<String> = text.split_whitespace().map(str::to_owned).collect();
        words.chunks(4).map(<[String]>::to_vec).collect()
    };
    let defaults = classes(default);
    classes(value)
        .into_iter()
        .filter(|class| class.len() == 4)
        .map(|class| {
            let forced = !defaults.contains(&class);
            let name = if class[0] == "slave" {
                "replica"
            } else {
                &class[0]
            };
            let bytes = |text: &str| text.parse().map_or_else(|_| text.to_owned(), memory);
            let line = format!(
                "{OUTPUT_LIMIT} {name} {} {} {}",
                bytes(&class[1]),
                bytes(&class[2]),
                class[3]
            );
            (line, forced)
        })
        .collect()
}

/// The directive Redis writes one line per value of.
const OUTPUT_LIMIT: &str = "client-output-buffer-limit";

/// Marks the lines CONFIG REWRITE adds at the end of the file.
const REWRITE_MARKER: &str = "# Generated by CONFIG REWRITE";

/// The `listpack` name of an old `ziplist` alias (Redis 7 keeps both
/// names for one setting).
fn ziplist_alias_of(name: &str) -> Option<&'static str> {
    Some(match name {
        "hash-max-ziplist-entries" => "hash-max-listpack-entries",
        "hash-max-ziplist-value" => "hash-max-listpack-value",
        "list-max-ziplist-size" => "list-max-listpack-size",
        "zset-max-ziplist-entries" => "zset-max-listpack-entries",
        "zset-max-ziplist-value" => "zset-max-listpack-value",
        _ => return None,
    })
}

/// CONFIG REWRITE's new text for the config file `old`: its comments,
/// blank lines, `include`s and order kept; each directive's first line
/// set to the running value and its later lines (a second `save` …)
/// dropped; then every directive not in the file whose running value
/// differs from its default, after [`REWRITE_MARKER`] (written once). As
/// Redis does. `users` are the `user` lines to write where the file had
/// its first (after the marker when it had none); `None` drops the
/// file's `user` lines, as Redis does when users live in an `aclfile`.
pub(crate) fn rewritten(old: &str, config: &Config, users: Option<&[String]>) -> String {
    let defaults = Config::default();
    // (name, running value, default value) of every directive.
    // Redis 7's old `ziplist` names are aliases: one setting, written
    // under the name the file uses (or the new name), never twice.
    let mut values: Vec<(&'static str, String, String)> = DIRECTIVES
        .iter()
        .filter(|d| ziplist_alias_of(d.name).is_none())
        .map(|d| (d.name, (d.get)(config), (d.get)(&defaults)))
        .collect();
    values.extend(
        crate::config_accepted::ACCEPTED
            .iter()
            .map(|a| (a.name, config.accepted_value(a), a.default.to_owned())),
    );
    let canonical = |name: &str| -> Option<&'static str> {
        directive(name)
            .map(|d| ziplist_alias_of(d.name).unwrap_or(d.name))
            .or_else(|| crate::config_accepted::find(name).map(|a| a.name))
    };
    let mut written = std::collections::HashSet::new();
    let mut output_limits = {
        let (_, value, default) = values
            .iter()
            .find(|(n, _, _)| *n == OUTPUT_LIMIT)
            .expect("a directive");
        output_limit_lines(value, default)
    };
    let mut out = String::new();
    // An earlier rewrite's marker stays where it is (and is not added
    // again), so rewriting twice changes nothing.
    let marked = old.lines().any(|line| line.trim() == REWRITE_MARKER);
    let mut users_written = false;
    for line in old.lines() {
        let trimmed = line.trim();
        let first = trimmed.split_whitespace().next().unwrap_or("");
        if first.eq_ignore_ascii_case("user") {
            if let Some(users) = users.filter(|_| !users_written) {
                for user in users {
                    out.push_str(user);
                    out.push('\n');
                }
            }
            users_written = true;
            continue;
        }
        let name = match canonical(first) {
            Some(name) if !trimmed.starts_with('#') => name,
            _ => {
                out.push_str(line);
                out.push('\n');
                continue;
            }
        };
        if name == OUTPUT_LIMIT {
            // Each of the file's lines takes the next class's line, in
            // order; one more than there are classes is dropped.
            written.insert(name);
            if !output_limits.is_empty() {
                out.push_str(&output_limits.remove(0).0);
                out.push('\n');
            }
            continue;
        }
        if written.insert(name) {
            let (_, value, _) = values.iter().find(|(n, _, _)| *n == name).expect("listed");
            // Under the name the line had (an alias stays an alias).
            let shown = directive(first).map_or(name, |d| d.name);
            out.push_str(&config_line(shown, value));
            out.push('\n');
        }
    }
    let mut generated: Vec<String> = values
        .iter()
        .filter(|(name, value, default)| {
            *name != OUTPUT_LIMIT && !written.contains(name) && value != default
        })
        .map(|(name, value, _)| config_line(name, value))
        .collect();
    generated.extend(
        output_limits
            .into_iter()
            .filter(|(_, forced)| *forced)
            .map(|(line, _)| line),
    );
    if !users_written && let Some(users) = users {
        generated.extend(users.iter().cloned());
    }
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
pub fn rewrite_file(config: &Config, users: Option<&[String]>) -> Result<(), String> {
    let Some(path) = &config.config_file else {
        return Err("The server is running without a config file".into());
    };
    let failed = |e: std::io::Error| format!("Rewriting config file: {e}");
    let old = std::fs::read_to_string(path).map_err(failed)?;
    let text = rewritten(&old, config, users);
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
