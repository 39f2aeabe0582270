//! Access frequency under the LFU policies: OBJECT FREQ counts
//! logarithmically, RESTORE FREQ sets it, `redis-cli --hotkeys` finds the
//! hot keys, and `allkeys-lfu` eviction keeps the keys used most.

mod common;

use common::*;

#[test]
fn object_freq_counts_under_lfu_only() {
    let server = TestServer::start();
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["SET", "k", "v"]), ok());
    let refused = raw.cmd(&["OBJECT", "FREQ", "k"]);
    assert!(
        refused
            .as_text()
            .starts_with("ERR An LFU maxmemory policy is not selected")
    );
    assert_eq!(
        raw.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"]),
        ok()
    );
    assert!(
        raw.cmd(&["OBJECT", "IDLETIME", "k"])
            .as_text()
            .starts_with("ERR An LFU maxmemory policy is selected, idle time not tracked")
    );
    assert_eq!(raw.cmd(&["SET", "new", "v"]), ok());
    assert_eq!(
        raw.cmd(&["OBJECT", "FREQ", "new"]),
        i(5),
        "a new key starts at 5"
    );
    for _ in 0..1000 {
        raw.send(&["GET", "new"]);
    }
    for _ in 0..1000 {
        raw.read();
    }
    // Logarithmic with the default factor 10: Redis' table gives 18 for
    // 1000 hits.
    let freq = raw.cmd(&["OBJECT", "FREQ", "new"]).as_int();
    // The increments are random: 20 runs gave 15 to 24, one in the suite 27.
    assert!((12..=32).contains(&freq), "freq after 1000 hits: {freq}");
    // Factor 0 counts every hit.
    assert_eq!(raw.cmd(&["CONFIG", "SET", "lfu-log-factor", "0"]), ok());
    for _ in 0..50 {
        assert_eq!(raw.cmd(&["GET", "k"]), b("v"));
    }
    let freq = raw.cmd(&["OBJECT", "FREQ", "k"]).as_int();
    assert!(freq >= 50, "every hit counts with factor 0: {freq}");
    assert_eq!(raw.cmd(&["OBJECT", "FREQ", "missing"]), Reply::NullBulk);
    // RESTORE FREQ sets the counter.
    let payload = match raw.cmd(&["DUMP", "k"]) {
        Reply::Bulk(bytes) => bytes,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        raw.cmd_bytes(&[b"RESTORE", b"restored", b"0", &payload, b"FREQ", b"200"]),
        ok()
    );
    assert_eq!(raw.cmd(&["OBJECT", "FREQ", "restored"]), i(200));
}

/// redis-cli --hotkeys (SCAN plus OBJECT FREQ) names the hot keys.
#[test]
fn redis_cli_hotkeys_finds_the_hot_keys() {
    let server = TestServer::start_with(&["--maxmemory-policy", "allkeys-lfu"]);
    let mut raw = server.raw();
    for n in 0..100 {
        assert_eq!(raw.cmd(&["SET", &format!("cold:{n}"), "v"]), ok());
    }
    assert_eq!(raw.cmd(&["SET", "hot:one", "v"]), ok());
    for _ in 0..3000 {
        raw.send(&["GET", "hot:one"]);
    }
    for _ in 0..3000 {
        raw.read();
    }
    let output = match std::process::Command::new("redis-cli")
        .args(["-p", &server.port.to_string(), "--hotkeys"])
        .output()
    {
        Ok(output) => output,
        Err(_) if std::env::var_os("CI").is_none() => {
            eprintln!("redis-cli not installed: --hotkeys skipped");
            return;
        }
        Err(e) => panic!("redis-cli must run under CI: {e}"),
    };
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    let hottest = text
        .lines()
        .find(|line| line.contains("hot key found with counter"))
        .unwrap_or_else(|| panic!("no hot key reported:\n{text}"));
    assert!(hottest.contains("\"hot:one\""), "{text}");
}

