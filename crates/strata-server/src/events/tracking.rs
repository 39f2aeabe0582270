//! Client-side caching (CLIENT TRACKING), as Redis 7 has it.
//!
//! A tracking client is told when a key it may have cached changes: an
//! `invalidate` push with the key (RESP3), sent to the client itself or to
//! the client it redirects to (any connected client; a RESP2 target hears
//! it as a message on `__redis__:invalidate` while it subscribes to
//! anything, as in Redis). In the default mode the server
//! remembers which keys each client read ([`Tracking::remember`]) and
//! tells it once; in BCAST mode it tells every client whose prefixes match
//! any changed key, remembering nothing. FLUSHDB and FLUSHALL send a null
//! invalidation (drop everything) to every tracking client.
//!
//! ## Why remembering and invalidating happen under the key's lock
//!
//! A client's read and the registration of its key are one step under the
//! key's shard lock (dispatch registers the keys of a read-only command
//! after its handler, before unlocking), and a write's invalidation is
//! sent under the same lock, before its commit unlocks. So a read either
//! comes before a write (and the write invalidates it) or after (and it
//! saw the new value): no interleaving leaves a client with a stale value
//! and no registration. The default mode's registrations are one-shot: a
//! key's invalidation forgets who had it, as Redis does.
//!
//! Changes made outside commands (keys expiring in the background, keys a
//! deleting eviction policy removes) are seen through the change feed, on
//! its own thread, after their locks are gone; that thread takes each
//! key's lock again to tell and forget its readers, so a read either came
//! before (and is told) or comes after (and registers anew). Keys evicted
//! to make room for a command are told the same way by the command's
//! memory gate before the command runs (`crate::commands`), so its reply
//! follows the invalidation, as in Redis; whichever of the two comes first
//! tells, the other finds nobody left to tell.
//!
//! The table of remembered keys is bounded by `tracking-table-max-keys`
//! (Redis' default, 1,000,000): past it, keys are dropped with an
//! invalidation, as Redis does. Deliveries go through the client's pub/sub
//! mailbox, so `client-output-buffer-limit pubsub` bounds a slow reader.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use smallvec::SmallVec;
use strata_engine::Keyspace;
use strata_engine::storage::record::Kind;
use strata_resp::Protocol;

use crate::config::{OutputLimit, SharedConfig};
use crate::events::feed_slot::FeedSlot;
use crate::events::pubsub::Mailbox;
use crate::net::client::ClientInfo;

/// The channel a RESP2 redirect target receives invalidations on.
pub const CHANNEL: &[u8] = b"__redis__:invalidate";

/// How a client tracks (CLIENT TRACKING's options).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// The client receiving the invalidations (0: this one).
    pub redirect: u64,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// BCAST prefixes (none: every key).
    pub prefixes: Vec<Bytes>,
}

struct Client {
    mailbox: Arc<Mailbox>,
    /// The client `options.redirect` names, as it was when tracking was
    /// turned on (it reads as killed once gone: a broken redirect).
    redirect_to: Option<Arc<ClientInfo>>,
    options: Options,
    /// The redirect target was gone when an invalidation was due.
    broken_redirect: bool,
}

#[derive(Default)]
struct State {
    clients: HashMap<u64, Client>,
    /// Default mode: key → the clients that read it since its last
    /// invalidation.
    keys: HashMap<Bytes, SmallVec<[u64; 2]>, foldhash::fast::RandomState>,
    /// Clients in BCAST mode.
    bcast: Vec<u64>,
}

/// The registry (see the module docs).
#[derive(Default)]
pub struct Tracking {
    /// Clients tracking: the only cost of tracking while nobody does.
    active: AtomicUsize,
    /// Keys in the table as last counted under the lock: it grows only in
    /// [`Tracking::remember`], which trims at once, so it is above
    /// `tracking-table-max-keys` only after that limit was lowered, and a
    /// command finds that out without taking the lock.
    keys_counted: AtomicUsize,
    state: Mutex<State>,
    /// The change feed, subscribed while a client tracks.
    feed: FeedSlot,
}

/// What INFO reports.
pub struct Counts {
    pub clients: usize,
    pub keys: usize,
    pub items: usize,
    pub prefixes: usize,
}

impl Tracking {
    pub fn is_active(&self) -> bool {
        self.active.load(Relaxed) > 0
    }

