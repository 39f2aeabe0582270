//! INFO: Redis' sections and field names, so `redis-cli info`, exporters
//! and client libraries that parse it work unchanged. Every figure is
//! measured (allocator, /proc, getrusage, counters); fields that describe
//! features Strata does not have yet report what is true today (no
//! persistence in progress, no replicas).

use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;

use strata_engine::keyspace::shards::ShardSet;

use crate::alloc;
use crate::commands::Node;
use crate::util::REDIS_VERSION;

/// How the sections that read every shard get each one: `None` locks them
/// in turn; a script's INFO passes its lock set, which then holds every
/// shard (`Keyspace::visit`): locking one again would deadlock.
pub type Held<'a, 'k> = Option<&'a mut ShardSet<'k>>;

/// Every section, in Redis' order. `INFO` without arguments (or `default`)
/// shows all but commandstats, as Redis does.
pub const ALL_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "tiering",
    "stats",
    "replication",
    "cpu",
    "modules",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
];

pub fn render(server: &Node, requested: &[String], now_ms: u64, held: &mut Held) -> String {
    let sections: Vec<&str> = if requested.is_empty() || requested.iter().any(|s| s == "default") {
        ALL_SECTIONS
            .iter()
            .copied()
            .filter(|s| *s != "commandstats" && *s != "latencystats")
            .collect()
    } else if requested.iter().any(|s| s == "all" || s == "everything") {
        ALL_SECTIONS.to_vec()
    } else {
        ALL_SECTIONS
            .iter()
            .copied()
            .filter(|s| requested.iter().any(|r| r == s))
            .collect()
    };
    let mut out = String::new();
    for (i, section) in sections.iter().enumerate() {
        if i > 0 {
            out.push_str("\r\n");
        }
        let title = {
            let mut t = section.to_string();
            t[..1].make_ascii_uppercase();
            match *section {
                "commandstats" => "Commandstats".to_owned(),
                "errorstats" => "Errorstats".to_owned(),
                "latencystats" => "Latencystats".to_owned(),
                "cpu" => "CPU".to_owned(),
                _ => t,
            }
        };
        let _ = write!(out, "# {title}\r\n");
        match *section {
            "server" => server_section(server, &mut out, now_ms),
            "clients" => clients_section(server, &mut out),
            "memory" => memory_section(server, &mut out, held),
            "persistence" => persistence_section(server, &mut out),
            "tiering" => tiering_section(server, &mut out, held),
            "stats" => stats_section(server, &mut out, held),
            "replication" => replication_section(server, &mut out),
            "cpu" => cpu_section(&mut out),
            "commandstats" => commandstats_section(server, &mut out),
            "errorstats" => errorstats_section(server, &mut out),
            "latencystats" => latencystats_section(server, &mut out),
            "keyspace" => keyspace_section(server, &mut out, now_ms, held),
            // Modules cannot be loaded (`loadmodule` stops start-up): an
            // empty section, as Redis' without modules.
            "modules" => {}
            "cluster" => {
                let enabled = u8::from(server.cluster.enabled());
                out.push_str(&format!("cluster_enabled:{enabled}\r\n"));
            }
            _ => {}
        }
    }
    out
}

macro_rules! field {
    ($out:expr, $name:expr, $value:expr) => {
        let _ = write!($out, "{}:{}\r\n", $name, $value);
    };
}

fn server_section(server: &Node, out: &mut String, now_ms: u64) {
    let config = server.config.get();
    let uptime_s = server.started.elapsed().as_secs();
    field!(out, "redis_version", REDIS_VERSION);
    field!(out, "strata_version", env!("CARGO_PKG_VERSION"));
    field!(out, "redis_git_sha1", "00000000");
    field!(out, "redis_git_dirty", 0);
    let mode = match server.cluster.enabled() {
        true => "cluster",
        false => "standalone",
    };
    field!(out, "redis_mode", mode);
    field!(out, "os", std::env::consts::OS);
    field!(out, "arch_bits", usize::BITS);
    field!(out, "multiplexing_api", "epoll");
    field!(out, "atomicvar_api", "rust-std-atomics");
    field!(out, "process_id", std::process::id());
    field!(out, "run_id", server.run_id);
    field!(
        out,
        "process_supervised",
        process_supervised(&config.supervised)
    );
    field!(out, "tcp_port", server.port());
    field!(out, "server_time_usec", now_ms * 1000);
    field!(out, "uptime_in_seconds", uptime_s);
    field!(out, "uptime_in_days", uptime_s / 86_400);
    field!(out, "hz", config.hz);
    field!(out, "configured_hz", config.hz);
    field!(out, "lru_clock", (now_ms / 1000) & ((1 << 24) - 1));
    field!(out, "monotonic_clock", "POSIX clock_gettime");
    field!(out, "executable", server.executable);
    field!(
        out,
        "config_file",
        config
            .config_file
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    );
    field!(out, "io_threads_active", 0);
    field!(out, "threads", config.threads);
}

