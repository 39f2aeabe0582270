//! The Raft group's storage: its log, vote and snapshot in the data
//! directory (`cluster-raft/`), and its state machine, the cluster's
//! topology ([`super::change`]).
//!
//! The topology changes rarely and is small (a CLUSTER NODES text), so
//! every file is written whole: to a new file, synced, renamed over the
//! old one, the directory synced (a crash leaves the old file or the new
//! one), except the log: `log.jsonl` holds the entries after the last
//! snapshot, one JSON line each, appended and synced (rewritten whole
//! after a truncation or a purge). `state.json` holds the vote and the
//! purge point, `snapshot.json` the last snapshot. At start the state
//! machine is the snapshot's topology; the entries after it are applied
//! again once the group's leader says they are committed.
//!
//! Implements openraft's v1 `RaftStorage` on `Arc<Store>` (the log reader
//! and snapshot builder openraft hands to its tasks are clones), with
//! every field behind one lock that is never held across an await.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io::Cursor;
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use openraft::storage::{LogState, RaftLogReader, RaftSnapshotBuilder, Snapshot};
use openraft::{
    BasicNode, Entry, EntryPayload, LogId, OptionalSend, RaftStorage, SnapshotMeta, StorageError,
    StorageIOError, StoredMembership, Vote,
};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use super::change::{Applied, Proposal, apply_proposal};
use super::nodes_file;
use super::topology::Topology;

pub type NodeId = u64;

openraft::declare_raft_types!(
    /// The cluster's Raft types: entries are topology proposals.
    pub TypeConfig:
        D = Proposal,
        R = Applied,
        NodeId = NodeId,
        Node = BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

/// Called with the topology after every change applied (the server
/// serves by it and saves its nodes file).
pub type OnApplied = Box<dyn Fn(&Topology) + Send + Sync>;

pub struct Store {
    dir: PathBuf,
    inner: Mutex<Inner>,
    on_applied: OnApplied,
}

#[derive(Default, Serialize, Deserialize)]
struct Durable {
    vote: Option<Vote<NodeId>>,
    last_purged: Option<LogId<NodeId>>,
}

#[derive(Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMeta<NodeId, BasicNode>,
    /// The topology as a cluster config file ("" before the seed).
    data: String,
}

#[derive(Default)]
struct Inner {
    durable: Durable,
    log: BTreeMap<u64, Entry<TypeConfig>>,
    snapshot: Option<StoredSnapshot>,
    applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, BasicNode>,
    topology: Option<Topology>,
    snapshots_built: u64,
}

fn io_error(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

fn read_json<T: for<'a> Deserialize<'a>>(path: &Path) -> std::io::Result<Option<T>> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(io_error),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    write_bytes(path, &serde_json::to_vec(value).map_err(io_error)?)
}

