//! Clients blocked on keys (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP,
//! BZPOPMIN, BZPOPMAX, BZMPOP) and what wakes them.
//!
//! A blocking command that finds nothing to pop asks to block
//! ([`crate::net::session::Block`]); its connection registers a [`Ticket`] here,
//! one place in the queue of each key it waits on, and runs the command
//! again whenever woken, until it pops something, times out, is unblocked
//! (CLIENT UNBLOCK), killed or disconnected. Running the same command again
//! keeps all of its semantics in one place (the handler): which key wins,
//! WRONGTYPE on a destination, the reply's shape.
//!
//! **What wakes a waiter.** Every committed change reaches the change feed
//! (`strata_engine::feed`), from whichever thread made it; one thread here
//! reads the feed while anyone waits on keys and wakes the *first* waiter
//! of each changed key (database-wide changes, FLUSHDB, FLUSHALL, SWAPDB,
//! wake the first of every key). So the feed is subscribed only while
//! someone waits on keys (subscribing costs every commit; WAIT and WAITAOF
//! wait on none), and a ticket subscribes it before its command runs
//! again, so no change after that run is missed.
//!
//! **FIFO among waiters.** Only the head of a key's queue is woken. A waiter
//! keeps its place while it finds nothing (another client popped first, or
//! the key holds another type, where Redis 7.0 keeps it blocked too) and
//! leaves the queues only when it is done; leaving wakes the new heads of
//! its keys, so a push of several elements serves several waiters in the
//! order they blocked, and a wake a waiter absorbed without using it is
//! passed on. Wake-ups may be spurious (the command then finds nothing and
//! waits again); none is lost.
//!
//! **Served before the waking command answers.** Redis serves the clients
//! a command woke before it runs the next command, so once a client has
//! the reply of its LPUSH, the BLMOVE that push woke has moved the element
//! (and the BLMOVE that move woke has moved it on). The feed thread alone
//! wakes a waiter some time after the reply. So dispatch also wakes the
//! heads of the keys a command changed itself ([`Blocking::wake_changed`])
//! and notes them ([`Woken`]); the connection awaits their next run
//! ([`await_runs`]) before it sends its replies. A waiter that ran counts
//! the run ([`Waiter::ran`]) only after it has left its queues and
//! awaited the waiters its own run woke, so chains are served whole. The
//! wait is bounded ([`SERVE_WAIT`]): if a woken client cannot run in that
//! time the reply goes out anyway, as it did before, and nothing else
//! changes (the feed thread wakes it as well).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use strata_engine::Keyspace;
use strata_engine::feed::Subscription;
use tokio::sync::Notify;

/// Groups of changes the waking thread's feed queue holds before it lags
/// (then every waiter is woken once and the feed subscribed again).
const FEED_CAPACITY: usize = 65_536;
/// How often the waking thread looks whether anyone still waits.
const IDLE_CHECK: Duration = Duration::from_millis(100);
/// How long a command's replies wait, at most, for the clients it woke
/// to run again.
pub const SERVE_WAIT: Duration = Duration::from_secs(1);

/// One blocked connection's wake-up signal.
#[derive(Default)]
pub struct Waiter {
    notify: Notify,
    /// Whether it ends when its key is deleted (XREADGROUP), which INFO
    /// counts as `total_blocking_keys_on_nokey`.
    on_nokey: bool,
    /// Runs done since it blocked (each after the waiters it woke ran).
    runs: AtomicU64,
    /// Set when it has left its queues for good.
    gone: AtomicBool,
    /// Told of each run and of leaving.
    ran: Notify,
}

impl Waiter {
    pub async fn woken(&self) {
        self.notify.notified().await
    }

    /// Counts one more run of the blocked command and tells whoever
    /// awaits it.
    pub fn ran(&self) {
        self.runs.fetch_add(1, SeqCst);
        self.ran.notify_waiters();
    }

    fn leave(&self) {
        self.gone.store(true, SeqCst);
        self.ran.notify_waiters();
    }

    /// Whether it ran after `runs` runs, or left.
    fn ran_since(&self, runs: u64) -> bool {
        self.runs.load(SeqCst) > runs || self.gone.load(SeqCst)
    }
}

/// A waiter a command woke, and how many runs it had done then: the
/// command's reply waits until it did one more (or left).
pub struct Woken {
    waiter: Arc<Waiter>,
    runs: u64,
}

