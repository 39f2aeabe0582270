//! Command-line flags with memtier_benchmark's names, meanings and
//! defaults, validated into a [`Config`]. A memtier command line from a
//! published benchmark runs unchanged.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// How keys are chosen (`--key-pattern`, `--command-key-pattern`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyPattern {
    /// S: one sequence over the whole range, shared by all clients.
    Sequential,
    /// R: uniform random.
    Random,
    /// G: Gaussian around `--key-median` with `--key-stddev`.
    Gaussian,
    /// P: sequential, each client over its own slice of the range.
    Parallel,
}

impl KeyPattern {
    fn parse(text: &str) -> Result<KeyPattern, String> {
        match text {
            "S" => Ok(KeyPattern::Sequential),
            "R" => Ok(KeyPattern::Random),
            "G" => Ok(KeyPattern::Gaussian),
            "P" => Ok(KeyPattern::Parallel),
            other => Err(format!("invalid key pattern '{other}': use S, R, G or P")),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Requests {
    /// `-n N`: requests per client.
    PerClient(u64),
    /// `-n allkeys`: the whole key range, once.
    AllKeys,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataSize {
    Fixed(usize),
    /// `--data-size-range=MIN-MAX` with `--data-size-pattern`: R picks a
    /// random size per request, S spreads the sizes evenly over the key
    /// range (key_min gets MIN, key_max gets MAX).
    Range {
        min: usize,
        max: usize,
        spread_over_keys: bool,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct CustomCommand {
    /// Arguments, possibly containing `__key__` and `__data__`.
    pub args: Vec<Vec<u8>>,
    pub ratio: u32,
    pub key_pattern: KeyPattern,
    /// Statistics label: the command name in upper case.
    pub name: String,
}

#[derive(Clone, Debug)]
pub struct Config {
    pub server: String,
    pub port: u16,
    /// (user, password) for AUTH.
    pub auth: Option<(Option<String>, String)>,
    pub resp3: bool,
    pub threads: usize,
    pub clients: usize,
    pub requests: Requests,
    pub test_time: Option<Duration>,
    pub ratio_sets: u32,
    pub ratio_gets: u32,
    pub pipeline: usize,
    pub data_size: DataSize,
    pub random_data: bool,
    pub key_prefix: String,
    pub key_min: u64,
    pub key_max: u64,
    pub set_pattern: KeyPattern,
    pub get_pattern: KeyPattern,
    pub key_stddev: f64,
    pub key_median: f64,
    pub distinct_client_seed: bool,
    pub randomize: bool,
    pub run_count: usize,
    /// `--print-all-runs`: with -x, each run's table too.
    pub print_all_runs: bool,
    pub hide_histogram: bool,
    pub print_percentiles: Vec<f64>,
    pub json_out_file: Option<PathBuf>,
    pub select_db: Option<u32>,
    pub commands: Vec<CustomCommand>,
    /// Open loop: requests per second over all clients.
    pub rate: Option<f64>,
    pub plot: Option<PathBuf>,
    /// Print the per-second progress line (on a terminal by default).
    pub progress: bool,
    /// `--expiry-range=MIN-MAX`: SETs carry `EX` with a random number of
    /// seconds in the range.
    pub expiry_range: Option<(u64, u64)>,
    /// `--out-file`: write the report there instead of stdout.
    pub out_file: Option<PathBuf>,
    pub show_config: bool,
    /// `--ipv4` / `--ipv6`: connect only over that family.
    pub family: Option<Family>,
    /// `--connection-timeout` (memtier's seconds); 10 s unless set.
    pub connect_timeout: Duration,
}

/// An address family `--ipv4` or `--ipv6` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

#[derive(Parser, Debug)]
#[command(
    name = "strata-bench",
    version,
    about = "A memtier_benchmark-compatible load generator for Redis-protocol servers",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Tool>,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Subcommand, Debug)]
pub enum Tool {
    /// Draws one chart from one or more JSON result files.
    Report {
        /// SVG file to write.
        #[arg(long)]
        plot: PathBuf,
        /// JSON files written by --json-out-file.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
    },
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Server address.
    #[arg(
        short = 's',
        long = "server",
        alias = "host",
        default_value = "localhost"
    )]
    server: String,
    /// redis://[[user:]password@]host[:port][/db]: sets the server, port,
    /// credentials and database at once.
    #[arg(long = "uri")]
    uri: Option<String>,
    /// Connect over IPv4 only.
    #[arg(long = "ipv4", conflicts_with = "ipv6")]
    ipv4: bool,
    /// Connect over IPv6 only.
    #[arg(long = "ipv6")]
    ipv6: bool,
    /// Seconds to wait for a connection (10 unless set).
    #[arg(long = "connection-timeout")]
    connection_timeout: Option<u64>,
    /// With -x: print each run's results too, before the best, worst and
    /// aggregated ones.
    #[arg(long = "print-all-runs")]
    print_all_runs: bool,
    /// memtier's debug output: accepted, nothing more is printed.
    #[arg(long = "debug", short = 'D')]
    debug: bool,
    /// memtier ignores the deadlines of imported data; strata-bench
    /// imports none (see --data-import), so it changes nothing.
    #[arg(long = "no-expiry")]
    no_expiry: bool,
    #[command(flatten)]
    refused: Refused,
    /// Server port.
    #[arg(short = 'p', long = "port", default_value_t = 6379)]
    port: u16,
    /// Authenticate with PASSWORD or USER:PASSWORD.
    #[arg(short = 'a', long = "authenticate")]
    authenticate: Option<String>,
    /// redis (RESP2), resp2 or resp3.
    #[arg(short = 'P', long = "protocol", default_value = "redis")]
    protocol: String,
    /// Number of threads.
    #[arg(short = 't', long = "threads", default_value_t = 4)]
    threads: usize,
    /// Number of clients per thread.
    #[arg(short = 'c', long = "clients", default_value_t = 50)]
    clients: usize,
    /// Number of total requests per client, or 'allkeys' for the whole key range.
    #[arg(short = 'n', long = "requests", default_value = "10000")]
    requests: String,
    /// Number of seconds to run the test (overrides --requests).
    #[arg(long = "test-time")]
    test_time: Option<u64>,
    /// Set:Get ratio.
    #[arg(long = "ratio", default_value = "1:10")]
    ratio: String,
    /// Number of concurrent pipelined requests per client.
    #[arg(long = "pipeline", default_value_t = 1)]
    pipeline: usize,
    /// Object data size in bytes.
    #[arg(short = 'd', long = "data-size", default_value_t = 32)]
    data_size: usize,
    /// Random-sized values in MIN-MAX.
    #[arg(long = "data-size-range")]
    data_size_range: Option<String>,
    /// R: random size per request; S: sizes spread evenly over the key range.
    #[arg(long = "data-size-pattern", default_value = "R")]
    data_size_pattern: String,
    /// Randomize the value bytes.
    #[arg(short = 'R', long = "random-data")]
    random_data: bool,
    /// Prefix for keys.
    #[arg(long = "key-prefix", default_value = "memtier-")]
    key_prefix: String,
    /// Key ID minimum value.
    #[arg(long = "key-minimum", default_value_t = 0)]
    key_minimum: u64,
    /// Key ID maximum value.
    #[arg(long = "key-maximum", default_value_t = 10_000_000)]
    key_maximum: u64,
    /// Set:Get key pattern, each of S, R, G or P.
    #[arg(long = "key-pattern", default_value = "R:R")]
    key_pattern: String,
    /// Standard deviation of the Gaussian pattern (default: key range / 6).
    #[arg(long = "key-stddev")]
    key_stddev: Option<f64>,
    /// Median of the Gaussian pattern (default: centre of the key range).
    #[arg(long = "key-median")]
    key_median: Option<f64>,
    /// Use a different random seed for each client.
    #[arg(long = "distinct-client-seed")]
    distinct_client_seed: bool,
    /// Seed from the clock instead of a constant.
    #[arg(long = "randomize")]
    randomize: bool,
    /// Number of full-test iterations.
    #[arg(short = 'x', long = "run-count", default_value_t = 1)]
    run_count: usize,
    /// Don't print the latency distribution.
    #[arg(long = "hide-histogram")]
    hide_histogram: bool,
    /// Percentiles for the result table, e.g. 50,99,99.9.
    #[arg(long = "print-percentiles", default_value = "50,99,99.9")]
    print_percentiles: String,
    /// Write the results as JSON.
    #[arg(long = "json-out-file")]
    json_out_file: Option<PathBuf>,
    /// Database to SELECT on every connection.
    #[arg(long = "select-db")]
    select_db: Option<u32>,
    /// A command to send, with __key__ and __data__ placeholders (repeatable).
    #[arg(long = "command")]
    command: Vec<String>,
    /// How many times each --command is sent in sequence (one per --command).
    #[arg(long = "command-ratio")]
    command_ratio: Vec<u32>,
    /// Key pattern of each --command (default R).
    #[arg(long = "command-key-pattern")]
    command_key_pattern: Vec<String>,
    /// Open loop: send this many requests per second in total, measuring
    /// latency from each request's intended send time.
    #[arg(long = "rate")]
    rate: Option<f64>,
    /// Draw throughput over time and the latency percentile curve to this SVG file.
    #[arg(long = "plot")]
    plot: Option<PathBuf>,
    /// Print the per-second progress line even when stderr is not a terminal.
    #[arg(long = "progress")]
    progress: bool,
    /// memtier's per-connection request cap. Here it sets the schedule of
    /// --rate (this many per second times all connections): latencies are
    /// then measured from intended send times.
    #[arg(long = "rate-limiting")]
    rate_limiting: Option<f64>,
    /// Random expiry for SETs, in seconds: MIN-MAX.
    #[arg(long = "expiry-range")]
    expiry_range: Option<String>,
    /// Write the report to this file instead of stdout.
    #[arg(long = "out-file", short = 'o')]
    out_file: Option<PathBuf>,
    /// Print the configuration before running.
    #[arg(long = "show-config")]
    show_config: bool,
}

/// memtier flags strata-bench refuses, each with the reason: a command
/// line that uses one stops at once rather than measure something else.
#[derive(Args, Debug)]
struct Refused {
    #[arg(long = "unix-socket", hide = true)]
    unix_socket: Option<String>,
    #[arg(long = "tls", hide = true)]
    tls: bool,
    #[arg(long = "cert", hide = true)]
    cert: Option<String>,
    #[arg(long = "key", hide = true)]
    key: Option<String>,
    #[arg(long = "cacert", hide = true)]
    cacert: Option<String>,
    #[arg(long = "tls-skip-verify", hide = true)]
    tls_skip_verify: bool,
    #[arg(long = "sni", hide = true)]
    sni: Option<String>,
    #[arg(long = "tls-protocols", hide = true)]
    tls_protocols: Option<String>,
    #[arg(long = "hdr-file-prefix", hide = true)]
    hdr_file_prefix: Option<String>,
    #[arg(long = "client-stats", hide = true)]
    client_stats: Option<String>,
    #[arg(long = "data-offset", hide = true)]
    data_offset: Option<String>,
    #[arg(long = "data-size-list", hide = true)]
    data_size_list: Option<String>,
    #[arg(long = "data-import", hide = true)]
    data_import: Option<String>,
    #[arg(long = "data-verify", hide = true)]
    data_verify: bool,
    #[arg(long = "verify-only", hide = true)]
    verify_only: bool,
    #[arg(long = "generate-keys", hide = true)]
    generate_keys: bool,
    #[arg(long = "key-zipf-exp", hide = true)]
    key_zipf_exp: Option<String>,
    #[arg(long = "reconnect-interval", hide = true)]
    reconnect_interval: Option<String>,
    #[arg(long = "reconnect-on-error", hide = true)]
    reconnect_on_error: bool,
    #[arg(long = "max-reconnect-attempts", hide = true)]
    max_reconnect_attempts: Option<String>,
    #[arg(long = "reconnect-backoff-factor", hide = true)]
    reconnect_backoff_factor: Option<String>,
    #[arg(long = "thread-conn-start-min-jitter-micros", hide = true)]
    jitter_min: Option<String>,
    #[arg(long = "thread-conn-start-max-jitter-micros", hide = true)]
    jitter_max: Option<String>,
    #[arg(long = "multi-key-get", hide = true)]
    multi_key_get: Option<String>,
    #[arg(long = "wait-ratio", hide = true)]
    wait_ratio: Option<String>,
    #[arg(long = "num-slaves", hide = true)]
    num_slaves: Option<String>,
    #[arg(long = "wait-timeout", hide = true)]
    wait_timeout: Option<String>,
    #[arg(long = "cluster-mode", hide = true)]
    cluster_mode: bool,
    #[arg(long = "monitor-input", hide = true)]
    monitor_input: Option<String>,
    #[arg(long = "monitor-pattern", hide = true)]
    monitor_pattern: Option<String>,
    #[arg(long = "command-stats-breakdown", hide = true)]
    command_stats_breakdown: Option<String>,
    #[arg(long = "statsd-host", hide = true)]
    statsd_host: Option<String>,
    #[arg(long = "statsd-port", hide = true)]
    statsd_port: Option<String>,
    #[arg(long = "statsd-prefix", hide = true)]
    statsd_prefix: Option<String>,
    #[arg(long = "statsd-run-label", hide = true)]
    statsd_run_label: Option<String>,
    #[arg(long = "graphite-port", hide = true)]
    graphite_port: Option<String>,
    #[arg(long = "scan-incremental-iteration", hide = true)]
    scan_incremental_iteration: bool,
    #[arg(long = "scan-incremental-max-iterations", hide = true)]
    scan_incremental_max_iterations: Option<String>,
    #[arg(long = "clients-start", hide = true)]
    clients_start: Option<String>,
    #[arg(long = "clients-step", hide = true)]
    clients_step: Option<String>,
    #[arg(long = "step-duration", hide = true)]
    step_duration: Option<String>,
}

const TLS: &str = "strata-bench does not speak TLS yet";
const RECONNECT: &str = "strata-bench does not reconnect: a connection that fails ends the run";
const STATSD: &str = "strata-bench sends no statsd or graphite metrics (see --json-out-file)";
const STEPS: &str = "strata-bench runs one client count (see --clients, and -x for repeats)";

/// Why each of [`Refused`]'s flags is refused.
const REFUSALS: &[(&str, &str)] = &[
    ("unix-socket", "strata-bench connects over TCP only"),
    ("tls", TLS),
    ("cert", TLS),
    ("key", TLS),
    ("cacert", TLS),
    ("tls-skip-verify", TLS),
    ("sni", TLS),
    ("tls-protocols", TLS),
    (
        "hdr-file-prefix",
        "strata-bench writes no HDR histogram files (its JSON has the percentiles)",
    ),
    (
        "client-stats",
        "strata-bench writes no per-client statistics files",
    ),
    (
        "data-offset",
        "strata-bench sends whole values (see --data-size)",
    ),
    (
        "data-size-list",
        "weighted size lists are not built yet (see --data-size-range)",
    ),
    ("data-import", "strata-bench does not import data files"),
    ("data-verify", "strata-bench does not verify values"),
    ("verify-only", "strata-bench does not verify values"),
    ("generate-keys", "strata-bench does not import data files"),
    (
        "key-zipf-exp",
        "the Zipf key pattern (Z) is not built yet (see S, R, G, P)",
    ),
    ("reconnect-interval", RECONNECT),
    ("reconnect-on-error", RECONNECT),
    ("max-reconnect-attempts", RECONNECT),
    ("reconnect-backoff-factor", RECONNECT),
    (
        "thread-conn-start-min-jitter-micros",
        "strata-bench opens every connection at once",
    ),
    (
        "thread-conn-start-max-jitter-micros",
        "strata-bench opens every connection at once",
    ),
    (
        "multi-key-get",
        "MGET batches are not built yet (see --command)",
    ),
    (
        "wait-ratio",
        "WAIT is not sent (see --command=\"WAIT 1 0\")",
    ),
    (
        "num-slaves",
        "WAIT is not sent (see --command=\"WAIT 1 0\")",
    ),
    (
        "wait-timeout",
        "WAIT is not sent (see --command=\"WAIT 1 0\")",
    ),
    (
        "cluster-mode",
        "strata-bench does not follow cluster redirections yet (redis-benchmark --cluster does)",
    ),
    (
        "monitor-input",
        "replaying MONITOR output is not built yet (see --command)",
    ),
    (
        "monitor-pattern",
        "replaying MONITOR output is not built yet (see --command)",
    ),
    (
        "command-stats-breakdown",
        "results are broken down by command only",
    ),
    ("statsd-host", STATSD),
    ("statsd-port", STATSD),
    ("statsd-prefix", STATSD),
    ("statsd-run-label", STATSD),
    ("graphite-port", STATSD),
    (
        "scan-incremental-iteration",
        "incremental SCAN runs are not built yet (see --command)",
    ),
    (
        "scan-incremental-max-iterations",
        "incremental SCAN runs are not built yet (see --command)",
    ),
    ("clients-start", STEPS),
    ("clients-step", STEPS),
    ("step-duration", STEPS),
];

impl Refused {
    /// The first refused flag given, with why it is refused.
    fn check(&self) -> Result<(), String> {
        let given = self.given();
        match REFUSALS.iter().find(|(name, _)| given.contains(name)) {
            Some((name, why)) => Err(format!("--{name} is not supported: {why}")),
            None => Ok(()),
        }
    }

    /// The refused flags given.
    fn given(&self) -> Vec<&'static str> {
        let flags = [
            ("unix-socket", self.unix_socket.is_some()),
            ("tls", self.tls),
            ("cert", self.cert.is_some()),
            ("key", self.key.is_some()),
            ("cacert", self.cacert.is_some()),
            ("tls-skip-verify", self.tls_skip_verify),
            ("sni", self.sni.is_some()),
            ("tls-protocols", self.tls_protocols.is_some()),
            ("hdr-file-prefix", self.hdr_file_prefix.is_some()),
            ("client-stats", self.client_stats.is_some()),
            ("data-offset", self.data_offset.is_some()),
            ("data-size-list", self.data_size_list.is_some()),
            ("data-import", self.data_import.is_some()),
            ("data-verify", self.data_verify),
            ("verify-only", self.verify_only),
            ("generate-keys", self.generate_keys),
            ("key-zipf-exp", self.key_zipf_exp.is_some()),
            ("reconnect-interval", self.reconnect_interval.is_some()),
            ("reconnect-on-error", self.reconnect_on_error),
            (
                "max-reconnect-attempts",
                self.max_reconnect_attempts.is_some(),
            ),
            (
                "reconnect-backoff-factor",
                self.reconnect_backoff_factor.is_some(),
            ),
            (
                "thread-conn-start-min-jitter-micros",
                self.jitter_min.is_some(),
            ),
            (
                "thread-conn-start-max-jitter-micros",
                self.jitter_max.is_some(),
            ),
            ("multi-key-get", self.multi_key_get.is_some()),
            ("wait-ratio", self.wait_ratio.is_some()),
            ("num-slaves", self.num_slaves.is_some()),
            ("wait-timeout", self.wait_timeout.is_some()),
            ("cluster-mode", self.cluster_mode),
            ("monitor-input", self.monitor_input.is_some()),
            ("monitor-pattern", self.monitor_pattern.is_some()),
            (
                "command-stats-breakdown",
                self.command_stats_breakdown.is_some(),
            ),
            ("statsd-host", self.statsd_host.is_some()),
            ("statsd-port", self.statsd_port.is_some()),
            ("statsd-prefix", self.statsd_prefix.is_some()),
            ("statsd-run-label", self.statsd_run_label.is_some()),
            ("graphite-port", self.graphite_port.is_some()),
            (
                "scan-incremental-iteration",
                self.scan_incremental_iteration,
            ),
            (
                "scan-incremental-max-iterations",
                self.scan_incremental_max_iterations.is_some(),
            ),
            ("clients-start", self.clients_start.is_some()),
            ("clients-step", self.clients_step.is_some()),
            ("step-duration", self.step_duration.is_some()),
        ];
        flags
            .iter()
            .filter(|(_, set)| *set)
            .map(|(name, _)| *name)
            .collect()
    }
}

fn parse_pair(text: &str, what: &str) -> Result<(String, String), String> {
    text.split_once(':')
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .ok_or_else(|| format!("invalid {what} '{text}': expected A:B"))
}

impl RunArgs {
    pub fn into_config(mut self) -> Result<Config, String> {
        self.refused.check()?;
        if let Some(uri) = self.uri.take() {
            self.apply_uri(&uri)?;
        }
        let resp3 = parse_protocol(&self.protocol)?;
        if self.threads == 0 || self.clients == 0 || self.pipeline == 0 {
            return Err("--threads, --clients and --pipeline must be at least 1".into());
        }
        let requests = parse_requests(&self.requests)?;
        let (ratio_sets, ratio_gets) = parse_ratio(&self.ratio)?;
        if ratio_sets == 0 && ratio_gets == 0 && self.command.is_empty() {
            return Err("--ratio 0:0 sends nothing".into());
        }
        let (set_pattern, get_pattern) = parse_pair(&self.key_pattern, "--key-pattern")?;
        let (set_pattern, get_pattern) = (
            KeyPattern::parse(&set_pattern)?,
            KeyPattern::parse(&get_pattern)?,
        );
        if self.key_maximum < self.key_minimum {
            return Err("--key-maximum must not be below --key-minimum".into());
        }
        let data_size = self.data_size()?;
        let print_percentiles = parse_percentiles(&self.print_percentiles)?;
        let commands = self.commands()?;
        let rate = self.rate()?;
        let expiry_range = self
            .expiry_range
            .as_deref()
            .map(parse_expiry_range)
            .transpose()?;
        let range = (self.key_maximum - self.key_minimum) as f64;
        Ok(Config {
            server: self.server,
            port: self.port,
            auth: self.authenticate.map(parse_credentials),
            resp3,
            threads: self.threads,
            clients: self.clients,
            requests,
            test_time: self.test_time.map(Duration::from_secs),
            ratio_sets,
            ratio_gets,
            pipeline: self.pipeline,
            data_size,
            random_data: self.random_data,
            key_prefix: self.key_prefix,
            key_min: self.key_minimum,
            key_max: self.key_maximum,
            set_pattern,
            get_pattern,
            key_stddev: self.key_stddev.unwrap_or(range / 6.0),
            key_median: self
                .key_median
                .unwrap_or(self.key_minimum as f64 + range / 2.0),
            distinct_client_seed: self.distinct_client_seed,
            randomize: self.randomize,
            run_count: self.run_count.max(1),
            print_all_runs: self.print_all_runs,
            hide_histogram: self.hide_histogram,
            print_percentiles,
            json_out_file: self.json_out_file,
            select_db: self.select_db,
            commands,
            rate,
            plot: self.plot,
            progress: self.progress || std::io::IsTerminal::is_terminal(&std::io::stderr()),
            expiry_range,
            out_file: self.out_file,
            show_config: self.show_config,
            family: match (self.ipv4, self.ipv6) {
                (true, _) => Some(Family::V4),
                (_, true) => Some(Family::V6),
                _ => None,
            },
            connect_timeout: Duration::from_secs(self.connection_timeout.unwrap_or(10).max(1)),
        })
    }

