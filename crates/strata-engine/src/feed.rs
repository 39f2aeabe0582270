//! The change feed: every committed group of changes, in commit order, to
//! whoever subscribed (WATCH, blocking commands, keyspace notifications,
//! client tracking and replication will).
//!
//! A group is what one lock hold changed (one command today; a whole
//! MULTI/EXEC or script later): its sequence number and, per record, the
//! kind of change, the database and the key. Those are the list the
//! commit itself hands back (`crate::keyspace::commit::Changed`), so publishing
//! never decodes the sealed records again. With the log on, the sequence
//! number is the group's last LSN and groups are published inside the
//! log's commit, so the feed's order is the log's order across threads.
//! With `appendonly no` the feed numbers groups itself, under its own
//! mutex, while the changing shard locks are still held, so two groups
//! touching one key are published in the order they were applied.
//! Changes that are not changes of data (value images written so a value
//! can leave RAM, compaction moving values) are not published.
//!
//! Nothing is dropped silently. Each subscription has a bounded queue; a
//! subscriber that falls behind by more than its capacity is told so
//! ([`Lagged`]) after the groups it did receive, and receives nothing more
//! (it must resubscribe and resynchronise, as a Redis replica does after a
//! backlog overrun). Publishing never waits for a subscriber. With no
//! subscriber, committing costs one relaxed atomic load.
//!
//! **Wake-ups wait for the end of a turn.** A subscriber that sleeps on
//! its queue is woken by a futex call, and on this machine's VMs a
//! wake-up costs the waker more than the commit itself. A thread that
//! commits many small groups in a row (a network thread running a
//! pipeline for each of its ready connections) calls [`defer_wakeups`]
//! once: its groups are queued at once as before (a subscriber that looks
//! sees them), but the sleepers are woken when it calls [`wake_deferred`],
//! at the end of its turn and before it parks, once for all the groups
//! of that turn, as Redis writes to its replicas before it sleeps.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::keyspace::commit::{ChangeRef, Changed};
use crate::storage::record::{self, Kind};

/// One change of one record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub kind: Kind,
    pub db: u16,
    /// Empty for database-level changes (FLUSHDB, FLUSHALL, SWAPDB).
    pub key: Vec<u8>,
    /// The record's `aux`: a deadline for SET and EXPIRE, the other
    /// database for SWAPDB.
    pub aux: u64,
    /// Why the data changed.
    pub cause: Cause,
    /// Made by background work (active expiry, eviction), not inside a
    /// command.
    pub background: bool,
}

/// Why a change happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// A command (or a script, or a transaction) made it.
    Command,
    /// A deadline passed: the key (DEL) or some of a hash's fields
    /// (HASH_DEL) expired.
    Expired,
    /// A deleting eviction policy removed the key.
    Evicted,
    /// The SET created its key.
    Created,
}

/// The changes of one committed group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// The group's last LSN with the log on; the feed's own count without.
    pub seq: u64,
    /// Empty when every subscriber takes records instead
    /// ([`Feed::subscribe_records`]).
    pub changes: Vec<Change>,
    /// The sealed records themselves (each numbered: its LSN, or the
    /// feed's count), when some subscriber asked for them
    /// ([`Feed::subscribe_records`]); empty otherwise.
    pub records: Vec<u8>,
}

/// The subscriber fell behind by more than its queue holds: groups after
/// the last one it received were not delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lagged;

struct Queue {
    state: Mutex<QueueState>,
    ready: Condvar,
    capacity: usize,
    /// Records wanted ([`Feed::subscribe_records`]): the queue is then
    /// bounded by the bytes of the records waiting, not only by groups.
    records_bytes_max: Option<usize>,
}

struct QueueState {
    groups: VecDeque<Arc<Group>>,
    /// Bytes of records in `groups`.
    bytes: usize,
    lagged: bool,
    closed: bool,
}

/// The publishing side, owned by the keyspace.
#[derive(Default)]
pub struct Feed {
    /// Whether anyone subscribes: the commit path's only cost otherwise.
    active: AtomicBool,
    state: Mutex<FeedState>,
}

#[derive(Default)]
struct FeedState {
    queues: Vec<Arc<Queue>>,
    /// The next sequence number of groups committed without the log.
    next_seq: u64,
}

impl Feed {
    /// Subscribes to every group committed from now on; `capacity` groups
    /// may wait unread before the subscription lags.
    pub fn subscribe(&self, capacity: usize) -> Subscription {
        self.subscribe_queue(capacity, None)
    }

