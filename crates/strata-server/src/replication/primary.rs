//! Serving one replica: after its PSYNC (or SYNC), the connection leaves
//! the network threads for a thread of its own, which writes the copy
//! ([`super::snapshot`]), sends it, then sends the translated changes
//! ([`super::translate`]) for as long as the replica keeps up.
//!
//! A replica that falls behind by more than `client-output-buffer-limit
//! replica` (its hard limit; 256 MB by default) is dropped and logged,
//! as Redis drops it: the changes waiting for it are freed and writers
//! never wait for it. A second thread reads what the replica sends
//! (`REPLCONF ACK <offset>`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use strata_resp::{Limits, RequestParser};

use super::snapshot::{self, Follows};
use super::translate::{Translator, write_command};
use super::{Attached, STATE_ONLINE, STATE_SEND_BULK};
use crate::client::ClientInfo;
use crate::server::{Server, now_ms};
use crate::{log_notice, log_warning};

/// What the replica asked for.
#[derive(Clone, Debug)]
pub struct SyncRequest {
    /// PSYNC (answered `+FULLRESYNC`) rather than the old SYNC.
    pub psync: bool,
    /// The port it listens on (REPLCONF listening-port), for INFO.
    pub listening_port: u16,
    /// `REPLCONF rdb-only 1` (`redis-cli --rdb`): the RDB file only, then
    /// the connection closes.
    pub rdb_only: bool,
}

/// Bytes of translated changes sent in one write at most.
const WRITE_BATCH_BYTES: usize = 1 << 20;
/// Marks kept per replica (see [`Attached::marks`]).
const MARKS_MAX: usize = 4096;
/// How long one wait for changes lasts before the thread looks at its
/// stop flag and the ping period again.
const POLL: Duration = Duration::from_millis(20);

