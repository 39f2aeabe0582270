//! Answering a network thread's idle connections while a script on that
//! same thread is busy.
//!
//! A script runs on its connection's network thread and holds it until it
//! ends (see `crate::scripting`): that thread's runtime polls none of its
//! other connections meanwhile. Clients on other threads get `-BUSY` from
//! the dispatcher once the script passes `busy-reply-threshold`, and new
//! connections are given to other threads; this module serves the clients
//! that were already on the busy thread, as Redis serves every client
//! from inside a busy script:
//!
//! - each connection of a network thread has a [`Slot`] in the thread's
//!   registry, with its socket's descriptor and an `idle` flag that the
//!   connection sets while it waits for a request with nothing buffered
//!   in either direction and a plain session (not subscribed,
//!   authenticated, replies on);
//! - while the script is busy, its time-limit hook calls [`serve_idle`]
//!   every [`PASS_INTERVAL`]: it polls the idle connections' sockets,
//!   reads what they sent and answers each request: SCRIPT KILL and
//!   FUNCTION KILL act as they do anywhere, FUNCTION STATS shows the
//!   running function, SHUTDOWN stops the script and the server (for a
//!   client whose user has no ACL rules: no ACL check runs here; others
//!   wait for the script's end like the next item), any other command
//!   that Redis refuses during a busy script gets the `-BUSY` error;
//! - a client in MULTI, or that sends MULTI, is answered as Redis
//!   answers it during a busy script: every command refused with `-BUSY`
//!   fails its transaction, EXEC is refused with EXECABORT, DISCARD ends
//!   it; the connection takes the transaction's new state with the stash
//!   ([`MultiNow`]);
//! - the first request it cannot answer here (an `allow_busy` command
//!   that needs the session, such as WATCH or AUTH; an unknown command; a
//!   protocol error) stops the serving of that connection: it and what
//!   follows wait in the slot, with any reply the socket did not take;
//! - when the script ends, [`release`] wakes those connections, which take
//!   the waiting bytes before reading their socket again, so nothing is
//!   lost and order is kept.
//!
//! Everything here runs on the network thread that owns the connections
//! (the registry is thread-local); the slot's fields are atomics and a
//! mutex only because connection futures must be `Send`.

use std::borrow::Cow;
use std::cell::RefCell;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use strata_resp::{Limits, Protocol, ReplyWriter, RequestParser};

use crate::commands::Gates;
use crate::commands::Node;
use crate::commands::functions::write_function_stats;
use crate::commands::server::shutdown_mode;
use crate::net::client::ClientInfo;
use crate::net::session::Session;

/// How often a busy script's hook serves the idle connections.
pub const PASS_INTERVAL: Duration = Duration::from_millis(5);
/// Bytes read from one connection per pass.
const READ_PER_PASS: usize = 64 * 1024;
/// A connection with more than this waiting (one huge request) is left
/// alone until the script ends.
const STASH_MAX: usize = 1024 * 1024;

/// One connection of a network thread, as the busy-script serving sees it.
pub struct Slot {
    fd: RawFd,
    client: Arc<ClientInfo>,
    /// The connection waits for a request and may be served from here.
    idle: AtomicBool,
    /// Its session speaks RESP3 (noted when it becomes idle).
    resp3: AtomicBool,
    /// Its session is in MULTI (noted when it becomes idle).
    in_multi: AtomicBool,
    /// Its user may run every command (noted when it becomes idle): only
    /// such a client is served SCRIPT KILL, FUNCTION KILL, FUNCTION STATS
    /// and SHUTDOWN here, where no ACL check runs.
    unrestricted: AtomicBool,
    /// Serving it stopped at a request it must run itself.
    stopped: AtomicBool,
    /// `stash` holds something.
    stashed: AtomicBool,
    /// Bytes and replies it must take before going on.
    stash: Mutex<Stash>,
}

#[derive(Default)]
struct Stash {
    /// Requests read from its socket and not answered.
    input: Vec<u8>,
    /// Replies its socket did not take.
    output: Vec<u8>,
    /// What serving did to its transaction (see [`MultiNow`]).
    multi: MultiNow,
}

