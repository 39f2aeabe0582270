//! Running a benchmark: threads, clients, pipelining, open loop.
//!
//! Each `--threads` thread runs a single-threaded tokio runtime with its
//! `--clients` connections. A client keeps up to `--pipeline` requests in
//! flight. Closed loop (the default, as memtier): a new request goes out as
//! soon as a reply frees a slot, and latency is reply time minus send time.
//! Open loop (`--rate`): requests are due at fixed intervals whatever the
//! server does, and latency is measured from each request's *intended* send
//! time, so a server that stalls shows the stall in the percentiles instead
//! of silently slowing the generator down (no coordinated omission). The
//! clients' schedules are interleaved (client `i` of `n` starts `i/n` of an
//! interval late), and each waits for its due time on a precise timer
//! ([`crate::pacer`]), so the generator's own lag stays in microseconds.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use hdrhistogram::Histogram;
use strata_resp::reply::{ReplyKind, scan_reply};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::config::{Config, KeyPattern};
use crate::pacer::Pacer;
use crate::workload::{Budget, KeyGen, Op, Rng, Shared, Values, client_seed, op_cycle};

/// Largest latency recorded (1 hour), in microseconds.
const LATENCY_US_MAX: u64 = 3_600_000_000;
/// Largest reply accepted from a server before it is treated as broken.
const REPLY_BYTES_MAX: usize = 1 << 30;
/// Longest a client waits for the server to take a request or send a
/// reply; past it the run fails instead of hanging on a stalled server.
const IO_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs one network operation with a deadline of `limit`.
async fn within<T>(
    limit: Duration,
    what: &str,
    operation: impl std::future::Future<Output = std::io::Result<T>>,
) -> Result<T, String> {
    match tokio::time::timeout(limit, operation).await {
        Ok(result) => result.map_err(|e| e.to_string()),
        Err(_) => Err(format!("{what}: no progress for {} s", limit.as_secs())),
    }
}

/// Results for one operation type.
#[derive(Clone, Debug)]
pub struct OpResult {
    /// Table label: "Sets", "Gets", or a custom command's name.
    pub name: String,
    pub ops: u64,
    pub hits: u64,
    pub misses: u64,
    pub errors: u64,
    /// Bytes of requests and replies; and each apart.
    pub bytes: u64,
    pub bytes_tx: u64,
    pub bytes_rx: u64,
    /// Latency in microseconds.
    pub latency: Histogram<u64>,
}

impl OpResult {
    /// An operation type that did not run (memtier's `Waits`).
    pub fn empty(name: &str) -> OpResult {
        OpResult::new(name)
    }

    fn new(name: &str) -> OpResult {
        OpResult {
            name: name.to_owned(),
            ops: 0,
            hits: 0,
            misses: 0,
            errors: 0,
            bytes: 0,
            bytes_tx: 0,
            bytes_rx: 0,
            latency: latency_histogram(),
        }
    }

    fn merge(&mut self, other: &OpResult) {
        self.ops += other.ops;
        self.hits += other.hits;
        self.misses += other.misses;
        self.errors += other.errors;
        self.bytes += other.bytes;
        self.bytes_tx += other.bytes_tx;
        self.bytes_rx += other.bytes_rx;
        self.latency.add(&other.latency).expect("same bounds");
    }
}

/// One second of the run.
#[derive(Clone, Debug, PartialEq)]
pub struct Second {
    pub second: u64,
    pub ops: u64,
    pub avg_latency_ms: f64,
    /// The slowest reply that arrived in this second, and the quickest.
    pub max_latency_ms: f64,
    pub min_latency_ms: f64,
    /// The latency at each of `--print-percentiles` among this second's
    /// replies, in milliseconds (memtier's per-second `p50.00`, …); empty
    /// when no reply arrived.
    pub percentiles_ms: Vec<f64>,
    pub bytes: u64,
    /// Of `bytes`, those received (replies); the rest were sent.
    pub bytes_rx: u64,
}