impl Woken {
    /// Whether this is `waiter` (a blocked client does not await itself).
    pub fn is(&self, waiter: &Waiter) -> bool {
        std::ptr::eq(Arc::as_ptr(&self.waiter), waiter)
    }
}

/// Adds `waiter` to `woken` (once), with the runs it has done so far.
fn note_woken(woken: &mut Vec<Woken>, waiter: &Arc<Waiter>) {
    if !woken.iter().any(|w| w.is(waiter)) {
        woken.push(Woken {
            waiter: waiter.clone(),
            runs: waiter.runs.load(SeqCst),
        });
    }
}

/// Waits until every client in `woken` ran again or left, for at most
/// [`SERVE_WAIT`] in all; empties `woken`.
pub async fn await_runs(woken: &mut Vec<Woken>) {
    let all = async {
        for one in woken.iter() {
            loop {
                let ran = one.waiter.ran.notified();
                tokio::pin!(ran);
                ran.as_mut().enable();
                if one.waiter.ran_since(one.runs) {
                    break;
                }
                ran.await;
            }
        }
    };
    let _ = tokio::time::timeout(SERVE_WAIT, all).await;
    woken.clear();
}

#[derive(Default)]
struct State {
    /// Waiters by database and key (see [`queue_key`]), first come first.
    queues: HashMap<Vec<u8>, VecDeque<Arc<Waiter>>>,
    /// Blocked clients (INFO's `blocked_clients`).
    waiters: usize,
    /// Those of them that wait on keys: WAIT and WAITAOF wait on none
    /// (replicas' acknowledgements wake them) and need no feed.
    keyed: usize,
    /// Whether a feed subscription exists (handed over or held by the
    /// waking thread).
    subscribed: bool,
    /// A new subscription for the waking thread to take.
    handover: Option<Subscription>,
}

pub struct Blocking {
    keyspace: Arc<Keyspace>,
    state: Mutex<State>,
    subscribed: Condvar,
    /// `state.keyed`, readable without the lock (the check every
    /// command that changed something makes).
    waiting: AtomicUsize,
}

/// The queue name of `key` in database `db`.
fn queue_key(db: usize, key: &[u8]) -> Vec<u8> {
    let mut name = Vec::with_capacity(2 + key.len());
    name.extend_from_slice(&(db as u16).to_le_bytes());
    name.extend_from_slice(key);
    name
}

impl Blocking {
    /// The registry and its waking thread.
    pub fn start(keyspace: Arc<Keyspace>) -> std::io::Result<Arc<Blocking>> {
        let blocking = Arc::new(Blocking {
            keyspace,
            state: Mutex::new(State::default()),
            subscribed: Condvar::new(),
            waiting: AtomicUsize::new(0),
        });
        let waking = blocking.clone();
        std::thread::Builder::new()
            .name("strata-unblock".into())
            .spawn(move || waking.wake_loop())?;
        Ok(blocking)
    }

    /// Clients blocked now (INFO's `blocked_clients`).
    pub fn blocked_clients(&self) -> usize {
        self.state.lock().waiters
    }

    /// Keys some client waits on, and those of them a waiter must hear
    /// of when they are deleted (INFO's `total_blocking_keys`,
    /// `total_blocking_keys_on_nokey`).
    pub fn blocking_keys(&self) -> (usize, usize) {
        let state = self.state.lock();
        let on_nokey = (state.queues.values())
            .filter(|queue| queue.iter().any(|w| w.on_nokey))
            .count();
        (state.queues.len(), on_nokey)
    }

    /// Puts a new waiter at the end of the queue of each of `keys` in
    /// database `db`, the feed subscribed before this returns.
    pub fn register(self: &Arc<Self>, db: usize, keys: &[bytes::Bytes], on_nokey: bool) -> Ticket {
        let waiter = Arc::new(Waiter {
            on_nokey,
            ..Waiter::default()
        });
        let mut names: Vec<Vec<u8>> = keys.iter().map(|k| queue_key(db, k)).collect();
        names.sort();
        names.dedup();
        let mut state = self.state.lock();
        for name in &names {
            state
                .queues
                .entry(name.clone())
                .or_default()
                .push_back(waiter.clone());
        }
        state.waiters += 1;
        if !names.is_empty() {
            state.keyed += 1;
        }
        self.waiting.store(state.keyed, Relaxed);
        // Only a waiter on keys needs the feed: a WAIT under a write load
        // would otherwise keep it subscribed, which costs every commit.
        if state.keyed > 0 && !state.subscribed {
            state.handover = Some(self.keyspace.subscribe(FEED_CAPACITY));
            state.subscribed = true;
            self.subscribed.notify_one();
        }
        Ticket {
            blocking: self.clone(),
            waiter,
            names,
            left: false,
        }
    }

