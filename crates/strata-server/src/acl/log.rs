//! ACL LOG: the latest denied commands and failed AUTHs, newest first,
//! at most `acllog-max-len` entries. A denial like one of the last ten
//! (same reason, context, object and user, within a minute) bumps that
//! entry's count instead of adding one, as Redis groups them.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use parking_lot::Mutex;

/// Entries within this long of each other may be grouped.
const GROUPING_WINDOW_MS: u64 = 60_000;
/// How many recent entries a new one is compared with.
const GROUPING_SCAN_MAX: usize = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Command,
    Key,
    Channel,
    Auth,
}

impl Reason {
    /// Which denial Redis reports when no selector allows a command:
    /// the highest rank (then the later argument).
    pub fn rank(self) -> u8 {
        match self {
            Reason::Command => 1,
            Reason::Key => 2,
            Reason::Auth => 3,
            Reason::Channel => 4,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Reason::Command => "command",
            Reason::Key => "key",
            Reason::Channel => "channel",
            Reason::Auth => "auth",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    Toplevel,
    Multi,
    Lua,
}

impl Context {
    /// A client's own command: inside MULTI or not.
    pub fn of_client(in_multi: bool) -> Context {
        match in_multi {
            true => Context::Multi,
            false => Context::Toplevel,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Context::Toplevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Entry {
    pub count: u64,
    pub reason: Reason,
    pub context: Context,
    pub object: String,
    pub username: String,
    pub time_ms: u64,
    /// The client as CLIENT LIST shows it, when it happened.
    pub client_info: String,
}

#[derive(Default)]
pub struct AclLog {
    entries: Mutex<VecDeque<Entry>>,
    /// Denials by reason, in [`Reason`]'s order (INFO's
    /// `acl_access_denied_*`, as Redis 7.2 counts them).
    denied: [AtomicU64; 4],
}

impl AclLog {
    /// Denials of `reason` since start or CONFIG RESETSTAT.
    pub fn denied(&self, reason: Reason) -> u64 {
        self.denied[reason as usize].load(Relaxed)
    }

    pub fn reset_counts(&self) {
        self.denied.iter().for_each(|count| count.store(0, Relaxed));
    }

    pub fn add(&self, entry: Entry, max_len: usize) {
        self.denied[entry.reason as usize].fetch_add(1, Relaxed);
        let mut entries = self.entries.lock();
        let similar = entries.iter().take(GROUPING_SCAN_MAX).position(|e| {
            e.reason == entry.reason
                && e.context == entry.context
                && e.time_ms.abs_diff(entry.time_ms) <= GROUPING_WINDOW_MS
                && e.object == entry.object
                && e.username == entry.username
        });
        if let Some(at) = similar {
            let mut existing = entries.remove(at).expect("found above");
            existing.count += 1;
            existing.time_ms = entry.time_ms;
            existing.client_info = entry.client_info;
            entries.push_front(existing);
            return;
        }
        entries.push_front(entry);
        entries.truncate(max_len);
    }

    /// The newest `count` entries.
    pub fn latest(&self, count: usize) -> Vec<Entry> {
        self.entries.lock().iter().take(count).cloned().collect()
    }

    pub fn reset(&self) {
        self.entries.lock().clear();
    }

    pub fn trim(&self, max_len: usize) {
        self.entries.lock().truncate(max_len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(object: &str, time_ms: u64) -> Entry {
        Entry {
            count: 1,
            reason: Reason::Command,
            context: Context::Toplevel,
            object: object.into(),
            username: "u".into(),
            time_ms,
            client_info: String::new(),
        }
    }

    #[test]
    fn similar_denials_are_grouped_and_the_log_is_bounded() {
        let log = AclLog::default();
        log.add(entry("get", 0), 3);
        log.add(entry("get", 1_000), 3);
        assert_eq!(log.latest(10).len(), 1);
        assert_eq!(log.latest(10)[0].count, 2);
        // Past the window: a new entry.
        log.add(entry("get", 1_000 + GROUPING_WINDOW_MS + 1), 3);
        assert_eq!(log.latest(10).len(), 2);
        for name in ["a", "b", "c", "d"] {
            log.add(entry(name, 0), 3);
        }
        let names: Vec<_> = log.latest(10).into_iter().map(|e| e.object).collect();
        assert_eq!(names, ["d", "c", "b"]);
    }
}