/// INFO's `process_supervised`: `systemd` when systemd supervises the
/// process (`supervise.rs` sends it notifications), else `no` (upstart's
/// handshake is not supported).
fn process_supervised(setting: &str) -> &'static str {
    let socket = std::env::var_os("NOTIFY_SOCKET").is_some_and(|s| !s.is_empty());
    match setting {
        "systemd" | "auto" if socket => "systemd",
        _ => "no",
    }
}

fn clients_section(server: &Node, out: &mut String) {
    let config = server.config.get();
    let clients = server.clients.snapshot();
    let max_input = clients
        .iter()
        .map(|c| c.query_buffer_bytes.load(Relaxed))
        .max()
        .unwrap_or(0);
    let max_output = clients
        .iter()
        .map(|c| c.output_buffer_bytes.load(Relaxed))
        .max()
        .unwrap_or(0);
    field!(out, "connected_clients", clients.len());
    field!(out, "cluster_connections", 0);
    field!(out, "maxclients", config.maxclients);
    field!(out, "client_recent_max_input_buffer", max_input);
    field!(out, "client_recent_max_output_buffer", max_output);
    field!(
        out,
        "blocked_clients",
        server.blocking.blocked_clients() + server.paused_clients.load(Relaxed)
    );
    let (blocking_keys, on_nokey) = server.blocking.blocking_keys();
    field!(out, "total_blocking_keys", blocking_keys);
    field!(out, "total_blocking_keys_on_nokey", on_nokey);
    field!(out, "tracking_clients", server.tracking.counts().clients);
    field!(out, "clients_in_timeout_table", 0);
}

/// Redis' human-readable byte counts: `1.50M`, `512B`.
fn human(bytes: u64) -> String {
    let units = [("G", 1u64 << 30), ("M", 1 << 20), ("K", 1 << 10)];
    for (suffix, size) in units {
        if bytes >= size {
            return format!("{:.2}{suffix}", bytes as f64 / size as f64);
        }
    }
    format!("{bytes}B")
}

fn total_system_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

/// Where `used_memory` goes (README "Where RAM goes").
struct Breakdown {
    index: u64,
    values: u64,
    log_buffers: u64,
    client_buffers: u64,
    /// Replicas' connections (`mem_clients_slaves`) and the replication
    /// history in RAM (`mem_replication_backlog`).
    replica_buffers: u64,
    backlog: u64,
    /// Allocator rounding, tables' spare slots, threads' scratch space…
    other: u64,
    /// RSS beyond `used_memory`: the allocator's free pages, code, stacks.
    rss_overhead: u64,
}

impl Breakdown {
    /// (INFO memory name, INFO tiering name, bytes) of every part.
    fn fields(&self) -> [(&'static str, &'static str, u64); 6] {
        [
            ("mem_keys_index", "ram_index_bytes", self.index),
            ("mem_values_in_ram", "ram_values_bytes", self.values),
            ("mem_log_buffers", "ram_log_buffers_bytes", self.log_buffers),
            (
                "mem_clients_normal",
                "ram_client_buffers_bytes",
                self.client_buffers,
            ),
            ("mem_other", "ram_other_bytes", self.other),
            ("mem_rss_overhead", "rss_overhead_bytes", self.rss_overhead),
        ]
    }
}

fn breakdown(server: &Node, used: u64, rss: u64, held: &mut Held) -> Breakdown {
    let census = server.keyspace.memory_census_in(held);
    let log_buffers = server.keyspace.log().map_or(0, |log| log.buffer_bytes());
    let (mut client_buffers, mut replica_buffers) = (0, 0);
    for client in server.clients.snapshot().iter() {
        let bytes = (client.query_buffer_bytes.load(Relaxed)
            + client.output_buffer_bytes.load(Relaxed)) as u64;
        match client.role.load(Relaxed) {
            crate::net::client::ROLE_REPLICA => replica_buffers += bytes,
            _ => client_buffers += bytes,
        }
    }
    let backlog = server.replication.backlog.ram_bytes();
    Breakdown {
        index: census.index_bytes,
        values: census.value_bytes,
        log_buffers,
        client_buffers,
        replica_buffers,
        backlog,
        other: used.saturating_sub(
            census.index_bytes
                + census.value_bytes
                + log_buffers
                + client_buffers
                + replica_buffers
                + backlog,
        ),
        rss_overhead: rss.saturating_sub(used),
    }
}

