//! What each client sends: which operation, which key, which value.
//!
//! Everything here is deterministic given a seed, so the generators can be
//! tested for their statistical properties, and a run is reproducible unless
//! `--randomize` asks otherwise.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

use crate::config::{Config, DataSize, KeyPattern, Requests};

/// SplitMix64: small, fast and good enough for load generation.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [low, high].
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        let span = high - low + 1;
        if span == 0 {
            self.next_u64()
        } else {
            low + self.next_u64() % span
        }
    }

    /// Standard normal, by the Box–Muller transform.
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.next_f64();
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

/// State shared by all clients of a run.
#[derive(Debug, Default)]
pub struct Shared {
    /// Next offset of the shared sequential (S) pattern.
    sequence: AtomicU64,
    /// Requests left in an `-n allkeys` run not split per client.
    remaining: AtomicI64,
}

impl Shared {
    pub fn new(config: &Config) -> Arc<Shared> {
        let range = config.key_max - config.key_min + 1;
        Arc::new(Shared {
            sequence: AtomicU64::new(0),
            remaining: AtomicI64::new(range as i64),
        })
    }
}

/// Picks key indexes for one client with one pattern.
#[derive(Debug)]
pub struct KeyGen {
    pattern: KeyPattern,
    min: u64,
    max: u64,
    median: f64,
    stddev: f64,
    /// This client's slice for P: [slice_min, slice_max], and the next one.
    slice_min: u64,
    slice_max: u64,
    next_in_slice: u64,
    shared: Arc<Shared>,
}

/// This client's slice of the key range for the P pattern, as memtier
/// splits it: range / clients + 1 keys each, the last slice cut at the end.
pub fn parallel_slice(min: u64, max: u64, client: usize, clients: usize) -> Option<(u64, u64)> {
    let size = (max - min + 1) / clients as u64 + 1;
    let start = min + client as u64 * size;
    (start <= max).then(|| (start, (start + size - 1).min(max)))
}

impl KeyGen {
    pub fn new(
        config: &Config,
        pattern: KeyPattern,
        client: usize,
        clients: usize,
        shared: Arc<Shared>,
    ) -> KeyGen {
        let (slice_min, slice_max) =
            parallel_slice(config.key_min, config.key_max, client, clients)
                .unwrap_or((config.key_max, config.key_max));
        KeyGen {
            pattern,
            min: config.key_min,
            max: config.key_max,
            median: config.key_median,
            stddev: config.key_stddev,
            slice_min,
            slice_max,
            next_in_slice: slice_min,
            shared,
        }
    }

    pub fn next(&mut self, rng: &mut Rng) -> u64 {
        match self.pattern {
            KeyPattern::Random => rng.between(self.min, self.max),
            KeyPattern::Sequential => {
                let span = self.max - self.min + 1;
                self.min + self.shared.sequence.fetch_add(1, Relaxed) % span
            }
            KeyPattern::Parallel => {
                let key = self.next_in_slice;
                self.next_in_slice = if key >= self.slice_max {
                    self.slice_min
                } else {
                    key + 1
                };
                key
            }
            KeyPattern::Gaussian => {
                const DRAWS_MAX: usize = 16;
                for _ in 0..DRAWS_MAX {
                    let x = (self.median + rng.normal() * self.stddev).round();
                    if x >= self.min as f64 && x <= self.max as f64 {
                        return x as u64;
                    }
                }
                (self.median.round() as u64).clamp(self.min, self.max)
            }
        }
    }

    /// Keys in this client's P slice (its share of an `allkeys` run).
    pub fn slice_len(&self) -> u64 {
        self.slice_max - self.slice_min + 1
    }
}

/// How many requests a client may still send.
#[derive(Debug)]
pub enum Budget {
    Unlimited,
    PerClient(u64),
    Shared(Arc<Shared>),
}

impl Budget {
    pub fn for_client(
        config: &Config,
        parallel_slice_len: Option<u64>,
        shared: &Arc<Shared>,
    ) -> Budget {
        if config.test_time.is_some() {
            return Budget::Unlimited;
        }
        match (config.requests, parallel_slice_len) {
            (Requests::PerClient(n), _) => Budget::PerClient(n),
            (Requests::AllKeys, Some(slice)) => Budget::PerClient(slice),
            (Requests::AllKeys, None) => Budget::Shared(shared.clone()),
        }
    }