    /// `--uri redis://[[user:]password@]host[:port][/db]` (memtier's):
    /// it overrides --server, --port, --authenticate and --select-db.
    fn apply_uri(&mut self, uri: &str) -> Result<(), String> {
        let bad = || {
            format!("invalid --uri '{uri}': expected redis://[[user:]password@]host[:port][/db]")
        };
        let rest = match uri.split_once("://") {
            Some(("redis", rest)) => rest,
            Some(("rediss", _)) => {
                return Err(
                    "--uri rediss:// is not supported: strata-bench does not speak TLS yet".into(),
                );
            }
            _ => return Err(bad()),
        };
        let (authority, db) = match rest.split_once('/') {
            Some((authority, "")) => (authority, None),
            Some((authority, db)) => (authority, Some(db.parse::<u32>().map_err(|_| bad())?)),
            None => (rest, None),
        };
        let (credentials, address) = match authority.rsplit_once('@') {
            Some((credentials, address)) => (Some(credentials), address),
            None => (None, authority),
        };
        let (host, port) = match address.rsplit_once(':') {
            Some((host, port)) if !host.ends_with(':') => {
                (host, Some(port.parse::<u16>().map_err(|_| bad())?))
            }
            _ => (address, None),
        };
        if host.is_empty() {
            return Err(bad());
        }
        self.server = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        if let Some(port) = port {
            self.port = port;
        }
        if let Some(credentials) = credentials.filter(|c| !c.is_empty()) {
            // `:password@`: a password alone (the default user).
            let credentials = credentials.strip_prefix(':').unwrap_or(credentials);
            self.authenticate = Some(credentials.to_owned());
        }
        if db.is_some() {
            self.select_db = db;
        }
        Ok(())
    }