fn memory_section(server: &Node, out: &mut String, held: &mut Held) {
    let config = server.config.get();
    let used = alloc::used_bytes();
    let rss = alloc::rss_bytes();
    let peak = alloc::peak_bytes();
    let system = total_system_memory();
    field!(out, "used_memory", used);
    field!(out, "used_memory_human", human(used));
    field!(out, "used_memory_rss", rss);
    field!(out, "used_memory_rss_human", human(rss));
    field!(out, "used_memory_peak", peak);
    field!(out, "used_memory_peak_human", human(peak));
    field!(
        out,
        "used_memory_peak_perc",
        format!("{:.2}%", used as f64 * 100.0 / peak.max(1) as f64)
    );
    field!(out, "total_system_memory", system);
    field!(out, "total_system_memory_human", human(system));
    field!(out, "maxmemory", config.maxmemory);
    field!(out, "maxmemory_human", human(config.maxmemory));
    field!(out, "maxmemory_policy", config.maxmemory_policy.name());
    field!(
        out,
        "mem_not_counted_for_evict",
        crate::data::tiering::not_counted_for_evict(&server.keyspace)
    );
    // The allocator's own figures, under jemalloc's names as Redis shows
    // them: mimalloc's committed memory stands for jemalloc's active and
    // resident pages (on Linux mimalloc estimates its resident set so).
    let allocated = used;
    let active = alloc::committed_bytes().max(allocated);
    let resident = active;
    let ratio = |a: u64, b: u64| format!("{:.2}", a as f64 / b.max(1) as f64);
    field!(out, "allocator_allocated", allocated);
    field!(out, "allocator_active", active);
    field!(out, "allocator_resident", resident);
    field!(out, "allocator_frag_ratio", ratio(active, allocated));
    field!(out, "allocator_frag_bytes", active - allocated);
    field!(out, "allocator_rss_ratio", ratio(resident, active));
    field!(out, "allocator_rss_bytes", resident - active);
    field!(out, "rss_overhead_ratio", ratio(rss, resident));
    // As INFO tiering's field of that name: RSS beyond used_memory (Redis:
    // beyond the allocator's resident bytes), one meaning for one name.
    field!(out, "rss_overhead_bytes", rss.saturating_sub(used));
    field!(
        out,
        "mem_fragmentation_ratio",
        format!("{:.2}", rss as f64 / used.max(1) as f64)
    );
    field!(out, "mem_fragmentation_bytes", rss as i64 - used as i64);
    field!(out, "mem_allocator", "mimalloc");
    field!(out, "active_defrag_running", 0);
    field!(
        out,
        "lazyfree_pending_objects",
        strata_engine::keyspace::lazyfree::pending()
    );
    field!(
        out,
        "lazyfreed_objects",
        strata_engine::keyspace::lazyfree::freed()
    );
    let (scripts, script_bytes) = server.scripts.cached();
    let libraries = server.functions.snapshot();
    let library_bytes: usize = libraries.libraries.values().map(|l| l.code.len()).sum();
    // One VM per network thread holds scripts and functions together:
    // all of it is counted as the scripts' VM, none as the functions'.
    let vm_bytes = crate::scripting::vms_bytes();
    field!(out, "used_memory_lua", vm_bytes);
    field!(out, "used_memory_vm_eval", vm_bytes);
    field!(out, "used_memory_lua_human", human(vm_bytes as u64));
    field!(out, "used_memory_scripts_eval", script_bytes);
    field!(out, "number_of_cached_scripts", scripts);
    field!(out, "number_of_functions", libraries.function_count());
    field!(out, "number_of_libraries", libraries.libraries.len());
    field!(out, "used_memory_vm_functions", 0);
    field!(out, "used_memory_vm_total", vm_bytes);
    field!(out, "used_memory_vm_total_human", human(vm_bytes as u64));
    field!(out, "used_memory_functions", library_bytes);
    field!(out, "used_memory_scripts", script_bytes + library_bytes);
    field!(
        out,
        "used_memory_scripts_human",
        human((script_bytes + library_bytes) as u64)
    );
    let figures = MemoryFigures::measure(server, held);
    field!(out, "used_memory_startup", figures.startup);
    field!(out, "used_memory_dataset", figures.dataset);
    field!(
        out,
        "used_memory_dataset_perc",
        format!("{:.2}%", figures.dataset_percentage())
    );
    field!(out, "used_memory_overhead", figures.overhead());
    let parts = breakdown(server, used, rss, held);
    for (name, _, bytes) in parts.fields() {
        field!(out, name, bytes);
    }
    // Redis' names for the same parts: the log's buffers stand where the
    // AOF buffer does; no cluster bus.
    field!(out, "mem_aof_buffer", parts.log_buffers);
    field!(out, "mem_clients_slaves", parts.replica_buffers);
    field!(out, "mem_replication_backlog", parts.backlog);
    field!(
        out,
        "mem_total_replication_buffers",
        parts.backlog + parts.replica_buffers
    );
    field!(out, "mem_cluster_links", 0);
}