#[derive(Clone, Debug)]
pub struct RunResult {
    /// Unix milliseconds when the run started.
    pub started_unix_ms: u64,
    pub duration: Duration,
    pub ops: Vec<OpResult>,
    /// Error replies by their first word (`ERR`, `OOM`, `MISCONF`, …).
    pub errors: BTreeMap<String, u64>,
    pub series: Vec<Second>,
}

impl RunResult {
    /// Requests per second over all operation types.
    pub fn ops_per_sec(&self) -> f64 {
        self.totals().ops as f64 / self.duration.as_secs_f64().max(1e-9)
    }

    /// Several runs as one (memtier's `AGGREGATED AVERAGE RESULTS`): their
    /// requests, bytes and latencies together over their summed time, so
    /// its rates are the runs' average weighted by their length.
    pub fn aggregate(runs: &[RunResult]) -> Option<RunResult> {
        let (first, rest) = runs.split_first()?;
        let mut all = first.clone();
        all.series.clear();
        for run in rest {
            all.duration += run.duration;
            for (op, other) in all.ops.iter_mut().zip(&run.ops) {
                op.merge(other);
            }
            for (code, count) in &run.errors {
                *all.errors.entry(code.clone()).or_insert(0) += count;
            }
        }
        Some(all)
    }

    pub fn totals(&self) -> OpResult {
        let mut total = OpResult::new("Totals");
        for op in &self.ops {
            total.merge(op);
        }
        total
    }
}

/// Counters the main thread samples once a second.
struct Live {
    ops: AtomicU64,
    latency_us: AtomicU64,
    /// Slowest reply since the main thread last took it.
    max_latency_us: AtomicU64,
    /// Quickest reply since then (`u64::MAX`: none).
    min_latency_us: AtomicU64,
    bytes: AtomicU64,
    /// Of `bytes`, those received (replies); the rest were sent.
    bytes_rx: AtomicU64,
    /// This second's latencies (µs), taken and reset by the sampler once
    /// a second: locked once per batch of replies, by this thread and the
    /// sampler only.
    second_latency: Mutex<Histogram<u64>>,
}

impl Default for Live {
    fn default() -> Self {
        Live {
            ops: AtomicU64::new(0),
            latency_us: AtomicU64::new(0),
            max_latency_us: AtomicU64::new(0),
            min_latency_us: AtomicU64::new(u64::MAX),
            bytes: AtomicU64::new(0),
            bytes_rx: AtomicU64::new(0),
            second_latency: Mutex::new(latency_histogram()),
        }
    }
}

/// An empty histogram of latencies in microseconds, 1 µs to an hour, three
/// significant digits.
fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_US_MAX, 3).expect("valid bounds")
}

/// Labels of the operation types, in table order.
fn op_names(config: &Config) -> Vec<String> {
    if config.commands.is_empty() {
        vec!["Sets".into(), "Gets".into()]
    } else {
        let mut names: Vec<String> = Vec::new();
        for command in &config.commands {
            if !names.contains(&command.name) {
                names.push(command.name.clone());
            }
        }
        names
    }
}

fn op_slot(config: &Config, names: &[String], op: Op) -> usize {
    match op {
        Op::Set => 0,
        Op::Get => 1,
        Op::Custom(i) => names
            .iter()
            .position(|n| *n == config.commands[i].name)
            .expect("named above"),
    }
}

/// Runs one benchmark iteration; `run` numbers iterations from 1.
pub fn run(config: &Arc<Config>, run: usize) -> Result<RunResult, String> {
    let names = op_names(config);
    let shared = Shared::new(config);
    let live: Vec<Arc<Live>> = (0..config.threads)
        .map(|_| Arc::new(Live::default()))
        .collect();
    let finished = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let started_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let deadline = config.test_time.map(|t| started + t);
    let handles = spawn_threads(config, run, &names, &shared, &live, deadline)?;
    let waiter = {
        let finished = finished.clone();
        std::thread::spawn(move || {
            let results: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
            finished.store(true, Relaxed);
            results
        })
    };
    let series = sample_seconds(config, run, started, &live, &finished);
    let duration = started.elapsed();
    let mut ops: Vec<OpResult> = names.iter().map(|n| OpResult::new(n)).collect();
    let mut errors = BTreeMap::new();
    for result in waiter
        .join()
        .map_err(|_| "benchmark threads panicked".to_string())?
    {
        let (thread_ops, thread_errors) =
            result.map_err(|_| "a benchmark thread panicked".to_string())??;
        for (total, part) in ops.iter_mut().zip(&thread_ops) {
            total.merge(part);
        }
        for (code, count) in thread_errors {
            *errors.entry(code).or_insert(0) += count;
        }
    }
    Ok(RunResult {
        started_unix_ms,
        duration,
        ops,
        errors,
        series,
    })
}

