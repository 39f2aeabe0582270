//! The replica's side: a thread that connects to the primary, asks to
//! continue the history it holds (PSYNC with its ID and offset) or for a
//! full synchronisation, loads the RDB file it may be sent, then applies
//! the command stream that follows, acknowledging its offset every
//! second. When the link breaks it connects again and asks to continue.
//! A restarted replica takes up the position its log kept (the
//! `repl_position` trailer every applied command's log group ends with).
//!
//! The primary may be Strata or redis-server 7.x. Commands from the
//! primary run as an internal client (CLIENT LIST `flags=M`) that no ACL
//! and no read-only rule stops; their replies are dropped. What they
//! change is logged here as any write is, so the replica is durable on
//! its own and feeds its own replicas.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{Relaxed, Release};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use strata_resp::{Limits, RequestParser};

use super::state::{LinkState, Position};
use crate::commands::{ColdValues, Node};
use crate::net::session::Session;
use crate::rdb::file::Item;
use crate::util::now_ms;
use crate::{log_notice, log_warning};

/// Wait between connection attempts.
const RETRY: Duration = Duration::from_secs(1);
/// Largest RDB file a replica takes (it is read into RAM whole).
const RDB_BYTES_MAX: u64 = 64 << 30;

/// Starts the link thread for `link` to `host:port`.
pub fn start(server: Arc<Node>, host: String, port: u16, link: Arc<LinkState>) {
    let spawned = std::thread::Builder::new()
        .name("strata-replica-link".into())
        .spawn(move || {
            while !link.stop.load(Relaxed) {
                log_notice!("Connecting to MASTER {host}:{port}");
                let outcome = follow(&server, &host, port, &link);
                // A link that was up reconnects at once (the backlog may
                // still hold what it lacks); failed attempts wait.
                let was_up = link.up.load(Relaxed);
                link.up.store(false, Relaxed);
                link.syncing.store(false, Relaxed);
                link.down_since_ms.store(now_ms(), Relaxed);
                server.persistence.loading.store(false, Release);
                match outcome {
                    Ok(()) => {}
                    Err(why) => log_warning!("Replication with {host}:{port}: {why}"),
                }
                if !link.stop.load(Relaxed) && !was_up {
                    std::thread::sleep(RETRY);
                }
            }
        });
    if let Err(e) = spawned {
        log_warning!("could not start the replication link: {e}");
    }
}