/// The figures INFO memory and MEMORY STATS / DOCTOR share.
pub struct MemoryFigures {
    pub used: u64,
    pub peak: u64,
    pub rss: u64,
    pub startup: u64,
    /// Keys and the values in RAM (the engine's census).
    pub dataset: u64,
    pub keys: u64,
    pub client_buffers: u64,
    pub log_buffers: u64,
    pub script_bytes: u64,
    pub library_bytes: u64,
    pub values_on_disk: u64,
}

impl MemoryFigures {
    pub fn measure(server: &Node, held: &mut Held) -> MemoryFigures {
        let used = alloc::used_bytes();
        let rss = alloc::rss_bytes();
        let parts = breakdown(server, used, rss, held);
        let libraries = server.functions.snapshot();
        MemoryFigures {
            used,
            peak: alloc::peak_bytes(),
            rss,
            startup: server.startup_memory.min(used),
            dataset: parts.index + parts.values,
            keys: server.keyspace.total_keys_in(held),
            client_buffers: parts.client_buffers,
            log_buffers: parts.log_buffers,
            script_bytes: server.scripts.cached().1 as u64,
            library_bytes: libraries
                .libraries
                .values()
                .map(|l| l.code.len() as u64)
                .sum(),
            values_on_disk: server.keyspace.tier().cold_keys(),
        }
    }

    /// What is not the dataset: buffers, caches, tables' spare room, the
    /// process' own structures.
    pub fn overhead(&self) -> u64 {
        self.used.saturating_sub(self.dataset)
    }

    pub fn dataset_percentage(&self) -> f64 {
        let net = self.used.saturating_sub(self.startup).max(1);
        self.dataset as f64 * 100.0 / net as f64
    }
}

/// INFO tiering (Strata): the RAM budget and where values are.
fn tiering_section(server: &Node, out: &mut String, held: &mut Held) {
    tiering_ram(server, out, held);
    tiering_traffic(server, out);
    tiering_disk(server, out, held);
}

/// INFO tiering's first part: the budget, RAM use, where values are.
fn tiering_ram(server: &Node, out: &mut String, held: &mut Held) {
    let config = server.config.get();
    let keyspace = &server.keyspace;
    let tier = keyspace.tier();
    let used = alloc::used_bytes();
    let log = keyspace.log();
    let enabled = log.is_some()
        && config.maxmemory > 0
        && config.maxmemory_policy == crate::config::MaxmemoryPolicy::Tiered;
    field!(out, "tiering_enabled", enabled as u8);
    field!(out, "maxmemory", config.maxmemory);
    field!(out, "maxmemory_human", human(config.maxmemory));
    field!(out, "maxmemory_policy", config.maxmemory_policy.name());
    field!(out, "ram_used_bytes", used);
    field!(out, "ram_used_human", human(used));
    for (_, name, bytes) in breakdown(server, used, alloc::rss_bytes(), held).fields() {
        field!(out, name, bytes);
    }
    if config.maxmemory > 0 {
        field!(
            out,
            "ram_used_perc",
            format!("{:.2}%", used as f64 * 100.0 / config.maxmemory as f64)
        );
    }
    let keys = keyspace.total_keys_in(held);
    let cold = tier.cold_keys().min(keys);
    field!(out, "keys", keys);
    field!(out, "keys_value_in_ram", keys - cold);
    field!(out, "keys_value_on_disk", cold);
    let (ram_hits, disk_hits) = keyspace.value_hits_in(held);
    field!(out, "ram_hits", ram_hits);
    field!(out, "disk_hits", disk_hits);
    field!(
        out,
        "ram_hit_ratio",
        format!(
            "{:.4}",
            ram_hits as f64 / (ram_hits + disk_hits).max(1) as f64
        )
    );
}

