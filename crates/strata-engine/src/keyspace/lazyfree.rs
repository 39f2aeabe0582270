//! Freeing big collections off the command path, as Redis' UNLINK and
//! `lazyfree-lazy-user-del` do: a deleted list, set, sorted set or hash
//! table of more than [`ELEMENTS_MIN`] elements is handed to one
//! background thread that drops it, so DEL of a 10-million-element list
//! holds its shard lock for microseconds rather than for the time it
//! takes to free every node. Smaller values are freed in place (handing
//! them over would cost more than freeing them). Values replaced in place
//! or leaving RAM are freed where they are.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{Sender, channel};

/// Redis' LAZYFREE_THRESHOLD: collections with more elements than this
/// are freed in the background.
pub(crate) const ELEMENTS_MIN: usize = 64;

type Garbage = Box<dyn Send>;

static QUEUE: OnceLock<Option<Sender<Garbage>>> = OnceLock::new();
static PENDING: AtomicU64 = AtomicU64::new(0);
static FREED: AtomicU64 = AtomicU64::new(0);

fn queue() -> Option<&'static Sender<Garbage>> {
    QUEUE
        .get_or_init(|| {
            let (sender, receiver) = channel::<Garbage>();
            std::thread::Builder::new()
                .name("strata-lazyfree".into())
                .spawn(move || {
                    for garbage in receiver {
                        drop(garbage);
                        PENDING.fetch_sub(1, Relaxed);
                        FREED.fetch_add(1, Relaxed);
                    }
                })
                .ok()
                .map(|_| sender)
        })
        .as_ref()
}

/// Frees `value` on the background thread (in place if it cannot start).
pub(crate) fn free_later(value: Garbage) {
    match queue() {
        Some(sender) => {
            PENDING.fetch_add(1, Relaxed);
            if let Err(returned) = sender.send(value) {
                PENDING.fetch_sub(1, Relaxed);
                drop(returned);
            }
        }
        None => drop(value),
    }
}

/// Values waiting to be freed (INFO's `lazyfree_pending_objects`).
pub fn pending() -> u64 {
    PENDING.load(Relaxed)
}

/// Values freed in the background so far (INFO's `lazyfreed_objects`).
pub fn freed() -> u64 {
    FREED.load(Relaxed)
}

/// Counts `objects` freed off the command path elsewhere (a flushed
/// database's keys, as Redis 7.4 counts them).
pub fn count_freed(objects: u64) {
    FREED.fetch_add(objects, Relaxed);
}

/// CONFIG RESETSTAT: the count of freed values starts again at 0.
pub fn reset_freed() {
    FREED.store(0, Relaxed);
}
