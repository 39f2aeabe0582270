//! Before-images of the keys a pinned lock set changes (a script run), so
//! that the run can be undone whole: a script must be all or nothing,
//! and there are two ways it can fail to finish while holding writes.
//!
//! - **A key it did not declare whose shard it cannot take.** Its shards
//!   were locked for its declared keys; another key's shard is taken if
//!   that cannot deadlock (in lock order, or free now). When it can
//!   deadlock (busy and out of order: its holder may be waiting for one
//!   of ours), the run is undone, its locks released and it runs again
//!   with every shard locked — nothing it did is left behind.
//! - **A panic in a command it called.** The lock set is undone before its
//!   group commits, so none of the run's changes survive.
//!
//! An image is taken before a write command touches a key, the first time
//! per key: the value's image, type and deadline (or its absence). Undoing
//! puts each back with the ordinary engine calls (set, remove), so the
//! records they log ride in the run's own group, after the run's records:
//! committed together, they leave the log as if the run never happened,
//! and every index (expiry, tiering locations, memory) stays right.
//!
//! Images cost a copy of each changed value, so a run keeps at most
//! [`UNDO_BYTES_MAX`] of them; a run that would need more takes every
//! shard first (it can then meet no busy shard) and keeps none.

use crate::KeyRef;
use crate::keyspace::shard::Shard;
use crate::types::value::{Value, ValueType};

/// Image bytes one run may keep.
pub(crate) const UNDO_BYTES_MAX: usize = 256 << 10;

/// A key as it was before the run first changed it.
pub(crate) struct Before {
    db: usize,
    key: Vec<u8>,
    /// Type, image and deadline (0: none); `None`: the key was absent.
    value: Option<(ValueType, Vec<u8>, u64)>,
}

/// The images one run keeps.
pub(crate) struct Undo {
    befores: Vec<Before>,
    bytes: usize,
    /// Images were refused for size: this run cannot be undone.
    given_up: bool,
    /// The run's clock (an undo made by a panic has no other).
    now_ms: u64,
}

/// Why [`Undo::capture`] kept no image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UndoFull;

impl Undo {
    pub(crate) fn new(now_ms: u64) -> Undo {
        Undo {
            befores: Vec::new(),
            bytes: 0,
            given_up: false,
            now_ms,
        }
    }

    pub(crate) fn now_ms(&self) -> u64 {
        self.now_ms
    }

    /// Whether the run can still be undone.
    pub(crate) fn usable(&self) -> bool {
        !self.given_up
    }

    /// Drops every image: the run will not be undone (it holds every
    /// shard, or has done something images cannot take back).
    pub(crate) fn give_up(&mut self) {
        self.befores = Vec::new();
        self.bytes = 0;
        self.given_up = true;
    }

    /// Keeps `key`'s image from `shard` unless one is kept already;
    /// [`UndoFull`] when it would pass [`UNDO_BYTES_MAX`].
    pub(crate) fn capture(
        &mut self,
        shard: &mut Shard,
        db: usize,
        key: KeyRef,
        now_ms: u64,
    ) -> Result<(), UndoFull> {
        if self.given_up {
            return Err(UndoFull);
        }
        if self
            .befores
            .iter()
            .any(|before| before.db == db && before.key == key.bytes)
        {
            return Ok(());
        }
        // The value must be in RAM to be copied (a cold one is read as a
        // command reading it would be).
        let value = match shard.peek_loaded(db, key, now_ms) {
            Ok(Some(entry)) => {
                let len = entry.image_len() + key.bytes.len();
                if self.bytes + len > UNDO_BYTES_MAX {
                    return Err(UndoFull);
                }
                let mut scratch = Vec::new();
                let image = entry.image(&mut scratch).to_vec();
                self.bytes += len;
                Some((entry.value_type(), image, entry.expire_at_ms().unwrap_or(0)))
            }
            Ok(None) => None,
            // Unreadable from disk: the command will fail on it anyway,
            // and nothing could be put back.
            Err(_) => return Err(UndoFull),
        };
        self.befores.push(Before {
            db,
            key: key.bytes.to_vec(),
            value,
        });
        Ok(())
    }

    /// Hands over the kept images, newest last, and forgets them.
    pub(crate) fn take(&mut self) -> Vec<Before> {
        self.bytes = 0;
        std::mem::take(&mut self.befores)
    }
}

impl Before {
    /// Puts this key back as it was, through `shard` (its locked shard):
    /// logged as a SET of the old image, or a DEL.
    pub(crate) fn restore(self, shard: &mut Shard, hash: u64, now_ms: u64) {
        let key = KeyRef {
            bytes: &self.key,
            hash,
        };
        match self.value {
            None => {
                shard.remove(self.db, key, now_ms);
            }
            Some((value_type, image, deadline)) => {
                let value = match value_type {
                    ValueType::String => Value::from_bytes(&image),
                    ValueType::Hash => Value::Hash(image.as_slice().into()),
                    ValueType::List => Value::List(image.as_slice().into()),
                    ValueType::Set => Value::Set(image.as_slice().into()),
                    ValueType::ZSet => Value::ZSet(image.as_slice().into()),
                    ValueType::Stream => Value::Stream(image.as_slice().into()),
                };
                let deadline = (deadline != 0).then_some(deadline);
                shard.set(self.db, key, value, deadline, false, now_ms);
            }
        }
    }

    pub(crate) fn key(&self) -> &[u8] {
        &self.key
    }
}