    /// Subscribes to every group committed from now on with its sealed
    /// records (replication): up to `bytes_max` bytes of records may wait
    /// unread before the subscription lags.
    pub fn subscribe_records(&self, bytes_max: usize) -> Subscription {
        self.subscribe_queue(usize::MAX, Some(bytes_max))
    }

    /// The sequence number the next group committed without the log gets
    /// for its first record.
    pub(crate) fn next_unlogged_seq(&self) -> u64 {
        self.state.lock().next_seq + 1
    }

    fn subscribe_queue(&self, capacity: usize, records_bytes_max: Option<usize>) -> Subscription {
        let queue = Arc::new(Queue {
            state: Mutex::new(QueueState {
                groups: VecDeque::new(),
                bytes: 0,
                lagged: false,
                closed: false,
            }),
            ready: Condvar::new(),
            capacity: capacity.max(1),
            records_bytes_max,
        });
        let mut state = self.state.lock();
        state.queues.push(queue.clone());
        self.active.store(true, Ordering::Release);
        Subscription { queue }
    }

    pub(crate) fn is_active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Publishes one group numbered `seq`: the `changed` its commit
    /// listed, and the sealed records in `group` to subscribers that want
    /// them. The log calls this inside its commit; see
    /// [`Feed::publish_unlogged`] otherwise.
    pub(crate) fn publish(&self, seq: u64, changed: &Changed, group: &[u8]) {
        let mut state = self.state.lock();
        self.deliver(&mut state, seq, changed, group);
    }

    /// Numbers and publishes a group committed without the log: its records
    /// are sealed here with the feed's own sequence numbers.
    pub(crate) fn publish_unlogged(&self, changed: &Changed, group: &mut [u8]) {
        let mut state = self.state.lock();
        let mut at = 0;
        while at < group.len() {
            let len = record::encoded_len(&group[at..]);
            state.next_seq += 1;
            record::seal(&mut group[at..at + len], state.next_seq, 0);
            at += len;
        }
        let seq = state.next_seq;
        self.deliver(&mut state, seq, changed, group);
    }

    fn deliver(&self, state: &mut FeedState, seq: u64, changed: &Changed, group: &[u8]) {
        if state.queues.is_empty() {
            self.active.store(false, Ordering::Release);
            return;
        }
        let wants_records = state
            .queues
            .iter()
            .any(|queue| queue.records_bytes_max.is_some());
        // Only subscribers without records read the change list (the
        // replication stream reads the records): with none, the list is
        // not built (an allocation per change and per key on every commit).
        let wants_changes = state
            .queues
            .iter()
            .any(|queue| queue.records_bytes_max.is_none());
        let changes: Vec<Change> = match wants_changes {
            true => changed.changes().map(Change::from).collect(),
            false => Vec::new(),
        };
        if changes.is_empty() && !wants_records {
            return;
        }
        let records = if wants_records {
            group.to_vec()
        } else {
            Vec::new()
        };
        let bytes = records.len();
        let group = Arc::new(Group {
            seq,
            changes,
            records,
        });
        // Each queue's lock is taken once per group: its line moves
        // between the committing threads and the queue's reader.
        let mut closed = false;
        for queue in &state.queues {
            let mut queued = queue.state.lock();
            if queued.closed {
                closed = true;
                continue;
            }
            if queued.lagged || (group.changes.is_empty() && queue.records_bytes_max.is_none()) {
                // (A group of server state only, the function
                // libraries, is of interest to replication alone.)
                continue;
            }
            let over_bytes = queue
                .records_bytes_max
                .is_some_and(|max| queued.bytes + bytes > max);
            if queued.groups.len() >= queue.capacity || over_bytes {
                queued.lagged = true;
                if queue.records_bytes_max.is_some() {
                    // A replica that fell behind starts over: what waits
                    // is of no use to it, and must not pin memory.
                    queued.groups.clear();
                    queued.bytes = 0;
                }
            } else {
                if queue.records_bytes_max.is_some() {
                    queued.bytes += bytes;
                }
                queued.groups.push_back(group.clone());
            }
            wake(queue);
        }
        if closed {
            state.queues.retain(|queue| !queue.state.lock().closed);
            if state.queues.is_empty() {
                self.active.store(false, Ordering::Release);
            }
        }
    }
}