/// One connection to the primary, from the handshake until it breaks.
fn follow(server: &Arc<Node>, host: &str, port: u16, link: &LinkState) -> Result<(), String> {
    // A replica configured at start-up connects once its own data is
    // loaded (it is then replaced by the primary's).
    while server.persistence.is_loading() {
        if link.stop.load(Relaxed) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if link.resume_saved.swap(false, Relaxed) && !server.replication.synced() {
        resume_saved(server);
    }
    let config = server.config.get();
    let timeout = Duration::from_secs(super::primary::repl_timeout_s(&config));
    let (addr, mut reader, mut writer) = open(host, port, timeout)?;
    handshake(&mut reader, &mut writer, server, &config)?;
    let client = server.clients.register(
        addr,
        writer.local_addr().map_err(|e| e.to_string())?,
        None,
        -1,
        now_ms(),
    );
    client.role.store(crate::net::client::ROLE_MASTER, Relaxed);
    let mut applier = Applier::new(server, client.clone());
    let outcome = synchronise(
        server,
        &mut reader,
        &mut writer,
        link,
        &mut applier,
        timeout,
    );
    let applied = outcome.and_then(|()| applier.apply_stream(reader, writer, link, timeout));
    server.clients.unregister(client.id);
    applied
}

/// Takes up the position this replica's data holds after a restart, so
/// that its PSYNC asks to continue from there.
fn resume_saved(server: &Node) {
    let image = server.keyspace.replication_position();
    let Some(position) = image.as_deref().and_then(Position::decode) else {
        return;
    };
    log_notice!(
        "The data holds replication ID {} up to offset {}: asking to continue from there",
        position.replid,
        position.offset
    );
    server.replication.resume(&position);
}

/// PSYNC, then the RDB file of a full synchronisation, loaded.
fn synchronise(
    server: &Node,
    reader: &mut BufReader<TcpStream>,
    writer: &mut TcpStream,
    link: &LinkState,
    applier: &mut Applier,
    timeout: Duration,
) -> Result<(), String> {
    let failover = link.failover.swap(false, Relaxed);
    let (replid, offset) = match ask_sync(reader, writer, &server.replication, failover)? {
        Sync::Continue(replid) => {
            if let Some(replid) = replid {
                server.replication.continue_as(&replid);
            }
            // The stream goes on in the database it had selected where
            // this server's copy of it ends (it selects only on changes).
            let db = server.replication.backlog.db().map_or(0, usize::from);
            if db < server.keyspace.db_count() {
                applier.session.db = db;
            }
            link.up.store(true, Relaxed);
            log_notice!(
                "MASTER <-> REPLICA sync: partial resynchronization accepted, at offset {}",
                server.replication.offset()
            );
            return Ok(());
        }
        Sync::Full(replid, offset) => (replid, offset),
    };
    link.syncing.store(true, Relaxed);
    link.last_io_ms.store(now_ms(), Relaxed);
    // Newlines every second until the copy is loaded: the primary sees
    // this replica alive while it has nothing to acknowledge yet.
    let _keepalive = KeepAlive::start(writer)?;
    let rdb = receive_rdb(reader, link, timeout)?;
    let applying = server.replication.applying();
    // REPLICAOF NO ONE (or another primary) came during the transfer: the
    // copy is not loaded. One that comes from here on waits for the load
    // (it takes `applying` too), as Redis' loads before its next command.
    if link.stop.load(Relaxed) {
        return Err("stopped during the transfer; the copy is not loaded".into());
    }
    log_notice!(
        "MASTER <-> REPLICA sync: loading {} bytes of RDB",
        rdb.len()
    );
    // Until the copy is loaded, the data matches no position.
    server.keyspace.save_replication_position(None, &[]);
    applier.load(&rdb)?;
    drop(rdb);
    server.replication.adopt(&replid, offset);
    let mut image = Vec::new();
    Position::encode(&mut image, &replid, offset, applier.session.db);
    server.keyspace.save_replication_position(None, &image);
    drop(applying);
    link.syncing.store(false, Relaxed);
    link.up.store(true, Relaxed);
    log_notice!("MASTER <-> REPLICA sync: finished with success");
    Ok(())
}

/// Sends a newline to the primary every second while it lives.
struct KeepAlive {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl KeepAlive {
    fn start(writer: &TcpStream) -> Result<KeepAlive, String> {
        let mut socket = writer.try_clone().map_err(|e| e.to_string())?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("strata-replica-keepalive".into())
            .spawn(move || {
                let mut sent_at = Instant::now();
                while !stopped.load(Relaxed) {
                    std::thread::sleep(Duration::from_millis(50));
                    if sent_at.elapsed() >= Duration::from_secs(1) {
                        if socket.write_all(b"\n").is_err() {
                            return;
                        }
                        sent_at = Instant::now();
                    }
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(KeepAlive {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for KeepAlive {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        // Joined: the link writes its acknowledgements next, and a newline
        // must not land inside one.
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A connection to another server at `host:port` (5 s to connect), with
/// `timeout` on its reads and writes: its address, a buffered reader and
/// the writer.
pub(super) fn open(
    host: &str,
    port: u16,
    timeout: Duration,
) -> Result<(std::net::SocketAddr, BufReader<TcpStream>, TcpStream), String> {
    let addr = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("{host}:{port}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host}:{port} resolves to no address"))?;
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| format!("{host}:{port}: {e}"))?;
    let io = |e: std::io::Error| e.to_string();
    stream.set_read_timeout(Some(timeout)).map_err(io)?;
    stream.set_write_timeout(Some(timeout)).map_err(io)?;
    let _ = stream.set_nodelay(true);
    let reader = BufReader::with_capacity(1 << 16, stream.try_clone().map_err(io)?);
    Ok((addr, reader, stream))
}

/// One command in RESP.
pub(super) fn command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    let owned: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
    super::translate::write_command(&mut out, &owned);
    out
}

fn read_line(reader: &mut impl BufRead) -> Result<String, String> {
    let mut line = String::new();
    let n = reader.read_line(&mut line).map_err(|e| e.to_string())?;
    if n == 0 {
        return Err("the primary closed the connection".into());
    }
    Ok(line.trim_end().to_string())
}

/// Sends a command and reads its one-line reply.
pub(super) fn ask(
    reader: &mut impl BufRead,
    writer: &mut TcpStream,
    args: &[&[u8]],
) -> Result<String, String> {
    writer
        .write_all(&command(args))
        .map_err(|e| e.to_string())?;
    read_line(reader)
}

/// AUTH with `masteruser`/`masterauth`, when set: what this server
/// sends to the servers it connects to (its primary, or the node a slot
/// moves to).
pub(super) fn authenticate(
    reader: &mut impl BufRead,
    writer: &mut TcpStream,
    config: &crate::config::Config,
) -> Result<(), String> {
    let password = config.setting("masterauth");
    if password.is_empty() {
        return Ok(());
    }
    let user = config.setting("masteruser");
    let reply = if user.is_empty() {
        ask(reader, writer, &[b"AUTH", password.as_bytes()])?
    } else {
        ask(
            reader,
            writer,
            &[b"AUTH", user.as_bytes(), password.as_bytes()],
        )?
    };
    match reply.starts_with('-') {
        true => Err(format!("unable to AUTH to MASTER: {reply}")),
        false => Ok(()),
    }
}

fn handshake(
    reader: &mut impl BufRead,
    writer: &mut TcpStream,
    server: &Node,
    config: &crate::config::Config,
) -> Result<(), String> {
    let pong = ask(reader, writer, &[b"PING"])?;
    if pong.starts_with('-') && !pong.starts_with("-NOAUTH") {
        return Err(format!("the primary answered PING with {pong}"));
    }
    authenticate(reader, writer, config)?;
    let port = server.port().to_string();
    let reply = ask(
        reader,
        writer,
        &[b"REPLCONF", b"listening-port", port.as_bytes()],
    )?;
    if reply.starts_with('-') {
        log_warning!("the primary refused REPLCONF listening-port: {reply}");
    }
    let reply = ask(reader, writer, &[b"REPLCONF", b"capa", b"psync2"])?;
    if reply.starts_with('-') {
        log_warning!("the primary refused REPLCONF capa: {reply}");
    }
    Ok(())
}

/// What PSYNC got.
enum Sync {
    /// `+FULLRESYNC <replid> <offset>`: an RDB file follows.
    Full(String, u64),
    /// `+CONTINUE [<replid>]`: the stream goes on from this server's
    /// offset.
    Continue(Option<String>),
}

/// PSYNC with this server's history (`? -1` without one).
fn ask_sync(
    reader: &mut impl BufRead,
    writer: &mut TcpStream,
    replication: &super::Replication,
    failover: bool,
) -> Result<Sync, String> {
    let own = replication.synced() || replication.streams_own_history();
    let (replid, offset) = if own || failover {
        let next = (replication.offset() + 1).to_string();
        (replication.replid(), next)
    } else {
        ("?".to_string(), "-1".to_string())
    };
    let mut args: Vec<&[u8]> = vec![b"PSYNC", replid.as_bytes(), offset.as_bytes()];
    if failover {
        args.push(b"FAILOVER");
    }
    writer
        .write_all(&command(&args))
        .map_err(|e| e.to_string())?;
    loop {
        let line = read_line(reader)?;
        if line.is_empty() {
            continue;
        }
        let mut words = line.split(' ');
        match words.next() {
            Some("+FULLRESYNC") => {
                let replid = words.next().unwrap_or_default().to_string();
                let offset = words
                    .next()
                    .and_then(|w| w.parse().ok())
                    .ok_or("a FULLRESYNC without an offset")?;
                return Ok(Sync::Full(replid, offset));
            }
            Some("+CONTINUE") => return Ok(Sync::Continue(words.next().map(str::to_string))),
            _ => return Err(format!("the primary answered PSYNC with {line}")),
        }
    }
}

/// How often a transfer that waits for bytes looks at the link's stop
/// flag.
const TRANSFER_POLL: Duration = Duration::from_millis(200);

/// Reads the RDB bulk of a full synchronisation: `$<len>\r\n` (newlines
/// may come first while the primary prepares it) and the bytes. It gives
/// up when the link is stopped (REPLICAOF NO ONE, or another primary),
/// looked at every [`TRANSFER_POLL`], and when the primary sends nothing
/// for `timeout`.
fn receive_rdb(
    reader: &mut BufReader<TcpStream>,
    link: &LinkState,
    timeout: Duration,
) -> Result<Vec<u8>, String> {
    (reader.get_ref().set_read_timeout(Some(TRANSFER_POLL))).map_err(|e| e.to_string())?;
    let waiting = |e: &std::io::Error| -> Result<(), String> {
        if !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock
                | std::io::ErrorKind::TimedOut
                | std::io::ErrorKind::Interrupted
        ) {
            return Err(e.to_string());
        }
        if link.stop.load(Relaxed) {
            return Err("stopped during the transfer".into());
        }
        let silent = now_ms().saturating_sub(link.last_io_ms.load(Relaxed));
        if silent > timeout.as_millis() as u64 {
            return Err("timeout: the primary sent nothing during the transfer".into());
        }
        Ok(())
    };
    let mut line = Vec::new();
    let header = loop {
        // `read_until` keeps what it read before an error: a timed-out
        // read goes on with the same line.
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => return Err("the primary closed the connection".into()),
            Ok(_) if line.ends_with(b"\n") => {
                link.last_io_ms.store(now_ms(), Relaxed);
                let text = String::from_utf8_lossy(&line).trim_end().to_string();
                line.clear();
                if !text.is_empty() {
                    break text;
                }
            }
            Ok(_) => {}
            Err(e) => waiting(&e)?,
        }
    };
    let len: u64 = header
        .strip_prefix('$')
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("expected the RDB bulk, got {header}"))?;
    if len > RDB_BYTES_MAX {
        return Err(format!(
            "the RDB file is {len} bytes, more than this replica takes"
        ));
    }
    link.sync_total.store(len, Relaxed);
    link.sync_read.store(0, Relaxed);
    let mut rdb = vec![0u8; len as usize];
    let mut got = 0;
    while got < rdb.len() {
        let n = match reader.read(&mut rdb[got..]) {
            Ok(n) => n,
            Err(e) => {
                waiting(&e)?;
                continue;
            }
        };
        if n == 0 {
            return Err("the primary closed the connection during the RDB transfer".into());
        }
        got += n;
        link.sync_read.store(got as u64, Relaxed);
        link.last_io_ms.store(now_ms(), Relaxed);
    }
    (reader.get_ref().set_read_timeout(Some(timeout))).map_err(|e| e.to_string())?;
    Ok(rdb)
}

/// Runs the primary's commands here.
pub(super) struct Applier<'s> {
    server: &'s Arc<Node>,
    session: Session,
    stats: crate::observe::stats::ThreadStats,
    replies: BytesMut,
    /// The database the primary's stream has selected (a SELECT queued
    /// in a MULTI counts at once: it is in force after the EXEC).
    stream_db: usize,
    /// The position after the command being applied, which every log
    /// group it commits ends with.
    position: Vec<u8>,
    /// Offsets reached, each with the last LSN logged by then, oldest
    /// first: the largest whose LSN the log has synced is what `FACK`
    /// reports (WAITAOF on the primary counts it).
    marks: std::collections::VecDeque<(u64, u64)>,
    /// The offset up to which this replica's log is synced.
    synced: u64,
}

/// Marks [`Applier`] keeps at most (older ones go: FACK then reports a
/// later offset a little later).
const MARKS_MAX: usize = 4096;

impl<'s> Applier<'s> {
    pub(super) fn new(server: &'s Arc<Node>, client: Arc<crate::net::client::ClientInfo>) -> Self {
        let mut session = Session::new(client, &server.acl);
        session.authenticated = true;
        session.primary_link = true;
        Applier {
            server,
            session,
            stats: crate::observe::stats::ThreadStats::new(server.commands.specs.len()),
            replies: BytesMut::new(),
            stream_db: 0,
            position: Vec::new(),
            marks: std::collections::VecDeque::new(),
            synced: 0,
        }
    }

    pub(super) fn run(&mut self, args: &[Bytes]) {
        let config = self.server.config.get();
        strata_engine::keyspace::replica_expiry::applying_primary(|| {
            (self.server.dispatch)(
                self.server,
                &mut self.session,
                &mut self.replies,
                &config,
                &self.stats,
                now_ms(),
                args,
                ColdValues::ReadUnderLock,
            )
        });
        // The clients it woke are served when they run (nothing here
        // waits for them).
        self.session.woken.clear();
        if self.replies.starts_with(b"-") {
            log_warning!(
                "a command from the primary failed here: {} ({})",
                String::from_utf8_lossy(&args[0]),
                String::from_utf8_lossy(&self.replies).trim_end()
            );
        }
        self.replies.clear();
    }

    /// Notes that the stream is applied up to `offset`, with what the
    /// log holds of it numbered up to its last LSN now.
    fn mark(&mut self, offset: u64) {
        let Some(log) = self.server.keyspace.change_log() else {
            return;
        };
        if self.marks.back().is_some_and(|&(at, _)| at == offset) {
            return;
        }
        if self.marks.len() == MARKS_MAX {
            self.marks.pop_front();
        }
        self.marks
            .push_back((offset, log.next_lsn().saturating_sub(1)));
    }

    /// The offset up to which the log has synced what the stream changed
    /// (None without a log of changes: no FACK, as Redis without AOF).
    fn synced_offset(&mut self) -> Option<u64> {
        let log = self.server.keyspace.change_log()?;
        let synced_lsn = log.synced_lsn();
        while let Some(&(offset, lsn)) = self.marks.front() {
            if lsn > synced_lsn {
                break;
            }
            self.synced = self.synced.max(offset);
            self.marks.pop_front();
        }
        Some(self.synced)
    }

    /// Runs a command of the stream, whose log groups end with the
    /// position `after` it (`replid`'s offset).
    fn run_at(&mut self, args: &[Bytes], replid: &str, after: u64) {
        if args[0].eq_ignore_ascii_case(b"select")
            && let Some(db) = args
                .get(1)
                .and_then(|db| std::str::from_utf8(db).ok()?.parse().ok())
        {
            self.stream_db = db;
        }
        let mut image = std::mem::take(&mut self.position);
        Position::encode(&mut image, replid, after, self.stream_db);
        strata_engine::storage::repl_position::with_trailer(&image, || self.run(args));
        self.position = image;
    }

    /// Replaces the data with the RDB file's.
    fn load(&mut self, rdb: &[u8]) -> Result<(), String> {
        let server = self.server;
        self.run(&[Bytes::from_static(b"FLUSHALL")]);
        server.persistence.loading.store(true, Release);
        let now = now_ms();
        let keyspace = &server.keyspace;
        let mut functions = Vec::new();
        let mut keys = 0u64;
        let mut stream_db = 0;
        let read = crate::rdb::file::read(rdb, |item| match item {
            Item::Key {
                db,
                key,
                deadline,
                value,
            } => {
                if db >= keyspace.db_count() || deadline.is_some_and(|at| at <= now) {
                    return;
                }
                let k = keyspace.key(&key);
                keyspace.lock(k).set(db, k, value, deadline, false, now);
                keys += 1;
            }
            Item::Function(code) => functions.push(code),
            Item::StreamDb(db) => stream_db = db,
        });
        server.persistence.loading.store(false, Release);
        if !functions.is_empty() {
            let mut payload = Vec::new();
            for code in &functions {
                payload.push(crate::rdb::OPCODE_FUNCTION2);
                crate::rdb::encoding::write_string(&mut payload, code);
            }
            crate::rdb::encoding::seal(&mut payload);
            self.run(&[
                Bytes::from_static(b"FUNCTION"),
                Bytes::from_static(b"RESTORE"),
                Bytes::from(payload),
                Bytes::from_static(b"REPLACE"),
            ]);
        }
        read?;
        // The stream goes on in the database the primary's copy names.
        if stream_db < keyspace.db_count() {
            self.session.db = stream_db;
        }
        log_notice!("MASTER <-> REPLICA sync: {keys} keys loaded");
        Ok(())
    }

    /// Applies the command stream until the link breaks or is stopped.
    /// The offset moves (and the applied bytes join this server's own
    /// stream) only between transactions, as Redis counts it: a
    /// reconnection never continues from inside a MULTI.
    fn apply_stream(
        &mut self,
        mut reader: BufReader<TcpStream>,
        mut writer: TcpStream,
        link: &LinkState,
        timeout: Duration,
    ) -> Result<(), String> {
        let replication = &self.server.replication;
        let mut input = BytesMut::from(reader.buffer());
        reader.consume(input.len());
        let mut stream = reader.into_inner();
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .map_err(|e| e.to_string())?;
        let replid = replication.replid();
        self.stream_db = self.session.db;
        self.mark(replication.offset());
        let mut parser = RequestParser::new();
        let limits = Limits {
            bulk_len_bytes_max: i64::MAX as u64,
            ..Limits::default()
        };
        let mut chunk = vec![0u8; 1 << 16];
        let mut acked_at = Instant::now();
        let mut heard_at = Instant::now();
        // The bytes `input` holds, kept whole from `raw_at` on: the parser
        // consumes `input`, and what each command was is taken from here.
        let mut raw = input.to_vec();
        let mut raw_at = 0;
        // Bytes applied since the offset last moved: it moves once per
        // batch read (and before an acknowledgement), never inside a
        // transaction.
        let mut pending = Vec::new();
        loop {
            if link.stop.load(Relaxed) {
                return Ok(());
            }
            let applying = replication.applying();
            if link.stop.load(Relaxed) {
                return Ok(());
            }
            loop {
                let before = input.len();
                let Some(args) = parser.next(&mut input, &limits).map_err(|e| e.0)? else {
                    // Empty lines (keep-alives, padding) the parser skipped
                    // count in the offset too.
                    let skipped = raw.len() - raw_at - input.len();
                    pending.extend_from_slice(&raw[raw_at..raw_at + skipped]);
                    raw_at += skipped;
                    break;
                };
                let consumed = before - input.len();
                let command = &raw[raw_at..raw_at + consumed];
                if args.len() >= 2
                    && args[0].eq_ignore_ascii_case(b"replconf")
                    && args[1].eq_ignore_ascii_case(b"getack")
                {
                    if self.session.multi.is_none() && !pending.is_empty() {
                        replication.applied(&pending, self.session.db);
                        pending.clear();
                    }
                    let synced = self.synced_offset();
                    send_ack(&mut writer, replication.offset(), synced)?;
                    acked_at = Instant::now();
                } else if !args[0].eq_ignore_ascii_case(b"ping") {
                    let after = replication.offset() + (pending.len() + consumed) as u64;
                    self.run_at(&args, &replid, after);
                }
                pending.extend_from_slice(command);
                raw_at += consumed;
            }
            if self.session.multi.is_none() && !pending.is_empty() {
                replication.applied(&pending, self.session.db);
                pending.clear();
            }
            // What was consumed goes once it is most of the buffer.
            if raw_at > raw.len() / 2 {
                raw.drain(..raw_at);
                raw_at = 0;
            }
            drop(applying);
            self.mark(replication.offset());
            if acked_at.elapsed() >= Duration::from_secs(1) {
                let synced = self.synced_offset();
                send_ack(&mut writer, replication.offset(), synced)?;
                acked_at = Instant::now();
            }
            match stream.read(&mut chunk) {
                Ok(0) => return Err("the primary closed the connection".into()),
                Ok(n) => {
                    input.extend_from_slice(&chunk[..n]);
                    raw.extend_from_slice(&chunk[..n]);
                    heard_at = Instant::now();
                    link.last_io_ms.store(now_ms(), Relaxed);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            // A socket read with a timeout fails so once the
                            // process is stopped and continued (signal(7)).
                            | std::io::ErrorKind::Interrupted
                    ) =>
                {
                    if heard_at.elapsed() > timeout {
                        return Err("timeout: nothing from the primary within repl-timeout".into());
                    }
                }
                Err(e) => return Err(e.to_string()),
            }
        }
    }
}

/// `REPLCONF ACK <offset>`, with `FACK <synced offset>` when this replica
/// logs its changes (as a Redis 7.2 replica with AOF on does).
fn send_ack(writer: &mut TcpStream, offset: u64, synced: Option<u64>) -> Result<(), String> {
    let offset = offset.to_string();
    let synced = synced.map(|s| s.to_string());
    let mut args: Vec<&[u8]> = vec![b"REPLCONF", b"ACK", offset.as_bytes()];
    if let Some(synced) = &synced {
        args.push(b"FACK");
        args.push(synced.as_bytes());
    }
    writer.write_all(&command(&args)).map_err(|e| e.to_string())
}