/// INFO tiering's reads, promotions and evictions.
fn tiering_traffic(server: &Node, out: &mut String) {
    let stats = &server.keyspace.tier().stats;
    let rates = server.tiering.rates();
    field!(out, "disk_reads", stats.disk_reads.load(Relaxed));
    field!(
        out,
        "disk_reads_per_sec",
        format!("{:.0}", rates.disk_reads)
    );
    field!(out, "disk_read_bytes", stats.disk_read_bytes.load(Relaxed));
    field!(out, "disk_reads_queued", server.tiering.readers.queued());
    field!(out, "disk_read_engine", server.tiering.readers.engine);
    field!(out, "sync_reads", stats.sync_reads.load(Relaxed));
    field!(out, "read_errors", stats.read_errors.load(Relaxed));
    field!(out, "promotions", stats.promotions.load(Relaxed));
    field!(
        out,
        "promotions_per_sec",
        format!("{:.0}", rates.promotions)
    );
    field!(out, "evictions", stats.evictions.load(Relaxed));
    field!(out, "evictions_per_sec", format!("{:.0}", rates.evictions));
    field!(out, "eviction_writes", stats.eviction_writes.load(Relaxed));
    field!(
        out,
        "oom_rejections",
        server.tiering.oom_rejections.load(Relaxed)
    );
    field!(
        out,
        "over_budget_buffers",
        server.tiering.over_budget_buffers.load(Relaxed)
    );
    field!(
        out,
        "eviction_waits",
        server.tiering.eviction_waits.load(Relaxed)
    );
    field!(
        out,
        "eviction_wait_us",
        server.tiering.eviction_wait_us.load(Relaxed)
    );
}

/// INFO tiering's disk use and compaction.
fn tiering_disk(server: &Node, out: &mut String, held: &mut Held) {
    let config = server.config.get();
    let keyspace = &server.keyspace;
    let tier = keyspace.tier();
    let stats = &tier.stats;
    let segments = keyspace.log().map_or(0, |log| log.segments().len());
    let (log_bytes, live_estimate) = keyspace.log_live_bytes_in(held);
    let checkpoint_bytes = server.persistence.last_checkpoint_bytes.load(Relaxed);
    field!(out, "maxdisk", config.maxdisk);
    field!(out, "maxdisk_human", human(config.maxdisk));
    field!(out, "disk_used_bytes", log_bytes + checkpoint_bytes);
    field!(out, "disk_used_human", human(log_bytes + checkpoint_bytes));
    field!(out, "disk_log_bytes", log_bytes);
    field!(out, "disk_log_segments", segments);
    field!(out, "disk_log_live_bytes", live_estimate);
    field!(
        out,
        "disk_log_live_ratio",
        format!("{:.4}", live_estimate as f64 / log_bytes.max(1) as f64)
    );
    field!(out, "disk_checkpoint_bytes", checkpoint_bytes);
    field!(
        out,
        "compaction_records_moved",
        stats.compaction_moves.load(Relaxed)
    );
    field!(
        out,
        "compaction_bytes_read",
        stats.compaction_bytes_read.load(Relaxed)
    );
    field!(
        out,
        "compaction_errors",
        stats.compaction_errors.load(Relaxed)
    );
    if let Some(error) = tier.compaction_error.read().as_deref() {
        field!(out, "compaction_last_error", error);
    }
}

fn persistence_section(server: &Node, out: &mut String) {
    loading_fields(server, out);
    save_and_rewrite_fields(server, out);
    let sharding = match server.keyspace.sharding() {
        strata_engine::keyspace::shards::Sharding::Slots => "slot",
        strata_engine::keyspace::shards::Sharding::Hash => "hash",
    };
    field!(out, "strata_key_sharding", sharding);
    if let Some(log) = server.keyspace.change_log() {
        log_fields(server, log, out);
    }
    let p = &server.persistence;
    field!(
        out,
        "strata_checkpoint_lsn",
        p.last_checkpoint_lsn.load(Relaxed)
    );
    field!(
        out,
        "strata_checkpoint_keys",
        p.last_checkpoint_keys.load(Relaxed)
    );
}