thread_local! {
    /// While this thread defers ([`defer_wakeups`]), the queues whose
    /// sleeping reader it owes a wake-up.
    static OWED: RefCell<Option<Vec<Arc<Queue>>>> = const { RefCell::new(None) };
}

/// From now on this thread's commits wake sleeping subscribers only when
/// it calls [`wake_deferred`] (see the module docs). The thread must call
/// it before it waits for anything and at the end of every turn of work.
pub fn defer_wakeups() {
    OWED.with(|owed| {
        owed.borrow_mut().get_or_insert_with(Vec::new);
    });
}

/// Wakes the subscribers this thread's commits have owed since its last
/// call; nothing for a thread that does not defer.
pub fn wake_deferred() {
    OWED.with(|owed| {
        if let Some(queues) = owed.borrow_mut().as_mut() {
            for queue in queues.drain(..) {
                queue.ready.notify_all();
            }
        }
    });
}

/// Wakes `queue`'s reader now, or owes it the wake-up on a deferring
/// thread.
fn wake(queue: &Arc<Queue>) {
    let deferred = OWED.with(|owed| match owed.borrow_mut().as_mut() {
        Some(queues) => {
            if !queues.iter().any(|owed| Arc::ptr_eq(owed, queue)) {
                queues.push(queue.clone());
            }
            true
        }
        None => false,
    });
    if !deferred {
        queue.ready.notify_all();
    }
}

impl From<ChangeRef<'_>> for Change {
    fn from(change: ChangeRef) -> Change {
        let flags = change.flags;
        Change {
            kind: change.kind,
            db: change.db,
            key: change.key.to_vec(),
            aux: change.aux,
            cause: if flags & record::FLAG_EXPIRED != 0 {
                Cause::Expired
            } else if flags & record::FLAG_EVICTED != 0 {
                Cause::Evicted
            } else if flags & record::FLAG_NEW != 0 {
                Cause::Created
            } else {
                Cause::Command
            },
            background: flags & record::FLAG_BACKGROUND != 0,
        }
    }
}

/// One subscriber's end of the feed. Dropping it unsubscribes.
pub struct Subscription {
    queue: Arc<Queue>,
}

impl Subscription {
    /// The next group if one is waiting.
    pub fn try_recv(&self) -> Result<Option<Arc<Group>>, Lagged> {
        let mut state = self.queue.state.lock();
        Self::take(&mut state)
    }