    /// The value sizes: `--data-size`, or `--data-size-range` with
    /// `--data-size-pattern` (checked only with a range, as memtier does).
    fn data_size(&self) -> Result<DataSize, String> {
        let Some(range) = &self.data_size_range else {
            return Ok(DataSize::Fixed(self.data_size));
        };
        let (min, max) = range
            .split_once('-')
            .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
            .ok_or_else(|| format!("invalid --data-size-range '{range}': expected MIN-MAX"))?;
        if min > max {
            return Err("--data-size-range: MIN must not exceed MAX".into());
        }
        let spread_over_keys = match self.data_size_pattern.as_str() {
            "R" => false,
            "S" => true,
            other => {
                return Err(format!("invalid --data-size-pattern '{other}': use R or S"));
            }
        };
        Ok(DataSize::Range {
            min,
            max,
            spread_over_keys,
        })
    }

    /// The `--command`s, each with its `--command-ratio` (default 1) and
    /// `--command-key-pattern` (default R), matched by position.
    fn commands(&self) -> Result<Vec<CustomCommand>, String> {
        let mut commands = Vec::new();
        for (i, text) in self.command.iter().enumerate() {
            let args: Vec<Vec<u8>> = strata_resp::split_args(text.as_bytes())
                .ok_or_else(|| format!("unbalanced quotes in --command '{text}'"))?
                .iter()
                .map(|a| a.to_vec())
                .collect();
            let Some(first) = args.first() else {
                return Err("empty --command".into());
            };
            let key_pattern = match self.command_key_pattern.get(i) {
                Some(p) => KeyPattern::parse(p)?,
                None => KeyPattern::Random,
            };
            commands.push(CustomCommand {
                name: String::from_utf8_lossy(first).to_ascii_uppercase(),
                args,
                ratio: self.command_ratio.get(i).copied().unwrap_or(1).max(1),
                key_pattern,
            });
        }
        Ok(commands)
    }

