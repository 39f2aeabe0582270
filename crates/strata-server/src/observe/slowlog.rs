//! The slow log (SLOWLOG): commands whose execution took at least
//! `slowlog-log-slower-than` microseconds, newest first, at most
//! `slowlog-max-len` of them, as Redis keeps them.
//!
//! Dispatch (`commands::call`) times every command's handler and offers
//! the slow ones here; a command inside a script or a transaction is
//! timed on its own, EXEC itself (`skip_slowlog`) and commands a script
//! calls are not logged (the script's EVAL is). An entry keeps at most
//! [`ARGS_MAX`] arguments of at most [`ARG_BYTES_MAX`] bytes each, with
//! Redis' "... (N more arguments)" and "... (N more bytes)" markers, so a
//! huge command costs the log little; AUTH's and HELLO's secrets are
//! replaced by "(redacted)".

use std::collections::VecDeque;

use bytes::Bytes;
use parking_lot::Mutex;

/// Arguments an entry keeps (the last one may be the "more" marker).
pub const ARGS_MAX: usize = 32;
/// Bytes an argument keeps before its "more bytes" marker.
pub const ARG_BYTES_MAX: usize = 128;

/// One slow command.
#[derive(Clone)]
pub struct Entry {
    pub id: u64,
    /// Unix time (seconds) when it was logged.
    pub time_s: u64,
    pub micros: u64,
    pub args: Vec<Bytes>,
    /// The client's `ip:port` and name.
    pub addr: String,
    pub name: String,
}

#[derive(Default)]
pub struct SlowLog {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Newest first.
    entries: VecDeque<Entry>,
    next_id: u64,
}

impl SlowLog {
    /// Logs a command that took `micros`, keeping `max_len` entries.
    pub fn record(
        &self,
        args: &[Bytes],
        micros: u64,
        time_s: u64,
        client: (String, String),
        max_len: usize,
    ) {
        let args = kept_args(args);
        let mut inner = self.inner.lock();
        let id = inner.next_id;
        inner.next_id += 1;
        inner.entries.push_front(Entry {
            id,
            time_s,
            micros,
            args,
            addr: client.0,
            name: client.1,
        });
        inner.entries.truncate(max_len);
    }

    /// The newest `count` entries (all with `None`).
    pub fn newest(&self, count: Option<usize>) -> Vec<Entry> {
        let inner = self.inner.lock();
        let count = count.unwrap_or(inner.entries.len());
        inner.entries.iter().take(count).cloned().collect()
    }

    /// SLOWLOG LEN.
    pub fn len(&self) -> usize {
        self.inner.lock().entries.len()
    }

    /// Whether the log holds no entry.
    pub fn is_empty(&self) -> bool {
        self.inner.lock().entries.is_empty()
    }

    /// SLOWLOG RESET (ids keep counting, as in Redis).
    pub fn reset(&self) {
        self.inner.lock().entries.clear();
    }

    /// CONFIG SET slowlog-max-len shrinks the log at once.
    pub fn trim(&self, max_len: usize) {
        self.inner.lock().entries.truncate(max_len);
    }
}

/// The arguments an entry keeps (see the module docs).
fn kept_args(args: &[Bytes]) -> Vec<Bytes> {
    let shown = if args.len() > ARGS_MAX {
        ARGS_MAX - 1
    } else {
        args.len()
    };
    let mut kept: Vec<Bytes> = args[..shown]
        .iter()
        .enumerate()
        .map(|(i, arg)| {
            if is_redacted(args, i) {
                Bytes::from_static(b"(redacted)")
            } else if arg.len() > ARG_BYTES_MAX {
                let mut text = arg[..ARG_BYTES_MAX].to_vec();
                text.extend_from_slice(
                    format!("... ({} more bytes)", arg.len() - ARG_BYTES_MAX).as_bytes(),
                );
                Bytes::from(text)
            } else {
                // A copy: the argument is a slice of the request's input
                // buffer, which a clone would keep whole for as long as the
                // entry lives (a slow 512 MB SET kept 1 GB per entry).
                Bytes::copy_from_slice(arg)
            }
        })
        .collect();
    if args.len() > ARGS_MAX {
        let more = args.len() - shown;
        kept.push(Bytes::from(format!("... ({more} more arguments)")));
    }
    kept
}

