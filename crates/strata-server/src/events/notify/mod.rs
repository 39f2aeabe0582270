//! Keyspace notifications (`notify-keyspace-events`), as Redis 7 has them.
//!
//! An event is published on `__keyspace@<db>__:<key>` (message: the
//! event's name) when the flags hold `K`, and on
//! `__keyevent@<db>__:<event>` (message: the key) when they hold `E`,
//! provided the flags also hold the event's class (`g` generic, `$`
//! string, `l` list, `s` set, `h` hash, `z` sorted set, `x` expired, `e`
//! evicted, `n` new key; `A` is `g$lshzxetd`). Delivery is pub/sub's:
//! fire and forget, to whoever subscribes at that moment.
//!
//! Two sources feed it:
//!
//! - **Commands** call [`crate::commands::Ctx::notify`] with the event
//!   name Redis uses (`set`, `lpush`, `del`, `expire`, `rename_from` …)
//!   after they change a key, so the writer's events are published before
//!   its reply is written, in the order the command made them.
//! - **The change feed** carries what no command decides: keys that expire
//!   (lazily when a command meets them, or in the background: `expired`),
//!   hash fields that expire (`hexpired`, then `del` if the hash is left
//!   empty), keys removed by a deleting eviction policy (`evicted`) and
//!   keys created (`new`). One thread ([`spawn_feed_events`]) reads the
//!   feed while a flag that needs it is on, and publishes these in commit
//!   order, moments after the commit. It subscribes when CONFIG SET turns
//!   such a flag on, before replying ([`crate::events::feed_slot`]). If it falls
//!   more than the feed's capacity behind, the events in between are lost
//!   (as a Redis subscriber past its output limit loses them) and it goes
//!   on.
//!
//! A value leaving RAM for disk is not a change of data and fires nothing.

use std::sync::Arc;
use std::time::Duration;

use strata_engine::Keyspace;
use strata_engine::feed::{Cause, Change};
use strata_engine::storage::record::Kind;

use crate::config::{OutputLimit, SharedConfig};
use crate::events::feed_slot::FeedSlot;
use crate::events::pubsub::PubSub;

pub mod classes;

pub use classes::{
    ALL, EVICTED, EXPIRED, GENERIC, HASH, KEY_MISS, KEYEVENT, KEYSPACE, LIST, MODULE, NEW, SET,
    STREAM, STRING, ZSET, flags_to_string, parse_flags,
};

/// Events the feed thread publishes, one class each.
const FEED_CLASSES: u32 = EXPIRED | EVICTED | NEW | HASH | GENERIC;

/// Whether an event of `class` is published under `flags`.
pub fn wanted(flags: u32, class: u32) -> bool {
    flags & class != 0 && flags & (KEYSPACE | KEYEVENT) != 0
}

/// Publishes `event` on `key` of database `db` under `flags` (see the
/// module docs); the caller checked [`wanted`].
pub fn publish(
    pubsub: &PubSub,
    limit: OutputLimit,
    flags: u32,
    event: &str,
    db: usize,
    key: &[u8],
) {
    if flags & KEYSPACE != 0 {
        let mut channel = format!("__keyspace@{db}__:").into_bytes();
        channel.extend_from_slice(key);
        pubsub.publish(&channel, event.as_bytes(), false, limit);
    }
    if flags & KEYEVENT != 0 {
        let channel = format!("__keyevent@{db}__:{event}");
        pubsub.publish(channel.as_bytes(), key, false, limit);
    }
}

/// Whether `flags` need the change feed (see [`spawn_feed_events`]).
pub fn needs_feed(flags: u32) -> bool {
    wanted(flags, FEED_CLASSES)
}

/// Starts the thread that publishes the feed's events (module docs), with
/// `slot` subscribed while the configuration [`needs_feed`].
pub fn spawn_feed_events(
    keyspace: Arc<Keyspace>,
    config: Arc<SharedConfig>,
    pubsub: Arc<PubSub>,
    slot: Arc<FeedSlot>,
) -> std::io::Result<()> {
    slot.want(&keyspace, needs_feed(config.get().notify_keyspace_events));
    std::thread::Builder::new()
        .name("strata-notify".into())
        .spawn(move || feed_events(&keyspace, &config, &pubsub, &slot))?;
    Ok(())
}

/// How long the thread waits for a group at a time (nothing is done
/// between two waits: a long wait only saves an idle server's wake-ups).
const POLL: Duration = Duration::from_secs(1);

fn feed_events(keyspace: &Keyspace, config: &SharedConfig, pubsub: &PubSub, slot: &FeedSlot) {
    loop {
        // Nothing, or fell behind (what it missed is lost; the slot starts
        // again from now): wait again.
        let Ok(Some(group)) = slot.recv(keyspace, POLL) else {
            continue;
        };
        // The flags when the change is seen, not when the wait began.
        let current = config.get();
        let (flags, limit) = (current.notify_keyspace_events, current.output_limit_pubsub);
        let mut previous: Option<&Change> = None;
        for change in &group.changes {
            if let Some((class, event)) = event_of(change, previous)
                && wanted(flags, class)
            {
                publish(pubsub, limit, flags, event, change.db as usize, &change.key);
            }
            previous = Some(change);
        }
    }
}

/// The event a change fires from the feed, if any; `previous` is the
/// change before it in the same group.
fn event_of(change: &Change, previous: Option<&Change>) -> Option<(u32, &'static str)> {
    match (change.kind, change.cause) {
        (Kind::Del, Cause::Expired) => {
            // A hash whose last fields expired is deleted, not expired.
            let emptied = previous.is_some_and(|p| {
                p.kind == Kind::HashDel
                    && p.cause == Cause::Expired
                    && p.db == change.db
                    && p.key == change.key
            });
            Some(if emptied {
                (GENERIC, "del")
            } else {
                (EXPIRED, "expired")
            })
        }
        (Kind::HashDel, Cause::Expired) => Some((HASH, "hexpired")),
        (Kind::Del, Cause::Evicted) => Some((EVICTED, "evicted")),
        // A key made by SET, or by the push, add or put that created it.
        (_, Cause::Created) => Some((NEW, "new")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_round_trip_in_redis_order() {
        for (given, shown) in [
            ("gKE", "gKE"),
            ("$lshzxeKE", "$lshzxeKE"),
            ("KA", "AK"),
            ("EA", "AE"),
            ("", ""),
            ("Am", "Am"),
            ("En", "nE"),
        ] {
            assert_eq!(
                flags_to_string(parse_flags(given).unwrap()),
                shown,
                "{given}"
            );
        }
        assert_eq!(parse_flags("KEq"), None);
    }

    #[test]
    fn a_class_needs_k_or_e() {
        let flags = parse_flags("g").unwrap();
        assert!(!wanted(flags, GENERIC));
        assert!(wanted(flags | KEYEVENT, GENERIC));
        assert!(!wanted(flags | KEYEVENT, STRING));
    }
}
