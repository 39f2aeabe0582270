//! The replication stream and its backlog: one history of bytes, the same
//! for every replica, whose offsets are what PSYNC, ACK, WAIT and INFO
//! count.
//!
//! On a primary, a producer thread subscribes to the change feed's records
//! (once, when the first replica attaches, and for good) and appends each
//! committed group as an entry: its records, their translation
//! ([`super::translate`]), and the database a replica in step has
//! selected before and after it (a SELECT only where the database changes,
//! as Redis writes it; a replica starting from a copy is told the database
//! in force by the copy's `repl-stream-db`, as Redis tells it). On a
//! replica, the link appends the primary's stream itself, byte for byte,
//! command by command as it applies them: its replicas (chained) and, after
//! a promotion, the replicas that followed the same primary, share its
//! offsets and can continue where they were.
//!
//! A replica that synchronised from a copy gets the entries after the
//! copy's start; those whose records the copy already holds are written,
//! as soon as the copy is done, into a file beside it (`primary.rs`,
//! `catch_up`; while the copy is being made, the files on disk keep the
//! entries' committed groups, [`Backlog::copying`]) with those records
//! left out — translated from the entry's database before,
//! and ending with the database after selected — and padded with newlines
//! to the same length (a newline is an empty command: Redis and Strata
//! replicas skip it and count it), so its offsets and its selected
//! database stay the stream's. Should that not fit (a group moving
//! between databases), the synchronisation starts over. A replica that reconnects
//! with an offset still in the backlog continues from there
//! (`+CONTINUE`); otherwise it synchronises again.
//!
//! RAM keeps the most recent entries, up to [`RAM_WINDOW_BYTES`] (counting
//! records and translations; at least the last one) or `repl-backlog-size`
//! if smaller; every entry also goes to disk ([`super::spill`]), which
//! keeps `repl-backlog-size` bytes of stream (1 GB unless set). A replica
//! continues from either. While the history is on disk, RAM keeps no
//! more than [`ram_window`] of the server's memory in use: 1/64, so a
//! small primary is not 16 MB larger for having a replica.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use strata_engine::feed::{Change, Group};

/// The database an entry leaves the stream in.
enum Db {
    /// A group of the producer's: selected before and after it.
    Moved(Option<u16>, Option<u16>),
    /// A client's command that needs this database selected first.
    Client(u16),
}

/// `SELECT db` and then `bytes`.
fn with_select(db: u16, bytes: &[u8]) -> Vec<u8> {
    let mut selected = Vec::with_capacity(bytes.len() + 24);
    super::translate::write_command(
        &mut selected,
        &[b"SELECT".to_vec(), db.to_string().into_bytes()],
    );
    selected.extend_from_slice(bytes);
    selected
}

/// A group of the producer's as the commands a replica applies, with the
/// database selected before them (as the producer last knew it) and
/// after them.
pub struct Translated {
    pub bytes: Arc<[u8]>,
    pub group: Arc<Group>,
    pub db_before: Option<u16>,
    pub db_after: Option<u16>,
}

/// One entry of the stream.
#[derive(Clone)]
pub struct Entry {
    /// Offset of its first byte.
    pub start: u64,
    /// Its bytes as every replica in step gets them.
    pub bytes: Arc<[u8]>,
    /// The committed group it translates (None: a PING, a GETACK, or a
    /// replica's copy of its primary's stream).
    pub group: Option<Arc<Group>>,
    /// The database a replica in step has selected before and after it.
    pub db_before: Option<u16>,
    pub db_after: Option<u16>,
}

impl Entry {
    pub fn end(&self) -> u64 {
        self.start + self.bytes.len() as u64
    }

    /// The last change it holds (0: none).
    pub fn seq(&self) -> u64 {
        self.group.as_ref().map_or(0, |group| group.seq)
    }

    /// The RAM it takes: its bytes and records, and what holds them (the
    /// entry in the queue, two reference-counted allocations and the
    /// group). Small writes are mostly that overhead: counting only the
    /// bytes let a 16 MB window take about 40 MB.
    fn weight(&self) -> usize {
        let group = self.group.as_ref().map_or(0, |g| {
            g.records.len() + size_of::<Group>() + g.changes.len() * size_of::<Change>()
        });
        self.bytes.len() + group + ENTRY_OVERHEAD_BYTES
    }
}

