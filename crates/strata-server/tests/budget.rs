//! The RAM budget as a cache operator relies on it: with `appendonly no`
//! values still leave RAM (into the cache store) instead of writes being
//! refused; the budget holds when no command arrives (after CONFIG SET
//! maxmemory, after a restart); a hot set that fits stays in RAM; and INFO
//! says where RAM goes.

mod common;

use std::time::{Duration, Instant};

use common::*;

const MB: u64 = 1 << 20;

fn segment_files(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter(|e| {
                    e.as_ref()
                        .unwrap()
                        .file_name()
                        .to_string_lossy()
                        .starts_with("segment-")
                })
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn without_the_log_a_cache_holds_10x_its_budget_and_starts_empty() {
    let cache = [
        "--maxmemory",
        "8mb",
        "--maxmemory-policy",
        "tiered",
        "--appendonly",
        "no",
        "--save",
        "",
    ];
    let server = TestServer::start_with(&cache);
    let mut con = server.client();
    // 80 MB: ten times the budget, and no write refused.
    const KEYS: u64 = 20_000;
    const SIZE: usize = 4000;
    fill(&mut con, KEYS, 1, SIZE);
    // As eviction counts it: without the store's write buffers.
    let used = info_u64(&mut con, "memory", "used_memory")
        - info_u64(&mut con, "memory", "mem_not_counted_for_evict");
    assert!(
        used <= 8 * MB + 2 * MB,
        "used_memory {used} over the budget"
    );
    let on_disk = info_u64(&mut con, "tiering", "keys_value_on_disk");
    assert!(on_disk > KEYS * 8 / 10, "{on_disk} values on disk");
    assert_eq!(info_u64(&mut con, "persistence", "aof_enabled"), 0);
    assert_eq!(info_u64(&mut con, "stats", "total_error_replies"), 0);
    check_all(&mut con, KEYS, 1, SIZE);
    // Overwrites and deletes of cold values.
    fill(&mut con, 100, 2, SIZE);
    let _: () = redis::cmd("DEL").arg(key(150)).query(&mut con).unwrap();
    let got: Option<Vec<u8>> = redis::cmd("GET").arg(key(50)).query(&mut con).unwrap();
    assert_eq!(got, Some(value(50, 2, SIZE)));
    let got: Option<Vec<u8>> = redis::cmd("GET").arg(key(150)).query(&mut con).unwrap();
    assert_eq!(got, None);
    let data = server.dir.join("data");
    assert_eq!(segment_files(&data.join("log")), 0, "no log is written");
    assert!(segment_files(&data.join("cache")) > 0, "the cache store is");
    // Not replayed: a restart of the pure cache starts empty and its old
    // store is removed.
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &cache, None, READY);
    let mut con = server.client();
    let keys: u64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(keys, 0);
    assert_eq!(segment_files(&server.dir.join("data/cache")), 0);
}

