//! MONITOR: every command the server runs, as one line per command, to
//! the clients that asked, in Redis' format:
//!
//! ```text
//! +1700000000.123456 [0 127.0.0.1:52301] "set" "k" "v"
//! ```
//!
//! (unix time with microseconds, database, the client's `ip:port` or
//! `lua` for a command a script called, then each argument quoted and
//! escaped as Redis' `sdscatrepr` does). Dispatch (`commands::call`)
//! feeds a command after it ran, unless it is an admin command or flagged
//! `skip_monitor`; EVAL, EVALSHA and FCALL are fed before they run, so
//! the commands their script calls follow them. Queued commands of a
//! transaction show when EXEC runs them. AUTH's and HELLO's secrets are
//! redacted.
//!
//! A monitor's lines go to its mailbox (`crate::events::pubsub::Mailbox`), the
//! same bounded queue a subscriber has: a monitor that does not read is
//! disconnected at its output limit (the normal class's, or the pubsub
//! class's when the normal one is unlimited, as it is by default), and
//! nothing is formatted while no client monitors.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use bytes::Bytes;
use parking_lot::RwLock;

use crate::config::{Config, OutputLimit};
use crate::events::pubsub::Mailbox;

#[derive(Default)]
pub struct Monitors {
    /// Monitoring clients, for the hot path's check.
    count: AtomicUsize,
    mailboxes: RwLock<HashMap<u64, Arc<Mailbox>>>,
}

impl Monitors {
    /// Whether any client monitors (one relaxed load).
    pub fn active(&self) -> bool {
        self.count.load(Relaxed) > 0
    }

    /// Client `id` monitors from now on; false if it already did.
    pub fn add(&self, id: u64, mailbox: Arc<Mailbox>) -> bool {
        let mut mailboxes = self.mailboxes.write();
        let added = mailboxes.insert(id, mailbox).is_none();
        self.count.store(mailboxes.len(), Relaxed);
        added
    }

    /// Client `id` stops monitoring (RESET, or it closed).
    pub fn remove(&self, id: u64) {
        let mut mailboxes = self.mailboxes.write();
        if mailboxes.remove(&id).is_some() {
            self.count.store(mailboxes.len(), Relaxed);
        }
    }

    pub fn is_monitor(&self, id: u64) -> bool {
        self.active() && self.mailboxes.read().contains_key(&id)
    }

    /// Sends one command's line to every monitor.
    pub fn feed(&self, db: usize, from: Option<&str>, args: &[Bytes], config: &Config) {
        let line = Bytes::from(line(now_micros(), db, from, args));
        let limit = limit(config);
        for mailbox in self.mailboxes.read().values() {
            mailbox.deliver(line.clone(), limit);
        }
    }
}

/// A monitor's output limit (see the module docs).
fn limit(config: &Config) -> OutputLimit {
    if config.output_limit_normal.hard_bytes > 0 || config.output_limit_normal.soft_bytes > 0 {
        config.output_limit_normal
    } else {
        config.output_limit_pubsub
    }
}

fn now_micros() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or(0)
}

/// One command's line (`from`: the client's address, `None` for a
/// script's command).
fn line(micros: u128, db: usize, from: Option<&str>, args: &[Bytes]) -> Vec<u8> {
    let mut out = format!("+{}.{:06} [{db} ", micros / 1_000_000, micros % 1_000_000).into_bytes();
    match from {
        Some(addr) => out.extend_from_slice(addr.as_bytes()),
        None => out.extend_from_slice(b"lua"),
    }
    out.push(b']');
    for (i, arg) in args.iter().enumerate() {
        out.push(b' ');
        if crate::observe::slowlog::is_redacted(args, i) {
            quote(&mut out, b"(redacted)");
        } else {
            quote(&mut out, arg);
        }
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// Appends `text` quoted and escaped (Redis' `sdscatrepr`).
fn quote(out: &mut Vec<u8>, text: &[u8]) {
    out.push(b'"');
    for &byte in text {
        match byte {
            b'\\' | b'"' => out.extend_from_slice(&[b'\\', byte]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(byte),
            _ => out.extend_from_slice(format!("\\x{byte:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_as_redis_writes_them() {
        let addr = "127.0.0.1:5000";
        let args: Vec<Bytes> = ["set", "k\"\\", "a\nb\x01\x7f é"]
            .iter()
            .map(|s| Bytes::from(s.to_string()))
            .collect();
        let text = String::from_utf8(line(1_700_000_000_000_042, 3, Some(addr), &args)).unwrap();
        assert_eq!(
            text,
            "+1700000000.000042 [3 127.0.0.1:5000] \"set\" \"k\\\"\\\\\" \"a\\nb\\x01\\x7f \\xc3\\xa9\"\r\n"
        );
        let auth: Vec<Bytes> = ["auth", "pw"]
            .iter()
            .map(|s| Bytes::from(s.to_string()))
            .collect();
        let text = String::from_utf8(line(0, 0, None, &auth)).unwrap();
        assert_eq!(text, "+0.000000 [0 lua] \"auth\" \"(redacted)\"\r\n");
    }
}