/// What an entry costs beyond its bytes and its group's: its place in the
/// queue, and the allocator's headers and rounding of its allocations.
const ENTRY_OVERHEAD_BYTES: usize = size_of::<Entry>() + 64;

struct State {
    /// Offset after the last byte appended (`master_repl_offset`).
    end: u64,
    entries: VecDeque<Entry>,
    weight: usize,
    ram_limit: usize,
    /// The newest change appended (WAIT maps changes to offsets).
    last_seq: u64,
    /// Replicas' positions (by client id): what a replica has not read
    /// yet stays past the limits, as long as it is at most
    /// `pin_bytes_max` behind (`client-output-buffer-limit replica`): a
    /// replica catching up after its copy is not sent back to another
    /// copy by the backlog. It stays on disk when the history is kept
    /// there (the files keep the entries' records while a copy is being
    /// made), in RAM otherwise.
    pins: std::collections::HashMap<u64, u64>,
    pin_bytes_max: u64,
    /// The database a replica in step has selected at `end` (None: not
    /// known; the next group selects its own).
    db: Option<u16>,
    /// The history on disk, beyond what RAM keeps.
    spill: super::spill::Spill,
    /// `repl-backlog-size`: the stream kept, RAM and disk together.
    total_limit: usize,
    /// Full synchronisations whose copy is being made ([`Backlog::copying`]).
    copying: usize,
}

/// RAM the backlog's entries take at most (unless `repl-backlog-size` is
/// smaller): older history is read back from disk.
pub const RAM_WINDOW_BYTES: usize = 16 << 20;

/// The least RAM window while the history is on disk: Redis' whole
/// default backlog.
const RAM_WINDOW_MIN_BYTES: usize = 1 << 20;

/// The RAM window while the history is also on disk, for a server with
/// `used_bytes` in use: 1/64 of it, between 1 and 16 MB. A replica in
/// step reads the newest entries, which any of these windows holds; one
/// further behind reads the files (through the page cache) either way.
/// With 16 MB a 280 MB primary grew by 7 % when its first replica
/// attached (docs/performance.md, "The backlog's RAM window").
fn ram_window(used_bytes: u64) -> usize {
    usize::try_from(used_bytes / 64)
        .unwrap_or(usize::MAX)
        .clamp(RAM_WINDOW_MIN_BYTES, RAM_WINDOW_BYTES)
}

/// The stream's recent entries.
pub struct Backlog {
    state: Mutex<State>,
    grew: Condvar,
}

/// A copy being made ([`Backlog::copying`]).
pub struct Copying<'a>(&'a Backlog);

impl Drop for Copying<'_> {
    fn drop(&mut self) {
        let mut state = self.0.state.lock();
        state.copying -= 1;
        let on = state.copying > 0;
        state.spill.keep_records(on);
    }
}

impl From<super::spill::Frame> for Entry {
    fn from(frame: super::spill::Frame) -> Entry {
        Entry {
            start: frame.start,
            bytes: frame.bytes.into(),
            group: frame.group.map(|(seq, records)| {
                Arc::new(Group {
                    seq,
                    changes: Vec::new(),
                    records,
                })
            }),
            db_before: frame.db_before,
            db_after: frame.db_after,
        }
    }
}

/// A reader asked for bytes the backlog no longer holds.
#[derive(Debug, PartialEq, Eq)]
pub struct Trimmed;

impl Backlog {
    pub fn new(limit: usize) -> Self {
        Backlog {
            state: Mutex::new(State {
                end: 0,
                entries: VecDeque::new(),
                weight: 0,
                ram_limit: limit.clamp(1, RAM_WINDOW_BYTES),
                last_seq: 0,
                pins: std::collections::HashMap::new(),
                pin_bytes_max: 256 << 20,
                db: None,
                spill: super::spill::Spill::off(limit as u64),
                total_limit: limit,
                copying: 0,
            }),
            grew: Condvar::new(),
        }
    }

    /// Offset after the last byte (`master_repl_offset`).
    pub fn end(&self) -> u64 {
        self.state.lock().end
    }