#[test]
fn a_checkpoint_of_a_cache_keeps_its_cold_values_across_a_restart() {
    let args = [
        "--maxmemory",
        "4mb",
        "--maxmemory-policy",
        "tiered",
        "--appendonly",
        "no",
        "--save",
        "3600 1",
    ];
    let server = TestServer::start_with(&args);
    let mut con = server.client();
    const KEYS: u64 = 6_000;
    const SIZE: usize = 4000;
    fill(&mut con, KEYS, 1, SIZE);
    let on_disk = info_u64(&mut con, "tiering", "keys_value_on_disk");
    assert!(on_disk > KEYS / 2, "{on_disk} values on disk");
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    // Written after the checkpoint: lost with the process, as with Redis'
    // save points.
    fill(&mut con, 10, 2, SIZE);
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &args, None, READY);
    let mut con = server.client();
    let keys: u64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(keys, KEYS);
    assert!(info_u64(&mut con, "tiering", "keys_value_on_disk") > KEYS / 2);
    check_all(&mut con, KEYS, 1, SIZE);
    assert!(info_u64(&mut con, "tiering", "disk_reads") > 0);
    // Compaction of the store: overwrite everything twice, then the
    // store shrinks back near the live data.
    fill(&mut con, KEYS, 3, SIZE);
    fill(&mut con, KEYS, 4, SIZE);
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    let store_bytes: u64 = std::fs::read_dir(server.dir.join("data/cache"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(
        store_bytes < 2 * KEYS * SIZE as u64 + 64 * MB,
        "cache store {store_bytes} bytes after compaction"
    );
    check_all(&mut con, KEYS, 4, SIZE);
}

/// Polls until at most `max` values are in RAM (with a deadline), one
/// INFO a second: one command cannot evict thousands of values, so what
/// left RAM meanwhile was the cron's doing. Returns the last count.
fn wait_values_in_ram_at_most(con: &mut redis::Connection, max: u64) -> u64 {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let in_ram = info_u64(con, "tiering", "keys_value_in_ram");
        if in_ram <= max || Instant::now() >= deadline {
            return in_ram;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[test]
fn the_budget_holds_without_commands_after_config_set_and_at_start() {
    let server = TestServer::start_with(&["--maxmemory-policy", "tiered"]);
    let mut con = server.client();
    const KEYS: u64 = 20_000;
    fill(&mut con, KEYS, 1, 1000);
    assert_eq!(info_u64(&mut con, "tiering", "keys_value_in_ram"), KEYS);
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("1mb")
        .query(&mut con)
        .unwrap();
    let in_ram = wait_values_in_ram_at_most(&mut con, KEYS / 100);
    assert!(in_ram <= KEYS / 100, "{in_ram} values still in RAM");
    // A restart under the budget: loading stops keeping values in RAM
    // once the budget is reached, and the cron moves the rest out.
    config_set(&mut con, "maxmemory", "0");
    check_all(&mut con, 2_000, 1, 1000);
    let dir = server.kill9();
    let server = TestServer::spawn(
        dir,
        &["--maxmemory", "1mb", "--maxmemory-policy", "tiered"],
        None,
        READY,
    );
    let mut con = server.client();
    let in_ram = wait_values_in_ram_at_most(&mut con, KEYS / 100);
    assert!(
        in_ram <= KEYS / 100,
        "{in_ram} values in RAM after a restart"
    );
    check_all(&mut con, KEYS, 1, 1000);
}

#[test]
fn a_hot_set_that_fits_stays_in_ram_and_info_says_where_ram_goes() {
    let server = TestServer::start_with(&["--maxmemory", "16mb", "--maxmemory-policy", "tiered"]);
    let mut con = server.client();
    const KEYS: u64 = 16_000;
    const SIZE: usize = 2000;
    // 32 MB of values, twice the budget; the hot set is 2 000 keys
    // (4 MB), a quarter of it.
    fill(&mut con, KEYS, 1, SIZE);
    const HOT: u64 = 2_000;
    for round in 0..6 {
        // A pass over cold keys between passes over the hot ones.
        let cold: Vec<String> = (HOT + round * 500..HOT + round * 500 + 500)
            .map(key)
            .collect();
        let _: Vec<Option<Vec<u8>>> = redis::cmd("MGET").arg(&cold).query(&mut con).unwrap();
        check_all(&mut con, HOT, 1, SIZE);
    }
    let ram0 = info_u64(&mut con, "tiering", "ram_hits");
    let disk0 = info_u64(&mut con, "tiering", "disk_hits");
    for round in 0..3 {
        check_all(&mut con, HOT, 1, SIZE);
        // Writes of cold keys compete for the budget too.
        let mut pipe = redis::pipe();
        for i in HOT + 4000 + round * 200..HOT + 4200 + round * 200 {
            pipe.cmd("SET").arg(key(i)).arg(value(i, 2, SIZE)).ignore();
        }
        pipe.query::<()>(&mut con).unwrap();
    }
    let ram = info_u64(&mut con, "tiering", "ram_hits") - ram0;
    let disk = info_u64(&mut con, "tiering", "disk_hits") - disk0;
    let ratio = ram as f64 / (ram + disk) as f64;
    assert!(ratio >= 0.8, "hot-set RAM hit ratio {ratio:.3}");
    // Where RAM goes: the census covers every shard within a few cron
    // ticks (polled until the index it counts is the 16 000 keys');
    // index + values + buffers + other add up to used_memory.
    let mut info = String::new();
    wait_until("a census of every shard", || {
        info = redis::cmd("INFO").arg("memory").query(&mut con).unwrap();
        info_field(&info, "mem_keys_index").parse::<u64>().unwrap() >= KEYS * 32
    });
    let field = |name: &str| -> u64 { info_field(&info, name).parse().unwrap() };
    let used = field("used_memory");
    let index = field("mem_keys_index");
    let values = field("mem_values_in_ram");
    let parts = index
        + values
        + field("mem_log_buffers")
        + field("mem_clients_normal")
        + field("mem_other");
    assert_eq!(parts, used, "{info}");
    // 16 000 keys of 12 bytes: about 0.6 MB of index (a 27-byte entry
    // head and ~10 bytes of table each); the values in RAM are most of
    // the budget.
    assert!((KEYS * 32..KEYS * 200).contains(&index), "index {index}");
    assert!(values > 4 * MB && values < 16 * MB, "values {values}");
    let rss = field("used_memory_rss");
    assert!(rss < 16 * MB + index + 48 * MB, "RSS {rss}");
}

/// Compacting the cache store between checkpoints must not delete what
/// the checkpoint on disk names: values overwritten since the SAVE still
/// come back from it after a crash.
#[test]
fn cache_store_compaction_keeps_what_the_checkpoint_names() {
    let args = [
        "--maxmemory",
        "16mb",
        "--maxmemory-policy",
        "tiered",
        "--appendonly",
        "no",
        "--save",
        "3600 1000000",
        "--auto-aof-rewrite-min-size",
        "1mb",
    ];
    let server = TestServer::start_with(&args);
    let mut con = server.client();
    const KEYS: u64 = 8_000;
    const SIZE: usize = 4000;
    fill(&mut con, KEYS, 1, SIZE);
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    // Overwrite everything twice: the saved images are dead to the
    // running server, and the store's growth triggers its compaction.
    fill(&mut con, KEYS, 2, SIZE);
    fill(&mut con, KEYS, 3, SIZE);
    let store_bytes = || -> u64 {
        std::fs::read_dir(server.dir.join("data/cache"))
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum()
    };
    // Compaction ran: the store holds less than everything written.
    wait_until("the cache store to be compacted", || {
        store_bytes() < 3 * KEYS * SIZE as u64
    });
    check_all(&mut con, KEYS, 3, SIZE);
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &args, None, READY);
    let mut con = server.client();
    check_all(&mut con, KEYS, 1, SIZE);
}
