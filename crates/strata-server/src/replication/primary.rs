//! Serving one replica: after its PSYNC (or SYNC), the connection leaves
//! the network threads for a thread of its own. When the backlog still
//! holds what the replica lacks, it answers `+CONTINUE` and sends the
//! stream from there; otherwise it writes a copy ([`super::snapshot`]),
//! answers `+FULLRESYNC`, writes what followed the copy up to where the
//! stream needs no more leaving out into a file ([`catch_up`]), sends the
//! copy and that file, then the stream ([`super::backlog`], from RAM or
//! disk) for as long as the replica keeps up.
//!
//! A replica that falls behind by more than `client-output-buffer-limit
//! replica` (its hard limit; 256 MB by default), or past what the backlog
//! holds, is dropped and logged, as Redis drops it; writers never wait
//! for it. A second thread reads what the replica sends
//! (`REPLCONF ACK <offset>`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use strata_resp::{Limits, RequestParser};

use super::shared::{CatchUp, Prepared, SharedCopy};
use super::snapshot::{self, Follows};
use super::state::SyncRequest;
use super::translate::Translator;
use super::{Attached, STATE_ONLINE, STATE_SEND_BULK};
use crate::commands::Node;
use crate::net::client::ClientInfo;
use crate::util::now_ms;
use crate::{log_notice, log_warning};

/// Bytes of translated changes sent in one write at most.
const WRITE_BATCH_BYTES: usize = 1 << 20;
/// How long one wait for changes lasts before the thread looks at its
/// stop flag and the ping period again.
const POLL: Duration = Duration::from_millis(20);

/// Serves the replica on `stream` until it goes, falls behind, or is
/// told to stop. `keep` (the client's registration) lives as long.
pub fn serve(
    server: Arc<Node>,
    stream: TcpStream,
    client: Arc<ClientInfo>,
    request: SyncRequest,
    keep: impl Send + 'static,
) {
    let attached = Arc::new(Attached::new(
        client.id,
        client.addr.ip().to_string(),
        request.listening_port,
        now_ms(),
    ));
    server.replication.attach(attached.clone());
    let spawned = std::thread::Builder::new()
        .name(format!("strata-replica-{}", client.id))
        .spawn(move || {
            let _keep = keep;
            log_notice!(
                "Replica {}:{} asks for synchronization",
                attached.ip,
                request.listening_port
            );
            // The acknowledgement reader holds a second handle of the
            // socket: it is shut down here, whatever ended the sending,
            // so the replica sees the connection end at once.
            let closer = stream.try_clone();
            let outcome = run(&server, stream, &client, &attached, &request);
            server.replication.backlog.unpin(client.id);
            attached.stop.store(true, Relaxed);
            if let Ok(socket) = closer {
                let _ = socket.shutdown(std::net::Shutdown::Both);
            }
            server.replication.detach(client.id);
            match outcome {
                Ok(()) => log_notice!("Connection with replica {} lost.", client.addr),
                Err(why) => log_warning!("Replica {}: {why}; dropped", client.addr),
            }
        });
    if let Err(e) = spawned {
        log_warning!("could not start a thread for a replica: {e}");
    }
}

fn run(
    server: &Node,
    mut stream: TcpStream,
    client: &ClientInfo,
    attached: &Arc<Attached>,
    request: &SyncRequest,
) -> Result<(), String> {
    let config = server.config.get();
    let io = |e: std::io::Error| e.to_string();
    stream.set_nonblocking(false).map_err(io)?;
    let timeout = Duration::from_secs(repl_timeout_s(&config));
    stream.set_write_timeout(Some(timeout)).map_err(io)?;
    let replication = &server.replication;
    replication.start_stream();
    if let Some(from) = request.continue_from(replication) {
        // A partial resynchronisation: the replica has the stream up to
        // `from`, and the backlog holds what follows.
        let line = format!("+CONTINUE {}\r\n", replication.replid());
        stream.write_all(line.as_bytes()).map_err(io)?;
        replication.partial_syncs.fetch_add(1, Relaxed);
        log_notice!(
            "Partial resynchronization request from {} accepted, at offset {from}",
            client.addr
        );
        replication.backlog.pin(client.id, from);
        return online(server, stream, client, attached, request, from, None);
    }
    if request.psync && request.replid != "?" {
        replication.partial_refused.fetch_add(1, Relaxed);
    }
    if request.rdb_only && request.functions_only {
        return send_functions_only(server, &config, client, request, &mut stream);
    }
    let prepared = prepare_copy(server, &config, client, request, &mut stream)?;
    attached.state.store(STATE_SEND_BULK, Relaxed);
    send_file(&mut stream, &prepared.copy).map_err(io)?;
    if request.rdb_only {
        return Ok(());
    }
    let from = prepared.caught_up.from;
    online(
        server,
        stream,
        client,
        attached,
        request,
        from,
        Some(prepared),
    )
}