/// A connection's transaction as serving left it, for the connection to
/// take over: MULTI, a refused command (the transaction fails, as in
/// Redis) and EXEC or DISCARD are answered here, the queued commands
/// stay in the session. The default: untouched.
#[derive(Default, Clone, Copy, PartialEq)]
pub struct MultiNow {
    /// EXEC (refused) or DISCARD ended the session's transaction, and
    /// with it its WATCHes.
    pub ended: bool,
    /// In MULTI now (begun here after `ended`, or still the session's);
    /// `true`: a command was refused, EXEC will fail.
    pub open: Option<bool>,
}

struct ThreadConnections {
    server: Arc<Node>,
    slots: foldhash::HashMap<u64, Arc<Slot>>,
    last_pass: Option<Instant>,
}

thread_local! {
    static THREAD: RefCell<Option<ThreadConnections>> = const { RefCell::new(None) };
}

/// Makes the calling network thread's registry.
pub fn start_thread(server: Arc<Node>) {
    THREAD.with(|thread| {
        *thread.borrow_mut() = Some(ThreadConnections {
            server,
            slots: foldhash::HashMap::default(),
            last_pass: None,
        });
    });
}

/// Registers a connection of this thread (`fd`: its socket; -1 for a TLS
/// connection, which never reports itself idle: only its session can
/// read and write its bytes).
pub fn register(client: Arc<ClientInfo>, fd: RawFd) -> Arc<Slot> {
    let slot = Arc::new(Slot {
        fd,
        client,
        idle: AtomicBool::new(false),
        resp3: AtomicBool::new(false),
        in_multi: AtomicBool::new(false),
        unrestricted: AtomicBool::new(false),
        stopped: AtomicBool::new(false),
        stashed: AtomicBool::new(false),
        stash: Mutex::new(Stash::default()),
    });
    THREAD.with(|thread| {
        if let Some(thread) = thread.borrow_mut().as_mut() {
            thread.slots.insert(slot.client.id, slot.clone());
        }
    });
    slot
}

/// Forgets a connection (it closed).
pub fn unregister(client_id: u64) {
    // `try_with`: a runtime torn down with the thread drops its tasks
    // after the thread's locals may be gone.
    let _ = THREAD.try_with(|thread| {
        if let Some(thread) = thread.borrow_mut().as_mut() {
            thread.slots.remove(&client_id);
        }
    });
}

impl Slot {
    /// Notes whether the connection now waits for a request with nothing
    /// buffered and a plain session (see the module docs); when it does,
    /// what serving needs to know of `session`.
    pub fn set_idle(&self, idle: bool, session: &Session) {
        if idle {
            self.resp3
                .store(session.protocol == Protocol::Resp3, Relaxed);
            self.unrestricted.store(session.user_unrestricted, Relaxed);
            self.in_multi.store(session.multi.is_some(), Relaxed);
        }
        self.idle.store(idle, Relaxed);
    }

    fn protocol(&self) -> Protocol {
        match self.resp3.load(Relaxed) {
            true => Protocol::Resp3,
            false => Protocol::Resp2,
        }
    }

    /// Moves what was read and not answered into `input`, and the replies
    /// the socket did not take into `output`, while the script was busy;
    /// returns what became of the session's transaction meanwhile. Called
    /// by the connection before it reads its socket.
    pub fn take(&self, input: &mut BytesMut, output: &mut BytesMut) -> MultiNow {
        if !self.stashed.load(Relaxed) {
            return MultiNow::default();
        }
        let mut stash = self.stash.lock();
        output.extend_from_slice(&stash.output);
        input.extend_from_slice(&stash.input);
        let multi = stash.multi;
        *stash = Stash::default();
        self.stashed.store(false, Relaxed);
        self.stopped.store(false, Relaxed);
        multi
    }
}