/// The log's entries, one JSON line each; a torn last line (a crash in
/// the middle of an append that was never acknowledged) is dropped.
fn read_log(path: &Path) -> std::io::Result<Vec<Entry<TypeConfig>>> {
    let text = match std::fs::read(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let lines: Vec<&[u8]> = text
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    let mut entries = Vec::with_capacity(lines.len());
    for (n, line) in lines.iter().enumerate() {
        match serde_json::from_slice(line) {
            Ok(entry) => entries.push(entry),
            Err(_) if n + 1 == lines.len() && !text.ends_with(b"\n") => break,
            Err(e) => return Err(io_error(format!("{}: line {}: {e}", path.display(), n + 1))),
        }
    }
    Ok(entries)
}

fn write_bytes(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let temporary = path.with_extension("tmp");
    {
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    std::fs::rename(&temporary, path)?;
    std::fs::File::open(path.parent().unwrap_or(Path::new(".")))?.sync_all()
}

impl Store {
    /// Opens (or creates) the group's storage in `dir`.
    pub fn open(dir: &Path, on_applied: OnApplied) -> std::io::Result<Arc<Store>> {
        std::fs::create_dir_all(dir)?;
        let durable: Durable = read_json(&dir.join("state.json"))?.unwrap_or_default();
        let entries = read_log(&dir.join("log.jsonl"))?;
        let snapshot: Option<StoredSnapshot> = read_json(&dir.join("snapshot.json"))?;
        let mut inner = Inner {
            durable,
            log: entries.into_iter().map(|e| (e.log_id.index, e)).collect(),
            ..Inner::default()
        };
        if let Some(snapshot) = &snapshot {
            inner.applied = snapshot.meta.last_log_id;
            inner.membership = snapshot.meta.last_membership.clone();
            if !snapshot.data.is_empty() {
                inner.topology = Some(nodes_file::decode(&snapshot.data).map_err(io_error)?);
            }
        }
        inner.snapshot = snapshot;
        Ok(Arc::new(Store {
            dir: dir.to_path_buf(),
            inner: Mutex::new(inner),
            on_applied,
        }))
    }

    /// Removes the group's storage from `dir` (a node leaving its
    /// group starts afresh).
    pub fn wipe(dir: &Path) -> std::io::Result<()> {
        for name in [
            "log.jsonl",
            "state.json",
            "snapshot.json",
            "log.tmp",
            "state.tmp",
            "snapshot.tmp",
        ] {
            match std::fs::remove_file(dir.join(name)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        std::fs::File::open(dir)?.sync_all()
    }

    /// Whether this node has ever been part of a group (a vote or a log).
    pub fn has_state(&self) -> bool {
        let inner = self.inner.lock();
        inner.durable.vote.is_some() || !inner.log.is_empty() || inner.snapshot.is_some()
    }

    /// The group's topology as last applied here.
    pub fn topology(&self) -> Option<Topology> {
        self.inner.lock().topology.clone()
    }

    fn save_durable(&self, inner: &Inner) -> std::io::Result<()> {
        write_json(&self.dir.join("state.json"), &inner.durable)
    }

    /// Rewrites the whole log (after a truncation or a purge).
    fn save_log(&self, inner: &Inner) -> std::io::Result<()> {
        let mut text = Vec::new();
        for entry in inner.log.values() {
            serde_json::to_writer(&mut text, entry).map_err(io_error)?;
            text.push(b'\n');
        }
        write_bytes(&self.dir.join("log.jsonl"), &text)
    }

    /// Appends entries to the log, synced (one line each).
    fn append_log<'e>(
        &self,
        entries: impl Iterator<Item = &'e Entry<TypeConfig>>,
    ) -> std::io::Result<()> {
        use std::io::Write;
        let mut text = Vec::new();
        for entry in entries {
            serde_json::to_writer(&mut text, entry).map_err(io_error)?;
            text.push(b'\n');
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("log.jsonl"))?;
        file.write_all(&text)?;
        file.sync_data()
    }
}

impl RaftLogReader<TypeConfig> for Arc<Store> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<NodeId>> {
        let inner = self.inner.lock();
        Ok(inner.log.range(range).map(|(_, e)| e.clone()).collect())
    }
}

impl RaftSnapshotBuilder<TypeConfig> for Arc<Store> {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        let mut inner = self.inner.lock();
        inner.snapshots_built += 1;
        let index = inner.applied.map_or(0, |id| id.index);
        let meta = SnapshotMeta {
            last_log_id: inner.applied,
            last_membership: inner.membership.clone(),
            snapshot_id: format!("{index}-{}", inner.snapshots_built),
        };
        let data = inner
            .topology
            .as_ref()
            .map(nodes_file::encode)
            .unwrap_or_default();
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data: data.clone(),
        };
        write_json(&self.dir.join("snapshot.json"), &stored)
            .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?;
        inner.snapshot = Some(stored);
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data.into_bytes())),
        })
    }
}