    /// The next group, waiting up to `timeout` for one.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Option<Arc<Group>>, Lagged> {
        let deadline = Instant::now() + timeout;
        let mut state = self.queue.state.lock();
        loop {
            if let Some(group) = Self::take(&mut state)? {
                return Ok(Some(group));
            }
            if self
                .queue
                .ready
                .wait_until(&mut state, deadline)
                .timed_out()
            {
                return Self::take(&mut state);
            }
        }
    }

    fn take(state: &mut QueueState) -> Result<Option<Arc<Group>>, Lagged> {
        match state.groups.pop_front() {
            Some(group) => {
                state.bytes = state.bytes.saturating_sub(group.records.len());
                Ok(Some(group))
            }
            None if state.lagged => Err(Lagged),
            None => Ok(None),
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.queue.state.lock().closed = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Keyspace;
    use crate::storage::log::{FsyncPolicy, Log, LogStart};
    use crate::types::value::Value;

    const NOW_MS: u64 = 1_000_000;
    const WAIT: Duration = Duration::from_secs(10);

    fn with_log() -> (Keyspace, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!(
            "strata-feed-{}-{}",
            std::process::id(),
            crate::keyspace::shards::random_u64()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let ks = Keyspace::new(4);
        let log = Log::start(
            &dir.join("log"),
            1 << 20,
            FsyncPolicy::No,
            LogStart {
                next_lsn: 1,
                next_segment: 1,
                segments: Vec::new(),
            },
        )
        .unwrap();
        ks.attach_log(log);
        (ks, dir)
    }

    fn set(ks: &Keyspace, db: usize, key: &[u8]) {
        let k = ks.key(key);
        ks.lock(k)
            .set(db, k, Value::from_bytes(b"v"), None, false, NOW_MS);
    }

    /// Every group until `count` changes arrived.
    fn receive(subscription: &Subscription, count: usize) -> Vec<Arc<Group>> {
        let mut groups = Vec::new();
        let mut changes = 0;
        while changes < count {
            let group = subscription
                .recv_timeout(WAIT)
                .expect("not lagged")
                .expect("a group within the wait");
            changes += group.changes.len();
            groups.push(group);
        }
        groups
    }

    /// Writers on several threads: the subscriber sees every change once,
    /// groups in strictly increasing order, each thread's keys in the
    /// order that thread wrote them.
    fn order_across_threads(ks: &Keyspace) {
        const THREADS: usize = 4;
        const PER_THREAD: usize = 2_000;
        let subscription = ks.subscribe(THREADS * PER_THREAD);
        std::thread::scope(|scope| {
            for thread in 0..THREADS {
                scope.spawn(move || {
                    for n in 0..PER_THREAD {
                        set(ks, 0, format!("t{thread}:{n}").as_bytes());
                    }
                });
            }
        });
        let groups = receive(&subscription, THREADS * PER_THREAD);
        assert!(
            groups.windows(2).all(|pair| pair[0].seq < pair[1].seq),
            "groups out of order"
        );
        let mut next = [0usize; THREADS];
        for change in groups.iter().flat_map(|g| &g.changes) {
            assert_eq!(change.kind, Kind::Set);
            let key = String::from_utf8(change.key.clone()).unwrap();
            let (thread, n) = key[1..].split_once(':').unwrap();
            let (thread, n): (usize, usize) = (thread.parse().unwrap(), n.parse().unwrap());
            assert_eq!(n, next[thread], "thread {thread}'s writes out of order");
            next[thread] += 1;
        }
        assert_eq!(next, [PER_THREAD; THREADS]);
        assert_eq!(subscription.try_recv(), Ok(None));
    }

    /// A deferring thread's groups are queued at once (a reader that
    /// looks sees them) but a sleeping reader wakes only at
    /// `wake_deferred`; a thread that does not defer wakes it at once.
    #[test]
    fn a_deferring_thread_wakes_sleeping_readers_at_the_end_of_its_turn() {
        let ks = Keyspace::new(4);
        let subscription = ks.subscribe(16);
        let (sender, woke) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                // Asleep before the commit (see the pause below).
                let group = subscription.recv_timeout(WAIT).unwrap();
                sender.send(group.is_some()).unwrap();
            });
            std::thread::sleep(Duration::from_millis(100));
            let (committed_tx, committed_rx) = std::sync::mpsc::channel();
            let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
            let ks = &ks;
            scope.spawn(move || {
                defer_wakeups();
                set(ks, 0, b"deferred");
                committed_tx.send(()).unwrap();
                go_rx.recv().unwrap();
                wake_deferred();
            });
            committed_rx.recv_timeout(WAIT).unwrap();
            std::thread::sleep(Duration::from_millis(300));
            assert!(woke.try_recv().is_err(), "woken before wake_deferred");
            go_tx.send(()).unwrap();
            assert_eq!(woke.recv_timeout(WAIT), Ok(true));
        });
        // Not deferring: the reader is woken by the commit itself.
        std::thread::scope(|scope| {
            let reader = scope.spawn(|| subscription.recv_timeout(WAIT).unwrap().is_some());
            std::thread::sleep(Duration::from_millis(100));
            let started = Instant::now();
            set(&ks, 0, b"at once");
            assert!(reader.join().unwrap());
            assert!(started.elapsed() < Duration::from_secs(5));
        });
    }

    #[test]
    fn groups_arrive_in_log_order_across_threads() {
        let (ks, dir) = with_log();
        order_across_threads(&ks);
        ks.log().unwrap().shutdown();
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn groups_arrive_in_order_without_the_log() {
        order_across_threads(&Keyspace::new(4));
    }

    #[test]
    fn a_multi_key_command_is_one_group_and_db_changes_are_published() {
        let (ks, dir) = with_log();
        let subscription = ks.subscribe(16);
        let (a, b) = (ks.key(b"a"), ks.key(b"b"));
        let mut set = ks.lock_many([a, b]);
        set.shard(a.shard())
            .set(0, a, Value::from_bytes(b"1"), None, false, NOW_MS);
        set.shard(b.shard())
            .set(1, b, Value::from_bytes(b"2"), None, false, NOW_MS);
        let commit = set.commit();
        let swap_commit = ks.swap_db(0, 1);
        let groups = receive(&subscription, 2 + 1);
        // The committer gets back what subscribers get: the group's LSN
        // and its changes.
        assert_eq!(commit.lsn, Some(groups[0].seq));
        assert_eq!(swap_commit.lsn, Some(groups[1].seq));
        let changed: Vec<_> = commit.changed.iter().collect();
        assert_eq!(
            changed,
            vec![(Kind::Set, 0, &b"a"[..]), (Kind::Set, 1, &b"b"[..])]
        );
        assert_eq!(groups[0].changes.len(), 2, "{groups:?}");
        assert_eq!(
            (groups[0].changes[1].db, &groups[0].changes[1].key[..]),
            (1, &b"b"[..])
        );
        let swap = &groups[1].changes[0];
        assert_eq!((swap.kind, swap.db, swap.aux), (Kind::SwapDb, 0, 1));
        ks.log().unwrap().shutdown();
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn the_change_list_is_built_only_for_subscribers_that_read_it() {
        let ks = Keyspace::new(4);
        let set_one = |name: &[u8]| {
            let key = ks.key(name);
            let mut set = ks.lock_many([key]);
            set.shard(key.shard())
                .set(0, key, Value::from_bytes(b"1"), None, false, NOW_MS);
            set.commit();
        };
        let records = ks.subscribe_records(1 << 20);
        let next = || records.recv_timeout(WAIT).unwrap().expect("a group");
        set_one(b"a");
        let alone = next();
        assert!(!alone.records.is_empty());
        assert!(alone.changes.is_empty(), "{alone:?}");
        let changes = ks.subscribe(16);
        set_one(b"b");
        assert_eq!(next().changes.len(), 1);
        assert_eq!(receive(&changes, 1)[0].changes[0].key, b"b");
    }

    #[test]
    fn a_group_over_two_shards_is_published_as_its_commit_lists_it() {
        let (ks, dir) = with_log();
        let subscription = ks.subscribe(16);
        let a = ks.key(b"a");
        let b = (0..)
            .map(|n| format!("b{n}"))
            .find(|name| ks.key(name.as_bytes()).shard() != a.shard())
            .unwrap();
        let b = ks.key(b.as_bytes());
        let mut set = ks.lock_many([a, b]);
        let deadline = NOW_MS + 5_000;
        set.shard(a.shard())
            .set(0, a, Value::from_bytes(b"1"), Some(deadline), false, NOW_MS);
        set.shard(b.shard())
            .set(0, b, Value::from_bytes(b"2"), None, false, NOW_MS);
        set.shard(a.shard())
            .set(0, a, Value::from_bytes(b"3"), None, true, NOW_MS);
        let commit = set.commit();
        let groups = receive(&subscription, 3);
        // One group, in apply order across the two shards, and what the
        // committer got back is what subscribers got, aux and causes too.
        assert_eq!(groups.len(), 1, "{groups:?}");
        assert_eq!(commit.lsn, Some(groups[0].seq));
        let published: Vec<Change> = commit.changed.changes().map(Change::from).collect();
        assert_eq!(published, groups[0].changes);
        let summary: Vec<_> = published
            .iter()
            .map(|c| (c.key.clone(), c.aux, c.cause))
            .collect();
        assert_eq!(
            summary,
            vec![
                (b"a".to_vec(), deadline, Cause::Created),
                (b.bytes.to_vec(), 0, Cause::Created),
                (b"a".to_vec(), deadline, Cause::Command),
            ]
        );
        ks.log().unwrap().shutdown();
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_subscriber_that_falls_behind_is_told_after_what_it_got() {
        let ks = Keyspace::new(1);
        let slow = ks.subscribe(4);
        let keeping_up = ks.subscribe(100);
        for n in 0..10 {
            set(&ks, 0, format!("k{n}").as_bytes());
        }
        for n in 0..4 {
            let group = slow.try_recv().unwrap().unwrap();
            assert_eq!(group.changes[0].key, format!("k{n}").into_bytes());
        }
        assert_eq!(slow.try_recv(), Err(Lagged));
        // Lagging is final: later changes do not reach it either.
        set(&ks, 0, b"later");
        assert_eq!(slow.try_recv(), Err(Lagged));
        assert_eq!(receive(&keeping_up, 11).len(), 11);
    }

    #[test]
    fn nothing_is_encoded_without_subscribers_and_dropping_unsubscribes() {
        let ks = Keyspace::new(1);
        assert!(!ks.feed.is_active());
        let subscription = ks.subscribe(4);
        assert!(ks.feed.is_active());
        drop(subscription);
        // The next publication notices the closed queue and switches off.
        set(&ks, 0, b"k");
        assert!(!ks.feed.is_active());
    }
}
