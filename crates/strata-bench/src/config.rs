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
    #[arg(short = 's', long = "server", default_value = "localhost")]
    server: String,
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

fn parse_pair(text: &str, what: &str) -> Result<(String, String), String> {
    text.split_once(':')
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .ok_or_else(|| format!("invalid {what} '{text}': expected A:B"))
}

impl RunArgs {
    pub fn into_config(self) -> Result<Config, String> {
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
        })
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
