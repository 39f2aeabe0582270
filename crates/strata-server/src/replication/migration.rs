//! Slots that move whole: `CLUSTER MIGRATION` (Redis 8.4's command),
//! Strata's own way of moving slots between the primaries of a cluster
//! whose nodes form a Raft group (docs/cluster.md, "Moving slots whole").
//!
//! Where `redis-cli --cluster reshard` moves keys one by one (MIGRATE,
//! with ASK redirections and one consensus round per slot), a migration
//! ships the slots' data as replication ships a primary's, and switches
//! their owner in one Raft entry:
//!
//! 1. `CLUSTER MIGRATION IMPORT <start> <end> …` on the importing node
//!    (the target) checks that one other primary serves every slot named,
//!    notes a task and asks that node (`… EXPORT`, an internal
//!    subcommand) to send them.
//! 2. The source connects to the target's client port and links the
//!    connection to the task (`… LINK`): what it sends there is applied
//!    as a primary's stream is, whichever node serves the slots.
//! 3. It copies the shards that hold the slots, one shard locked at a time
//!    ([`strata_engine::keyspace::copy`], as a full synchronisation does), sending
//!    each key of the slots as `RESTORE … REPLACE ABSTTL`. The changes
//!    made meanwhile are the replication stream's records
//!    ([`super::backlog`], kept from before the copy began): those of the
//!    slots numbered at or above their shard's copy point are translated
//!    ([`super::translate`]) and sent, so the target ends exact. Clients
//!    go on meanwhile, on the source, with no ASK redirection. The copy
//!    waits while the target's replicas fall far behind (the target's
//!    INFO, every 16 MB), and keeps to `cluster-migration-max-rate`.
//! 4. Once the target is less than [`SWITCH_LAG_BYTES`] behind and
//!    confirms quickly what it was sent (an ECHO marker, unheld, a few
//!    tries), the source holds its clients' writes
//!    ([`super::failover::hold_writes`], which waits out the write gate,
//!    `crate::write_gate`), sends
//!    the rest, waits until the target has applied everything (an ECHO
//!    marker), holds reads too, and sends `… COMMIT`: the target proposes
//!    the switch to the group (`Change::TakeSlots`: the slots become the
//!    target's with a new greatest config epoch) and answers once it is
//!    committed. The source applies it at once and lets its clients go
//!    on: the writes it held are answered MOVED to the target.
//!    Should COMMIT go unanswered, the clients stay held until this node's
//!    topology says who serves the slots (2 s at most).
//! 5. The source then deletes its keys of the slots; a task that fails
//!    leaves the slots where they were, and the target deletes what it
//!    had been sent.
//!
//! A FLUSHALL, FLUSHDB or SWAPDB on the source during the move fails the
//! task (it cannot be sent for some slots only). `CLUSTER MIGRATION
//! STATUS` reports tasks, `CANCEL` stops them.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use strata_engine::keyspace::copy::Copied;
use strata_engine::keyspace::shards::{SHARD_COUNT, Sharding, key_slot};
use strata_engine::storage::record::{Kind, Record};

use super::link::{Applier, ask, authenticate, command, open};
use super::slot_tasks::{Operation, Phase, Task, ranges};
use super::translate::{Translator, write_command};
use crate::cluster::change::Change;
use crate::commands::Node;
use crate::util::now_ms;
use crate::{log_notice, log_warning};