/// Serves this thread's idle connections (see the module docs); does
/// nothing more often than every [`PASS_INTERVAL`], nor off a network
/// thread.
pub fn serve_idle() {
    let work = THREAD.with(|thread| {
        let mut thread = thread.borrow_mut();
        let thread = thread.as_mut()?;
        let now = Instant::now();
        if thread
            .last_pass
            .is_some_and(|last| now.duration_since(last) < PASS_INTERVAL)
        {
            return None;
        }
        thread.last_pass = Some(now);
        let idle: Vec<Arc<Slot>> = thread
            .slots
            .values()
            .filter(|slot| slot.idle.load(Relaxed) && !slot.stopped.load(Relaxed))
            .cloned()
            .collect();
        Some((thread.server.clone(), idle))
    });
    let Some((server, idle)) = work else { return };
    if idle.is_empty() {
        return;
    }
    let mut polled: Vec<libc::pollfd> = idle
        .iter()
        .map(|slot| libc::pollfd {
            fd: slot.fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: `polled` is a valid array of `polled.len()` pollfds.
    let ready = unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, 0) };
    if ready <= 0 {
        return;
    }
    for (slot, polled) in idle.iter().zip(&polled) {
        if polled.revents & libc::POLLIN != 0 {
            serve_one(&server, slot);
        }
    }
}

/// Reads what `slot`'s client sent and answers it (see the module docs).
fn serve_one(server: &Node, slot: &Slot) {
    let mut stash = slot.stash.lock();
    let mut chunk = vec![0u8; READ_PER_PASS];
    // SAFETY: `chunk` is writable for its length; the descriptor is the
    // connection's socket, open while its slot is registered.
    let read = unsafe {
        libc::recv(
            slot.fd,
            chunk.as_mut_ptr().cast(),
            chunk.len(),
            libc::MSG_DONTWAIT,
        )
    };
    // End of stream or an error: left for the connection to find.
    if read <= 0 {
        return;
    }
    stash.input.extend_from_slice(&chunk[..read as usize]);
    let mut replies = BytesMut::new();
    if stash.multi == MultiNow::default() && slot.in_multi.load(Relaxed) {
        stash.multi.open = Some(false);
    }
    let mut multi = stash.multi;
    let waiting = answer(server, slot, &stash.input, &mut replies, &mut multi);
    stash.multi = multi;
    let answered = stash.input.len() - waiting.len;
    stash.input.drain(..answered);
    let stop = waiting.stop || stash.input.len() > STASH_MAX;
    stash.output.extend_from_slice(&replies);
    send_stashed(slot.fd, &mut stash.output);
    if stop || !stash.output.is_empty() {
        slot.stopped.store(true, Relaxed);
    }
    let stashed =
        !stash.input.is_empty() || !stash.output.is_empty() || stash.multi != MultiNow::default();
    slot.stashed.store(stashed, Relaxed);
}

/// What [`answer`] left unanswered: the tail of the input it was given.
struct Waiting {
    len: usize,
    /// The tail starts with a request that must wait for the script's end
    /// (as opposed to an incomplete one).
    stop: bool,
}

/// Answers the complete requests at the head of `input` into `replies`,
/// stopping at the first one the connection must run itself.
fn answer(
    server: &Node,
    slot: &Slot,
    input: &[u8],
    replies: &mut BytesMut,
    multi: &mut MultiNow,
) -> Waiting {
    let mut buffer = BytesMut::from(input);
    let mut parser = RequestParser::new();
    let limits = Limits::default();
    loop {
        let len = buffer.len();
        let args = match parser.next(&mut buffer, &limits) {
            Ok(Some(args)) => args,
            Ok(None) => return Waiting { len, stop: false },
            Err(_) => return Waiting { len, stop: true },
        };
        let mut out = ReplyWriter::new(replies, slot.protocol());
        let unrestricted = slot.unrestricted.load(Relaxed);
        let served = match multi.open.is_some() {
            true => reply_in_multi(server, slot, &args, multi, &mut out),
            false => reply_while_busy(server, slot, &args, unrestricted, multi, &mut out),
        };
        if !served {
            return Waiting { len, stop: true };
        }
    }
}