/// `redis-cli --functions-rdb`: a file of the function libraries alone,
/// made for this request (never shared with a replica's copy), and no
/// stream after it.
fn send_functions_only(
    server: &Node,
    config: &crate::config::Config,
    client: &ClientInfo,
    request: &SyncRequest,
    stream: &mut TcpStream,
) -> Result<(), String> {
    let replication = &server.replication;
    if request.psync {
        let line = format!(
            "+FULLRESYNC {} {}\r\n",
            replication.replid(),
            replication.offset()
        );
        stream
            .write_all(line.as_bytes())
            .map_err(|e| e.to_string())?;
    }
    let path = config
        .dir
        .join("replication")
        .join(format!("functions-{}.rdb", client.id));
    let libraries = server.functions.snapshot();
    let written =
        snapshot::write_functions(&libraries, &path, crate::util::REDIS_VERSION, now_ms());
    let sent = written.and_then(|copy| send_file(stream, &copy));
    let _ = std::fs::remove_file(&path);
    sent.map_err(|e| format!("the functions-only copy failed: {e}"))
}

/// Answers `+FULLRESYNC` and makes the copy with what follows it, or
/// joins the copy another replica's synchronisation is making.
fn prepare_copy(
    server: &Node,
    config: &crate::config::Config,
    client: &ClientInfo,
    request: &SyncRequest,
    stream: &mut TcpStream,
) -> Result<Arc<Prepared>, String> {
    let replication = &server.replication;
    let backlog = &replication.backlog;
    let fullresync = |stream: &mut TcpStream, from: u64| {
        if !request.psync {
            return Ok(());
        }
        let line = format!("+FULLRESYNC {} {from}\r\n", replication.replid());
        stream.write_all(line.as_bytes()).map_err(|e| e.to_string())
    };
    let mut slot = replication.sharing.lock();
    if let Some(shared) = slot.upgrade() {
        drop(slot);
        backlog.pin(client.id, shared.from);
        fullresync(stream, shared.from)?;
        replication.full_syncs.fetch_add(1, Relaxed);
        log_notice!(
            "Replica {} shares the copy being made for another replica",
            client.addr
        );
        let mut made = shared.made.lock();
        while made.is_none() {
            shared.ready.wait_for(&mut made, Duration::from_secs(1));
            // The replica making it is gone without a word (its thread
            // ended): the copy will never come.
            if made.is_none() && Arc::strong_count(&shared) == 1 {
                return Err("the copy it shared was not made".into());
            }
        }
        let prepared = made.clone().expect("made")?;
        backlog.pin(client.id, prepared.caught_up.end);
        return Ok(prepared);
    }
    // From the copy's start until `catch_up` has read what it needs, the
    // history on disk keeps the entries' records (not RAM).
    let copying = backlog.copying();
    let paused = replication.pause_applying();
    let (from, stream_db) = backlog.end_and_db(!replication.is_replica());
    // What comes after the copy's start stays (on disk, with its
    // records) until the part the copy holds some of is written out.
    backlog.pin(client.id, from);
    let shared = Arc::new(SharedCopy {
        from,
        made: parking_lot::Mutex::new(None),
        ready: parking_lot::Condvar::new(),
    });
    *slot = Arc::downgrade(&shared);
    drop(slot);
    let made = fullresync(stream, from)
        .and_then(|()| full_copy(server, config, client, stream_db, paused))
        .and_then(|copy| {
            let path = copy.path.with_extension("stream");
            let caught_up = catch_up(server, client, &copy, from, &path);
            if caught_up.is_err() {
                let _ = std::fs::remove_file(&path);
                let _ = std::fs::remove_file(&copy.path);
            }
            Ok(Arc::new(Prepared {
                copy,
                caught_up: caught_up?,
            }))
        });
    drop(copying);
    // Later requests make a copy of their own.
    let mut slot = replication.sharing.lock();
    if std::ptr::eq(slot.as_ptr(), Arc::as_ptr(&shared)) {
        *slot = std::sync::Weak::new();
    }
    drop(slot);
    *shared.made.lock() = Some(made.clone());
    shared.ready.notify_all();
    made
}