    /// First offset still held (`repl_backlog_first_byte_offset` − 1).
    pub fn start(&self) -> u64 {
        let state = self.state.lock();
        let in_ram = state.entries.front().map_or(state.end, |e| e.start);
        if state.spill.is_on() {
            in_ram.min(state.spill.start_offset())
        } else {
            in_ram
        }
    }

    /// RAM the history takes (INFO's `mem_replication_backlog`): its
    /// entries' stream bytes and records, not the part on disk.
    pub fn ram_bytes(&self) -> u64 {
        self.state.lock().weight as u64
    }

    /// Bytes of stream held (`repl_backlog_histlen`).
    pub fn held(&self) -> u64 {
        self.end() - self.start()
    }

    /// The newest change the stream has passed (in it, or left out).
    pub fn last_seq(&self) -> u64 {
        self.state.lock().last_seq
    }

    /// Keeps the history on disk in `dir` from now on.
    pub fn spill_to(&self, dir: &std::path::Path) {
        let mut state = self.state.lock();
        let end = state.end;
        state.spill.start(dir, end);
    }

    /// `repl-backlog-size`: the stream kept, RAM and disk together (RAM
    /// keeps at most [`RAM_WINDOW_BYTES`] of it).
    pub fn set_limit(&self, limit: usize) {
        let mut state = self.state.lock();
        state.total_limit = limit.max(1);
        state.ram_limit = limit.clamp(1, RAM_WINDOW_BYTES);
        state.spill.set_limit(limit as u64);
    }

    pub fn limit(&self) -> usize {
        self.state.lock().total_limit
    }

    /// How far behind a replica may be before what it has not read may go.
    pub fn set_pin_limit(&self, bytes: u64) {
        self.state.lock().pin_bytes_max = bytes;
    }

    /// Replica `id` reads from `offset` on (see `State::pins`).
    pub fn pin(&self, id: u64, offset: u64) {
        self.state.lock().pins.insert(id, offset);
    }

    pub fn unpin(&self, id: u64) {
        self.state.lock().pins.remove(&id);
    }

    /// Changes up to `seq` came before the stream began: a replica holds
    /// them from the backlog's start on.
    pub fn set_baseline(&self, seq: u64) {
        let mut state = self.state.lock();
        state.last_seq = state.last_seq.max(seq);
    }

    /// The end, and the database a replica in step has selected there
    /// (what a copy taken now tells its replica: RDB `repl-stream-db`).
    /// With `reselect` (a primary's own stream), the stream selects its
    /// next database again from here on, as Redis' does once a replica
    /// attaches (its own tests expect the SELECT); a stream copied as is
    /// from a primary keeps its state.
    pub fn end_and_db(&self, reselect: bool) -> (u64, Option<u16>) {
        let mut state = self.state.lock();
        let db = state.db;
        if reselect {
            state.db = None;
        }
        (state.end, db)
    }

    /// Starts a new history at `offset` (a replica that loaded a copy,
    /// or a promoted one keeps its offset): nothing before it is held.
    pub fn reset(&self, offset: u64) {
        self.reset_in(offset, None);
    }

    /// [`Backlog::reset`] where the stream has database `db` selected (a
    /// restarted replica resuming from the position its log kept).
    pub fn reset_in(&self, offset: u64, db: Option<u16>) {
        let mut state = self.state.lock();
        state.entries.clear();
        state.weight = 0;
        state.end = offset;
        state.db = db;
        state.spill.reset(offset);
        drop(state);
        self.grew.notify_all();
    }

    /// The database a replica in step has selected now.
    pub fn db(&self) -> Option<u16> {
        self.state.lock().db
    }

    /// Appends `bytes`, which leave a replica in step with database
    /// `db_after` selected (translating `group`, if any, from `db_before`;
    /// None for a primary's stream copied as is: its databases unknown).
    /// Returns the new end.
    pub fn append(
        &self,
        bytes: Arc<[u8]>,
        group: Option<Arc<Group>>,
        db_before: Option<u16>,
        db_after: Option<u16>,
    ) -> u64 {
        let end = self.append_entry(bytes, group, Some(Db::Moved(db_before, db_after)));
        self.announce();
        end
    }

    /// Wakes the readers waiting for more of the stream.
    pub fn announce(&self) {
        self.grew.notify_all();
    }