/// Under allkeys-lfu the keys read often survive eviction; keys read
/// once go first.
#[test]
fn allkeys_lfu_evicts_rarely_used_keys_first() {
    // Enough keys that each eviction window (8 of 1024 shards) samples a
    // few dozen: eviction picks the best of a window's sample.
    const KEYS: u64 = 20_000;
    const HOT: u64 = 2_000;
    let server = TestServer::start_with(&["--maxmemory-policy", "allkeys-lfu"]);
    let mut raw = server.raw();
    let pipelined = |raw: &mut Raw, commands: &mut dyn Iterator<Item = Vec<String>>| {
        let mut sent = 0;
        for command in commands {
            let args: Vec<&str> = command.iter().map(String::as_str).collect();
            raw.send(&args);
            sent += 1;
            if sent % 1000 == 0 {
                for _ in 0..1000 {
                    assert!(!matches!(raw.read(), Reply::Error(_)));
                }
            }
        }
        for _ in 0..sent % 1000 {
            assert!(!matches!(raw.read(), Reply::Error(_)));
        }
    };
    let value = "v".repeat(200);
    pipelined(
        &mut raw,
        &mut (0..KEYS).map(|n| vec!["SET".into(), key(n), value.clone()]),
    );
    // The hot keys are the last ones written, and the cold ones are read
    // once after them: an LRU policy would keep the cold keys, so only
    // frequency can keep the hot ones.
    pipelined(
        &mut raw,
        &mut (0..30).flat_map(|_| (KEYS - HOT..KEYS).map(|n| vec!["GET".into(), key(n)])),
    );
    pipelined(
        &mut raw,
        &mut (0..KEYS - HOT).map(|n| vec!["GET".into(), key(n)]),
    );
    // Room for about half the keys.
    let info = raw.cmd(&["INFO", "memory"]).as_text();
    let used: u64 = info_field(&info, "used_memory").parse().unwrap();
    let budget = (used / 2).to_string();
    assert_eq!(raw.cmd(&["CONFIG", "SET", "maxmemory", &budget]), ok());
    // Writes and the cron evict a step at a time.
    let mut evicted = 0;
    wait_until("eviction to pass a quarter of the keys", || {
        assert_eq!(raw.cmd(&["SET", "trigger", "x"]), ok());
        let info = raw.cmd(&["INFO", "stats"]).as_text();
        evicted = info_field(&info, "evicted_keys").parse().unwrap();
        evicted > KEYS / 4
    });
    let hot_left = (KEYS - HOT..KEYS)
        .filter(|&n| raw.cmd(&["EXISTS", &key(n)]) == i(1))
        .count() as u64;
    assert!(
        hot_left >= HOT * 9 / 10,
        "only {hot_left} of {HOT} hot keys left after {evicted} evictions"
    );
}

/// CLIENT NO-TOUCH: that client's reads and writes leave the counter
/// alone; TOUCH still counts; other clients count as before.
#[test]
fn client_no_touch_leaves_access_alone() {
    let server =
        TestServer::start_with(&["--maxmemory-policy", "allkeys-lfu", "--lfu-log-factor", "0"]);
    let (mut quiet, mut other) = (server.raw(), server.raw());
    assert_eq!(quiet.cmd(&["SET", "k", "v"]), ok());
    assert_eq!(quiet.cmd(&["OBJECT", "FREQ", "k"]), i(5));
    assert_eq!(quiet.cmd(&["CLIENT", "NO-TOUCH", "ON"]), ok());
    for _ in 0..10 {
        assert_eq!(quiet.cmd(&["GET", "k"]), b("v"));
    }
    assert_eq!(quiet.cmd(&["APPEND", "k", "w"]), i(2));
    assert_eq!(quiet.cmd(&["OBJECT", "FREQ", "k"]), i(5));
    assert_eq!(quiet.cmd(&["TOUCH", "k"]), i(1));
    assert_eq!(quiet.cmd(&["OBJECT", "FREQ", "k"]), i(6));
    assert_eq!(other.cmd(&["GET", "k"]), b("vw"));
    assert_eq!(quiet.cmd(&["OBJECT", "FREQ", "k"]), i(7));
    assert_eq!(quiet.cmd(&["CLIENT", "NO-TOUCH", "OFF"]), ok());
    assert_eq!(quiet.cmd(&["GET", "k"]), b("vw"));
    assert_eq!(quiet.cmd(&["OBJECT", "FREQ", "k"]), i(8));
}