    /// The open-loop rate over all clients: `--rate`, or memtier's
    /// per-connection `--rate-limiting` times the connections.
    fn rate(&self) -> Result<Option<f64>, String> {
        let rate = match (self.rate, self.rate_limiting) {
            (Some(_), Some(_)) => {
                return Err("use either --rate or --rate-limiting, not both".into());
            }
            (rate, None) => rate,
            (None, Some(per_connection)) => {
                Some(per_connection * (self.threads * self.clients) as f64)
            }
        };
        if let Some(rate) = rate
            && !(rate > 0.0 && rate.is_finite())
        {
            return Err(
                "--rate and --rate-limiting must be positive numbers of requests per second".into(),
            );
        }
        Ok(rate)
    }
}

/// `--authenticate`: USER:PASSWORD, or a password alone.
fn parse_credentials(credentials: String) -> (Option<String>, String) {
    match credentials.split_once(':') {
        Some((user, password)) => (Some(user.to_owned()), password.to_owned()),
        None => (None, credentials),
    }
}

/// `--protocol`: whether to speak RESP3.
fn parse_protocol(text: &str) -> Result<bool, String> {
    match text {
        "redis" | "resp2" => Ok(false),
        "resp3" => Ok(true),
        other => Err(format!(
            "unsupported protocol '{other}': use redis, resp2 or resp3"
        )),
    }
}

/// `--requests`: a count per client, or `allkeys`.
fn parse_requests(text: &str) -> Result<Requests, String> {
    match text {
        "allkeys" => Ok(Requests::AllKeys),
        n => Ok(Requests::PerClient(
            n.parse().map_err(|_| format!("invalid --requests '{n}'"))?,
        )),
    }
}

/// `--ratio` SETS:GETS.
fn parse_ratio(text: &str) -> Result<(u32, u32), String> {
    let (sets, gets) = parse_pair(text, "--ratio")?;
    let sets: u32 = sets
        .parse()
        .map_err(|_| format!("invalid --ratio '{text}'"))?;
    let gets: u32 = gets
        .parse()
        .map_err(|_| format!("invalid --ratio '{text}'"))?;
    Ok((sets, gets))
}

/// `--print-percentiles`: comma-separated, each within 0..=100.
fn parse_percentiles(text: &str) -> Result<Vec<f64>, String> {
    text.split(',')
        .map(|p| {
            p.trim()
                .parse::<f64>()
                .ok()
                .filter(|p| (0.0..=100.0).contains(p))
        })
        .collect::<Option<Vec<f64>>>()
        .ok_or_else(|| format!("invalid --print-percentiles '{text}'"))
}

/// `--expiry-range` MIN-MAX seconds, MIN at least 1.
fn parse_expiry_range(range: &str) -> Result<(u64, u64), String> {
    range
        .split_once('-')
        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
        .filter(|(min, max)| 0 < *min && min <= max)
        .ok_or_else(|| {
            format!("invalid --expiry-range '{range}': expected MIN-MAX seconds, MIN at least 1")
        })
}

/// Parses a command line (without the program name) into a run config.
pub fn parse(args: &[&str]) -> Result<Config, String> {
    let cli = Cli::try_parse_from(std::iter::once("strata-bench").chain(args.iter().copied()))
        .map_err(|e| e.to_string())?;
    cli.run.into_config()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// memtier_benchmark's long options (its `long_options` table) and
    /// whether each takes a value; --help and --version are clap's own.
    const MEMTIER_FLAGS: &str = "server 1;host 1;port 1;unix-socket 1;ipv4 0;ipv6 0;protocol 1;\
        tls 0;cert 1;key 1;cacert 1;tls-skip-verify 0;sni 1;tls-protocols 1;out-file 1;\
        hdr-file-prefix 1;client-stats 1;run-count 1;debug 0;show-config 0;hide-histogram 0;\
        print-percentiles 1;print-all-runs 0;distinct-client-seed 0;randomize 0;requests 1;\
        clients 1;threads 1;test-time 1;ratio 1;pipeline 1;data-size 1;data-offset 1;\
        random-data 0;data-size-range 1;data-size-list 1;data-size-pattern 1;expiry-range 1;\
        data-import 1;data-verify 0;verify-only 0;generate-keys 0;key-prefix 1;key-minimum 1;\
        key-maximum 1;key-pattern 1;key-stddev 1;key-median 1;key-zipf-exp 1;\
        reconnect-interval 1;reconnect-on-error 0;max-reconnect-attempts 1;\
        reconnect-backoff-factor 1;connection-timeout 1;thread-conn-start-min-jitter-micros 1;\
        thread-conn-start-max-jitter-micros 1;multi-key-get 1;authenticate 1;select-db 1;\
        no-expiry 0;wait-ratio 1;num-slaves 1;wait-timeout 1;json-out-file 1;cluster-mode 0;\
        command 1;command-key-pattern 1;command-ratio 1;monitor-input 1;monitor-pattern 1;\
        command-stats-breakdown 1;rate-limiting 1;uri 1;statsd-host 1;statsd-port 1;\
        statsd-prefix 1;statsd-run-label 1;graphite-port 1;scan-incremental-iteration 0;\
        scan-incremental-max-iterations 1;clients-start 1;clients-step 1;step-duration 1";

    /// A value each memtier option accepts.
    fn value_for(flag: &str) -> &'static str {
        match flag {
            "server" | "host" => "localhost",
            "protocol" => "redis",
            "ratio" => "1:1",
            "key-pattern" => "R:R",
            "data-size-range" | "expiry-range" => "1-2",
            "data-size-pattern" | "command-key-pattern" => "R",
            "print-percentiles" => "50",
            "command" => "get __key__",
            "uri" => "redis://localhost:6380/2",
            "out-file" | "json-out-file" => "/dev/null",
            "key-stddev" | "key-median" => "1.5",
            _ => "1",
        }
    }