/// Writes to `path` the stream from the copy's start (`from`) up to the
/// first entry the copy holds nothing of: those entries with the records
/// the copy already holds left out, padded to their length. Done as soon
/// as the copy is, reading the entries with their records from RAM or
/// from the backlog's files (which keep them while a copy is being made):
/// nothing written during a full synchronisation is held in RAM for it.
/// The rest of the stream the replica reads whole, from RAM or disk.
fn catch_up(
    server: &Node,
    client: &ClientInfo,
    copy: &snapshot::Snapshot,
    from: u64,
    path: &std::path::Path,
) -> Result<CatchUp, String> {
    let keyspace = &server.keyspace;
    let backlog = &server.replication.backlog;
    let io = |e: std::io::Error| e.to_string();
    // Every change committed before the copy ended must be in the stream
    // first (the producer follows the commits closely).
    let target = keyspace.next_change_seq().saturating_sub(1);
    let waiting = Instant::now();
    let copies_all = copy.covered.iter().all(|&l| l == 0);
    while !copies_all && backlog.last_seq() < target {
        if waiting.elapsed() > CATCH_UP_WAIT {
            return Err("the stream did not reach the end of its copy; it starts over".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).map_err(io)?);
    let mut at = from;
    'read: loop {
        let entries = backlog
            .read_with_records(at, WRITE_BATCH_BYTES)
            .map_err(|_| "the writes made during its copy are no longer held; it starts over")?;
        if entries.is_empty() {
            break;
        }
        for entry in &entries {
            if entry.end() <= at {
                continue;
            }
            if copies_all || entry.group.as_ref().is_some_and(|g| copy.passed(g)) {
                break 'read;
            }
            let skip = (at - entry.start) as usize;
            match &entry.group {
                Some(group) => {
                    let padded = padded(keyspace, copy, entry, group)?;
                    out.write_all(&padded[skip..]).map_err(io)?;
                }
                None => out.write_all(&entry.bytes[skip..]).map_err(io)?,
            }
            at = entry.end();
        }
    }
    out.flush().map_err(io)?;
    // From here on the replica reads the stream whole: from disk if RAM
    // no longer holds it.
    backlog.pin(client.id, at);
    Ok(CatchUp {
        path: path.to_path_buf(),
        from,
        end: at,
    })
}

/// How long a full synchronisation waits for the stream to reach the
/// end of its copy.
const CATCH_UP_WAIT: Duration = Duration::from_secs(10);

/// `entry`, translated without the records `copy` already holds, ending
/// with its database after selected, and padded with newlines to its
/// length (an empty command replicas skip and count): the offsets stay
/// the stream's.
fn padded(
    keyspace: &strata_engine::Keyspace,
    copy: &snapshot::Snapshot,
    entry: &super::backlog::Entry,
    group: &strata_engine::feed::Group,
) -> Result<Vec<u8>, String> {
    let mut partial = Vec::new();
    let mut restart = false;
    let kept =
        |record: &strata_engine::storage::record::Record| match copy.follows(keyspace, record) {
            Follows::Send => true,
            Follows::Skip => false,
            Follows::Restart => {
                restart = true;
                false
            }
        };
    let mut translator = Translator::at(entry.db_before);
    translator.group(keyspace, now_ms(), &group.records, kept, &mut partial);
    if let Some(db) = entry.db_after {
        translator.select(db, &mut partial);
    }
    if restart {
        return Err("the whole keyspace changed while it was copied; it starts over".into());
    }
    if partial.len() > entry.bytes.len() {
        return Err("its copy and the stream do not line up; it starts over".into());
    }
    partial.resize(entry.bytes.len(), b'\n');
    Ok(partial)
}

