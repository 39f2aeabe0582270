//! Test harness: starts the real `strata-server` binary on an ephemeral
//! port in its own temporary directory, and talks to it either with the
//! `redis` crate or with a raw RESP client that sees exact wire replies
//! (error strings, RESP3 types, connection closes).

// Shared by every test binary, each using a part of it.
#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub const TIMEOUT: Duration = Duration::from_secs(20);

pub struct TestServer {
    pub port: u16,
    pub dir: PathBuf,
    child: Child,
    log_lines: mpsc::Receiver<String>,
    /// Lines read while waiting for the start marker, still to be seen by
    /// [`TestServer::wait_for_log`].
    early_lines: std::sync::Mutex<std::collections::VecDeque<String>>,
    /// Leave `dir` on disk when dropped (the test restarts on it).
    keep_dir: bool,
}

/// Log line a server prints once its data is loaded and it serves.
pub const READY: &str = "Ready to accept connections tcp on ";
/// Log line a server prints as soon as it listens (it may still load).
pub const LISTENING: &str = "Listening on tcp ";

static NEXT_DIR: AtomicUsize = AtomicUsize::new(0);

/// This test process's directory, parent of every [`temp_dir`].
static PROCESS_DIR: OnceLock<PathBuf> = OnceLock::new();

/// Removes [`PROCESS_DIR`] when the test process exits: libtest returns
/// from `main` or calls `exit`, and both run `atexit` handlers.
extern "C" fn remove_process_dir() {
    if let Some(dir) = PROCESS_DIR.get() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// A new directory of its own for a test. Every one lives under one
/// directory per test process, removed as the process exits, so a
/// directory kept for a restart that never came (a node killed for
/// good, a server that exited) does not stay behind: a full run leaked
/// gigabytes of logs and Raft state before, and filled CI's disk.
/// `STRATA_KEEP_TEST_DIRS=1` keeps them to look at after a failure.
pub fn temp_dir() -> PathBuf {
    let parent = PROCESS_DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("strata-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        if std::env::var_os("STRATA_KEEP_TEST_DIRS").is_none() {
            // SAFETY: `remove_process_dir` is an `extern "C" fn()` that
            // neither unwinds nor depends on anything `exit` tears down
            // before it (it only reads a static and removes files).
            unsafe { libc::atexit(remove_process_dir) };
        }
        dir
    });
    let unique = format!(
        "{}-{}",
        NEXT_DIR.fetch_add(1, Ordering::Relaxed),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let dir = parent.join(unique);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

impl TestServer {
    pub fn start() -> TestServer {
        Self::start_with(&[])
    }

    /// Starts a server with extra `--name value` arguments (the first may
    /// be a config file).
    pub fn start_with(args: &[&str]) -> TestServer {
        Self::spawn(temp_dir(), args, None, READY)
    }

    /// Starts a server whose data lives under `dir` (`dir/data`), e.g. one
    /// left by an earlier server, and returns once `marker` is logged.
    /// `file_size_limit` sets RLIMIT_FSIZE (a full disk, reproducibly).
    pub fn spawn(
        dir: PathBuf,
        args: &[&str],
        file_size_limit: Option<u64>,
        marker: &str,
    ) -> TestServer {
        let (child, log_lines) = Self::launch(&dir, args, file_size_limit);
        let deadline = Instant::now() + TIMEOUT;
        let mut early_lines = std::collections::VecDeque::new();
        let port = loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let line = match log_lines.recv_timeout(remaining) {
                Ok(line) => line,
                Err(e) => panic!(
                    "server did not report readiness in time ({e}); its log:\n{}",
                    Vec::from(early_lines).join("\n")
                ),
            };
            if let Some(rest) = line.split(marker).nth(1) {
                let address = rest.split_whitespace().next().unwrap();
                break address.rsplit(':').next().unwrap().parse().unwrap();
            }
            early_lines.push_back(line);
        };
        TestServer {
            port,
            dir,
            child,
            log_lines,
            early_lines: std::sync::Mutex::new(early_lines),
            keep_dir: false,
        }
    }

    /// Starts a server on `dir` that is expected to exit by itself (a
    /// refused start-up); returns its exit status and every log line.
    pub fn run_to_exit(
        dir: &std::path::Path,
        args: &[&str],
    ) -> (std::process::ExitStatus, Vec<String>) {
        let (mut child, log_lines) = Self::launch(dir, args, None);
        let deadline = Instant::now() + TIMEOUT;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                panic!("server kept running");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        std::thread::sleep(Duration::from_millis(50));
        (status, log_lines.try_iter().collect())
    }

    fn launch(
        dir: &std::path::Path,
        args: &[&str],
        file_size_limit: Option<u64>,
    ) -> (Child, mpsc::Receiver<String>) {
        // STRATA_TEST_SERVER runs the tests against another build (an
        // optimized one for a long fuzz run, an older one to show a new
        // test failing there).
        let binary = std::env::var_os("STRATA_TEST_SERVER")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_strata-server").into());
        let mut command = Command::new(binary);
        // A config file, as redis-server takes it, comes first.
        let args = match args.first() {
            Some(file) if !file.starts_with("--") => {
                command.arg(file);
                &args[1..]
            }
            _ => args,
        };
        command
            .args(["--port", "0", "--bind", "127.0.0.1", "--dir"])
            .arg(dir.join("data"))
            .args(["--threads", "2"])
            // Tests call DEBUG from 127.0.0.1; Strata's default, like
            // Redis', is `no`.
            .args(["--enable-debug-command", "local"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some(limit) = file_size_limit {
            use std::os::unix::process::CommandExt;
            // SAFETY: only async-signal-safe setrlimit between fork and exec.
            unsafe {
                command.pre_exec(move || {
                    let rlimit = libc::rlimit {
                        rlim_cur: limit,
                        rlim_max: libc::RLIM_INFINITY,
                    };
                    if libc::setrlimit(libc::RLIMIT_FSIZE, &rlimit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let mut child = command.spawn().expect("start strata-server");
        let stdout = child.stdout.take().unwrap();
        let (sender, log_lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        (child, log_lines)
    }

    /// `kill -9`s the server and returns its directory, kept on disk for
    /// a restart.
    pub fn kill9(mut self) -> PathBuf {
        let _ = self.child.kill();
        wait_bounded(&mut self.child);
        self.keep_dir = true;
        self.dir.clone()
    }

    /// Waits for the server to exit by itself (after SHUTDOWN or SIGTERM),
    /// requires a clean exit, and returns its directory for a restart.
    pub fn exited(mut self) -> PathBuf {
        let status = self.wait_exit();
        assert!(status.success(), "the server exited with {status}");
        self.keep_dir = true;
        self.dir.clone()
    }

    /// Waits for the server to exit by itself, whatever its status, and
    /// returns the status and its directory for a restart.
    pub fn exited_with_status(mut self) -> (std::process::ExitStatus, PathBuf) {
        let status = self.wait_exit();
        self.keep_dir = true;
        (status, self.dir.clone())
    }

    /// The log lines printed before the server was ready (those
    /// `wait_for_log` has not taken).
    pub fn startup_log(&self) -> Vec<String> {
        self.early_lines.lock().unwrap().iter().cloned().collect()
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A `redis` crate connection with timeouts.
    pub fn client(&self) -> redis::Connection {
        let client = redis::Client::open(self.url()).unwrap();
        let con = client.get_connection_with_timeout(TIMEOUT).unwrap();
        con.set_read_timeout(Some(TIMEOUT)).unwrap();
        con.set_write_timeout(Some(TIMEOUT)).unwrap();
        con
    }

    pub fn raw(&self) -> Raw {
        Raw::connect(self.port)
    }

    /// Waits for a log line containing `needle`.
    pub fn wait_for_log(&self, needle: &str) -> String {
        while let Some(line) = self.early_lines.lock().unwrap().pop_front() {
            if line.contains(needle) {
                return line;
            }
        }
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let line = self
                .log_lines
                .recv_timeout(remaining)
                .unwrap_or_else(|_| panic!("no log line with {needle:?}"));
            if line.contains(needle) {
                return line;
            }
        }
    }

    /// Waits for the process to exit by itself.
    pub fn wait_exit(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "server did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        reap(&mut self.child);
        if !self.keep_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Waits for `child` to exit, at most [`TIMEOUT`] (then kills it and
/// fails): no test waits for a process without a deadline.
pub fn wait_bounded(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("process {} did not exit in time", child.id());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Kills `child` and waits for it at most [`TIMEOUT`], without failing
/// (for `Drop`: a panic there would abort the test binary).
pub fn reap(child: &mut Child) {
    let _ = child.kill();
    let deadline = Instant::now() + TIMEOUT;
    while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `command` to its end, at most `limit`; its exit code and output
/// (through a file, so a chatty build cannot fill a pipe and stall).
pub fn run_within(command: &mut Command, limit: Duration) -> (i32, String) {
    run_within_reading(command, Stdio::null(), limit)
}

/// [`run_within`], with `stdin` as the command's standard input.
pub fn run_within_reading(command: &mut Command, stdin: Stdio, limit: Duration) -> (i32, String) {
    let dir = temp_dir();
    let log = dir.join("output.log");
    let file = std::fs::File::create(&log).unwrap();
    let mut child = command
        .stdin(stdin)
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{command:?} did not finish in {limit:?}:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    (status.code().unwrap_or(-1), output)
}

/// Runs `attempt` until it does not panic, five times at most: for
/// servers started on ports picked in advance (a cluster node's address
/// is in its peers' topology), which another test may take first.
pub fn with_free_ports<T>(mut attempt: impl FnMut() -> T) -> T {
    for _ in 0..4 {
        let tried = std::panic::catch_unwind(std::panic::AssertUnwindSafe(&mut attempt));
        if let Ok(value) = tried {
            return value;
        }
    }
    attempt()
}

/// Runs `command` to its end with standard input closed, at most
/// [`TIMEOUT`]; returns its exit code and its standard output and error.
pub fn run_bounded(command: &mut Command) -> (i32, String) {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_bounded(&mut child);
    let output = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (status.code().unwrap_or(-1), text)
}

// Values that describe themselves, for tests of tiering and the budget.

pub fn info_u64(con: &mut redis::Connection, section: &str, name: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg(section).query(con).unwrap();
    info_field(&info, name).parse().unwrap()
}

/// The value stored under key `i` at `version`: self-describing, so a
/// wrong, stale or torn value is caught, `size` bytes long.
pub fn value(i: u64, version: u64, size: usize) -> Vec<u8> {
    let stamp = format!("<{i}:{version}>");
    stamp.bytes().cycle().take(size).collect()
}

pub fn key(i: u64) -> String {
    format!("key:{i:08}")
}

/// Writes keys `0..count` at `version`, pipelined (about 256 KiB per
/// pipeline: the query buffer counts against the budget, as in Redis).
pub fn fill(con: &mut redis::Connection, count: u64, version: u64, size: usize) {
    let per_pipeline = (256 * 1024 / size).clamp(1, 64);
    for chunk in (0..count).collect::<Vec<_>>().chunks(per_pipeline) {
        let mut pipe = redis::pipe();
        for &i in chunk {
            pipe.cmd("SET")
                .arg(key(i))
                .arg(value(i, version, size))
                .ignore();
        }
        pipe.query::<()>(con).unwrap();
    }
}

/// Reads keys `0..count` back (MGET in batches) and checks every value.
pub fn check_all(con: &mut redis::Connection, count: u64, version: u64, size: usize) {
    let ids: Vec<u64> = (0..count).collect();
    mget_check(con, &ids, |i| value(i, version, size));
}

/// Reads keys `ids` back (MGET in batches) and checks each against
/// `expected(i)`.
pub fn mget_check(con: &mut redis::Connection, ids: &[u64], expected: impl Fn(u64) -> Vec<u8>) {
    for chunk in ids.chunks(32) {
        let keys: Vec<String> = chunk.iter().map(|&i| key(i)).collect();
        let values: Vec<Option<Vec<u8>>> = redis::cmd("MGET").arg(&keys).query(con).unwrap();
        for (&i, got) in chunk.iter().zip(values) {
            assert_eq!(got, Some(expected(i)), "value of {}", key(i));
        }
    }
}

/// Whether the value of `key` is on disk only (OBJECT RESIDENCY).
pub fn on_disk(con: &mut redis::Connection, key: &str) -> bool {
    let residency: String = redis::cmd("OBJECT")
        .arg("RESIDENCY")
        .arg(key)
        .query(con)
        .unwrap();
    residency == "disk"
}

pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + TIMEOUT;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// CONFIG SET `name` `value`, which must answer OK.
pub fn config_set(con: &mut redis::Connection, name: &str, value: &str) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg(name)
        .arg(value)
        .query(con)
        .unwrap();
}

/// The value of field `name` in an INFO reply.
pub fn info_field(info: &str, name: &str) -> String {
    info.lines()
        .find_map(|line| line.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in INFO"))
        .trim()
        .to_owned()
}

/// A RESP reply as it came over the wire.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    /// `$-1` (RESP2 null bulk).
    NullBulk,
    /// `*-1` (RESP2 null array).
    NullArray,
    /// `_` (RESP3 null).
    Null,
    Array(Vec<Reply>),
    Map(Vec<(Reply, Reply)>),
    Set(Vec<Reply>),
    Double(String),
    Bool(bool),
    Verbatim(String, Vec<u8>),
    BigNumber(String),
    Push(Vec<Reply>),
}

impl Reply {
    pub fn bulk(text: &str) -> Reply {
        Reply::Bulk(text.as_bytes().to_vec())
    }

    pub fn simple(text: &str) -> Reply {
        Reply::Simple(text.to_owned())
    }

    pub fn err(text: &str) -> Reply {
        Reply::Error(text.to_owned())
    }

    pub fn as_text(&self) -> String {
        match self {
            Reply::Bulk(b) | Reply::Verbatim(_, b) => String::from_utf8_lossy(b).into_owned(),
            Reply::Simple(s) | Reply::Error(s) | Reply::Double(s) => s.clone(),
            Reply::Int(n) => n.to_string(),
            other => panic!("not text: {other:?}"),
        }
    }

    pub fn as_array(&self) -> &[Reply] {
        match self {
            Reply::Array(items) | Reply::Set(items) | Reply::Push(items) => items,
            other => panic!("not an array: {other:?}"),
        }
    }

    pub fn as_int(&self) -> i64 {
        match self {
            Reply::Int(n) => *n,
            other => panic!("not an integer: {other:?}"),
        }
    }
}

/// Shorthands for expected replies.
pub fn b(text: &str) -> Reply {
    Reply::bulk(text)
}

pub fn ok() -> Reply {
    Reply::simple("OK")
}

pub fn e(text: &str) -> Reply {
    Reply::err(text)
}

pub fn i(n: i64) -> Reply {
    Reply::Int(n)
}

/// A raw RESP client.
pub struct Raw {
    pub stream: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Raw {
    pub fn connect(port: u16) -> Raw {
        Raw::from_stream(TcpStream::connect(("127.0.0.1", port)).unwrap())
    }

    /// A client on a connection made elsewhere (another address).
    pub fn from_stream(stream: TcpStream) -> Raw {
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(TIMEOUT)).unwrap();
        stream.set_nodelay(true).unwrap();
        let reader = BufReader::new(stream.try_clone().unwrap());
        Raw { stream, reader }
    }

    pub fn encode(args: &[&[u8]]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            out.extend_from_slice(arg);
            out.extend_from_slice(b"\r\n");
        }
        out
    }

    pub fn send(&mut self, args: &[&str]) {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.stream.write_all(&Self::encode(&args)).unwrap();
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    pub fn cmd(&mut self, args: &[&str]) -> Reply {
        self.send(args);
        self.read()
    }

    pub fn cmd_bytes(&mut self, args: &[&[u8]]) -> Reply {
        self.stream.write_all(&Self::encode(args)).unwrap();
        self.read()
    }

    /// A one-line reply, or `None` when the connection is gone.
    pub fn try_read(&mut self) -> Option<Reply> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(n) if n > 0 && line.ends_with("\r\n") => {}
            _ => return None,
        }
        let line = line.trim_end_matches("\r\n");
        let (kind, rest) = line.split_at(1);
        match kind {
            "+" => Some(Reply::Simple(rest.to_owned())),
            "-" => Some(Reply::Error(rest.to_owned())),
            ":" => rest.parse().ok().map(Reply::Int),
            _ => None,
        }
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        let n = self.reader.read_line(&mut line).unwrap();
        assert!(n > 0, "connection closed while waiting for a reply");
        line.trim_end_matches("\r\n").to_owned()
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut data = vec![0; len + 2];
        self.reader.read_exact(&mut data).unwrap();
        data.truncate(len);
        data
    }

    pub fn read(&mut self) -> Reply {
        let line = self.line();
        let (kind, rest) = line.split_at(1);
        let count = || rest.parse::<i64>().unwrap();
        match kind {
            "+" => Reply::Simple(rest.to_owned()),
            "-" => Reply::Error(rest.to_owned()),
            ":" => Reply::Int(count()),
            "$" if count() < 0 => Reply::NullBulk,
            "$" => Reply::Bulk(self.bytes(count() as usize)),
            "*" if count() < 0 => Reply::NullArray,
            "*" => Reply::Array((0..count()).map(|_| self.read()).collect()),
            "~" => Reply::Set((0..count()).map(|_| self.read()).collect()),
            ">" => Reply::Push((0..count()).map(|_| self.read()).collect()),
            "%" => Reply::Map((0..count()).map(|_| (self.read(), self.read())).collect()),
            "_" => Reply::Null,
            "," => Reply::Double(rest.to_owned()),
            "#" => Reply::Bool(rest == "t"),
            "(" => Reply::BigNumber(rest.to_owned()),
            // Attributes describe the reply after them: skipped, as
            // clients that do not use them skip them.
            "|" => {
                for _ in 0..2 * count() {
                    self.read();
                }
                self.read()
            }
            "=" => {
                let data = self.bytes(count() as usize);
                Reply::Verbatim(
                    String::from_utf8_lossy(&data[..3]).into_owned(),
                    data[4..].to_vec(),
                )
            }
            other => panic!("unexpected reply type {other:?} in {line:?}"),
        }
    }

    /// True when the server closed the connection (EOF or reset) within the
    /// timeout.
    pub fn is_closed(&mut self) -> bool {
        self.closed_within(TIMEOUT)
    }

    /// True when the server closed the connection (EOF or reset) within
    /// `wait`; data it sends meanwhile is skipped.
    pub fn closed_within(&mut self, wait: Duration) -> bool {
        let mut buf = [0u8; 4096];
        let deadline = Instant::now() + wait;
        let closed = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break false;
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            match self.reader.read(&mut buf) {
                Ok(0) => break true,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(_) => break true,
            }
        };
        if !closed {
            self.stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        }
        closed
    }
}

/// Asserts a raw command's reply.
#[macro_export]
macro_rules! assert_reply {
    ($raw:expr, [$($arg:expr),+ $(,)?], $expected:expr) => {
        assert_eq!($raw.cmd(&[$($arg),+]), $expected, "command {:?}", [$($arg),+]);
    };
}

/// Debian's redis-server, if installed.
///
/// redis-server cannot pick a free port itself (`port 0` turns TCP off), so
/// a port the kernel just handed out is tried, and the server is only used
/// once it answers with its own pid: if another process took the port
/// meanwhile (redis-server then exits, or the pid differs), another port
/// is tried.
pub struct RedisServer {
    pub port: u16,
    child: std::process::Child,
}

impl RedisServer {
    /// Starts redis-server; without it, None off CI (with a note naming
    /// `what` was skipped) and a failure under CI, which installs it
    /// (`.ci/run` fails if it cannot): there the comparison must run.
    pub fn start_unless_missing(what: &str) -> Option<RedisServer> {
        let started = RedisServer::start();
        if started.is_none() {
            assert!(
                std::env::var_os("CI").is_none(),
                "redis-server is not installed, and CI must run {what}"
            );
            eprintln!("redis-server not installed: {what} skipped");
        }
        started
    }

    pub fn start() -> Option<RedisServer> {
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .ok()?
                .local_addr()
                .ok()?
                .port();
            let child = std::process::Command::new("redis-server")
                .args([
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--enable-debug-command",
                    "yes",
                    // Where a replica puts the RDB file it receives.
                    "--dir",
                    temp_dir().to_str().unwrap(),
                ])
                .stdout(std::process::Stdio::null())
                .spawn()
                .ok()?;
            let mut server = RedisServer { port, child };
            if server.answers_as_itself() {
                return Some(server);
            }
        }
        panic!("redis-server did not start on any of 5 free ports");
    }

    /// Waits until the port answers (true when it is this process) or the
    /// process exits (false).
    fn answers_as_itself(&mut self) -> bool {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            assert!(Instant::now() < deadline, "redis-server did not start");
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            // Whoever answers on the port (ours, or a server another test
            // started there and may be stopping: a reset is no answer).
            if let Some(pid) = server_pid(self.port) {
                return pid == self.child.id();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The `process_id` that a server on `port` reports in INFO server, if it
/// answers at all.
fn server_pid(port: u16) -> Option<u32> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream
        .write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
        .ok()?;
    let mut reply = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        reply.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&reply);
        if let Some(rest) = text.split("process_id:").nth(1)
            && let Some(pid) = rest.split("\r\n").next().filter(|_| rest.contains("\r\n"))
        {
            return pid.trim().parse().ok();
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        reap(&mut self.child);
    }
}

/// Runs strata-bench (as a library) against `port` with `args`; the last
/// run's result.
pub fn bench(port: u16, args: &[&str]) -> strata_bench::run::RunResult {
    let port = port.to_string();
    let mut all = vec!["-s", "127.0.0.1", "-p", &port, "--hide-histogram"];
    all.extend_from_slice(args);
    let config = strata_bench::config::parse(&all).unwrap();
    let mut results = strata_bench::run_benchmark(config, false).unwrap();
    results.pop().unwrap()
}

/// The records of a log segment: its bytes without the zero padding that
/// direct writes leave after the last record (test records never end in a
/// zero byte).
pub fn log_records(segment: &std::path::Path) -> Vec<u8> {
    let mut bytes = std::fs::read(segment).unwrap();
    while bytes.last() == Some(&0) {
        bytes.pop();
    }
    bytes
}

/// Bytes of the newest log segment under `dir` (a test server's dir).
pub fn newest_segment_bytes(dir: &std::path::Path) -> u64 {
    let mut segments: Vec<_> = std::fs::read_dir(dir.join("data/log"))
        .map(|entries| {
            entries
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == "log"))
                .collect()
        })
        .unwrap_or_default();
    segments.sort();
    segments
        .last()
        .map_or(0, |p| std::fs::metadata(p).map_or(0, |m| m.len()))
}

/// `kill -9`s `server` while its log grows: once the newest segment has
/// grown by `growth` bytes since `before` (its size before the request
/// that writes them), or after [`TIMEOUT`]. Returns the directory.
pub fn kill9_while_the_log_grows(server: TestServer, before: u64, growth: u64) -> PathBuf {
    let deadline = Instant::now() + TIMEOUT;
    while newest_segment_bytes(&server.dir) < before + growth && Instant::now() < deadline {
        std::thread::yield_now();
    }
    server.kill9()
}

/// The `strata-check` binary. It belongs to the engine crate, so cargo
/// does not hand this package its path: it is built beside
/// strata-server, in the same target directory and profile. `cargo test
/// --workspace` builds it with the engine's tests; a run of this package
/// alone (`cargo test -p strata-server`) builds it here, once.
pub fn strata_check() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let server = PathBuf::from(env!("CARGO_BIN_EXE_strata-server"));
            let check = server.with_file_name("strata-check");
            if !check.exists() {
                let profile_dir = server.parent().expect("the binary's directory");
                let mut build = Command::new(env!("CARGO"));
                build.args([
                    "build",
                    "--quiet",
                    "-p",
                    "strata-engine",
                    "--bin",
                    "strata-check",
                ]);
                if profile_dir
                    .file_name()
                    .is_some_and(|name| name == "release")
                {
                    build.arg("--release");
                }
                if let Some(target) = profile_dir.parent() {
                    build.arg("--target-dir").arg(target);
                }
                // A build may compile the engine again (features unify per
                // build): bounded, but by minutes rather than TIMEOUT.
                let (code, output) = run_within(&mut build, Duration::from_secs(900));
                assert_eq!(code, 0, "building strata-check failed:\n{output}");
            }
            assert!(check.exists(), "no strata-check at {}", check.display());
            check
        })
        .clone()
}

/// Whether `strata-check` finds a torn tail in `dir`'s log: a commit the
/// kill cut in the middle, which recovery must drop whole.
pub fn has_torn_tail(dir: &std::path::Path) -> bool {
    let (code, output) = run_bounded(Command::new(strata_check()).arg(dir.join("data")));
    assert!(code == 0 || code == 1, "strata-check: {output}");
    code == 1
}