    /// Every memtier flag is taken with memtier's meaning, or refused
    /// with the reason: none is an unknown argument.
    #[test]
    fn every_memtier_flag_is_accepted_or_refused_with_a_reason() {
        let mut refused = Vec::new();
        for entry in MEMTIER_FLAGS.split(';') {
            let (flag, takes_value) = entry.trim().split_once(' ').unwrap();
            let option = format!("--{flag}");
            let mut args = vec![option.as_str()];
            if takes_value == "1" {
                args.push(value_for(flag));
            }
            if flag == "command-key-pattern" || flag == "command-ratio" {
                args.extend(["--command", "get __key__"]);
            }
            match parse(&args) {
                Ok(_) => {}
                Err(why) => {
                    let expected = format!("--{flag} is not supported: ");
                    assert!(why.starts_with(&expected), "--{flag}: {why}");
                    refused.push(flag);
                }
            }
        }
        assert!(
            refused.contains(&"cluster-mode") && refused.contains(&"tls"),
            "{refused:?}"
        );
        assert!(
            !refused.contains(&"uri") && !refused.contains(&"ipv4"),
            "{refused:?}"
        );
    }

    #[test]
    fn a_uri_sets_server_port_credentials_and_database() {
        let c = parse(&["--uri", "redis://user:secret@example.org:6380/3", "-p", "1"]).unwrap();
        assert_eq!(
            (c.server.as_str(), c.port, c.select_db),
            ("example.org", 6380, Some(3))
        );
        assert_eq!(c.auth, Some((Some("user".into()), "secret".into())));
        let c = parse(&["--uri", "redis://:pw@[::1]"]).unwrap();
        assert_eq!((c.server.as_str(), c.port), ("::1", 6379));
        assert_eq!(c.auth, Some((None, "pw".into())));
        let c = parse(&["--host", "h", "--ipv6", "--connection-timeout", "3"]).unwrap();
        assert_eq!((c.server.as_str(), c.family), ("h", Some(Family::V6)));
        assert_eq!(c.connect_timeout, Duration::from_secs(3));
        assert!(parse(&["--uri", "rediss://h"]).unwrap_err().contains("TLS"));
        assert!(
            parse(&["--uri", "http://h"])
                .unwrap_err()
                .starts_with("invalid --uri")
        );
        assert!(parse(&["--ipv4", "--ipv6"]).is_err());
    }