/// Writes the copy a full synchronisation sends (`+FULLRESYNC` named
/// the offset the stream after it starts at). On a replica, applying its
/// primary's stream is paused (`paused`) until the copy is written, so
/// the copy is exactly the stream up to that offset; on a primary, the copy is shard by shard and the
/// records it already holds are left out of what follows
/// ([`snapshot::Snapshot::follows`]).
fn full_copy(
    server: &Node,
    config: &crate::config::Config,
    client: &ClientInfo,
    stream_db: Option<u16>,
    paused: Option<parking_lot::MutexGuard<'_, ()>>,
) -> Result<snapshot::Snapshot, String> {
    let replication = &server.replication;
    let path = config
        .dir
        .join("replication")
        .join(format!("sync-{}.rdb", client.id));
    let started = Instant::now();
    let copy = snapshot::write(
        &server.keyspace,
        &path,
        crate::util::REDIS_VERSION,
        stream_db.unwrap_or(0),
        now_ms(),
    );
    drop(paused);
    let mut copy = match copy {
        Ok(copy) => copy,
        Err(e) => {
            let _ = std::fs::remove_file(&path);
            return Err(format!("the copy for the replica failed: {e}"));
        }
    };
    if replication.is_replica() {
        // Nothing after `from` is in the copy.
        copy.covered.iter_mut().for_each(|l| *l = 0);
    }
    replication.full_syncs.fetch_add(1, Relaxed);
    log_notice!(
        "Synchronization copy of {} keys ({} bytes) written in {} ms; sending",
        copy.keys,
        copy.bytes,
        started.elapsed().as_millis()
    );
    Ok(copy)
}

/// The replica is in step: send the stream from offset `from` for as long
/// as it keeps up.
fn online(
    server: &Node,
    mut stream: TcpStream,
    client: &ClientInfo,
    attached: &Arc<Attached>,
    request: &SyncRequest,
    from: u64,
    prepared: Option<Arc<Prepared>>,
) -> Result<(), String> {
    attached.acknowledge(from, None, now_ms());
    attached.sent.store(from, Relaxed);
    attached.state.store(STATE_ONLINE, Relaxed);
    log_notice!("Synchronization with replica {} succeeded", client.addr);
    let reader = stream.try_clone().map_err(|e| e.to_string())?;
    spawn_ack_reader(server.replication.clone(), reader, attached.clone());
    // A PSYNC replica acknowledges every second; one silent for longer
    // than repl-timeout is gone (a cut network), as Redis decides. SYNC
    // clients (`redis-cli --replica`) never acknowledge.
    let watch_acks = request.psync;
    let config = server.config.get();
    let timeout = Duration::from_secs(repl_timeout_s(&config));
    stream
        .set_write_timeout(Some(POLL))
        .map_err(|e| e.to_string())?;
    let mut at = from;
    if let Some(prepared) = prepared {
        // What follows the copy up to where the stream is sent whole.
        let caught_up = &prepared.caught_up;
        let mut file = std::fs::File::open(&caught_up.path).map_err(|e| e.to_string())?;
        let mut chunk = vec![0u8; WRITE_BATCH_BYTES];
        loop {
            let n = file.read(&mut chunk).map_err(|e| e.to_string())?;
            if n == 0 {
                break;
            }
            write_watching(&mut stream, &chunk[..n], attached, timeout, || false)?;
        }
        at = caught_up.end;
        attached.sent.store(at, Relaxed);
    }
    stream_changes(server, &mut stream, client, attached, watch_acks, at)
}

/// Redis' `repl-timeout` (seconds).
pub fn repl_timeout_s(config: &crate::config::Config) -> u64 {
    config
        .setting("repl-timeout")
        .parse::<u64>()
        .unwrap_or(60)
        .max(1)
}

fn send_file(stream: &mut TcpStream, copy: &snapshot::Snapshot) -> std::io::Result<()> {
    stream.write_all(format!("${}\r\n", copy.bytes).as_bytes())?;
    let mut file = std::fs::File::open(&copy.path)?;
    let copied = std::io::copy(&mut file, stream)?;
    if copied != copy.bytes {
        return Err(std::io::Error::other("the copy changed size while sent"));
    }
    Ok(())
}

