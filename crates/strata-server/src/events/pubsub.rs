//! Pub/sub: who listens to what, and delivery.
//!
//! [`PubSub`] maps channels, patterns and shard channels to the
//! subscribed clients' [`Mailbox`]es, and each client to what it listens
//! to (so a disconnect unsubscribes everything). PUBLISH encodes a message
//! once per protocol (a RESP2 array or a RESP3 push), hands a reference to
//! every matching mailbox and wakes its connection, which writes it on its
//! own thread: fan-out to many subscribers uses every core, and the
//! publisher never waits for a subscriber.
//!
//! A mailbox is bounded by `client-output-buffer-limit pubsub`, counted
//! with the connection's unsent output: over the hard limit, or over the
//! soft limit for longer than its seconds, the subscriber is disconnected
//! (as Redis does) and its messages dropped, so a slow subscriber never
//! grows server memory without bound.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use parking_lot::RwLock;
use strata_resp::{Protocol, ReplyWriter};

use crate::config::OutputLimit;
pub use crate::net::client::Mailbox;

/// The three namespaces a client can subscribe in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Channel,
    Pattern,
    Shard,
}

impl Kind {
    /// The reply words for (un)subscribing and for a message.
    pub fn words(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Kind::Channel => ("subscribe", "unsubscribe", "message"),
            Kind::Pattern => ("psubscribe", "punsubscribe", "pmessage"),
            Kind::Shard => ("ssubscribe", "sunsubscribe", "smessage"),
        }
    }
}

type Subscribers = HashMap<u64, Arc<Mailbox>, foldhash::fast::RandomState>;

#[derive(Default)]
struct State {
    channels: HashMap<Bytes, Subscribers>,
    patterns: HashMap<Bytes, Subscribers>,
    shard_channels: HashMap<Bytes, Subscribers>,
    /// Per client: its channels, patterns and shard channels, in
    /// subscription order.
    clients: HashMap<u64, [Vec<Bytes>; 3]>,
}

impl State {
    fn table(&mut self, kind: Kind) -> &mut HashMap<Bytes, Subscribers> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard_channels,
        }
    }
}

/// The registry (see the module docs).
#[derive(Default)]
pub struct PubSub {
    state: RwLock<State>,
}

/// A client's subscription counts (CLIENT LIST's sub, psub, ssub).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub channels: usize,
    pub patterns: usize,
    pub shard: usize,
}

impl PubSub {
    /// Subscribes `mailbox`'s client to `name`; returns its counts after.
    pub fn subscribe(&self, kind: Kind, name: &Bytes, mailbox: &Arc<Mailbox>) -> Counts {
        let id = mailbox.id;
        // A copy of the name: the argument is a slice of the request's
        // input buffer, which a subscription must not keep whole.
        let name = Bytes::copy_from_slice(name);
        let mut state = self.state.write();
        let subscribers = state.table(kind).entry(name.clone()).or_default();
        if subscribers.insert(id, mailbox.clone()).is_none() {
            state.clients.entry(id).or_default()[kind as usize].push(name);
        }
        Self::counts_of(&state, id)
    }

    /// Unsubscribes client `id` from `name`; returns its counts after.
    pub fn unsubscribe(&self, kind: Kind, name: &[u8], id: u64) -> Counts {
        let mut state = self.state.write();
        let table = state.table(kind);
        if let Some(subscribers) = table.get_mut(name)
            && subscribers.remove(&id).is_some()
        {
            if subscribers.is_empty() {
                table.remove(name);
            }
            if let Some(names) = state.clients.get_mut(&id) {
                names[kind as usize].retain(|n| &n[..] != name);
                if names.iter().all(Vec::is_empty) {
                    state.clients.remove(&id);
                }
            }
        }
        Self::counts_of(&state, id)
    }

    /// What client `id` is subscribed to in `kind`, in order.
    pub fn names_of(&self, kind: Kind, id: u64) -> Vec<Bytes> {
        let state = self.state.read();
        state
            .clients
            .get(&id)
            .map(|names| names[kind as usize].clone())
            .unwrap_or_default()
    }

    pub fn counts(&self, id: u64) -> Counts {
        Self::counts_of(&self.state.read(), id)
    }

    fn counts_of(state: &State, id: u64) -> Counts {
        state
            .clients
            .get(&id)
            .map_or(Counts::default(), |names| Counts {
                channels: names[0].len(),
                patterns: names[1].len(),
                shard: names[2].len(),
            })
    }