/// INFO persistence's loading fields (and Redis' fork fields, all 0: a
/// checkpoint never forks).
fn loading_fields(server: &Node, out: &mut String) {
    let p = &server.persistence;
    let loading = p.is_loading();
    field!(out, "loading", loading as u8);
    field!(out, "async_loading", 0);
    field!(out, "current_cow_peak", 0);
    field!(out, "current_cow_size", 0);
    field!(out, "current_cow_size_age", 0);
    field!(out, "current_fork_perc", "0.00");
    field!(out, "current_save_keys_processed", 0);
    field!(out, "current_save_keys_total", 0);
    if loading {
        let progress = *p.loading_progress.lock();
        field!(out, "loading_start_time", p.loading_started_s.load(Relaxed));
        field!(out, "loading_total_bytes", progress.bytes_total);
        field!(out, "loading_rdb_used_mem", 0);
        field!(out, "loading_loaded_bytes", progress.bytes_done);
        let percent = if progress.bytes_total == 0 {
            0.0
        } else {
            progress.bytes_done as f64 * 100.0 / progress.bytes_total as f64
        };
        field!(out, "loading_loaded_perc", format!("{percent:.2}"));
        field!(out, "loading_eta_seconds", 1);
    }
}

/// INFO persistence's `rdb_*` and `aof_*` fields: checkpoints answer for
/// both saves and rewrites.
fn save_and_rewrite_fields(server: &Node, out: &mut String) {
    let p = &server.persistence;
    let changes = server
        .total_changes()
        .saturating_sub(p.changes_at_last_save.load(Relaxed));
    let ok = |flag: bool| if flag { "ok" } else { "err" };
    let running_s = match p.checkpoint_started_ms.load(Relaxed) {
        0 => -1,
        started => (crate::util::now_ms().saturating_sub(started) / 1000) as i64,
    };
    let last_duration_s = match p.saves.load(Relaxed) {
        0 => -1,
        _ => (p.last_duration_ms.load(Relaxed) / 1000) as i64,
    };
    field!(out, "rdb_changes_since_last_save", changes);
    field!(
        out,
        "rdb_bgsave_in_progress",
        p.checkpoint_in_progress() as u8
    );
    field!(out, "rdb_last_save_time", p.last_save_s.load(Relaxed));
    field!(
        out,
        "rdb_last_bgsave_status",
        ok(p.last_save_ok.load(Relaxed))
    );
    field!(out, "rdb_last_bgsave_time_sec", last_duration_s);
    field!(out, "rdb_current_bgsave_time_sec", running_s);
    field!(out, "rdb_saves", p.saves.load(Relaxed));
    field!(out, "rdb_last_cow_size", 0);
    field!(out, "rdb_last_load_keys_expired", 0);
    field!(
        out,
        "rdb_last_load_keys_loaded",
        p.keys_loaded.load(Relaxed)
    );
    let log = server.keyspace.change_log();
    field!(
        out,
        "aof_enabled",
        (log.is_some() && server.config.get().appendonly) as u8
    );
    field!(
        out,
        "aof_rewrite_in_progress",
        p.checkpoint_in_progress() as u8
    );
    field!(out, "aof_rewrite_scheduled", 0);
    field!(out, "aof_last_rewrite_time_sec", last_duration_s);
    field!(out, "aof_current_rewrite_time_sec", running_s);
    field!(
        out,
        "aof_last_bgrewrite_status",
        ok(p.last_rewrite_ok.load(Relaxed))
    );
    field!(out, "aof_rewrites", p.rewrites.load(Relaxed));
    field!(
        out,
        "aof_rewrites_consecutive_failures",
        p.rewrite_consecutive_failures.load(Relaxed)
    );
    let write_error = log.and_then(|log| log.write_error());
    field!(out, "aof_last_write_status", ok(write_error.is_none()));
    field!(out, "aof_last_cow_size", 0);
    field!(out, "module_fork_in_progress", 0);
    field!(out, "module_fork_last_cow_size", 0);
}