/// Answers `args` from a client in MULTI during a busy script, as Redis
/// does: a command is refused with `-BUSY` and fails the transaction,
/// EXEC is refused with EXECABORT and ends it, DISCARD ends it; `multi`
/// says so. False, with nothing written, when the connection must run
/// the command after the script.
fn reply_in_multi(
    server: &Node,
    slot: &Slot,
    args: &[Bytes],
    multi: &mut MultiNow,
    out: &mut ReplyWriter,
) -> bool {
    let table = &server.commands;
    let Some(id) = table.resolve(args) else {
        return false;
    };
    if !table.specs[id].arity_ok(args.len()) {
        return false;
    }
    match table.full_names[id].as_str() {
        "exec" => {
            let busy = server.scripts.busy_error();
            out.error(&format!(
                "EXECABORT Transaction discarded because of: {busy}"
            ));
        }
        "discard" => out.ok(),
        "multi" => {
            out.error("ERR MULTI calls can not be nested");
            return true;
        }
        _ if table.gates(id).has(Gates::ALLOW_BUSY) => return false,
        _ => {
            out.error(server.scripts.busy_error());
            multi.open = Some(true);
            return true;
        }
    }
    slot.client.multi.store(-1, Relaxed);
    *multi = MultiNow {
        ended: true,
        open: None,
    };
    true
}

/// Answers `args` during a busy script into `out`: SCRIPT KILL and
/// FUNCTION KILL do their work, FUNCTION STATS shows the running
/// function (a client that cannot see it could never kill it), SHUTDOWN
/// stops the script and the server (no reply, as anywhere), MULTI begins
/// a transaction ([`reply_in_multi`] answers what follows), anything else
/// Redis refuses gets `-BUSY`. `None`, with nothing written, when the
/// connection must run it after the script — also any of the first four
/// from a client whose user has rules (its ACL check runs then); else
/// what became of the transaction.
fn reply_while_busy(
    server: &Node,
    slot: &Slot,
    args: &[Bytes],
    unrestricted: bool,
    multi: &mut MultiNow,
    out: &mut ReplyWriter,
) -> bool {
    let table = &server.commands;
    let Some(id) = table.resolve(args) else {
        return false;
    };
    let result: Result<(), Cow<str>> = match table.full_names[id].as_str() {
        "script|kill" | "function|kill" | "function|stats" | "shutdown" if !unrestricted => {
            return false;
        }
        name @ ("script|kill" | "function|kill") if args.len() == 2 => {
            let functions = name == "function|kill";
            server
                .scripts
                .kill(functions)
                .reply()
                .map(|()| out.ok())
                .map_err(Into::into)
        }
        "function|stats" if args.len() == 2 => {
            write_function_stats(server, out).map_err(|error| error.0)
        }
        "shutdown" => match shutdown_mode(args) {
            Ok(save) => {
                crate::log_warning!("User requested shutdown...");
                server.request_shutdown(save);
                Ok(())
            }
            Err(error) => Err(error.0),
        },
        "multi" if args.len() == 1 => {
            slot.client.multi.store(0, Relaxed);
            multi.open = Some(false);
            out.ok();
            Ok(())
        }
        _ if table.gates(id).has(Gates::ALLOW_BUSY) || !table.specs[id].arity_ok(args.len()) => {
            return false;
        }
        _ => Err(server.scripts.busy_error().into()),
    };
    if let Err(text) = result {
        out.error(&text);
    }
    true
}

/// Sends what the socket takes of `output` without waiting.
fn send_stashed(fd: RawFd, output: &mut Vec<u8>) {
    while !output.is_empty() {
        // SAFETY: `output` is readable for its length; `fd` is open (see
        // `serve_one`).
        let sent = unsafe {
            libc::send(
                fd,
                output.as_ptr().cast(),
                output.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if sent <= 0 {
            return;
        }
        output.drain(..sent as usize);
    }
}

/// The busy script of this thread ended: the connections that have
/// requests or replies waiting are woken to take them.
pub fn release() {
    let _ = THREAD.try_with(|thread| {
        let mut thread = thread.borrow_mut();
        let Some(thread) = thread.as_mut() else {
            return;
        };
        thread.last_pass = None;
        for slot in thread.slots.values() {
            if slot.stashed.load(Relaxed) {
                slot.client.nudge();
            }
        }
    });
}