/// Stream bytes left to send below which the source holds its writes
/// and switches.
pub const SWITCH_LAG_BYTES: u64 = 64 << 10;
/// Confirmations asked before the hold at most, and the time one that
/// ends them may take.
const PRE_SYNCS: usize = 4;
const QUICK_SYNC: Duration = Duration::from_millis(5);
/// How long the source may take, once its writes are held, to send the
/// rest and have the target apply it; past it the task fails and the
/// writes go on here.
const CATCH_UP: Duration = Duration::from_secs(5);
/// How long the source waits for the target's answer to COMMIT (the
/// group answers a change within 10 s).
const COMMIT_WAIT: Duration = Duration::from_secs(12);
/// The longest the source's clients are held: past every wait above, so
/// that a hold never ends by itself while the switch may still commit.
const HOLD: Duration = Duration::from_secs(20);
/// How long the target waits for the source to connect back.
const LINK_WAIT: Duration = Duration::from_secs(10);
/// How far the target's replicas may fall behind the target's stream
/// before the copy waits for them (a replica more than 256 MB behind is
/// dropped and must copy its primary again), how often the source looks,
/// and for how long at most it waits each time.
const TARGET_REPLICA_LAG_MAX: u64 = 96 << 20;
const LAG_CHECK_BYTES: u64 = 16 << 20;
const LAG_WAIT_MAX: Duration = Duration::from_secs(30);
/// Bytes sent in one write at most.
const BATCH_BYTES: usize = 1 << 20;
/// How long one wait for new changes (or for the task's end) lasts.
const POLL: Duration = Duration::from_millis(20);
/// What the target's answer to an ECHO marker starts with.
const MARK: &str = "strata-migration-mark ";

/// IMPORT, on the target: checks the slots, notes the task and starts it;
/// answers its id.
pub fn import(server: &Arc<Node>, slots: Vec<u16>) -> Result<String, String> {
    let cluster = &server.cluster;
    if !cluster.in_group() {
        return Err("ERR CLUSTER MIGRATION needs nodes that form a group (joined with CLUSTER MEET or redis-cli --cluster create)".into());
    }
    let mut slots = slots;
    slots.sort_unstable();
    slots.dedup();
    let (me, source) = {
        let t = cluster.topology();
        if t.myself().primary.is_some() {
            return Err("ERR CLUSTER MIGRATION IMPORT must be sent to a master".into());
        }
        let mut owner = None;
        for &slot in &slots {
            let served_by = match t.owner(slot) {
                None => return Err(format!("ERR Slot {slot} has no owner")),
                Some(node) if node == t.me => {
                    return Err(format!("ERR Slot {slot} is already served by this node"));
                }
                Some(node) => node,
            };
            if owner.is_some_and(|o| o != served_by) {
                return Err("ERR The slots are served by more than one node: import them from each with an IMPORT of its own".into());
            }
            owner = Some(served_by);
            if t.importing_from(slot).is_some() || t.migrating_to(slot).is_some() {
                return Err(format!("ERR Slot {slot} is being moved by CLUSTER SETSLOT"));
            }
        }
        let Some(owner) = owner else {
            return Err("ERR No slot given".into());
        };
        (t.myself().id.clone(), t.nodes[owner].clone())
    };
    let id = crate::util::random_hex(40);
    let task = Task::new(id.clone(), Operation::Import, slots, source.id.clone(), me);
    let task = server.replication.migrations.start(task)?;
    let server = server.clone();
    std::thread::Builder::new()
        .name("strata-import".into())
        .spawn(move || {
            let outcome = run_import(&server, &task, &source.ip, source.port);
            finish(&server, &task, outcome);
        })
        .map_err(|e| format!("ERR could not start the import: {e}"))?;
    Ok(id)
}

/// EXPORT, on the source (sent by the target's IMPORT): checks the slots
/// and starts sending them.
pub fn export(server: &Arc<Node>, id: String, dest: String, slots: Vec<u16>) -> Result<(), String> {
    let mut slots = slots;
    slots.sort_unstable();
    slots.dedup();
    let (me, target) = {
        let t = server.cluster.topology();
        if t.myself().primary.is_some() {
            return Err("ERR this node is not a master".into());
        }
        if let Some(slot) = slots.iter().find(|&&slot| t.owner(slot) != Some(t.me)) {
            return Err(format!("ERR Slot {slot} is not served by this node"));
        }
        if let Some(slot) = slots.iter().find(|&&slot| t.migrating_to(slot).is_some()) {
            return Err(format!("ERR Slot {slot} is being moved by CLUSTER SETSLOT"));
        }
        let target = t
            .find(&dest)
            .map(|index| t.nodes[index].clone())
            .ok_or_else(|| format!("ERR Unknown node {dest}"))?;
        if target.primary.is_some() || target.id == t.myself().id {
            return Err("ERR The importing node must be another master".into());
        }
        (t.myself().id.clone(), target)
    };
    let task = Task::new(id, Operation::Export, slots, me, dest);
    let task = server.replication.migrations.start(task)?;
    let server = server.clone();
    std::thread::Builder::new()
        .name("strata-export".into())
        .spawn(move || {
            let outcome = send(&server, &task, &target.ip, target.port);
            server.replication.backlog.unpin(task.pin);
            finish(&server, &task, outcome);
        })
        .map_err(|e| format!("ERR could not start the export: {e}"))?;
    Ok(())
}