impl RaftStorage<TypeConfig> for Arc<Store> {
    type LogReader = Self;
    type SnapshotBuilder = Self;

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        let mut inner = self.inner.lock();
        inner.durable.vote = Some(*vote);
        self.save_durable(&inner)
            .map_err(|e| StorageIOError::write_vote(&e).into())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        Ok(self.inner.lock().durable.vote)
    }

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        let inner = self.inner.lock();
        let last_purged = inner.durable.last_purged;
        let last = inner.log.values().next_back().map(|e| e.log_id);
        Ok(LogState {
            last_purged_log_id: last_purged,
            last_log_id: last.or(last_purged),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn append_to_log<I>(&mut self, entries: I) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
    {
        let mut inner = self.inner.lock();
        let entries: Vec<Entry<TypeConfig>> = entries.into_iter().collect();
        // Appended after the last entry (openraft truncates a conflict
        // first): a line each; out of order, the log is written whole.
        let in_order = match (inner.log.keys().next_back(), entries.first()) {
            (Some(last), Some(first)) => first.log_id.index == last + 1,
            _ => true,
        };
        let written = match in_order && !inner.log.is_empty() {
            true => self.append_log(entries.iter()),
            false => {
                for entry in &entries {
                    inner.log.insert(entry.log_id.index, entry.clone());
                }
                self.save_log(&inner)
            }
        };
        for entry in entries {
            inner.log.insert(entry.log_id.index, entry);
        }
        written.map_err(|e| StorageIOError::write_logs(&e).into())
    }

    async fn delete_conflict_logs_since(
        &mut self,
        log_id: LogId<NodeId>,
    ) -> Result<(), StorageError<NodeId>> {
        let mut inner = self.inner.lock();
        inner.log.retain(|index, _| *index < log_id.index);
        self.save_log(&inner)
            .map_err(|e| StorageIOError::write_logs(&e).into())
    }

    async fn purge_logs_upto(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let mut inner = self.inner.lock();
        inner.durable.last_purged = Some(log_id);
        inner.log.retain(|index, _| *index > log_id.index);
        // The purge point first: a crash between leaves entries before
        // it in the log, never read again (the other order would leave a
        // hole after it).
        (self
            .save_durable(&inner)
            .and_then(|_| self.save_log(&inner)))
        .map_err(|e| StorageIOError::write_logs(&e).into())
    }

    async fn last_applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>), StorageError<NodeId>>
    {
        let inner = self.inner.lock();
        Ok((inner.applied, inner.membership.clone()))
    }

    async fn apply_to_state_machine(
        &mut self,
        entries: &[Entry<TypeConfig>],
    ) -> Result<Vec<Applied>, StorageError<NodeId>> {
        let mut inner = self.inner.lock();
        let mut answers = Vec::with_capacity(entries.len());
        let mut changed = false;
        for entry in entries {
            inner.applied = Some(entry.log_id);
            match &entry.payload {
                EntryPayload::Blank => answers.push(Ok("OK".into())),
                EntryPayload::Normal(proposal) => {
                    let answer = apply_proposal(&mut inner.topology, proposal);
                    changed |= answer.is_ok();
                    answers.push(answer);
                }
                EntryPayload::Membership(membership) => {
                    inner.membership =
                        StoredMembership::new(Some(entry.log_id), membership.clone());
                    answers.push(Ok("OK".into()));
                }
            }
        }
        let topology = changed.then(|| inner.topology.clone()).flatten();
        drop(inner);
        if let Some(topology) = topology {
            (self.on_applied)(&topology);
        }
        Ok(answers)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        let data = String::from_utf8(snapshot.into_inner())
            .map_err(|e| StorageIOError::read_snapshot(Some(meta.signature()), &e))?;
        let topology = match data.is_empty() {
            true => None,
            false => Some(nodes_file::decode(&data).map_err(|e| {
                StorageIOError::read_snapshot(Some(meta.signature()), &io_error(e))
            })?),
        };
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data,
        };
        write_json(&self.dir.join("snapshot.json"), &stored)
            .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?;
        let mut inner = self.inner.lock();
        inner.applied = meta.last_log_id;
        inner.membership = meta.last_membership.clone();
        inner.topology = topology.clone();
        inner.snapshot = Some(stored);
        drop(inner);
        if let Some(topology) = topology {
            (self.on_applied)(&topology);
        }
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        let inner = self.inner.lock();
        Ok(inner.snapshot.as_ref().map(|stored| Snapshot {
            meta: stored.meta.clone(),
            snapshot: Box::new(Cursor::new(stored.data.clone().into_bytes())),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::CommittedLeaderId;

    fn entry(index: u64) -> Entry<TypeConfig> {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 7), index),
            payload: EntryPayload::Blank,
        }
    }

    #[test]
    fn the_log_reads_back_and_drops_a_torn_last_line() {
        let dir = std::env::temp_dir().join(format!("strata-raft-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("log.jsonl");
        let mut text = Vec::new();
        for index in 1..=3 {
            serde_json::to_writer(&mut text, &entry(index)).unwrap();
            text.push(b'\n');
        }
        let whole = text.clone();
        text.extend_from_slice(br#"{"log_id":{"leader_id""#);
        std::fs::write(&path, &text).unwrap();
        let read = read_log(&path).unwrap();
        assert_eq!(
            read.iter().map(|e| e.log_id.index).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        // A bad line before the last is corruption, not a torn append.
        let mut corrupt = b"{oops}\n".to_vec();
        corrupt.extend_from_slice(&whole);
        std::fs::write(&path, &corrupt).unwrap();
        assert!(read_log(&path).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