    /// Takes one request from the budget; false when it is spent.
    pub fn take(&mut self) -> bool {
        match self {
            Budget::Unlimited => true,
            Budget::PerClient(n) => {
                let ok = *n > 0;
                *n = n.saturating_sub(1);
                ok
            }
            Budget::Shared(shared) => shared.remaining.fetch_sub(1, Relaxed) > 0,
        }
    }
}

/// Value sizes and bytes.
#[derive(Debug)]
pub struct Values {
    size: DataSize,
    key_min: u64,
    key_max: u64,
    /// Twice the largest value, so random data can be sliced at an offset.
    bytes: Vec<u8>,
}

impl Values {
    pub fn new(config: &Config, rng: &mut Rng) -> Values {
        let largest = match config.data_size {
            DataSize::Fixed(n) => n,
            DataSize::Range { max, .. } => max,
        };
        let bytes = if config.random_data {
            (0..2 * largest + 1)
                .map(|_| b'!' + (rng.next_u64() % 94) as u8)
                .collect()
        } else {
            vec![b'x'; 2 * largest + 1]
        };
        Values {
            size: config.data_size,
            key_min: config.key_min,
            key_max: config.key_max,
            bytes,
        }
    }

    /// The size of the value for `key` (data-size pattern S depends on it).
    pub fn size_for(&self, key: u64, rng: &mut Rng) -> usize {
        match self.size {
            DataSize::Fixed(n) => n,
            DataSize::Range {
                min,
                max,
                spread_over_keys: false,
            } => rng.between(min as u64, max as u64) as usize,
            DataSize::Range {
                min,
                max,
                spread_over_keys: true,
            } => {
                let span = (self.key_max - self.key_min).max(1) as f64;
                let position = (key.clamp(self.key_min, self.key_max) - self.key_min) as f64 / span;
                min + ((max - min) as f64 * position).round() as usize
            }
        }
    }

    pub fn value_for(&self, key: u64, rng: &mut Rng) -> &[u8] {
        let size = self.size_for(key, rng);
        let offset = (rng.next_u64() as usize) % (self.bytes.len() - size);
        &self.bytes[offset..offset + size]
    }
}

/// One entry of the operation cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Set,
    Get,
    /// Index into `Config::commands`.
    Custom(usize),
}

/// The repeating sequence of operations: `--ratio` sets then gets, or each
/// `--command` as many times as its `--command-ratio`.
pub fn op_cycle(config: &Config) -> Vec<Op> {
    if !config.commands.is_empty() {
        return config
            .commands
            .iter()
            .enumerate()
            .flat_map(|(i, c)| std::iter::repeat_n(Op::Custom(i), c.ratio as usize))
            .collect();
    }
    let mut cycle = vec![Op::Set; config.ratio_sets as usize];
    cycle.extend(std::iter::repeat_n(Op::Get, config.ratio_gets as usize));
    cycle
}