/// LINK, on the target: the connection asking is the source's link for
/// task `id` (its commands then run whichever node serves their slots).
pub fn link(server: &Node, id: &str, client_id: u64) -> Result<(), String> {
    let task = (server.replication.migrations.find(id))
        .filter(|t| t.operation == Operation::Import && t.phase().0 == Phase::Connecting)
        .ok_or("ERR No slot import waits for this link")?;
    task.link_client.store(client_id, Relaxed);
    task.set_phase(Phase::Streaming);
    Ok(())
}

/// COMMIT, on the target, from the source's link once everything is
/// applied here: the group gives the slots to this node.
pub fn commit(server: &Node, id: &str, client_id: u64) -> Result<(), String> {
    let task = (server.replication.migrations.find(id))
        .filter(|t| t.operation == Operation::Import && t.link_client.load(Relaxed) == client_id)
        .ok_or("ERR No slot import is linked to this connection")?;
    task.set_phase(Phase::Switching);
    let change = Change::TakeSlots {
        slots: task.slots.clone(),
        from: task.source.clone(),
    };
    server.cluster.submit(change)?;
    task.end(Ok(()));
    Ok(())
}

/// Ends `task` with `outcome`, and deletes this node's keys of the slots
/// it does not serve (the source's after a move, the target's after a
/// failed one).
fn finish(server: &Arc<Node>, task: &Task, outcome: Result<(), String>) {
    let what = match task.operation {
        Operation::Import => "Import",
        Operation::Export => "Export",
    };
    match &outcome {
        Ok(()) => log_notice!(
            "Cluster: {what} of slots {} done (task {}, {} keys, writes held {} ms)",
            task.ranges(),
            task.id,
            task.keys.load(Relaxed),
            task.pause_ms.load(Relaxed)
        ),
        Err(why) => log_warning!(
            "Cluster: {what} of slots {} stopped (task {}): {why}",
            task.ranges(),
            task.id
        ),
    }
    task.end(outcome);
    let dropped = drop_keys(server, &task.slots);
    if dropped > 0 {
        log_notice!("Cluster: deleted {dropped} keys of slots this node does not serve");
    }
}

/// The target's side: deletes what an earlier attempt left, asks the
/// source to send the slots, and waits until the source has switched
/// them (COMMIT) or the link ends.
fn run_import(server: &Arc<Node>, task: &Task, host: &str, port: u16) -> Result<(), String> {
    drop_keys(server, &task.slots);
    let (mut reader, mut writer) = connect(server, host, port)?;
    let mut export: Vec<Vec<u8>> = ["CLUSTER", "MIGRATION", "EXPORT"]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
    export.push(task.id.clone().into_bytes());
    export.push(task.dest.clone().into_bytes());
    for (first, last) in ranges(&task.slots) {
        export.push(first.to_string().into_bytes());
        export.push(last.to_string().into_bytes());
    }
    let args: Vec<&[u8]> = export.iter().map(Vec::as_slice).collect();
    let reply = ask(&mut reader, &mut writer, &args)?;
    if let Some(why) = reply.strip_prefix('-') {
        return Err(format!("the source refused: {why}"));
    }
    drop((reader, writer));
    let asked = Instant::now();
    loop {
        std::thread::sleep(POLL);
        let linked = task.link_client.load(Relaxed);
        if task.phase().0 == Phase::Completed {
            return Ok(());
        }
        if task.cancel.load(Relaxed) {
            if let Some(client) = server.clients.get(linked).filter(|_| linked != 0) {
                client.kill();
            }
            return Err("cancelled".into());
        }
        if linked == 0 && asked.elapsed() > LINK_WAIT {
            return Err("the source did not connect".into());
        }
        if linked != 0 && server.clients.get(linked).is_none() {
            return match task.phase().0 {
                Phase::Completed => Ok(()),
                _ => Err("the source closed the link before the switch".into()),
            };
        }
    }
}