    /// Wakes the waiters of the keys in `changed` (database `db`'s, as
    /// the feed thread would) and adds them to `woken`, so the command's
    /// replies can wait until they ran. Costs one atomic load when nobody
    /// waits.
    pub fn wake_changed(
        &self,
        changed: &strata_engine::keyspace::commit::Changed,
        woken: &mut Vec<Woken>,
    ) {
        if self.waiting.load(Relaxed) == 0 || changed.is_empty() {
            return;
        }
        let state = self.state.lock();
        let mut note =
            |queue: &VecDeque<Arc<Waiter>>| wake_head(queue, |waiter| note_woken(woken, waiter));
        for change in changed.changes() {
            if change.key.is_empty() {
                state.queues.values().for_each(&mut note);
            } else if let Some(queue) = state.queues.get(&queue_key(change.db as usize, change.key))
            {
                note(queue);
            }
        }
    }

    /// Whether `waiter` is first in line for `key` of database `db`:
    /// no client that blocked on it earlier still waits. A key's
    /// clients are served in the order they blocked, so a client woken
    /// for one key leaves another's elements to whoever waits there
    /// before it.
    pub fn first_in_line(&self, db: usize, key: &[u8], waiter: &Waiter) -> bool {
        let state = self.state.lock();
        (state.queues.get(&queue_key(db, key)))
            .and_then(VecDeque::front)
            .is_none_or(|first| std::ptr::eq(Arc::as_ptr(first), waiter))
    }

    fn wake_loop(&self) {
        loop {
            let subscription = {
                let mut state = self.state.lock();
                loop {
                    if let Some(subscription) = state.handover.take() {
                        break subscription;
                    }
                    self.subscribed.wait(&mut state);
                }
            };
            loop {
                match subscription.recv_timeout(IDLE_CHECK) {
                    Ok(Some(group)) => {
                        let mut state = self.state.lock();
                        // Under a steady write load the feed never goes
                        // quiet: the last keyed waiter leaving ends the
                        // subscription here, not at the next idle check.
                        if state.keyed == 0 {
                            state.subscribed = false;
                            break;
                        }
                        for change in &group.changes {
                            if change.key.is_empty() {
                                wake_all(&state);
                            } else if let Some(queue) = state
                                .queues
                                .get(&queue_key(change.db as usize, &change.key))
                            {
                                wake_head(queue, |_| {});
                            }
                        }
                    }
                    Ok(None) => {
                        let mut state = self.state.lock();
                        if state.keyed == 0 {
                            state.subscribed = false;
                            break;
                        }
                    }
                    Err(_lagged) => {
                        // Changes were missed: every waiter looks again.
                        let mut state = self.state.lock();
                        wake_all(&state);
                        if state.keyed == 0 {
                            state.subscribed = false;
                        } else {
                            state.handover = Some(self.keyspace.subscribe(FEED_CAPACITY));
                        }
                        break;
                    }
                }
            }
        }
    }
}

/// Wakes the first waiter of a changed key, and every waiter that must
/// hear of the key's deletion (XREADGROUP): behind a BLPOP of the same
/// key, which finds nothing and keeps its place, one would never wake.
/// Those run again, answer if the stream or group went, and otherwise
/// wait on without changing anything.
/// `woke` is told of each waiter woken.
fn wake_head(queue: &VecDeque<Arc<Waiter>>, mut woke: impl FnMut(&Arc<Waiter>)) {
    if let Some(head) = queue.front() {
        head.notify.notify_one();
        woke(head);
    }
    for waiter in queue.iter().skip(1).filter(|w| w.on_nokey) {
        waiter.notify.notify_one();
        woke(waiter);
    }
}

fn wake_all(state: &State) {
    for queue in state.queues.values() {
        wake_head(queue, |_| {});
    }
}

/// A blocked connection's places in its keys' queues; dropping it leaves
/// them and wakes the new heads.
pub struct Ticket {
    blocking: Arc<Blocking>,
    waiter: Arc<Waiter>,
    names: Vec<Vec<u8>>,
    /// Whether it left the queues already ([`Ticket::leave`]).
    left: bool,
}