/// INFO persistence's fields of the running log.
fn log_fields(server: &Node, log: &strata_engine::storage::log::Log, out: &mut String) {
    let p = &server.persistence;
    let write_error = log.write_error();
    field!(out, "aof_current_size", log.disk_bytes());
    field!(out, "aof_base_size", p.last_checkpoint_bytes.load(Relaxed));
    field!(out, "aof_pending_rewrite", 0);
    field!(out, "aof_buffer_length", log.pending_bytes());
    field!(out, "aof_pending_bio_fsync", 0);
    field!(out, "aof_delayed_fsync", 0);
    field!(out, "strata_log_fsync_policy", log.fsync_policy().name());
    field!(out, "strata_log_segments", log.segments().len());
    field!(out, "strata_log_next_lsn", log.next_lsn());
    field!(out, "strata_log_written_lsn", log.written_lsn());
    field!(out, "strata_log_synced_lsn", log.synced_lsn());
    let stats = &log.stats;
    field!(out, "strata_log_writes", stats.writes.load(Relaxed));
    field!(
        out,
        "strata_log_bytes_written",
        stats.bytes_written.load(Relaxed)
    );
    field!(out, "strata_log_fsyncs", stats.fsyncs.load(Relaxed));
    field!(
        out,
        "strata_log_last_fsync_us",
        stats.last_fsync_us.load(Relaxed)
    );
    field!(
        out,
        "strata_log_write_errors",
        stats.write_errors.load(Relaxed)
    );
    field!(
        out,
        "strata_log_last_error",
        write_error.unwrap_or_default()
    );
}

fn stats_section(server: &Node, out: &mut String, held: &mut Held) {
    let sum = |f: fn(&crate::observe::stats::ThreadStats) -> u64| {
        server.thread_stats.iter().map(|t| f(t)).sum::<u64>()
    };
    field!(
        out,
        "total_connections_received",
        server.stats.connections_received.load(Relaxed)
    );
    field!(out, "total_commands_processed", server.total_commands());
    field!(
        out,
        "instantaneous_ops_per_sec",
        server.stats.instantaneous_ops_per_sec()
    );
    let (net_in, net_out) = server.total_net_bytes();
    field!(out, "total_net_input_bytes", net_in);
    field!(out, "total_net_output_bytes", net_out);
    let (input_kbps, output_kbps) = server.stats.instantaneous_kbps();
    field!(out, "instantaneous_input_kbps", format!("{input_kbps:.2}"));
    field!(
        out,
        "instantaneous_output_kbps",
        format!("{output_kbps:.2}")
    );
    field!(
        out,
        "rejected_connections",
        server.stats.rejected_connections.load(Relaxed)
    );
    server.replication.stats(out);
    field!(
        out,
        "expired_keys",
        server
            .keyspace
            .expired_keys_in(held)
            .saturating_sub(server.stats.expired_keys_base.load(Relaxed))
    );
    field!(
        out,
        "evicted_keys",
        server.tiering.evicted_keys.load(Relaxed)
    );
    field!(
        out,
        "evicted_clients",
        server.client_memory.evicted.load(Relaxed)
    );
    field!(out, "evicted_scripts", server.scripts.evicted.load(Relaxed));
    field!(out, "keyspace_hits", sum(|t| t.keyspace_hits.load(Relaxed)));
    field!(
        out,
        "keyspace_misses",
        sum(|t| t.keyspace_misses.load(Relaxed))
    );
    field!(
        out,
        "pubsub_channels",
        server.pubsub.channels(false, None).len()
    );
    field!(out, "pubsub_patterns", server.pubsub.pattern_count());
    field!(
        out,
        "pubsubshard_channels",
        server.pubsub.channels(true, None).len()
    );
    // MIGRATE opens a connection per call and keeps none.
    field!(out, "migrate_cached_sockets", 0);
    never_happens(out);
    let tracking = server.tracking.counts();
    field!(out, "tracking_total_keys", tracking.keys);
    field!(out, "tracking_total_items", tracking.items);
    field!(out, "tracking_total_prefixes", tracking.prefixes);
    field!(
        out,
        "total_error_replies",
        server.stats.error_replies.load(Relaxed)
    );
    field!(
        out,
        "total_reads_processed",
        sum(|t| t.reads_processed.load(Relaxed))
    );
    field!(
        out,
        "total_writes_processed",
        sum(|t| t.writes_processed.load(Relaxed))
    );
    acl_denials(server, out);
}

fn acl_denials(server: &Node, out: &mut String) {
    use crate::acl::log::Reason;
    for (name, reason) in [
        ("acl_access_denied_auth", Reason::Auth),
        ("acl_access_denied_cmd", Reason::Command),
        ("acl_access_denied_key", Reason::Key),
        ("acl_access_denied_channel", Reason::Channel),
    ] {
        field!(out, name, server.acl.log.denied(reason));
    }
}