/// Connects to a node's client port and authenticates as replication
/// does (`masteruser`/`masterauth`).
fn connect(
    server: &Node,
    host: &str,
    port: u16,
) -> Result<(BufReader<TcpStream>, TcpStream), String> {
    let config = server.config.get();
    let timeout = Duration::from_secs(super::primary::repl_timeout_s(&config));
    let (_, mut reader, mut writer) = open(host, port, timeout)?;
    authenticate(&mut reader, &mut writer, &config)
        .map_err(|why| why.replace("MASTER", "the other node"))?;
    Ok((reader, writer))
}

/// What the target answered, as the source's reply reader passes it on.
enum Reply {
    /// An error, or an EXEC whose commands include one.
    Error(String),
    /// The answer to the ECHO marker numbered so.
    Marker(u64),
    /// The answer to COMMIT.
    Committed,
    Closed,
}

/// The source's link to the target: commands go out on `writer`, the
/// target's answers come back through a thread of their own.
struct Link {
    writer: TcpStream,
    replies: mpsc::Receiver<Reply>,
    marker: u64,
}

impl Link {
    fn open(mut reader: BufReader<TcpStream>, writer: TcpStream) -> Result<Link, String> {
        writer.set_read_timeout(None).map_err(|e| e.to_string())?;
        let (tx, replies) = mpsc::channel();
        std::thread::Builder::new()
            .name("strata-export-replies".into())
            .spawn(move || {
                loop {
                    let reply = match read_reply(&mut reader) {
                        Err(_) => Reply::Closed,
                        Ok(Parsed::Error(why)) => Reply::Error(why),
                        Ok(Parsed::Simple(text)) if text == "COMMITTED" => Reply::Committed,
                        Ok(Parsed::Bulk(text)) => match text.strip_prefix(MARK) {
                            Some(n) => Reply::Marker(n.parse().unwrap_or(0)),
                            None => continue,
                        },
                        Ok(_) => continue,
                    };
                    let closed = matches!(reply, Reply::Closed);
                    if tx.send(reply).is_err() || closed {
                        break;
                    }
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(Link {
            writer,
            replies,
            marker: 0,
        })
    }

    /// Fails on what the target answered so far: an error, or the end.
    fn check(&mut self) -> Result<(), String> {
        loop {
            match self.replies.try_recv() {
                Ok(Reply::Error(why)) => {
                    return Err(format!("the importing node refused a command: {why}"));
                }
                Ok(Reply::Closed) | Err(mpsc::TryRecvError::Disconnected) => {
                    return Err("the importing node closed the link".into());
                }
                Ok(_) => {}
                Err(mpsc::TryRecvError::Empty) => return Ok(()),
            }
        }
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.check()?;
        if bytes.is_empty() {
            return Ok(());
        }
        (self.writer.write_all(bytes)).map_err(|e| format!("sending to the importing node: {e}"))
    }

    fn command(&mut self, args: &[&[u8]]) -> Result<(), String> {
        self.write(&command(args))
    }

    /// Waits until the target has applied everything sent so far.
    fn sync(&mut self, deadline: Instant) -> Result<(), String> {
        self.marker += 1;
        let mark = format!("{MARK}{}", self.marker);
        self.command(&[b"ECHO", mark.as_bytes()])?;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.replies.recv_timeout(left) {
                Ok(Reply::Marker(n)) if n == self.marker => return Ok(()),
                Ok(Reply::Error(why)) => {
                    return Err(format!("the importing node refused a command: {why}"));
                }
                Ok(Reply::Closed) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err("the importing node closed the link".into());
                }
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err("the importing node did not keep up".into());
                }
            }
        }
    }

