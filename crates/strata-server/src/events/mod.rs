//! What one client's command makes other clients see: pub/sub, keyspace
//! notifications, client-side caching (tracking), blocked commands woken
//! by a change, MONITOR, and the change-feed subscriptions they share.
//!
//! - `pubsub`: channels and patterns, shard channels; `notify`: keyspace
//!   notifications and their classes; `tracking`: CLIENT TRACKING's
//!   invalidations.
//! - `blocking`: BLPOP, XREAD BLOCK and the like, woken by committed keys.
//! - `monitor`: MONITOR's stream; `feed_slot`: a change-feed subscription
//!   that exists exactly while someone needs it.

pub mod blocking;
pub mod feed_slot;
pub mod monitor;
pub mod notify;
pub mod pubsub;
pub mod tracking;