    /// Appends a command that selects no database (PING, REPLCONF
    /// GETACK), in whichever database the stream has selected
    /// when it goes in: read under the same lock, so a group the
    /// producer appends meanwhile, which may select another, is not
    /// undone by it.
    pub fn append_neutral(&self, bytes: Arc<[u8]>) -> u64 {
        let end = self.append_entry(bytes, None, None);
        self.announce();
        end
    }

    /// Appends a command a client ran in database `db` that changes no
    /// data (PUBLISH, SPUBLISH): after a SELECT of `db` when the stream
    /// has another selected (or none yet), as Redis sends it. Read and
    /// set under the lock, as [`Backlog::append_neutral`] does.
    pub fn append_in_db(&self, db: u16, command: &[Vec<u8>]) -> u64 {
        let end = self.append_entry(Arc::from(&command.concat()[..]), None, Some(Db::Client(db)));
        self.announce();
        end
    }

    fn append_entry(&self, bytes: Arc<[u8]>, group: Option<Arc<Group>>, dbs: Option<Db>) -> u64 {
        let mut gone = Vec::new();
        let mut state = self.state.lock();
        let end = Self::append_locked(&mut state, bytes, group, dbs, &mut gone);
        drop(state);
        drop(gone);
        end
    }

    /// Appends the producer's translated groups in order under one hold
    /// of the lock (per group, the lock's cache line moving between the
    /// producer and the senders was half of the producer's time in the
    /// backlog), without waking the readers: the producer calls
    /// [`Backlog::announce`] after its batch. Returns the new end.
    pub fn append_groups(&self, groups: Vec<Translated>) -> u64 {
        // What leaves RAM is freed after the lock is let go.
        let mut gone = Vec::new();
        let mut state = self.state.lock();
        for translated in groups {
            let (mut before, mut bytes) = (translated.db_before, translated.bytes);
            if let Some(db) = before
                && state.db != Some(db)
            {
                // Translated for `db`, but something else went in since
                // the producer read it (a PUBLISH from another database,
                // a replica attaching, after which the stream selects
                // again): select it first. (None: the translation
                // selected its database itself.)
                bytes = with_select(db, &bytes).into();
                before = state.db;
            }
            let dbs = Some(Db::Moved(before, translated.db_after));
            let group = Some(translated.group);
            Self::append_locked(&mut state, bytes, group, dbs, &mut gone);
        }
        let end = state.end;
        drop(state);
        drop(gone);
        end
    }

    fn append_locked(
        state: &mut State,
        bytes: Arc<[u8]>,
        group: Option<Arc<Group>>,
        dbs: Option<Db>,
        gone: &mut Vec<Entry>,
    ) -> u64 {
        let (db_before, db_after, bytes) = match dbs {
            None => (state.db, state.db, bytes),
            Some(Db::Moved(before, after)) => (before, after, bytes),
            Some(Db::Client(db)) if state.db == Some(db) => (state.db, state.db, bytes),
            Some(Db::Client(db)) => (state.db, Some(db), with_select(db, &bytes).into()),
        };
        if bytes.is_empty() {
            // A group that translates to nothing is still passed.
            let seq = group.map_or(0, |group| group.seq);
            state.last_seq = state.last_seq.max(seq);
            return state.end;
        }
        let entry = Entry {
            start: state.end,
            bytes,
            group,
            db_before,
            db_after,
        };
        let pinned = state.pins.values().min().copied();
        let in_ram = pinned.filter(|_| !state.spill.is_on());
        let keep_from = pinned.filter(|&at| state.end - at <= state.pin_bytes_max);
        let appended = super::spill::Appended {
            start: entry.start,
            bytes: &entry.bytes,
            group: (entry.group.as_ref()).map(|g| (g.seq, g.records.as_slice())),
            db_before,
            db_after,
        };
        state.spill.append(&appended, keep_from);
        state.db = db_after;
        state.end = entry.end();
        state.last_seq = state.last_seq.max(entry.seq());
        state.weight += entry.weight();
        state.entries.push_back(entry);
        let ram_limit = if state.spill.is_on() {
            state.ram_limit.min(ram_window(crate::alloc::used_bytes()))
        } else {
            state.ram_limit
        };
        while state.weight > ram_limit && state.entries.len() > 1 {
            let front = state.entries.front().expect("more than one");
            let needed = in_ram.is_some_and(|at| front.end() > at);
            if needed && state.end - front.start <= state.pin_bytes_max {
                break;
            }
            let front = state.entries.pop_front().expect("more than one");
            state.weight -= front.weight();
            gone.push(front);
        }
        state.end
    }