    /// The target's answer to COMMIT: Ok, a refusal (Err(Some)), or none
    /// in time (Err(None): the group may still have committed it).
    fn commit(&mut self, id: &str, deadline: Instant) -> Result<(), Option<String>> {
        (self.command(&[b"CLUSTER", b"MIGRATION", b"COMMIT", id.as_bytes()])).map_err(Some)?;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.replies.recv_timeout(left) {
                Ok(Reply::Committed) => return Ok(()),
                Ok(Reply::Error(why)) => return Err(Some(why)),
                Ok(Reply::Marker(_)) => {}
                Ok(Reply::Closed) | Err(_) => return Err(None),
            }
        }
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        let _ = self.writer.shutdown(std::net::Shutdown::Both);
    }
}

/// A reply, read whole, as much as the source needs of it.
enum Parsed {
    Simple(String),
    Error(String),
    Bulk(String),
    Other,
}

/// Reads one RESP2 reply; an array counts as its first error, if any.
fn read_reply(reader: &mut impl BufRead) -> std::io::Result<Parsed> {
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "not a RESP reply");
    let mut line = Vec::new();
    if reader.read_until(b'\n', &mut line)? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    let Some((&kind, rest)) = line.split_first() else {
        return Err(bad());
    };
    let text = String::from_utf8_lossy(rest).trim_end().to_string();
    let len = || text.parse::<i64>().map_err(|_| bad());
    Ok(match kind {
        b'+' => Parsed::Simple(text),
        b'-' => Parsed::Error(text),
        b':' => Parsed::Other,
        b'$' => match len()? {
            n if n < 0 => Parsed::Other,
            n if n > 1 << 20 => return Err(bad()),
            n => {
                let mut body = vec![0; n as usize + 2];
                reader.read_exact(&mut body)?;
                body.truncate(n as usize);
                Parsed::Bulk(String::from_utf8_lossy(&body).into_owned())
            }
        },
        b'*' => {
            let mut first_error = None;
            for _ in 0..len()?.max(0) {
                if let Parsed::Error(why) = read_reply(reader)?
                    && first_error.is_none()
                {
                    first_error = Some(why);
                }
            }
            first_error.map_or(Parsed::Other, Parsed::Error)
        }
        _ => return Err(bad()),
    })
}

/// Which records of the stream the target needs.
struct Filter {
    /// Per slot: whether it moves.
    wanted: Vec<bool>,
    /// Per shard: the first change its copy does not hold (`u64::MAX`:
    /// a shard not copied, which holds none of the slots).
    covered: Vec<u64>,
    /// The smallest of those.
    first: u64,
}

impl Filter {
    fn new(slots: &[u16]) -> Filter {
        let mut wanted = vec![false; strata_engine::keyspace::shards::SLOT_COUNT as usize];
        for &slot in slots {
            wanted[slot as usize] = true;
        }
        Filter {
            wanted,
            covered: vec![u64::MAX; SHARD_COUNT],
            first: u64::MAX,
        }
    }

    /// The commands for the records of `group` the target lacks. Fails
    /// on a change of every key made after a copy began.
    fn translate(
        &self,
        keyspace: &strata_engine::Keyspace,
        group: &strata_engine::feed::Group,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        let mut flushed = false;
        let keep = |record: &Record| match record.kind {
            Kind::FlushDb | Kind::FlushAll | Kind::SwapDb => {
                flushed |= record.lsn >= self.first;
                false
            }
            Kind::Meta => false,
            _ => {
                record.db == 0
                    && self.wanted[key_slot(record.key) as usize]
                    && record.lsn >= self.covered[keyspace.key(record.key).shard()]
            }
        };
        Translator::at(Some(0)).group(keyspace, now_ms(), &group.records, keep, out);
        match flushed {
            true => Err("a FLUSHALL, FLUSHDB or SWAPDB ran during the move".into()),
            false => Ok(()),
        }
    }
}