    /// Turns tracking on for client `id` (again, with new options).
    pub fn enable(
        &self,
        keyspace: &Keyspace,
        id: u64,
        mailbox: Arc<Mailbox>,
        redirect_to: Option<Arc<ClientInfo>>,
        options: Options,
    ) {
        // Before the client hears OK: a key expiring right after is seen.
        self.feed.want(keyspace, true);
        let mut state = self.state.lock();
        if options.bcast && !state.bcast.contains(&id) {
            state.bcast.push(id);
        }
        let previous = state.clients.insert(
            id,
            Client {
                mailbox,
                redirect_to,
                options,
                broken_redirect: false,
            },
        );
        if let Some(previous) = previous {
            // Prefixes add up while tracking stays on, as in Redis.
            let client = state.clients.get_mut(&id).expect("just inserted");
            for prefix in previous.options.prefixes {
                if !client.options.prefixes.contains(&prefix) {
                    client.options.prefixes.push(prefix);
                }
            }
        }
        self.active.store(state.clients.len(), Relaxed);
    }

    /// Turns tracking off for client `id` (CLIENT TRACKING OFF, RESET, or
    /// a disconnect).
    pub fn disable(&self, keyspace: &Keyspace, id: u64) {
        let mut state = self.state.lock();
        if state.clients.remove(&id).is_none() {
            return;
        }
        state.bcast.retain(|c| *c != id);
        state.keys.retain(|_, clients| {
            clients.retain(|c| *c != id);
            !clients.is_empty()
        });
        self.active.store(state.clients.len(), Relaxed);
        if state.clients.is_empty() {
            self.feed.want(keyspace, false);
        }
    }

    /// Client `id`'s options and whether its redirect broke, if it tracks.
    pub fn options(&self, id: u64) -> Option<(Options, bool)> {
        let state = self.state.lock();
        let client = state.clients.get(&id)?;
        Some((client.options.clone(), client.broken_redirect))
    }

    /// Checks CLIENT TRACKING ON's prefixes against each other and the
    /// client's current ones: Redis' error for two that overlap.
    pub fn prefix_collision(&self, id: u64, prefixes: &[Bytes]) -> Option<String> {
        let overlap = |a: &[u8], b: &[u8]| {
            let n = a.len().min(b.len());
            a[..n] == b[..n]
        };
        let state = self.state.lock();
        let current = state
            .clients
            .get(&id)
            .map(|c| c.options.prefixes.clone())
            .unwrap_or_default();
        for (i, prefix) in prefixes.iter().enumerate() {
            if let Some(existing) = current.iter().find(|e| overlap(e, prefix)) {
                return Some(format!(
                    "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                    String::from_utf8_lossy(prefix),
                    String::from_utf8_lossy(existing)
                ));
            }
            if let Some(other) = prefixes[i + 1..].iter().find(|o| overlap(o, prefix)) {
                return Some(format!(
                    "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                    String::from_utf8_lossy(prefix),
                    String::from_utf8_lossy(other)
                ));
            }
        }
        None
    }