    /// Entries from offset `from` on (the first may begin before it: a
    /// reader sends its bytes from `from`), up to about `max_bytes`,
    /// waiting up to `wait` for one when there is none yet.
    pub fn read(&self, from: u64, max_bytes: usize, wait: Duration) -> Result<Vec<Entry>, Trimmed> {
        self.read_from(from, max_bytes, wait, false)
    }

    /// [`Backlog::read`], without waiting, of entries with the committed
    /// groups they translate (on disk, those are kept only while a copy
    /// is being made: [`Backlog::copying`]).
    pub fn read_with_records(&self, from: u64, max_bytes: usize) -> Result<Vec<Entry>, Trimmed> {
        self.read_from(from, max_bytes, Duration::ZERO, true)
    }

    /// While the guard lives, a full synchronisation's copy is being made:
    /// the history on disk keeps the entries' committed groups too.
    pub fn copying(&self) -> Copying<'_> {
        let mut state = self.state.lock();
        state.copying += 1;
        state.spill.keep_records(true);
        Copying(self)
    }

    fn read_from(
        &self,
        from: u64,
        max_bytes: usize,
        wait: Duration,
        need_records: bool,
    ) -> Result<Vec<Entry>, Trimmed> {
        let mut state = self.state.lock();
        if state.end <= from && !wait.is_zero() {
            self.grew.wait_for(&mut state, wait);
        }
        let first = state.entries.front().map_or(state.end, |e| e.start);
        if from < first {
            // Older history: from disk, if it still holds it.
            return match state.spill.read(from, max_bytes) {
                Ok(Some(frames)) if !(need_records && frames.iter().any(|f| f.stripped)) => {
                    Ok(frames.into_iter().map(Entry::from).collect())
                }
                _ => Err(Trimmed),
            };
        }
        // Entries are in offset order: find the one holding `from`.
        let at = state.entries.partition_point(|e| e.end() <= from);
        let mut taken = 0;
        let mut out = Vec::new();
        for entry in state.entries.iter().skip(at) {
            if taken >= max_bytes {
                break;
            }
            taken += entry.bytes.len();
            out.push(entry.clone());
        }
        Ok(out)
    }

    /// Whether a replica at offset `from` can continue from the backlog.
    pub fn holds(&self, from: u64) -> bool {
        let mut state = self.state.lock();
        let first = state.entries.front().map_or(state.end, |e| e.start);
        if from < first {
            return state.spill.holds(from);
        }
        from <= state.end && Self::at_boundary(&state, from)
    }

    /// Offsets inside an entry that a replica padded differently are not
    /// places to continue from; the start or end of an entry is.
    fn at_boundary(state: &State, offset: u64) -> bool {
        if offset == state.end {
            return true;
        }
        let at = state.entries.partition_point(|e| e.end() <= offset);
        state.entries.get(at).is_some_and(|e| e.start == offset)
    }

    /// The offset at which a replica holds every change up to `seq`: the
    /// end of the first entry with a change at or after it; None when that
    /// change is not in the stream yet. A change older than every entry
    /// held is held at the backlog's start.
    pub fn offset_holding(&self, seq: u64) -> Option<u64> {
        let state = self.state.lock();
        if seq > state.last_seq {
            return None;
        }
        // Changes only grow along the stream (entries without one say
        // nothing): from the newest back to the first older change.
        let mut holding = None;
        for entry in state.entries.iter().rev() {
            match entry.group {
                Some(_) if entry.seq() >= seq => holding = Some(entry.end()),
                Some(_) => break,
                None => {}
            }
        }
        Some(holding.unwrap_or_else(|| state.entries.front().map_or(state.end, |e| e.start)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ram_window_is_a_64th_of_the_memory_between_1_and_16_mb() {
        assert_eq!(ram_window(0), 1 << 20);
        assert_eq!(ram_window(32 << 20), 1 << 20);
        assert_eq!(ram_window(300 << 20), (300 << 20) / 64);
        assert_eq!(ram_window(1 << 30), 16 << 20);
        assert_eq!(ram_window(u64::MAX), 16 << 20);
    }
}