/// The source's side: links to the target, copies the slots, streams
/// what changes, then switches (module doc).
fn send(server: &Arc<Node>, task: &Task, host: &str, port: u16) -> Result<(), String> {
    let (mut reader, mut writer) = connect(server, host, port)?;
    let reply = ask(
        &mut reader,
        &mut writer,
        &[b"CLUSTER", b"MIGRATION", b"LINK", task.id.as_bytes()],
    )?;
    if reply != "+OK" {
        return Err(format!("the importing node refused the link: {reply}"));
    }
    let mut link = Link::open(reader, writer)?;
    task.set_phase(Phase::Copying);
    let replication = &server.replication;
    replication.start_stream();
    let backlog = &replication.backlog;
    // From here on the stream's history keeps the records the copy may
    // lack, on disk if not in RAM.
    let _copying = backlog.copying();
    let (from, _) = backlog.end_and_db(true);
    backlog.pin(task.pin, from);
    let mut filter = Filter::new(&task.slots);
    // A second connection asks the target how far its replicas are.
    let mut control = connect(server, host, port).ok();
    copy(server, task, &mut link, &mut filter, &mut control)?;
    drop(control);
    task.set_phase(Phase::Streaming);
    let mut at = from;
    // Close to the stream's end, the target is asked to confirm it has
    // applied what it was sent, without holding anything: once that
    // takes little time (or after a few tries), what remains for the
    // hold is small.
    for _ in 0..PRE_SYNCS {
        loop {
            task.cancelled()?;
            at = forward(server, task, &mut link, &filter, at)?;
            if backlog.end().saturating_sub(at) < SWITCH_LAG_BYTES {
                break;
            }
        }
        let started = Instant::now();
        link.sync(Instant::now() + Duration::from_secs(60))?;
        if started.elapsed() < QUICK_SYNC {
            break;
        }
    }
    task.set_phase(Phase::Switching);
    let held = Instant::now();
    let until_ms = now_ms() + HOLD.as_millis() as u64;
    let offset = super::failover::hold_writes(server, until_ms)?;
    let switched = switch(server, task, &mut link, &filter, at, offset, until_ms);
    task.pause_ms
        .store(held.elapsed().as_millis() as u64, Relaxed);
    server.client_unpause();
    switched
}

/// Copies the keys of the slots, shard by shard, as RESTORE commands;
/// notes in `filter` where each shard's copy ends.
fn copy(
    server: &Node,
    task: &Task,
    link: &mut Link,
    filter: &mut Filter,
    control: &mut Option<Control>,
) -> Result<(), String> {
    let keyspace = &server.keyspace;
    let shards: Vec<usize> = match keyspace.sharding() {
        Sharding::Slots => {
            let mut shards: Vec<usize> = (task.slots.iter())
                .map(|&slot| slot as usize % SHARD_COUNT)
                .collect();
            shards.sort_unstable();
            shards.dedup();
            shards
        }
        // A directory sharded by hash (older versions) holds a slot's
        // keys in every shard.
        Sharding::Hash => (0..SHARD_COUNT).collect(),
    };
    let now = now_ms();
    let mut out = Vec::new();
    let mut cold = Vec::new();
    let (started, mut sent) = (Instant::now(), 0u64);
    for index in shards {
        task.cancelled()?;
        let mut keys = 0;
        let (covered, _) = keyspace.copy_shard(index, now, |db, key, deadline, copied| {
            if db != 0 || !filter.wanted[key_slot(key) as usize] {
                return;
            }
            keys += 1;
            match copied {
                Copied::Value(value) => restore(
                    &mut out,
                    key,
                    deadline,
                    &crate::rdb::object::dump(value, now),
                ),
                Copied::Cold { loc, value_type } => {
                    cold.push((key.to_vec(), deadline, loc, value_type))
                }
            }
        });
        filter.covered[index] = covered;
        filter.first = filter.first.min(covered);
        for (key, deadline, loc, value_type) in cold.drain(..) {
            let value =
                (keyspace.read_cold_copy(loc, value_type, &key)).map_err(|e| e.to_string())?;
            restore(
                &mut out,
                &key,
                deadline,
                &crate::rdb::object::dump(value.value(), now),
            );
        }
        task.keys.fetch_add(keys, Relaxed);
        if out.len() >= BATCH_BYTES {
            link.write(&out)?;
            let before = sent;
            sent += out.len() as u64;
            out.clear();
            pace(server, started, sent);
            if sent / LAG_CHECK_BYTES != before / LAG_CHECK_BYTES {
                wait_for_target_replicas(task, control)?;
            }
        }
    }
    link.write(&out)
}

/// A connection to the target for its INFO.
type Control = (BufReader<TcpStream>, TcpStream);