    #[test]
    fn defaults_are_memtiers() {
        let c = parse(&[]).unwrap();
        assert_eq!(
            (c.server.as_str(), c.port, c.threads, c.clients),
            ("localhost", 6379, 4, 50)
        );
        assert_eq!(c.requests, Requests::PerClient(10_000));
        assert_eq!((c.ratio_sets, c.ratio_gets, c.pipeline), (1, 10, 1));
        assert_eq!(c.data_size, DataSize::Fixed(32));
        assert_eq!(
            (c.key_prefix.as_str(), c.key_min, c.key_max),
            ("memtier-", 0, 10_000_000)
        );
        assert_eq!(
            (c.set_pattern, c.get_pattern),
            (KeyPattern::Random, KeyPattern::Random)
        );
        assert!((c.key_stddev - 10_000_000.0 / 6.0).abs() < 1e-6);
        assert!((c.key_median - 5_000_000.0).abs() < 1e-6);
        assert_eq!(c.print_percentiles, vec![50.0, 99.0, 99.9]);
    }

    #[test]
    fn published_command_lines_parse() {
        let c = parse(&[
            "--ratio=1:0",
            "--test-time=120",
            "-d",
            "10000",
            "-t",
            "1",
            "-c",
            "50",
            "--pipeline=25",
        ])
        .unwrap();
        assert_eq!(
            (c.ratio_sets, c.ratio_gets, c.threads, c.clients, c.pipeline),
            (1, 0, 1, 50, 25)
        );
        assert_eq!(
            (c.data_size, c.test_time),
            (DataSize::Fixed(10_000), Some(Duration::from_secs(120)))
        );
        let c = parse(&[
            "--pipeline=20",
            "-c",
            "10",
            "-t",
            "15",
            "-d",
            "100",
            "--key-pattern=G:G",
            "--key-stddev=5000",
            "--ratio=1:1",
            "--distinct-client-seed",
            "--randomize",
            "--key-maximum=100000",
        ])
        .unwrap();
        assert_eq!(
            (c.set_pattern, c.key_stddev, c.key_median),
            (KeyPattern::Gaussian, 5000.0, 50_000.0)
        );
        assert!(c.distinct_client_seed && c.randomize);
        let c = parse(&[
            "-n",
            "allkeys",
            "--key-pattern=P:P",
            "--data-size-range=100-1000",
            "--data-size-pattern=S",
            "-a",
            "u:p",
        ])
        .unwrap();
        assert_eq!(c.requests, Requests::AllKeys);
        assert_eq!(
            c.data_size,
            DataSize::Range {
                min: 100,
                max: 1000,
                spread_over_keys: true
            }
        );
        assert_eq!(c.auth, Some((Some("u".into()), "p".into())));
        let c = parse(&[
            "--command=set __key__ __data__",
            "--command-ratio=2",
            "--command=get __key__",
            "--command-key-pattern=R",
            "--command-key-pattern=G",
        ])
        .unwrap();
        assert_eq!(c.commands.len(), 2);
        assert_eq!(
            (
                c.commands[0].name.as_str(),
                c.commands[0].ratio,
                c.commands[1].ratio
            ),
            ("SET", 2, 1)
        );
        assert_eq!(c.commands[1].key_pattern, KeyPattern::Gaussian);
    }

    #[test]
    fn more_memtier_flags() {
        let c = parse(&[
            "--rate-limiting=100",
            "-t",
            "2",
            "-c",
            "5",
            "--expiry-range=10-20",
            "--out-file=r.txt",
            "--show-config",
        ])
        .unwrap();
        assert_eq!(c.rate, Some(1000.0));
        assert_eq!(c.expiry_range, Some((10, 20)));
        assert_eq!(c.out_file, Some(PathBuf::from("r.txt")));
        assert!(c.show_config);
        assert!(parse(&["--rate=5", "--rate-limiting=5"]).is_err());
        assert!(parse(&["--expiry-range=0-5"]).is_err());
    }

    #[test]
    fn bad_flags_are_rejected() {
        for args in [
            &["--ratio=1"][..],
            &["--key-pattern=X:R"],
            &["--data-size-range=10"],
            &["--protocol=memcache_text"],
            &["-n", "lots"],
            &["--rate=0"],
            &["--print-percentiles=101"],
            &["--key-minimum=5", "--key-maximum=1"],
        ] {
            assert!(parse(args).is_err(), "{args:?} should be rejected");
        }
    }
}