/// Starts the `--threads` threads, each with its `live` counters.
fn spawn_threads(
    config: &Arc<Config>,
    run: usize,
    names: &[String],
    shared: &Arc<Shared>,
    live: &[Arc<Live>],
    deadline: Option<Instant>,
) -> Result<Vec<std::thread::JoinHandle<ThreadResult>>, String> {
    let mut handles = Vec::new();
    for thread in 0..config.threads {
        let (config, shared, live, names) = (
            config.clone(),
            shared.clone(),
            live[thread].clone(),
            names.to_vec(),
        );
        handles.push(
            std::thread::Builder::new()
                .name(format!("bench-{thread}"))
                .spawn(move || thread_main(&config, thread, run, &names, shared, live, deadline))
                .map_err(|e| e.to_string())?,
        );
    }
    Ok(handles)
}

/// Samples the threads' `live` counters once a second until they have
/// `finished`, printing the progress line if asked; returns the seconds.
fn sample_seconds(
    config: &Config,
    run: usize,
    started: Instant,
    live: &[Arc<Live>],
    finished: &AtomicBool,
) -> Vec<Second> {
    let mut series = Vec::new();
    let (mut last_ops, mut last_latency, mut last_bytes) = (0u64, 0u64, 0u64);
    let mut last_rx = 0u64;
    let mut next_tick = started + Duration::from_secs(1);
    while !finished.load(Relaxed) {
        std::thread::sleep(
            Duration::from_millis(20).min(next_tick.saturating_duration_since(Instant::now())),
        );
        if Instant::now() < next_tick || finished.load(Relaxed) {
            continue;
        }
        let ops: u64 = live.iter().map(|l| l.ops.load(Relaxed)).sum();
        let latency: u64 = live.iter().map(|l| l.latency_us.load(Relaxed)).sum();
        let bytes: u64 = live.iter().map(|l| l.bytes.load(Relaxed)).sum();
        let rx: u64 = live.iter().map(|l| l.bytes_rx.load(Relaxed)).sum();
        let max_us = live
            .iter()
            .map(|l| l.max_latency_us.swap(0, Relaxed))
            .max()
            .unwrap_or(0);
        let min_us = live
            .iter()
            .map(|l| l.min_latency_us.swap(u64::MAX, Relaxed))
            .filter(|&us| us != u64::MAX)
            .min()
            .unwrap_or(0);
        let mut this_second = latency_histogram();
        for l in live {
            let mut taken = l.second_latency.lock().unwrap_or_else(|e| e.into_inner());
            this_second.add(&*taken).expect("same bounds");
            taken.reset();
        }
        let percentiles_ms = if this_second.is_empty() {
            Vec::new()
        } else {
            let at = |p: f64| this_second.value_at_quantile(p / 100.0) as f64 / 1000.0;
            config.print_percentiles.iter().map(|&p| at(p)).collect()
        };
        let second = series.len() as u64 + 1;
        let delta_ops = ops - last_ops;
        let avg_latency_ms = if delta_ops == 0 {
            0.0
        } else {
            (latency - last_latency) as f64 / delta_ops as f64 / 1000.0
        };
        let sample = Second {
            second,
            ops: delta_ops,
            avg_latency_ms,
            max_latency_ms: max_us as f64 / 1000.0,
            min_latency_ms: min_us as f64 / 1000.0,
            percentiles_ms,
            bytes: bytes - last_bytes,
            bytes_rx: rx - last_rx,
        };
        if config.progress {
            print_progress(config, run, started, ops, latency, &sample);
        }
        series.push(sample);
        (last_ops, last_latency, last_bytes, last_rx) = (ops, latency, bytes, rx);
        next_tick += Duration::from_secs(1);
    }
    if config.progress {
        eprintln!();
    }
    series
}

