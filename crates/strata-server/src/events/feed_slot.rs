//! A change-feed subscription that exists exactly while someone needs it,
//! shared between the code that decides (a command turning a feature on)
//! and the thread that reads it.
//!
//! Subscribing costs every commit, so keyspace notifications and client
//! tracking subscribe only while they are on. The subscription is taken
//! by the command that turns the feature on, before it replies: a change
//! committed right after that reply is in the feed already, whatever the
//! reading thread was doing (it could be asleep between two looks at the
//! configuration, which used to lose an expiry that came that soon).

use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use strata_engine::Keyspace;
use strata_engine::feed::{Group, Lagged, Subscription};

/// Groups a reader may be behind before it has lagged.
const FEED_CAPACITY: usize = 65_536;

#[derive(Default)]
pub struct FeedSlot {
    current: Mutex<Option<Arc<Subscription>>>,
    /// Wakes a reader waiting for a subscription ([`FeedSlot::want`]).
    subscribed: Condvar,
}

impl FeedSlot {
    /// Subscribes now if `wanted` and not subscribed; unsubscribes if not
    /// `wanted`.
    pub fn want(&self, keyspace: &Keyspace, wanted: bool) {
        let mut current = self.current.lock();
        match (wanted, current.is_some()) {
            (true, false) => {
                *current = Some(Arc::new(keyspace.subscribe(FEED_CAPACITY)));
                self.subscribed.notify_all();
            }
            (false, true) => *current = None,
            _ => {}
        }
    }

    /// The next group, waiting up to `timeout` (for a subscription first
    /// when there is none: an idle reader sleeps until one is taken). A
    /// reader that lagged gets `Err` once and a fresh subscription from
    /// then on.
    pub fn recv(
        &self,
        keyspace: &Keyspace,
        timeout: Duration,
    ) -> Result<Option<Arc<Group>>, Lagged> {
        let subscription = {
            let mut current = self.current.lock();
            if current.is_none() {
                self.subscribed.wait_for(&mut current, timeout);
            }
            current.clone()
        };
        let Some(subscription) = subscription else {
            return Ok(None);
        };
        let received = subscription.recv_timeout(timeout);
        if received.is_err() {
            let mut current = self.current.lock();
            if current
                .as_ref()
                .is_some_and(|c| Arc::ptr_eq(c, &subscription))
            {
                *current = Some(Arc::new(keyspace.subscribe(FEED_CAPACITY)));
            }
        }
        received
    }
}