/// Sends the stream from offset `at` on: the backlog's entries, as they
/// are, from RAM or from disk.
fn stream_changes(
    server: &Node,
    stream: &mut TcpStream,
    client: &ClientInfo,
    attached: &Attached,
    watch_acks: bool,
    mut at: u64,
) -> Result<(), String> {
    let backlog = &server.replication.backlog;
    let config = server.config.get();
    let timeout = Duration::from_secs(repl_timeout_s(&config));
    let limit = match config.output_limit_replica.hard_bytes {
        0 => u64::MAX,
        bytes => bytes,
    };
    backlog.set_pin_limit(limit);
    let fell_behind = || "it fell behind by more than the backlog holds".to_string();
    let mut out = Vec::new();
    loop {
        if attached.stop.load(Relaxed) || client.is_killed() {
            return Ok(());
        }
        let silent_ms = now_ms().saturating_sub(attached.acked_at_ms.load(Relaxed));
        if watch_acks && silent_ms > timeout.as_millis() as u64 {
            return Err("timeout: no acknowledgement within repl-timeout".into());
        }
        let entries = backlog
            .read(at, WRITE_BATCH_BYTES, POLL)
            .map_err(|_| fell_behind())?;
        out.clear();
        for entry in &entries {
            let skip = (at - entry.start) as usize;
            out.extend_from_slice(&entry.bytes[skip..]);
            at = entry.end();
        }
        if out.is_empty() {
            continue;
        }
        write_watching(stream, &out, attached, timeout, || {
            backlog.end().saturating_sub(at) > limit
        })?;
        attached.sent.store(at, Relaxed);
        backlog.pin(client.id, at);
    }
}

/// Writes `bytes`, and while the replica does not take them, watches
/// whether it fell behind or must stop: a replica that stops reading is
/// noticed within [`POLL`], not after `repl-timeout`.
fn write_watching(
    stream: &mut TcpStream,
    bytes: &[u8],
    attached: &Attached,
    timeout: Duration,
    behind: impl Fn() -> bool,
) -> Result<(), String> {
    let mut at = 0;
    let mut progress = Instant::now();
    while at < bytes.len() {
        match stream.write(&bytes[at..]) {
            Ok(0) => return Err("the replica's socket closed".into()),
            Ok(n) => {
                at += n;
                progress = Instant::now();
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                if behind() {
                    return Err("it fell behind by more than its output buffer limit".into());
                }
                if attached.stop.load(Relaxed) {
                    return Err("it was told to stop".into());
                }
                if progress.elapsed() > timeout {
                    return Err("timeout: it took nothing within repl-timeout".into());
                }
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}

/// Reads what the replica sends: `REPLCONF ACK <offset>`. A replica that
/// hangs up stops its sender.
fn spawn_ack_reader(
    replication: Arc<super::Replication>,
    mut stream: TcpStream,
    attached: Arc<Attached>,
) {
    let spawned = std::thread::Builder::new()
        .name("strata-replica-acks".into())
        .spawn(move || {
            let mut parser = RequestParser::new();
            let mut input = BytesMut::with_capacity(4096);
            let mut chunk = [0u8; 4096];
            let limits = Limits::default();
            loop {
                if attached.stop.load(Relaxed) {
                    return;
                }
                let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
                match stream.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => {
                        // Anything from the replica shows it alive: a
                        // loading one sends newlines (as Redis' do).
                        attached.acked_at_ms.store(now_ms(), Relaxed);
                        input.extend_from_slice(&chunk[..n]);
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock
                                | std::io::ErrorKind::TimedOut
                                | std::io::ErrorKind::Interrupted
                        ) =>
                    {
                        continue;
                    }
                    Err(_) => break,
                }
                while let Ok(Some(args)) = parser.next(&mut input, &limits) {
                    let is_ack = args.len() >= 3
                        && args[0].eq_ignore_ascii_case(b"replconf")
                        && args[1].eq_ignore_ascii_case(b"ack");
                    let number = |arg: &Bytes| std::str::from_utf8(arg).ok()?.parse::<u64>().ok();
                    // `REPLCONF ACK <offset> [FACK <synced offset>]`.
                    let synced = args
                        .get(3)
                        .filter(|word| word.eq_ignore_ascii_case(b"fack"))
                        .and_then(|_| number(args.get(4)?));
                    if let Some(offset) = is_ack.then(|| number(&args[2])).flatten() {
                        attached.acknowledge(offset, synced, now_ms());
                        replication.acked.notify_waiters();
                    }
                }
            }
            attached.stop.store(true, Relaxed);
        });
    if let Err(e) = spawned {
        log_warning!("could not start a thread for a replica's acknowledgements: {e}");
    }
}