/// Rewrites memtier's progress line on stderr: totals so far (`ops`,
/// `latency` in microseconds) and the `last` second.
fn print_progress(
    config: &Config,
    run: usize,
    started: Instant,
    ops: u64,
    latency: u64,
    last: &Second,
) {
    let (delta_ops, avg_latency_ms) = (last.ops, last.avg_latency_ms);
    let elapsed = started.elapsed().as_secs_f64();
    let left = match config.test_time {
        Some(total) => format!("{:.0} secs left", (total.as_secs_f64() - elapsed).max(0.0)),
        None => format!("{ops} ops"),
    };
    let avg_total = if ops == 0 {
        0.0
    } else {
        latency as f64 / ops as f64 / 1000.0
    };
    eprint!(
        "\r[RUN #{run} {elapsed:.0} secs] {} threads: {ops} ops, {delta_ops} (avg: {:.0}) ops/sec, {:.2} (avg: {avg_total:.2}) msec latency, {left}   ",
        config.threads,
        ops as f64 / elapsed,
        avg_latency_ms
    );
}

/// One thread's results: per operation type, and error replies by code.
type ThreadTotals = (Vec<OpResult>, BTreeMap<String, u64>);
type ThreadResult = Result<ThreadTotals, String>;
/// A request awaiting its reply: operation slot, the time its latency is
/// measured from, and its bytes.
type InFlight = (usize, Instant, usize);
/// Where a thread's clients record, shared on that thread only.
type Collector = Rc<RefCell<ThreadTotals>>;

fn thread_main(
    config: &Arc<Config>,
    thread: usize,
    run: usize,
    names: &[String],
    shared: Arc<Shared>,
    live: Arc<Live>,
    deadline: Option<Instant>,
) -> ThreadResult {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let collector = Rc::new(RefCell::new((
        names.iter().map(|n| OpResult::new(n)).collect::<Vec<_>>(),
        BTreeMap::new(),
    )));
    let local = tokio::task::LocalSet::new();
    let total_clients = config.threads * config.clients;
    let outcome = local.block_on(&runtime, async {
        let mut tasks = Vec::new();
        for c in 0..config.clients {
            let index = thread * config.clients + c;
            let client = Client::new(
                config,
                index,
                total_clients,
                run,
                names,
                shared.clone(),
                live.clone(),
                collector.clone(),
                deadline,
            );
            tasks.push(tokio::task::spawn_local(client.run()));
        }
        for task in tasks {
            task.await.map_err(|e| e.to_string())??;
        }
        Ok::<(), String>(())
    });
    outcome?;
    Ok(Rc::try_unwrap(collector)
        .map_err(|_| "client still running".to_string())?
        .into_inner())
}

struct Client {
    config: Arc<Config>,
    names: Vec<String>,
    rng: Rng,
    set_keys: KeyGen,
    get_keys: KeyGen,
    command_keys: Vec<KeyGen>,
    values: Values,
    budget: Budget,
    cycle: Vec<Op>,
    position: usize,
    live: Arc<Live>,
    collector: Collector,
    deadline: Option<Instant>,
    /// Open loop: time between this client's requests.
    interval: Option<Duration>,
    /// Open loop: when this client's first request is due after the start,
    /// so that the clients' schedules interleave evenly instead of every
    /// client sending at the same instant (and queueing behind the others).
    phase: Duration,
    key_text: Vec<u8>,
}