/// Waits (up to [`LAG_WAIT_MAX`]) while the target's replicas are more
/// than [`TARGET_REPLICA_LAG_MAX`] behind it: a copy faster than they
/// apply would make them drop out and copy the whole target again.
/// Without an answer from the target, it does not wait.
fn wait_for_target_replicas(task: &Task, control: &mut Option<Control>) -> Result<(), String> {
    let started = Instant::now();
    while started.elapsed() < LAG_WAIT_MAX {
        task.cancelled()?;
        let Some((reader, writer)) = control.as_mut() else {
            return Ok(());
        };
        let lag = (writer.write_all(&command(&[b"INFO", b"replication"])))
            .ok()
            .and_then(|()| match read_reply(reader) {
                Ok(Parsed::Bulk(info)) => Some(replica_lag(&info)),
                _ => None,
            });
        match lag {
            None => {
                *control = None;
                return Ok(());
            }
            Some(lag) if lag <= TARGET_REPLICA_LAG_MAX => return Ok(()),
            Some(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    Ok(())
}

/// How far the furthest online replica is behind, by INFO replication's
/// `master_repl_offset` and `slaveN:…offset=…` (what it acknowledged).
fn replica_lag(info: &str) -> u64 {
    let field = |line: &str, name: &str| {
        line.split(',')
            .find_map(|part| part.strip_prefix(name))
            .and_then(|value| value.trim().parse::<u64>().ok())
    };
    let end = (info.lines())
        .find_map(|line| line.strip_prefix("master_repl_offset:"))
        .and_then(|value| value.trim().parse::<u64>().ok())
        .unwrap_or(0);
    (info.lines())
        .filter(|line| line.starts_with("slave") && line.contains("state=online"))
        .filter_map(|line| field(line.split_once(':')?.1, "offset="))
        .map(|offset| end.saturating_sub(offset))
        .max()
        .unwrap_or(0)
}

/// Sleeps as long as `cluster-migration-max-rate` asks after `sent`
/// bytes copied since `started`.
fn pace(server: &Node, started: Instant, sent: u64) {
    let rate = server.config.get().migration_rate_bytes;
    if rate == 0 {
        return;
    }
    let due = Duration::from_secs_f64(sent as f64 / rate as f64);
    if let Some(early) = due.checked_sub(started.elapsed()) {
        std::thread::sleep(early.min(Duration::from_secs(1)));
    }
}

/// Appends `RESTORE key deadline payload REPLACE ABSTTL`.
fn restore(out: &mut Vec<u8>, key: &[u8], deadline: Option<u64>, payload: &[u8]) {
    let deadline = deadline.unwrap_or(0).to_string();
    let args = [
        b"RESTORE".as_slice(),
        key,
        deadline.as_bytes(),
        payload,
        b"REPLACE",
        b"ABSTTL",
    ];
    write_command(out, &args.map(<[u8]>::to_vec));
}

/// Sends what the stream holds from `at` on (waiting a little for it);
/// answers where it stopped.
fn forward(
    server: &Node,
    task: &Task,
    link: &mut Link,
    filter: &Filter,
    at: u64,
) -> Result<u64, String> {
    let backlog = &server.replication.backlog;
    let entries = backlog
        .read(at, BATCH_BYTES, POLL)
        .map_err(|_| "the stream no longer holds the changes made since the copy began")?;
    let mut out = Vec::new();
    let mut at = at;
    for entry in &entries {
        if entry.end() <= at {
            continue;
        }
        if let Some(group) = &entry.group {
            filter.translate(&server.keyspace, group, &mut out)?;
        }
        at = entry.end();
    }
    link.write(&out)?;
    backlog.pin(task.pin, at);
    Ok(at)
}

/// With the source's writes held: sends the stream up to `offset` (which
/// holds the last write), waits until the target applied it, holds
/// reads too, and has the target commit the switch; applies it here.
fn switch(
    server: &Node,
    task: &Task,
    link: &mut Link,
    filter: &Filter,
    mut at: u64,
    offset: u64,
    until_ms: u64,
) -> Result<(), String> {
    let deadline = Instant::now() + CATCH_UP;
    while at < offset {
        if Instant::now() > deadline {
            return Err("the importing node did not keep up".into());
        }
        at = forward(server, task, link, filter, at)?;
    }
    link.sync(deadline)?;
    task.cancelled()?;
    // Until the switch is applied here, a read here could miss a write
    // the target takes once the group gave it the slots.
    server.client_pause(until_ms, false, now_ms());
    let change = Change::TakeSlots {
        slots: task.slots.clone(),
        from: task.source.clone(),
    };
    let moved = || {
        let t = server.cluster.topology();
        t.owner(task.slots[0]).is_some_and(|owner| owner != t.me)
    };
    match link.commit(&task.id, Instant::now() + COMMIT_WAIT) {
        Ok(()) => {
            if let Err(why) = server.cluster.apply_committed(&task.dest, &change) {
                log_warning!("Cluster: applying the slot move here: {why}");
            }
        }
        Err(Some(why)) => return Err(format!("the switch was refused: {why}")),
        Err(None) => {}
    }
    // Until this node no longer serves the slots, its clients wait: the
    // group may have given them away (a switch committed but not
    // answered, or not applied here), and its log tells this node soon.
    let wait = Instant::now() + Duration::from_secs(2);
    while !moved() && Instant::now() < wait {
        std::thread::sleep(Duration::from_millis(5));
    }
    match moved() {
        true => Ok(()),
        false => Err("the importing node did not answer the switch".into()),
    }
}

/// Deletes this node's keys of those of `slots` it does not serve, as
/// DELs that its log and its replicas see; answers how many.
fn drop_keys(server: &Arc<Node>, slots: &[u16]) -> u64 {
    let unserved: Vec<u16> = {
        let t = server.cluster.topology();
        (slots.iter().copied())
            .filter(|&slot| t.owner(slot) != Some(t.me))
            .collect()
    };
    let somewhere = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let client = server
        .clients
        .register(somewhere, somewhere, None, -1, now_ms());
    let mut applier = Applier::new(server, client.clone());
    let mut dropped = 0;
    // Each shard is read once for all the slots (it was read again for
    // every slot and every 512 keys), then its keys go 512 to a DEL.
    (server.keyspace).keys_in_slots(0, &unserved, now_ms(), |keys| {
        dropped += keys.len() as u64;
        for chunk in keys.chunks(512) {
            let mut args = vec![Bytes::from_static(b"DEL")];
            args.extend(chunk.iter().map(|key| Bytes::copy_from_slice(key)));
            applier.run(&args);
        }
    });
    server.clients.unregister(client.id);
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_furthest_online_replica_gives_the_lag() {
        let info = "# Replication\r\nrole:master\r\nconnected_slaves:3\r\n\
            slave0:ip=127.0.0.1,port=7001,state=online,offset=900,lag=0\r\n\
            slave1:ip=127.0.0.1,port=7002,state=online,offset=400,lag=1\r\n\
            slave2:ip=127.0.0.1,port=7003,state=wait_bgsave,offset=0,lag=0\r\n\
            master_repl_offset:1000\r\n";
        assert_eq!(replica_lag(info), 600);
        assert_eq!(replica_lag("role:master\r\nmaster_repl_offset:5\r\n"), 0);
    }

    #[test]
    fn replies_are_read_whole_with_their_first_error() {
        let wire = b"+OK\r\n$23\r\nstrata-migration-mark 7\r\n*2\r\n+OK\r\n-ERR no\r\n:3\r\n+COMMITTED\r\n";
        let mut reader = std::io::BufReader::new(&wire[..]);
        assert!(matches!(read_reply(&mut reader).unwrap(), Parsed::Simple(s) if s == "OK"));
        assert!(
            matches!(read_reply(&mut reader).unwrap(), Parsed::Bulk(s) if s == "strata-migration-mark 7")
        );
        assert!(matches!(read_reply(&mut reader).unwrap(), Parsed::Error(s) if s == "ERR no"));
        assert!(matches!(read_reply(&mut reader).unwrap(), Parsed::Other));
        assert!(matches!(read_reply(&mut reader).unwrap(), Parsed::Simple(s) if s == "COMMITTED"));
        assert!(read_reply(&mut reader).is_err(), "the end");
    }
}