    /// Remembers that client `id` read `keys` (default mode); drops keys
    /// with an invalidation past `max_keys` (0: no limit).
    pub fn remember<'k>(
        &self,
        id: u64,
        keys: impl Iterator<Item = &'k [u8]>,
        max_keys: usize,
        limit: OutputLimit,
    ) {
        let mut state = self.state.lock();
        for key in keys {
            let clients = state.keys.entry(Bytes::copy_from_slice(key)).or_default();
            if !clients.contains(&id) {
                clients.push(id);
            }
        }
        trim_to(&mut state, max_keys, limit);
        self.keys_counted.store(state.keys.len(), Relaxed);
    }

    /// Drops keys with an invalidation past `max_keys` (0: no limit); the
    /// cron calls it, and each command before it runs (as Redis does), so
    /// that a lowered `tracking-table-max-keys` applies without waiting
    /// for the next key read. Whether it dropped any.
    pub fn trim(&self, max_keys: usize, limit: OutputLimit) -> bool {
        if max_keys == 0 || !self.is_active() || self.keys_counted.load(Relaxed) <= max_keys {
            return false;
        }
        let mut state = self.state.lock();
        let before = state.keys.len();
        trim_to(&mut state, max_keys, limit);
        self.keys_counted.store(state.keys.len(), Relaxed);
        state.keys.len() < before
    }

    /// Whether a client tracks in BCAST mode (changed keys are then
    /// gathered for [`Tracking::broadcast`]).
    pub fn has_bcast(&self) -> bool {
        self.is_active() && !self.state.lock().bcast.is_empty()
    }

    /// Tells the default-mode clients that remembered them that `keys`
    /// changed, one message per key. `writer` made the changes (NOLOOP
    /// clients are not told of their own); `forget` ends those
    /// registrations (only under the keys' locks: module docs).
    pub fn invalidate(
        &self,
        keys: &[&[u8]],
        writer: Option<u64>,
        forget: bool,
        limit: OutputLimit,
    ) {
        if keys.is_empty() {
            return;
        }
        let mut state = self.state.lock();
        for key in keys {
            let readers: SmallVec<[u64; 2]> = if forget {
                state.keys.remove(*key).unwrap_or_default()
            } else {
                state.keys.get(*key).cloned().unwrap_or_default()
            };
            for id in readers {
                if !skips(&state, id, writer) {
                    deliver(&mut state, id, Some(&[key]), limit);
                }
            }
        }
    }

    /// Tells the BCAST clients whose prefixes match that `keys` changed:
    /// one message per matching prefix with all its keys, as Redis sends
    /// what one event loop changed (here: one command, transaction or
    /// script).
    pub fn broadcast(&self, keys: &[&[u8]], writer: Option<u64>, limit: OutputLimit) {
        if keys.is_empty() {
            return;
        }
        let mut state = self.state.lock();
        for id in state.bcast.clone() {
            if skips(&state, id, writer) {
                continue;
            }
            let Some(client) = state.clients.get(&id) else {
                continue;
            };
            let prefixes = if client.options.prefixes.is_empty() {
                vec![Bytes::new()]
            } else {
                client.options.prefixes.clone()
            };
            for prefix in prefixes {
                let mut matching: Vec<&[u8]> = keys
                    .iter()
                    .copied()
                    .filter(|k| k.starts_with(&prefix))
                    .collect();
                matching.sort_unstable();
                matching.dedup();
                if !matching.is_empty() {
                    deliver(&mut state, id, Some(&matching), limit);
                }
            }
        }
    }

    /// FLUSHALL, with every shard locked: no key is remembered any more
    /// (the null invalidation that follows tells every client).
    pub fn forget_keys(&self) {
        self.state.lock().keys.clear();
        self.keys_counted.store(0, Relaxed);
    }

    /// FLUSHDB or FLUSHALL: every tracking client drops everything.
    /// FLUSHDB keeps the registrations, as Redis does (the table is not
    /// per database).
    pub fn invalidate_all(&self, limit: OutputLimit) {
        let mut state = self.state.lock();
        let ids: Vec<u64> = state.clients.keys().copied().collect();
        for id in ids {
            deliver(&mut state, id, None, limit);
        }
    }

    pub fn counts(&self) -> Counts {
        let state = self.state.lock();
        Counts {
            clients: state.clients.len(),
            keys: state.keys.len(),
            items: state.keys.values().map(SmallVec::len).sum(),
            prefixes: state
                .bcast
                .iter()
                .filter_map(|id| state.clients.get(id))
                .map(|c| c.options.prefixes.len().max(1))
                .sum(),
        }
    }
}

/// Whether client `id` is NOLOOP and made the change itself.
fn skips(state: &State, id: u64, writer: Option<u64>) -> bool {
    Some(id) == writer && state.clients.get(&id).is_some_and(|c| c.options.noloop)
}

/// Drops keys of `state` with an invalidation to their readers until at
/// most `max_keys` remain (0: no limit).
fn trim_to(state: &mut State, max_keys: usize, limit: OutputLimit) {
    while max_keys > 0 && state.keys.len() > max_keys {
        let victim = state.keys.keys().next().cloned().expect("over the limit");
        let clients = state.keys.remove(&victim).expect("present");
        for client in clients {
            deliver(state, client, Some(&[&victim]), limit);
        }
    }
}