/// Whether argument `i` of a command is a secret, shown `(redacted)` as
/// Redis redacts it: AUTH's user and password, HELLO's after its AUTH
/// keyword, ACL SETUSER's user and rules (passwords among them),
/// MIGRATE's AUTH password and AUTH2 user and password, and the values
/// CONFIG SET gives to password options.
pub fn is_redacted(args: &[Bytes], i: usize) -> bool {
    let Some(name) = args.first() else {
        return false;
    };
    let word = |n: usize, w: &str| {
        args.get(n)
            .is_some_and(|a| a.eq_ignore_ascii_case(w.as_bytes()))
    };
    if name.eq_ignore_ascii_case(b"auth") {
        return i >= 1;
    }
    // Redis 7.4 hides the user names and rules of all three.
    if name.eq_ignore_ascii_case(b"acl")
        && (word(1, "setuser") || word(1, "getuser") || word(1, "deluser"))
    {
        return i >= 2;
    }
    if name.eq_ignore_ascii_case(b"hello") {
        return args
            .iter()
            .position(|arg| arg.eq_ignore_ascii_case(b"auth"))
            .is_some_and(|at| i > at);
    }
    if name.eq_ignore_ascii_case(b"migrate") {
        let mut j = 6;
        while j < args.len() {
            if word(j, "auth") {
                if i == j + 1 {
                    return true;
                }
                j += 2;
            } else if word(j, "auth2") {
                if i == j + 1 || i == j + 2 {
                    return true;
                }
                j += 3;
            } else {
                j += 1;
            }
        }
        return false;
    }
    if name.eq_ignore_ascii_case(b"config") && word(1, "set") && i >= 3 && i % 2 == 1 {
        const SECRET: [&str; 5] = [
            "requirepass",
            "masteruser",
            "masterauth",
            "tls-key-file-pass",
            "tls-client-key-file-pass",
        ];
        return SECRET.iter().any(|secret| word(i - 1, secret));
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(items: &[&str]) -> Vec<Bytes> {
        items.iter().map(|s| Bytes::from(s.to_string())).collect()
    }

    #[test]
    fn long_commands_are_cut_and_secrets_redacted() {
        let many: Vec<String> = (0..40).map(|i| i.to_string()).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let kept = kept_args(&bytes(&many));
        assert_eq!(kept.len(), ARGS_MAX);
        assert_eq!(kept[30], "30");
        assert_eq!(kept[31], "... (9 more arguments)");
        let big = "x".repeat(200);
        let kept = kept_args(&bytes(&["SET", "k", &big]));
        assert_eq!(
            kept[2],
            format!("{}... (72 more bytes)", "x".repeat(128)).as_str()
        );
        assert_eq!(
            kept_args(&bytes(&["AUTH", "user", "pw"]))[1..],
            bytes(&["(redacted)", "(redacted)"])[..]
        );
        assert_eq!(
            kept_args(&bytes(&["HELLO", "3", "AUTH", "u", "p"])),
            bytes(&["HELLO", "3", "AUTH", "(redacted)", "(redacted)"])
        );
        assert_eq!(
            kept_args(&bytes(&["ACL", "SETUSER", "u", ">secret"])),
            bytes(&["ACL", "SETUSER", "(redacted)", "(redacted)"])
        );
        assert_eq!(
            kept_args(&bytes(&[
                "MIGRATE", "h", "1", "k", "0", "9", "AUTH2", "u", "p", "COPY"
            ])),
            bytes(&[
                "MIGRATE",
                "h",
                "1",
                "k",
                "0",
                "9",
                "AUTH2",
                "(redacted)",
                "(redacted)",
                "COPY"
            ])
        );
        assert_eq!(
            kept_args(&bytes(&[
                "CONFIG",
                "SET",
                "maxmemory",
                "1",
                "requirepass",
                "pw"
            ])),
            bytes(&[
                "CONFIG",
                "SET",
                "maxmemory",
                "1",
                "requirepass",
                "(redacted)"
            ])
        );
    }

    #[test]
    fn newest_first_within_the_limit() {
        let log = SlowLog::default();
        for i in 0..5 {
            log.record(
                &bytes(&["GET", &i.to_string()]),
                10,
                1,
                ("a:1".into(), String::new()),
                3,
            );
        }
        let entries = log.newest(None);
        assert_eq!(
            entries.iter().map(|e| e.id).collect::<Vec<_>>(),
            vec![4, 3, 2]
        );
        assert_eq!(log.newest(Some(1))[0].args[1], "4");
        log.reset();
        assert_eq!(log.len(), 0);
        log.record(
            &bytes(&["GET", "x"]),
            10,
            1,
            ("a:1".into(), String::new()),
            3,
        );
        assert_eq!(log.newest(None)[0].id, 5);
    }
}