/// Serves the replica on `stream` until it goes, falls behind, or is
/// told to stop. `keep` (the client's registration) lives as long.
pub fn serve(
    server: Arc<Server>,
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
            let outcome = run(&server, stream, &client, &attached, &request);
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
    server: &Server,
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
    let limit = match config.output_limit_replica.hard_bytes {
        0 => usize::MAX,
        bytes => bytes as usize,
    };
    let changes = server.keyspace.subscribe_records(limit);
    let base = server.replication.offset();
    if request.psync {
        let line = format!("+FULLRESYNC {} {base}\r\n", server.replication.replid());
        stream.write_all(line.as_bytes()).map_err(io)?;
    }
    let path = config
        .dir
        .join("replication")
        .join(format!("sync-{}.rdb", client.id));
    let started = Instant::now();
    let copy = snapshot::write(
        &server.keyspace,
        &path,
        crate::server::REDIS_VERSION,
        now_ms(),
    );
    let copy = match copy {
        Ok(copy) => copy,
        Err(e) => {
            let _ = std::fs::remove_file(&path);
            return Err(format!("the copy for the replica failed: {e}"));
        }
    };
    server.replication.full_syncs.fetch_add(1, Relaxed);
    log_notice!(
        "Synchronization copy of {} keys ({} bytes) written in {} ms; sending",
        copy.keys,
        copy.bytes,
        started.elapsed().as_millis()
    );
    attached.state.store(STATE_SEND_BULK, Relaxed);
    let sent = send_file(&mut stream, &copy);
    let _ = std::fs::remove_file(&path);
    sent.map_err(io)?;
    // Once it acknowledges the copy, the replica holds every change
    // below the first shard's L_s.
    let copied = copy
        .covered
        .iter()
        .min()
        .copied()
        .unwrap_or(1)
        .saturating_sub(1);
    attached.marks.lock().push_back((base, copied));
    if request.rdb_only {
        return Ok(());
    }
    attached.state.store(STATE_ONLINE, Relaxed);
    log_notice!("Synchronization with replica {} succeeded", client.addr);
    let reader = stream.try_clone().map_err(io)?;
    spawn_ack_reader(server.replication.server(), reader, attached.clone());
    stream_changes(server, &mut stream, client, attached, &copy, &changes, base)
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

/// Sends every change committed after the copy, in commit order.
fn stream_changes(
    server: &Server,
    stream: &mut TcpStream,
    client: &ClientInfo,
    attached: &Attached,
    copy: &snapshot::Snapshot,
    changes: &strata_engine::feed::Subscription,
    base: u64,
) -> Result<(), String> {
    let keyspace = &server.keyspace;
    let timeout = Duration::from_secs(repl_timeout_s(&server.config.get()));
    stream
        .set_write_timeout(Some(POLL))
        .map_err(|e| e.to_string())?;
    let mut translator = Translator::new();
    let mut out = Vec::new();
    let mut sent = 0u64;
    let mut pinged = Instant::now();
    let mut last_seq = 0;
    loop {
        if attached.stop.load(Relaxed) || client.is_killed() {
            return Ok(());
        }
        let mut group = changes
            .recv_timeout(POLL)
            .map_err(|_| "it fell behind by more than its output buffer limit".to_string())?;
        while let Some(next) = group {
            let mut restart = false;
            translator.group(
                keyspace,
                now_ms(),
                &next.records,
                |record| match copy.follows(keyspace, record) {
                    Follows::Send => true,
                    Follows::Skip => false,
                    Follows::Restart => {
                        restart = true;
                        false
                    }
                },
                &mut out,
            );
            if restart {
                return Err(
                    "the whole keyspace changed while it was copied; it starts over".into(),
                );
            }
            last_seq = last_seq.max(next.seq);
            if out.len() >= WRITE_BATCH_BYTES {
                break;
            }
            group = changes
                .try_recv()
                .map_err(|_| "it fell behind by more than its output buffer limit".to_string())?;
        }
        let period = Duration::from_secs(server.config.get().repl_ping_replica_period_s);
        if pinged.elapsed() >= period {
            write_command(&mut out, &[b"PING".to_vec()]);
            pinged = Instant::now();
        }
        let data_end = base + sent + out.len() as u64;
        if attached.getack.swap(false, Relaxed) {
            write_command(
                &mut out,
                &[b"REPLCONF".to_vec(), b"GETACK".to_vec(), b"*".to_vec()],
            );
        }
        if out.is_empty() {
            continue;
        }
        if last_seq > 0 {
            let mut marks = attached.marks.lock();
            // A replica that does not acknowledge keeps this many marks at
            // most; past that the newest mark moves (WAIT may count it a
            // little late, never early).
            if marks.len() >= MARKS_MAX {
                marks.pop_back();
            }
            marks.push_back((data_end, last_seq));
        }
        write_watching(stream, &out, changes, attached, timeout)?;
        sent += out.len() as u64;
        out.clear();
        attached.sent.store(base + sent, Relaxed);
        server.replication.advance(base + sent);
    }
}

/// Writes `bytes`, and while the replica does not take them, watches
/// whether it fell behind or must stop: a replica that stops reading is
/// noticed within [`POLL`], not after `repl-timeout`.
fn write_watching(
    stream: &mut TcpStream,
    bytes: &[u8],
    changes: &strata_engine::feed::Subscription,
    attached: &Attached,
    timeout: Duration,
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
                if changes.is_lagged() {
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
fn spawn_ack_reader(server: Option<Arc<Server>>, mut stream: TcpStream, attached: Arc<Attached>) {
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
                    Ok(n) => input.extend_from_slice(&chunk[..n]),
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
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
                    if let Some(offset) = is_ack
                        .then(|| std::str::from_utf8(&args[2]).ok()?.parse::<u64>().ok())
                        .flatten()
                    {
                        attached.acknowledge(offset, now_ms());
                        if let Some(server) = &server {
                            server.replication.acked.notify_waiters();
                        }
                    }
                }
            }
            attached.stop.store(true, Relaxed);
        });
    if let Err(e) = spawned {
        log_warning!("could not start a thread for a replica's acknowledgements: {e}");
    }
}