    /// Unsubscribes a client from everything (it disconnected).
    pub fn forget(&self, id: u64) {
        for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
            for name in self.names_of(kind, id) {
                self.unsubscribe(kind, &name, id);
            }
        }
    }

    /// Delivers `payload` on `channel` (PUBLISH, or SPUBLISH with
    /// `shard`); returns how many clients received it. While this thread
    /// holds its messages ([`Held`]), the message waits there and the
    /// count is of those who would receive it now.
    pub fn publish(
        &self,
        channel: &[u8],
        payload: &[u8],
        shard: bool,
        limit: OutputLimit,
    ) -> usize {
        let held = HELD.with(|held| match &mut *held.borrow_mut() {
            Some(messages) if messages.len() < HELD_MESSAGES_MAX => {
                messages.push((channel.to_vec(), payload.to_vec(), shard, limit));
                true
            }
            _ => false,
        });
        match held {
            true => self.receivers(channel, shard),
            false => self.deliver_now(channel, payload, shard, limit),
        }
    }

    /// How many clients a message on `channel` would reach now.
    fn receivers(&self, channel: &[u8], shard: bool) -> usize {
        let state = self.state.read();
        let table = match shard {
            true => &state.shard_channels,
            false => &state.channels,
        };
        let direct = table.get(channel).map_or(0, HashMap::len);
        let by_pattern: usize = match shard {
            true => 0,
            false => state
                .patterns
                .iter()
                .filter(|(pattern, _)| strata_engine::glob::matches(pattern, channel, false))
                .map(|(_, subscribers)| subscribers.len())
                .sum(),
        };
        direct + by_pattern
    }

    fn deliver_now(
        &self,
        channel: &[u8],
        payload: &[u8],
        shard: bool,
        limit: OutputLimit,
    ) -> usize {
        let state = self.state.read();
        let mut messages = Encoded::default();
        let mut received = 0;
        let table = if shard {
            &state.shard_channels
        } else {
            &state.channels
        };
        let word = if shard { "smessage" } else { "message" };
        if let Some(subscribers) = table.get(channel) {
            for mailbox in subscribers.values() {
                let message =
                    messages.get(mailbox.protocol(), &[word.as_bytes(), channel, payload]);
                mailbox.deliver(message, limit);
                received += 1;
            }
        }
        if !shard {
            for (pattern, subscribers) in &state.patterns {
                if !strata_engine::glob::matches(pattern, channel, false) {
                    continue;
                }
                let mut per_pattern = Encoded::default();
                for mailbox in subscribers.values() {
                    let message = per_pattern.get(
                        mailbox.protocol(),
                        &[b"pmessage", pattern, channel, payload],
                    );
                    mailbox.deliver(message, limit);
                    received += 1;
                }
            }
        }
        received
    }

    /// Active channels (PUBSUB CHANNELS / SHARDCHANNELS), matching
    /// `pattern` if given.
    pub fn channels(&self, shard: bool, pattern: Option<&[u8]>) -> Vec<Bytes> {
        let state = self.state.read();
        let table = if shard {
            &state.shard_channels
        } else {
            &state.channels
        };
        table
            .keys()
            .filter(|name| pattern.is_none_or(|p| strata_engine::glob::matches(p, name, false)))
            .cloned()
            .collect()
    }

    /// Subscribers of `channel` (PUBSUB NUMSUB / SHARDNUMSUB).
    pub fn subscribers(&self, shard: bool, channel: &[u8]) -> usize {
        let state = self.state.read();
        let table = if shard {
            &state.shard_channels
        } else {
            &state.channels
        };
        table.get(channel).map_or(0, HashMap::len)
    }

    /// Patterns subscribed to by at least one client (PUBSUB NUMPAT).
    pub fn pattern_count(&self) -> usize {
        self.state.read().patterns.len()
    }
}

/// A message encoded at most once per protocol.
#[derive(Default)]
struct Encoded {
    resp2: Option<Bytes>,
    resp3: Option<Bytes>,
}

impl Encoded {
    fn get(&mut self, protocol: Protocol, parts: &[&[u8]]) -> Bytes {
        let slot = match protocol {
            Protocol::Resp2 => &mut self.resp2,
            _ => &mut self.resp3,
        };
        slot.get_or_insert_with(|| {
            let mut out = BytesMut::new();
            let mut writer = ReplyWriter::new(&mut out, protocol);
            writer.push(parts.len());
            for part in parts {
                writer.bulk(part);
            }
            out.freeze()
        })
        .clone()
    }
}

/// Messages a thread holds back: a script's PUBLISH and keyspace events
/// go out when the script ends, so a run that is undone and run again
/// (`strata_engine::keyspace::undo`) publishes nothing twice. Subscribers see them
/// at the same point as with Redis, where nothing else runs during a
/// script.
type HeldMessage = (Vec<u8>, Vec<u8>, bool, OutputLimit);

/// Messages one run holds at most; past it they are delivered at once.
const HELD_MESSAGES_MAX: usize = 100_000;

thread_local! {
    static HELD: std::cell::RefCell<Option<Vec<HeldMessage>>> = const { std::cell::RefCell::new(None) };
}

/// This thread's held messages, from [`Held::begin`] until released or
/// dropped (dropping discards them: the run is undone, or panicked).
pub struct Held {
    /// Whether this hold started the thread's holding (a script inside
    /// a held transaction leaves it to the outer one).
    outer: bool,
}

impl Held {
    /// Starts holding this thread's messages.
    pub fn begin() -> Held {
        let outer = HELD.with(|held| {
            let mut held = held.borrow_mut();
            let outer = held.is_none();
            if outer {
                *held = Some(Vec::new());
            }
            outer
        });
        Held { outer }
    }

    /// Forgets the messages held so far (the run is undone).
    pub fn discard(&self) {
        if self.outer {
            HELD.with(|held| {
                if let Some(messages) = &mut *held.borrow_mut() {
                    messages.clear();
                }
            });
        }
    }

    /// Delivers the held messages, in order, and stops holding.
    pub fn release(self, pubsub: &PubSub) {
        if !self.outer {
            return;
        }
        let messages = HELD
            .with(|held| held.borrow_mut().take())
            .unwrap_or_default();
        for (channel, payload, shard, limit) in messages {
            pubsub.deliver_now(&channel, &payload, shard, limit);
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.outer {
            HELD.with(|held| held.borrow_mut().take());
        }
    }
}