/// Strata never forks and has no defragmenter and no I/O threads in
/// Redis' sense (its network threads run commands): INFO stats shows
/// Redis' figures for a server that did none of that.
fn never_happens(out: &mut String) {
    for name in [
        "total_forks",
        "latest_fork_usec",
        "active_defrag_hits",
        "active_defrag_misses",
        "active_defrag_key_hits",
        "active_defrag_key_misses",
        "total_active_defrag_time",
        "current_active_defrag_time",
        "io_threaded_reads_processed",
        "io_threaded_writes_processed",
    ] {
        field!(out, name, 0);
    }
}

fn replication_section(server: &Node, out: &mut String) {
    let read_only = server.config.get().replication.read_only;
    server
        .replication
        .info(out, crate::util::now_ms(), read_only);
}

fn cpu_section(out: &mut String) {
    // SAFETY: getrusage only writes into the struct we pass.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    field!(
        out,
        "used_cpu_sys",
        format!("{:.6}", seconds(usage.ru_stime))
    );
    field!(
        out,
        "used_cpu_user",
        format!("{:.6}", seconds(usage.ru_utime))
    );
    field!(out, "used_cpu_sys_children", "0.000000");
    field!(out, "used_cpu_user_children", "0.000000");
}

fn commandstats_section(server: &Node, out: &mut String) {
    for (id, name) in server.commands.full_names.iter().enumerate() {
        let total = |f: fn(&crate::observe::stats::CommandCounters) -> u64| {
            server
                .thread_stats
                .iter()
                .map(|t| f(&t.commands[id]))
                .sum::<u64>()
        };
        let calls = total(|c| c.calls.load(Relaxed));
        let rejected = total(|c| c.rejected.load(Relaxed));
        if calls == 0 && rejected == 0 {
            continue;
        }
        let usec = total(|c| c.usec.load(Relaxed));
        let failed = total(|c| c.failed.load(Relaxed));
        let per_call = if calls == 0 {
            0.0
        } else {
            usec as f64 / calls as f64
        };
        let _ = write!(
            out,
            "cmdstat_{name}:calls={calls},usec={usec},usec_per_call={per_call:.2},rejected_calls={rejected},failed_calls={failed}\r\n"
        );
    }
}

/// Command `id`'s latency histogram summed over the network threads.
pub fn command_histogram(server: &Node, id: usize) -> crate::observe::histogram::Counts {
    let mut counts = [0; crate::observe::histogram::BUCKETS];
    for thread in &server.thread_stats {
        if let Some(histogram) = thread.commands[id].histogram.get() {
            histogram.add_to(&mut counts);
        }
    }
    counts
}

/// Per command called since the last reset, the latency percentiles of
/// `latency-tracking-info-percentiles`, in µs (Redis' format).
fn latencystats_section(server: &Node, out: &mut String) {
    let percentiles = server
        .config
        .get()
        .latency_tracking_info_percentiles
        .clone();
    for (id, name) in server.commands.full_names.iter().enumerate() {
        let counts = command_histogram(server, id);
        if crate::observe::histogram::total(&counts) == 0 {
            continue;
        }
        let values: Vec<String> = percentiles
            .iter()
            .map(|p| {
                let micros = crate::observe::histogram::percentile_ns(&counts, *p) as f64 / 1000.0;
                format!("p{}={micros:.3}", crate::config::format_percentile(*p))
            })
            .collect();
        let _ = write!(
            out,
            "latency_percentiles_usec_{name}:{}\r\n",
            values.join(",")
        );
    }
}

fn errorstats_section(server: &Node, out: &mut String) {
    for (code, count) in server.stats.errors_by_code.lock().iter() {
        let _ = write!(out, "errorstat_{code}:count={count}\r\n");
    }
}

fn keyspace_section(server: &Node, out: &mut String, now_ms: u64, held: &mut Held) {
    for (db, stats) in server
        .keyspace
        .db_stats_in(held, now_ms)
        .into_iter()
        .enumerate()
    {
        if stats.keys > 0 {
            let _ = write!(
                out,
                "db{db}:keys={},expires={},avg_ttl={}\r\n",
                stats.keys, stats.expires, stats.avg_ttl_ms
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::human;

    #[test]
    fn human_sizes() {
        assert_eq!(human(512), "512B");
        assert_eq!(human(1536), "1.50K");
        assert_eq!(human(3 << 20), "3.00M");
    }
}