impl Client {
    #[allow(clippy::too_many_arguments)]
    fn new(
        config: &Arc<Config>,
        index: usize,
        clients: usize,
        run: usize,
        names: &[String],
        shared: Arc<Shared>,
        live: Arc<Live>,
        collector: Collector,
        deadline: Option<Instant>,
    ) -> Client {
        let mut rng = Rng::new(client_seed(config, index, run));
        let keys = |pattern| KeyGen::new(config, pattern, index, clients, shared.clone());
        let set_keys = keys(config.set_pattern);
        let get_keys = keys(config.get_pattern);
        let command_keys: Vec<KeyGen> = config
            .commands
            .iter()
            .map(|c| keys(c.key_pattern))
            .collect();
        let cycle = op_cycle(config);
        // An allkeys run whose keys all come from P slices: this client's
        // share is its slice.
        let patterns: Vec<KeyPattern> = cycle
            .iter()
            .map(|op| match op {
                Op::Set => config.set_pattern,
                Op::Get => config.get_pattern,
                Op::Custom(i) => config.commands[*i].key_pattern,
            })
            .collect();
        let all_parallel = patterns.iter().all(|p| *p == KeyPattern::Parallel);
        let budget =
            Budget::for_client(config, all_parallel.then(|| set_keys.slice_len()), &shared);
        let values = Values::new(config, &mut rng);
        let interval = config
            .rate
            .map(|rate| Duration::from_secs_f64(clients as f64 / rate));
        let phase = interval.map_or(Duration::ZERO, |interval| {
            interval.mul_f64(index as f64 / clients as f64)
        });
        Client {
            config: config.clone(),
            names: names.to_vec(),
            rng,
            set_keys,
            get_keys,
            command_keys,
            values,
            budget,
            cycle,
            position: 0,
            live,
            collector,
            deadline,
            interval,
            phase,
            key_text: Vec::new(),
        }
    }

    /// The server's address, of the family `--ipv4`/`--ipv6` asks for.
    async fn address(&self) -> Result<std::net::SocketAddr, String> {
        let (server, port) = (self.config.server.as_str(), self.config.port);
        let found = tokio::net::lookup_host((server, port))
            .await
            .map_err(|e| format!("resolving {server}: {e}"))?;
        let mut found = found.filter(|address| match self.config.family {
            Some(crate::config::Family::V4) => address.is_ipv4(),
            Some(crate::config::Family::V6) => address.is_ipv6(),
            None => true,
        });
        found
            .next()
            .ok_or_else(|| format!("{server} has no address of the family asked for"))
    }

    /// Sends a command and waits for its reply (connection set-up only).
    async fn handshake(&self, stream: &mut TcpStream, args: &[&[u8]]) -> Result<(), String> {
        let mut out = Vec::new();
        encode(&mut out, args);
        within(IO_TIMEOUT, "sending set-up", stream.write_all(&out)).await?;
        let mut input = BytesMut::new();
        loop {
            if let Some((_, kind)) = scan_reply(&input).map_err(|e| e.to_string())? {
                if let ReplyKind::Error { start, end } = kind {
                    return Err(format!(
                        "{} failed: {}",
                        String::from_utf8_lossy(args[0]),
                        String::from_utf8_lossy(&input[start..end])
                    ));
                }
                return Ok(());
            }
            if within(IO_TIMEOUT, "set-up reply", stream.read_buf(&mut input)).await? == 0 {
                return Err("connection closed during set-up".into());
            }
        }
    }

    async fn connect(&self) -> Result<TcpStream, String> {
        let address = self.address().await?;
        let timeout = self.config.connect_timeout;
        let mut stream = within(timeout, "connecting", TcpStream::connect(address))
            .await
            .map_err(|e| {
                format!(
                    "connection to {}:{} failed: {e}",
                    self.config.server, self.config.port
                )
            })?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        if let Some((user, password)) = &self.config.auth {
            match user {
                Some(user) => {
                    self.handshake(
                        &mut stream,
                        &[b"AUTH", user.as_bytes(), password.as_bytes()],
                    )
                    .await?
                }
                None => {
                    self.handshake(&mut stream, &[b"AUTH", password.as_bytes()])
                        .await?
                }
            }
        }
        if self.config.resp3 {
            self.handshake(&mut stream, &[b"HELLO", b"3"]).await?;
        }
        if let Some(db) = self.config.select_db {
            self.handshake(&mut stream, &[b"SELECT", db.to_string().as_bytes()])
                .await?;
        }
        Ok(stream)
    }