impl Ticket {
    pub fn waiter(&self) -> &Waiter {
        &self.waiter
    }

    /// Its waiter, to keep while its command runs again
    /// ([`Blocking::first_in_line`]).
    pub fn shared_waiter(&self) -> Arc<Waiter> {
        self.waiter.clone()
    }

    /// Leaves the queues, adding the new heads it wakes to `woken` (the
    /// turns a client that popped passes on are served before the reply
    /// of the command that woke it, as Redis serves them). Whoever awaits
    /// this waiter is released when the [`Leaving`] drops: after the
    /// caller awaited `woken`.
    pub fn leave(mut self, woken: &mut Vec<Woken>) -> Leaving {
        self.leave_noting(|waiter| note_woken(woken, waiter));
        woken.retain(|w| !w.is(&self.waiter));
        Leaving {
            waiter: self.waiter.clone(),
        }
    }

    fn leave_noting(&mut self, mut woke: impl FnMut(&Arc<Waiter>)) {
        if std::mem::replace(&mut self.left, true) {
            return;
        }
        let mut state = self.blocking.state.lock();
        for name in &self.names {
            let Some(queue) = state.queues.get_mut(name) else {
                continue;
            };
            queue.retain(|w| !Arc::ptr_eq(w, &self.waiter));
            if queue.is_empty() {
                state.queues.remove(name);
            } else {
                wake_head(queue, &mut woke);
            }
        }
        state.waiters -= 1;
        if !self.names.is_empty() {
            state.keyed -= 1;
        }
        self.blocking.waiting.store(state.keyed, Relaxed);
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.left {
            self.leave_noting(|_| {});
            self.waiter.leave();
        }
    }
}

/// A waiter that left its queues: dropping it releases whoever awaits
/// its run ([`await_runs`]).
pub struct Leaving {
    waiter: Arc<Waiter>,
}

impl Drop for Leaving {
    fn drop(&mut self) {
        self.waiter.leave();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_engine::Value;

    fn wait(waiter: &Waiter, within: Duration) -> bool {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async { tokio::time::timeout(within, waiter.woken()).await.is_ok() })
    }

    fn set(keyspace: &Keyspace, key: &[u8]) {
        let key = keyspace.key(key);
        let mut set = keyspace.lock_many([key]);
        set.shard(key.shard())
            .set(0, key, Value::from_bytes(b"v"), None, false, 1);
        set.commit();
    }

    #[test]
    fn only_the_head_of_a_key_is_woken_and_leaving_passes_the_turn() {
        let keyspace = Arc::new(Keyspace::new(1));
        let blocking = Blocking::start(keyspace.clone()).unwrap();
        let first = blocking.register(0, &[bytes::Bytes::from_static(b"k")], false);
        let second = blocking.register(0, &[bytes::Bytes::from_static(b"k")], false);
        assert_eq!(blocking.blocked_clients(), 2);
        set(&keyspace, b"other");
        assert!(!wait(first.waiter(), Duration::from_millis(300)));
        set(&keyspace, b"k");
        assert!(wait(first.waiter(), Duration::from_secs(10)));
        assert!(!wait(second.waiter(), Duration::from_millis(300)));
        drop(first);
        assert!(wait(second.waiter(), Duration::from_secs(10)));
        drop(second);
        assert_eq!(blocking.blocked_clients(), 0);
    }

    #[test]
    fn the_feed_is_read_only_while_someone_waits_on_keys() {
        let keyspace = Arc::new(Keyspace::new(1));
        let blocking = Blocking::start(keyspace.clone()).unwrap();
        let subscribed = || blocking.state.lock().subscribed;
        // A WAIT waits on no key: no subscription.
        let wait_ticket = blocking.register(0, &[], false);
        assert_eq!(blocking.blocked_clients(), 1);
        assert!(!subscribed());
        let keyed = blocking.register(0, &[bytes::Bytes::from_static(b"k")], false);
        assert!(subscribed());
        // Once the keyed waiter leaves, the subscription ends although
        // writes never stop (the WAIT still waits).
        drop(keyed);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut n = 0u32;
        while subscribed() {
            assert!(std::time::Instant::now() < deadline, "still subscribed");
            n += 1;
            set(&keyspace, format!("w{}", n % 64).as_bytes());
        }
        assert_eq!(blocking.blocked_clients(), 1);
        drop(wait_ticket);
        assert_eq!(blocking.blocked_clients(), 0);
    }
}