/// Seed for client `index` (memtier: constant, per client, or from the clock).
pub fn client_seed(config: &Config, index: usize, run: usize) -> u64 {
    let base = if config.randomize {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    } else {
        0x5eed_5eed
    };
    let distinct = if config.distinct_client_seed {
        index as u64 + 1
    } else {
        0
    };
    base ^ distinct.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ (run as u64).wrapping_mul(0xd1b5_4a32_d192_ed03)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;
    use std::collections::HashSet;

    #[test]
    fn sequential_allkeys_covers_the_range_exactly_once_across_clients() {
        let config = parse(&[
            "-n",
            "allkeys",
            "--key-minimum=1",
            "--key-maximum=1000",
            "--key-pattern=S:S",
            "-c",
            "7",
            "-t",
            "3",
        ])
        .unwrap();
        let shared = Shared::new(&config);
        let mut seen = Vec::new();
        let mut rng = Rng::new(1);
        let clients = 21;
        let mut gens: Vec<(KeyGen, Budget)> = (0..clients)
            .map(|c| {
                (
                    KeyGen::new(&config, KeyPattern::Sequential, c, clients, shared.clone()),
                    Budget::for_client(&config, None, &shared),
                )
            })
            .collect();
        // Clients interleave, as they do when running.
        let mut active = true;
        while active {
            active = false;
            for (keys, budget) in gens.iter_mut() {
                if budget.take() {
                    seen.push(keys.next(&mut rng));
                    active = true;
                }
            }
        }
        seen.sort_unstable();
        assert_eq!(seen, (1..=1000).collect::<Vec<u64>>());
    }

    #[test]
    fn parallel_slices_split_the_range() {
        let config = parse(&[
            "-n",
            "allkeys",
            "--key-minimum=0",
            "--key-maximum=999",
            "--key-pattern=P:P",
            "-c",
            "3",
            "-t",
            "1",
        ])
        .unwrap();
        let shared = Shared::new(&config);
        let mut all = Vec::new();
        for client in 0..3 {
            let mut keys = KeyGen::new(&config, KeyPattern::Parallel, client, 3, shared.clone());
            let mut budget = Budget::for_client(&config, Some(keys.slice_len()), &shared);
            let mut rng = Rng::new(1);
            let mut mine = HashSet::new();
            while budget.take() {
                mine.insert(keys.next(&mut rng));
            }
            assert_eq!(mine.len() as u64, keys.slice_len());
            all.extend(mine);
        }
        all.sort_unstable();
        assert_eq!(all, (0..=999).collect::<Vec<u64>>());
        assert_eq!(parallel_slice(0, 9, 3, 4), Some((9, 9)));
        assert_eq!(parallel_slice(0, 9, 5, 6), None);
    }

    #[test]
    fn gaussian_has_the_requested_median_and_stddev() {
        let config = parse(&[
            "--key-minimum=0",
            "--key-maximum=1000000",
            "--key-median=300000",
            "--key-stddev=50000",
        ])
        .unwrap();
        let mut keys = KeyGen::new(&config, KeyPattern::Gaussian, 0, 1, Shared::new(&config));
        let mut rng = Rng::new(42);
        let mut draws: Vec<f64> = (0..200_000).map(|_| keys.next(&mut rng) as f64).collect();
        draws.sort_by(f64::total_cmp);
        let median = draws[draws.len() / 2];
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        let stddev =
            (draws.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / draws.len() as f64).sqrt();
        assert!((median - 300_000.0).abs() < 1_000.0, "median {median}");
        assert!((stddev - 50_000.0).abs() < 1_000.0, "stddev {stddev}");
    }

    #[test]
    fn uniform_keys_stay_in_range_and_cover_it() {
        let config = parse(&["--key-minimum=10", "--key-maximum=19"]).unwrap();
        let mut keys = KeyGen::new(&config, KeyPattern::Random, 0, 1, Shared::new(&config));
        let mut rng = Rng::new(7);
        let seen: HashSet<u64> = (0..1000).map(|_| keys.next(&mut rng)).collect();
        assert_eq!(seen, (10..=19).collect());
    }

    #[test]
    fn data_size_patterns() {
        let config = parse(&[
            "--data-size-range=100-1000",
            "--data-size-pattern=S",
            "--key-minimum=0",
            "--key-maximum=900",
        ])
        .unwrap();
        let mut rng = Rng::new(3);
        let values = Values::new(&config, &mut rng);
        assert_eq!(values.size_for(0, &mut rng), 100);
        assert_eq!(values.size_for(450, &mut rng), 550);
        assert_eq!(values.size_for(900, &mut rng), 1000);
        let config = parse(&["--data-size-range=100-1000", "--data-size-pattern=R", "-R"]).unwrap();
        let values = Values::new(&config, &mut rng);
        let sizes: Vec<usize> = (0..10_000)
            .map(|_| values.value_for(5, &mut rng).len())
            .collect();
        assert!(sizes.iter().all(|s| (100..=1000).contains(s)));
        let mean = sizes.iter().sum::<usize>() as f64 / sizes.len() as f64;
        assert!((mean - 550.0).abs() < 15.0, "mean size {mean}");
    }

    #[test]
    fn ratio_is_respected_within_one_percent() {
        let config = parse(&["--ratio=1:4"]).unwrap();
        let cycle = op_cycle(&config);
        let ops: Vec<Op> = cycle.iter().copied().cycle().take(100_003).collect();
        let sets = ops.iter().filter(|o| **o == Op::Set).count() as f64;
        assert!((sets / ops.len() as f64 - 0.2).abs() < 0.01);
        let config = parse(&[
            "--command=incr __key__",
            "--command-ratio=3",
            "--command=get __key__",
        ])
        .unwrap();
        assert_eq!(
            op_cycle(&config),
            vec![Op::Custom(0), Op::Custom(0), Op::Custom(0), Op::Custom(1)]
        );
    }
}