/// Sends client `id` the invalidation of `keys` (`None`: everything),
/// through its redirect target when it has one.
fn deliver(state: &mut State, id: u64, keys: Option<&[&[u8]]>, limit: OutputLimit) {
    let Some(client) = state.clients.get(&id) else {
        return;
    };
    let redirect = client.options.redirect;
    let Some(target) = &client.redirect_to else {
        if client.mailbox.protocol() == Protocol::Resp3 {
            client
                .mailbox
                .deliver(encode(Protocol::Resp3, false, keys), limit);
        }
        return;
    };
    // As Redis: any live client may be the target; a RESP2 one hears
    // invalidations only as a subscriber (the `__redis__:invalidate`
    // message), a RESP3 one as pushes.
    match target.is_gone() {
        false => {
            let mailbox = target.mailbox();
            match mailbox.protocol() {
                Protocol::Resp2 if target.is_subscriber() => {
                    mailbox.deliver(encode(Protocol::Resp2, true, keys), limit)
                }
                Protocol::Resp2 => {}
                protocol => mailbox.deliver(encode(protocol, true, keys), limit),
            }
        }
        true => {
            let client = state.clients.get_mut(&id).expect("looked up above");
            client.broken_redirect = true;
            if client.mailbox.protocol() == Protocol::Resp3 {
                let text = format!(">2\r\n$21\r\ntracking-redir-broken\r\n:{redirect}\r\n");
                client.mailbox.deliver(Bytes::from(text), limit);
            }
        }
    }
}

/// An invalidation as `protocol` writes it: a push, or (RESP2, to a
/// redirect target) a message on [`CHANNEL`].
fn encode(protocol: Protocol, redirected: bool, keys: Option<&[&[u8]]>) -> Bytes {
    let mut out = Vec::with_capacity(64 + keys.map_or(0, |k| k.iter().map(|k| k.len() + 16).sum()));
    match protocol {
        Protocol::Resp2 => {
            debug_assert!(redirected);
            out.extend_from_slice(b"*3\r\n$7\r\nmessage\r\n$20\r\n");
            out.extend_from_slice(CHANNEL);
            out.extend_from_slice(b"\r\n");
        }
        _ => out.extend_from_slice(b">2\r\n$10\r\ninvalidate\r\n"),
    }
    match keys {
        Some(keys) => {
            out.extend_from_slice(format!("*{}\r\n", keys.len()).as_bytes());
            for key in keys {
                out.extend_from_slice(format!("${}\r\n", key.len()).as_bytes());
                out.extend_from_slice(key);
                out.extend_from_slice(b"\r\n");
            }
        }
        None if protocol == Protocol::Resp2 => out.extend_from_slice(b"$-1\r\n"),
        None => out.extend_from_slice(b"_\r\n"),
    }
    Bytes::from(out)
}

/// Starts the thread that invalidates keys changed outside commands
/// (module docs).
pub fn spawn_feed_invalidations(
    keyspace: Arc<Keyspace>,
    config: Arc<SharedConfig>,
    tracking: Arc<Tracking>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("strata-tracking".into())
        .spawn(move || feed_invalidations(&keyspace, &config, &tracking))?;
    Ok(())
}

/// How long the thread waits for a group at a time (nothing is done
/// between two waits: a long wait only saves an idle server's wake-ups).
const POLL: Duration = Duration::from_secs(1);

fn feed_invalidations(keyspace: &Keyspace, config: &SharedConfig, tracking: &Tracking) {
    loop {
        match tracking.feed.recv(keyspace, POLL) {
            Ok(Some(group)) => {
                let limit = config.get().output_limit_pubsub;
                let keys: Vec<&[u8]> = group
                    .changes
                    .iter()
                    .filter(|c| c.background && matches!(c.kind, Kind::Del | Kind::HashDel))
                    .map(|c| &c.key[..])
                    .collect();
                for key in &keys {
                    let _locked = keyspace.lock_keys(&[keyspace.key(key)]);
                    tracking.invalidate(&[key], None, true, limit);
                }
                tracking.broadcast(&keys, None, limit);
            }
            Ok(None) => {}
            // Fell behind: invalidate everything rather than miss a key.
            Err(_) => tracking.invalidate_all(config.get().output_limit_pubsub),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalidations_are_encoded_as_redis_sends_them() {
        assert_eq!(
            &encode(Protocol::Resp3, false, Some(&[b"k"]))[..],
            b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n"
        );
        assert_eq!(
            &encode(Protocol::Resp3, false, None)[..],
            b">2\r\n$10\r\ninvalidate\r\n_\r\n"
        );
        assert_eq!(
            &encode(Protocol::Resp2, true, Some(&[b"key", b"k2"]))[..],
            b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*2\r\n$3\r\nkey\r\n$2\r\nk2\r\n"
        );
        assert_eq!(
            &encode(Protocol::Resp2, true, None)[..],
            b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n$-1\r\n"
        );
    }
}