    /// Appends the next request to `out`; returns its operation slot.
    fn next_request(&mut self, out: &mut Vec<u8>) -> usize {
        let op = self.cycle[self.position % self.cycle.len()];
        self.position += 1;
        // One buffer reused for every key this client sends.
        let mut key_text = std::mem::take(&mut self.key_text);
        key_text.clear();
        let key = match op {
            Op::Set => self.set_keys.next(&mut self.rng),
            Op::Get => self.get_keys.next(&mut self.rng),
            Op::Custom(i) => self.command_keys[i].next(&mut self.rng),
        };
        key_text.extend_from_slice(self.config.key_prefix.as_bytes());
        key_text.extend_from_slice(itoa::Buffer::new().format(key).as_bytes());
        match op {
            Op::Set => match self.config.expiry_range {
                None => {
                    let value = self.values.value_for(key, &mut self.rng);
                    encode(out, &[b"SET", &key_text, value]);
                }
                Some((min, max)) => {
                    let seconds = self.rng.between(min, max).to_string();
                    let value = self.values.value_for(key, &mut self.rng);
                    encode(out, &[b"SET", &key_text, value, b"EX", seconds.as_bytes()]);
                }
            },
            Op::Get => encode(out, &[b"GET", &key_text]),
            Op::Custom(i) => {
                let needs_data = self.config.commands[i]
                    .args
                    .iter()
                    .any(|a| contains(a, b"__data__"));
                let value = if needs_data {
                    self.values.value_for(key, &mut self.rng).to_vec()
                } else {
                    Vec::new()
                };
                let args: Vec<Vec<u8>> = self.config.commands[i]
                    .args
                    .iter()
                    .map(|a| replace(&replace(a, b"__key__", &key_text), b"__data__", &value))
                    .collect();
                let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
                encode(out, &refs);
            }
        }
        self.key_text = key_text;
        op_slot(&self.config, &self.names, op)
    }

    async fn run(mut self) -> Result<(), String> {
        let mut stream = self.connect().await?;
        let pipeline = self.config.pipeline;
        let mut out = Vec::with_capacity(64 * 1024);
        let mut input = BytesMut::with_capacity(64 * 1024);
        let mut in_flight: VecDeque<InFlight> = VecDeque::with_capacity(pipeline);
        let mut next_due = Instant::now() + self.phase;
        let mut done_sending = false;
        // Open loop: a precise wait for each due time (see `pacer`).
        let mut pacer = self.interval.map(|_| Pacer::new());
        loop {
            let now = Instant::now();
            if self.deadline.is_some_and(|d| now >= d) {
                done_sending = true;
            }
            if !done_sending && !self.queue_requests(now, &mut next_due, &mut in_flight, &mut out) {
                done_sending = true;
            }
            if !out.is_empty() {
                within(IO_TIMEOUT, "sending requests", stream.write_all(&out)).await?;
                out.clear();
            }
            if in_flight.is_empty() {
                if done_sending {
                    return Ok(());
                }
                match &mut pacer {
                    Some(pacer) => pacer.until(next_due).await,
                    None => tokio::time::sleep_until(next_due.into()).await,
                }
                continue;
            }
            let can_send_more =
                self.interval.is_some() && !done_sending && in_flight.len() < pipeline;
            let read = match (&mut pacer, can_send_more) {
                (Some(pacer), true) => tokio::select! {
                    read = within(IO_TIMEOUT, "waiting for replies", stream.read_buf(&mut input)) => Some(read),
                    _ = pacer.until(next_due) => None,
                },
                _ => Some(
                    within(
                        IO_TIMEOUT,
                        "waiting for replies",
                        stream.read_buf(&mut input),
                    )
                    .await,
                ),
            };
            match read {
                None => continue,
                Some(Ok(0)) => return Err("server closed the connection".into()),
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
            }
            if input.len() > REPLY_BYTES_MAX {
                return Err("reply larger than 1 GB".into());
            }
            self.record_replies(&mut input, &mut in_flight)?;
        }
    }

    /// Appends to `out` the requests that may go now while the pipeline
    /// has room: closed loop, as many as fit; open loop, those due by
    /// `now` (advancing `next_due`). Returns false once the request
    /// budget is spent.
    fn queue_requests(
        &mut self,
        now: Instant,
        next_due: &mut Instant,
        in_flight: &mut VecDeque<InFlight>,
        out: &mut Vec<u8>,
    ) -> bool {
        while in_flight.len() < self.config.pipeline {
            let measured_from = match self.interval {
                Some(interval) => {
                    if *next_due > now {
                        break;
                    }
                    let due = *next_due;
                    *next_due += interval;
                    due
                }
                None => now,
            };
            if !self.budget.take() {
                return false;
            }
            let before = out.len();
            let slot = self.next_request(out);
            in_flight.push_back((slot, measured_from, out.len() - before));
        }
        true
    }

    /// Takes every complete reply off `input`, matches it with its request
    /// in `in_flight`, and records it: in this thread's totals, and in the
    /// `live` counters the main thread samples.
    fn record_replies(
        &self,
        input: &mut BytesMut,
        in_flight: &mut VecDeque<InFlight>,
    ) -> Result<(), String> {
        let now = Instant::now();
        let mut collector = self.collector.borrow_mut();
        let mut this_second = self
            .live
            .second_latency
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let (mut ops, mut latency_us, mut bytes, mut max_us) = (0u64, 0u64, 0u64, 0u64);
        let (mut bytes_rx, mut min_us) = (0u64, u64::MAX);
        while let Some((len, kind)) = scan_reply(input).map_err(|e| e.to_string())? {
            let Some((slot, measured_from, request_len)) = in_flight.pop_front() else {
                return Err("reply without a request".into());
            };
            let micros = now.saturating_duration_since(measured_from).as_micros() as u64;
            let stats = &mut collector.0[slot];
            stats.ops += 1;
            stats.bytes += (len + request_len) as u64;
            stats.bytes_rx += len as u64;
            stats.bytes_tx += request_len as u64;
            stats.latency.saturating_record(micros.max(1));
            this_second.saturating_record(micros.max(1));
            let is_get = self.config.commands.is_empty() && slot == 1;
            match kind {
                ReplyKind::Error { start, end } => {
                    stats.errors += 1;
                    let text = String::from_utf8_lossy(&input[start..end]);
                    let code = text.split(' ').next().unwrap_or("ERR").to_owned();
                    *collector.1.entry(code).or_insert(0) += 1;
                }
                ReplyKind::Null if is_get => stats.misses += 1,
                _ if is_get => stats.hits += 1,
                _ => {}
            }
            ops += 1;
            latency_us += micros;
            max_us = max_us.max(micros);
            min_us = min_us.min(micros);
            bytes += (len + request_len) as u64;
            bytes_rx += len as u64;
            input.advance(len);
        }
        self.live.ops.fetch_add(ops, Relaxed);
        self.live.latency_us.fetch_add(latency_us, Relaxed);
        if max_us > self.live.max_latency_us.load(Relaxed) {
            self.live.max_latency_us.fetch_max(max_us, Relaxed);
        }
        self.live.bytes.fetch_add(bytes, Relaxed);
        self.live.bytes_rx.fetch_add(bytes_rx, Relaxed);
        if ops > 0 {
            self.live.min_latency_us.fetch_min(min_us.max(1), Relaxed);
        }
        Ok(())
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn replace(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut i = 0;
    while i < haystack.len() {
        if haystack[i..].starts_with(needle) {
            out.extend_from_slice(with);
            i += needle.len();
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    out
}

/// Encodes one request as a RESP array of bulk strings.
pub fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    let mut digits = itoa::Buffer::new();
    out.push(b'*');
    out.extend_from_slice(digits.format(args.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    for arg in args {
        out.push(b'$');
        out.extend_from_slice(digits.format(arg.len()).as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_replaced() {
        assert_eq!(replace(b"a__key__b__key__", b"__key__", b"K"), b"aKbK");
        assert!(contains(b"x__data__", b"__data__"));
        let mut out = Vec::new();
        encode(&mut out, &[b"GET", b"k"]);
        assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
    }
}
