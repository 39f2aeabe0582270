//! Durability against the real binary, real files and real `kill -9`:
//! restarts keep data and TTLs, no acknowledged write is lost under
//! `always` or `everysec`, checkpoints taken under load are consistent and
//! compact the log, a torn tail is cut with a log line, corruption stops
//! start-up, clients see -LOADING while data loads, and a full disk gives
//! -MISCONF without losing anything.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::*;

fn info(raw: &mut Raw, section: &str) -> String {
    raw.cmd(&["INFO", section]).as_text()
}

/// Checks every key's value (MGET in batches of 500).
fn assert_values(raw: &mut Raw, expected: &[(&String, &String)], what: &str) {
    for batch in expected.chunks(500) {
        let mut args = vec!["MGET"];
        args.extend(batch.iter().map(|(key, _)| key.as_str()));
        let values = raw.cmd(&args);
        for ((key, value), got) in batch.iter().zip(values.as_array()) {
            assert_eq!(got, &b(value), "{what} value of {key} lost");
        }
    }
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir.join("data/log"))
        .map(|entries| entries.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    found.sort();
    found
}

fn check(dir: &Path, extra: &[&str]) -> (i32, String) {
    run_bounded(
        Command::new(strata_check())
            .args(extra)
            .arg(dir.join("data")),
    )
}

#[test]
fn restart_keeps_data_and_ttls_after_kill_and_after_shutdown() {
    let server = TestServer::start();
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["SET", "plain", "hello"]), ok());
    assert_eq!(raw.cmd(&["SET", "counter", "10"]), ok());
    assert_eq!(raw.cmd(&["INCRBY", "counter", "5"]), i(15));
    assert_eq!(raw.cmd(&["SET", "volatile", "v", "EX", "1000"]), ok());
    assert_eq!(raw.cmd(&["APPEND", "plain", " world"]), i(11));
    assert_eq!(raw.cmd(&["MSET", "m1", "a", "m2", "b"]), ok());
    assert_eq!(raw.cmd(&["RENAME", "m2", "renamed"]), ok());
    assert_eq!(raw.cmd(&["SETRANGE", "bits", "3", "xyz"]), i(6));
    assert_eq!(raw.cmd(&["SELECT", "5"]), ok());
    assert_eq!(raw.cmd(&["SET", "in5", "five"]), ok());
    assert_eq!(raw.cmd(&["SET", "gone", "x", "PX", "1"]), ok());
    assert_eq!(raw.cmd(&["DEL", "nothing"]), i(0));
    std::thread::sleep(Duration::from_millis(5));
    let verify = |server: &TestServer| {
        let mut raw = server.raw();
        assert_eq!(raw.cmd(&["GET", "plain"]), b("hello world"));
        assert_eq!(raw.cmd(&["GET", "counter"]), b("15"));
        assert_eq!(raw.cmd(&["OBJECT", "ENCODING", "counter"]), b("int"));
        assert_eq!(
            raw.cmd(&["MGET", "m1", "m2", "renamed"]).as_array().len(),
            3
        );
        assert_eq!(raw.cmd(&["GET", "m2"]), Reply::NullBulk);
        assert_eq!(raw.cmd(&["GET", "renamed"]), b("b"));
        assert_eq!(
            raw.cmd(&["GET", "bits"]),
            Reply::Bulk(b"\0\0\0xyz".to_vec())
        );
        let ttl = raw.cmd(&["TTL", "volatile"]).as_int();
        assert!((990..=1000).contains(&ttl), "ttl {ttl}");
        assert_eq!(raw.cmd(&["TTL", "plain"]), i(-1));
        assert_eq!(raw.cmd(&["SELECT", "5"]), ok());
        assert_eq!(raw.cmd(&["GET", "in5"]), b("five"));
        assert_eq!(raw.cmd(&["EXISTS", "gone"]), i(0));
        assert_eq!(raw.cmd(&["DBSIZE"]), i(1));
    };
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    verify(&server);
    let mut raw = server.raw();
    let before = raw.cmd(&["LASTSAVE"]).as_int();
    raw.send(&["SHUTDOWN"]);
    assert!(raw.is_closed());
    let dir = server.exited();
    assert!(
        std::fs::read_dir(dir.join("data")).unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".ckpt")),
        "SHUTDOWN writes a checkpoint"
    );
    let (status, report) = check(&dir, &[]);
    assert_eq!(status, 0, "{report}");
    assert!(
        report.contains("live data (dry-run recovery): 7 keys"),
        "{report}"
    );
    let server = TestServer::spawn(dir, &[], None, READY);
    verify(&server);
    let mut raw = server.raw();
    assert!(raw.cmd(&["LASTSAVE"]).as_int() >= before);
    let persistence = info(&mut raw, "persistence");
    assert_eq!(info_field(&persistence, "rdb_last_load_keys_loaded"), "7");
    assert_eq!(info_field(&persistence, "aof_enabled"), "1");
}

/// With the log on, SHUTDOWN writes a final checkpoint only when something
/// changed since the last one: an idle server exits at once, and nothing
/// is lost either way.
#[test]
fn shutdown_writes_no_final_checkpoint_when_nothing_changed_since_the_last() {
    let server = TestServer::start();
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["SET", "before", "1"]), ok());
    checkpoint_now(&mut raw);
    raw.send(&["SHUTDOWN"]);
    let line = server.wait_for_log("final");
    assert!(line.contains("no final one is needed"), "{line}");
    assert!(raw.is_closed());
    let server = TestServer::spawn(server.exited(), &[], None, READY);
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["GET", "before"]), b("1"));
    checkpoint_now(&mut raw);
    assert_eq!(raw.cmd(&["SET", "after", "2"]), ok());
    raw.send(&["SHUTDOWN"]);
    let line = server.wait_for_log("final");
    assert!(line.contains("Saving the final checkpoint"), "{line}");
    assert!(raw.is_closed());
    let server = TestServer::spawn(server.exited(), &[], None, READY);
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["MGET", "before", "after"]).as_array().len(), 2);
    assert_eq!(raw.cmd(&["GET", "after"]), b("2"));
    // SHUTDOWN SAVE asks for one: it is written whatever changed.
    checkpoint_now(&mut raw);
    raw.send(&["SHUTDOWN", "SAVE"]);
    let line = server.wait_for_log("final");
    assert!(line.contains("Saving the final checkpoint"), "{line}");
    assert!(raw.is_closed());
    std::fs::remove_dir_all(server.exited()).unwrap();
}

/// Writers pipelining SETs of unique keys on several connections record
/// what was acknowledged; the server is killed mid-stream; every
/// acknowledged key must come back with its value.
fn no_acknowledged_write_lost(fsync: &str) {
    let server = TestServer::start_with(&["--appendfsync", fsync, "--log-segment-size", "256kb"]);
    let stop = Arc::new(AtomicBool::new(false));
    let acked_count = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..4)
        .map(|writer| {
            let port = server.port;
            let stop = stop.clone();
            let acked_count = acked_count.clone();
            std::thread::spawn(move || {
                let mut acked = HashMap::new();
                // Replies other than OK before the kill: there must be none.
                let mut unexpected = Vec::new();
                let mut raw = Raw::connect(port);
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let batch: Vec<(String, String)> = (0..25)
                        .map(|_| {
                            n += 1;
                            (
                                format!("w{writer}:{n}"),
                                format!("value-{writer}-{n}-{}", n * 7),
                            )
                        })
                        .collect();
                    let mut wire = Vec::new();
                    for (key, value) in &batch {
                        wire.extend(Raw::encode(&[b"SET", key.as_bytes(), value.as_bytes()]));
                    }
                    if std::io::Write::write_all(&mut raw.stream, &wire).is_err() {
                        break;
                    }
                    for (key, value) in batch {
                        match raw.try_read() {
                            Some(Reply::Simple(s)) if s == "OK" => {
                                acked.insert(key, value);
                                acked_count.fetch_add(1, Ordering::Relaxed);
                            }
                            Some(other) => unexpected.push(other),
                            // The connection went with the server.
                            None => return (acked, unexpected),
                        }
                    }
                }
                (acked, unexpected)
            })
        })
        .collect();
    // Killed mid-stream once enough writes are acknowledged.
    wait_until("5 000 acknowledged writes", || {
        acked_count.load(Ordering::Relaxed) >= 5_000
    });
    let dir = server.kill9();
    stop.store(true, Ordering::Relaxed);
    let (acked, unexpected): (Vec<HashMap<String, String>>, Vec<Vec<Reply>>) =
        writers.into_iter().map(|w| w.join().unwrap()).unzip();
    let unexpected: Vec<Reply> = unexpected.into_iter().flatten().collect();
    assert!(
        unexpected.is_empty(),
        "replies other than OK: {unexpected:?}"
    );
    let total: usize = acked.iter().map(HashMap::len).sum();
    assert!(total >= 5_000, "only {total} writes acknowledged");
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut raw = server.raw();
    let all: Vec<(&String, &String)> = acked.iter().flatten().collect();
    assert_values(&mut raw, &all, &format!("acknowledged under {fsync}"));
}

#[test]
fn kill9_under_always_loses_no_acknowledged_write() {
    no_acknowledged_write_lost("always");
}

/// Under `appendfsync always` every reply is covered by an fsync: after
/// a SET's reply, the log's synced LSN has passed the LSN written before
/// the SET was sent (the SET's record comes after it). A build that
/// replied after the write but before its fsync passed every other test;
/// here about a third of the rounds catch it.
#[test]
fn every_reply_under_always_is_covered_by_an_fsync() {
    let server = TestServer::start_with(&["--appendfsync", "always"]);
    let mut raw = server.raw();
    let lsn = |raw: &mut Raw, name: &str| -> u64 {
        info_field(&info(raw, "persistence"), name).parse().unwrap()
    };
    for n in 0..300 {
        let written_before = lsn(&mut raw, "strata_log_written_lsn");
        assert_eq!(raw.cmd(&["SET", &format!("k{n}"), "v"]), ok());
        let synced = lsn(&mut raw, "strata_log_synced_lsn");
        assert!(
            synced > written_before,
            "round {n}: the reply came before the fsync ({synced} synced, {written_before} written before the SET)"
        );
    }
}

#[test]
fn kill9_under_everysec_loses_no_acknowledged_write() {
    no_acknowledged_write_lost("everysec");
}

/// Two writer threads, each overwriting its own `keys` keys
/// (`{prefix}{writer}:{k}`) with `value(round)` again and again until
/// finished, so the last acknowledged value of every key is known.
struct Overwriters {
    stop: Arc<AtomicBool>,
    writes: Arc<AtomicU64>,
    threads: Vec<std::thread::JoinHandle<HashMap<String, String>>>,
}

impl Overwriters {
    fn start(port: u16, prefix: &'static str, keys: usize, value: fn(u64) -> String) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let writes = Arc::new(AtomicU64::new(0));
        let threads = (0..2)
            .map(|writer| {
                let (stop, writes) = (stop.clone(), writes.clone());
                std::thread::spawn(move || {
                    let mut latest = HashMap::new();
                    let mut raw = Raw::connect(port);
                    let mut round = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        round += 1;
                        for k in 0..keys {
                            let key = format!("{prefix}{writer}:{k}");
                            let value = value(round);
                            assert_eq!(raw.cmd(&["SET", &key, &value]), ok());
                            latest.insert(key, value);
                        }
                        writes.fetch_add(keys as u64, Ordering::Relaxed);
                    }
                    latest
                })
            })
            .collect();
        Overwriters {
            stop,
            writes,
            threads,
        }
    }

    /// Stops the writers; the last value each key was acknowledged with.
    fn finish(self) -> Vec<HashMap<String, String>> {
        self.stop.store(true, Ordering::Relaxed);
        self.threads
            .into_iter()
            .map(|w| w.join().unwrap())
            .collect()
    }
}

/// Starts BGSAVEs until `checkpoints` have started and the writers have
/// made `writes` writes.
fn bgsave_during(raw: &mut Raw, writers: &Overwriters, checkpoints: usize, writes: u64) {
    let mut started = 0;
    let deadline = Instant::now() + TIMEOUT;
    while started < checkpoints || writers.writes.load(Ordering::Relaxed) < writes {
        assert!(Instant::now() < deadline, "{started} BGSAVEs started");
        if raw.cmd(&["BGSAVE"]) == Reply::simple("Background saving started") {
            started += 1;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn checkpoints_under_load_are_consistent_and_compact_the_log() {
    let server = TestServer::start_with(&[
        "--log-segment-size",
        "64kb",
        "--auto-aof-rewrite-min-size",
        "256kb",
        "--auto-aof-rewrite-percentage",
        "100",
    ]);
    // Each writer overwrites its own 200 keys again and again, so the final
    // acknowledged value of every key is known.
    let writers = Overwriters::start(server.port, "c", 200, |round| {
        format!("{round}-{}", "x".repeat(100))
    });
    let mut raw = server.raw();
    // Three checkpoints while the writers run, and at least 20 000 writes
    // (2.6 MB of records, four times what the compacted log may hold).
    bgsave_during(&mut raw, &writers, 3, 20_000);
    let persistence = info(&mut raw, "persistence");
    let log_bytes: u64 = info_field(&persistence, "aof_current_size")
        .parse()
        .unwrap();
    let latest = writers.finish();
    let live_bytes = 400 * 130;
    assert!(
        log_bytes < 2 * live_bytes + 2 * (256 << 10),
        "log not compacted: {log_bytes} bytes"
    );
    let dir = server.kill9();
    let (status, report) = check(&dir, &[]);
    assert_eq!(status, 0, "{report}");
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut raw = server.raw();
    let all: Vec<(&String, &String)> = latest.iter().flatten().collect();
    assert_values(&mut raw, &all, "last acknowledged");
    assert_eq!(raw.cmd(&["DBSIZE"]), i(400));
}

#[test]
fn torn_tail_is_cut_with_a_log_line_and_strata_check_sees_it() {
    let server = TestServer::start();
    let mut raw = server.raw();
    for n in 0..20 {
        assert_eq!(raw.cmd(&["SET", &format!("k{n}"), &format!("v{n}")]), ok());
    }
    let dir = server.kill9();
    let segment = segments(&dir).pop().expect("a segment");
    let length = common::log_records(&segment).len() as u64;
    // Cut the last record (k19) in the middle, as a crash mid-write would.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .unwrap();
    file.set_len(length - 5).unwrap();
    drop(file);
    let (status, report) = check(&dir, &[]);
    assert_eq!(status, 1, "{report}");
    assert!(report.contains("TORN TAIL"), "{report}");
    let server = TestServer::spawn(dir, &[], None, LISTENING);
    let line = server.wait_for_log("torn tail");
    assert!(line.contains(&segment.display().to_string()), "{line}");
    server.wait_for_log(READY);
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["GET", "k18"]), b("v18"));
    assert_eq!(raw.cmd(&["GET", "k19"]), Reply::NullBulk);
    assert_eq!(raw.cmd(&["SET", "after", "ok"]), ok());
    let dir = server.kill9();
    let (status, report) = check(&dir, &[]);
    assert_eq!(status, 0, "{report}");
    let server = TestServer::spawn(dir, &[], None, READY);
    assert_eq!(server.raw().cmd(&["GET", "after"]), b("ok"));
}

#[test]
fn strata_check_fix_truncates_a_torn_tail() {
    let server = TestServer::start();
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["SET", "a", "1"]), ok());
    let dir = server.kill9();
    let segment = segments(&dir).pop().unwrap();
    let mut bytes = common::log_records(&segment);
    bytes.extend_from_slice(&[7; 13]);
    std::fs::write(&segment, &bytes).unwrap();
    let (status, report) = check(&dir, &["--fix", "--yes"]);
    assert_eq!(status, 0, "{report}");
    assert!(report.contains("Truncated"), "{report}");
    assert_eq!(
        std::fs::metadata(&segment).unwrap().len() as usize,
        bytes.len() - 13
    );
    let (status, report) = check(&dir, &[]);
    assert_eq!(status, 0, "{report}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn corruption_mid_log_stops_startup_naming_file_and_offset() {
    let server = TestServer::start();
    let mut raw = server.raw();
    for n in 0..20 {
        assert_eq!(raw.cmd(&["SET", &format!("k{n}"), "value"]), ok());
    }
    let dir = server.kill9();
    let segment = segments(&dir).pop().unwrap();
    let mut bytes = common::log_records(&segment);
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&segment, &bytes).unwrap();
    let (status, lines) = TestServer::run_to_exit(&dir, &[]);
    assert!(!status.success());
    let all = lines.join("\n");
    assert!(all.contains("Corrupt log"), "{all}");
    assert!(all.contains(&segment.display().to_string()), "{all}");
    assert!(all.contains("at offset"), "{all}");
    let (status, report) = check(&dir, &[]);
    assert_eq!(status, 2, "{report}");
    assert!(report.contains("Corrupt log"), "{report}");
    assert_eq!(
        std::fs::read(&segment).unwrap(),
        bytes,
        "nothing was changed"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn clients_get_loading_while_the_dataset_loads() {
    let server = TestServer::start();
    let mut raw = server.raw();
    let mut wire = Vec::new();
    for n in 0..3000 {
        wire.extend(Raw::encode(&[b"SET", format!("k{n}").as_bytes(), b"v"]));
    }
    raw.send_raw(&wire);
    for _ in 0..3000 {
        assert_eq!(raw.read(), ok());
    }
    let dir = server.kill9();
    // 1 ms per record: three seconds of loading.
    let server = TestServer::spawn(dir, &["--key-load-delay", "1000"], None, LISTENING);
    let mut raw = server.raw();
    assert_eq!(
        raw.cmd(&["GET", "k1"]),
        e("LOADING Redis is loading the dataset in memory")
    );
    let persistence = info(&mut raw, "persistence");
    assert_eq!(info_field(&persistence, "loading"), "1");
    assert_eq!(
        raw.cmd(&["PING"]),
        e("LOADING Redis is loading the dataset in memory")
    );
    let progress = server.wait_for_log("Loading: ");
    assert!(progress.contains("log records"), "{progress}");
    server.wait_for_log(READY);
    assert_eq!(raw.cmd(&["GET", "k2999"]), b("v"));
    assert_eq!(info_field(&info(&mut raw, "persistence"), "loading"), "0");
}

#[test]
fn full_disk_refuses_writes_with_misconf_keeps_reads_and_recovers() {
    let limit: u64 = 256 << 10;
    let server = TestServer::spawn(
        temp_dir(),
        &["--save", "", "--appendfsync", "always"],
        Some(limit),
        READY,
    );
    let mut reader = server.raw();
    assert_eq!(reader.cmd(&["SET", "before", "kept"]), ok());
    let writer = {
        let port = server.port;
        std::thread::spawn(move || {
            let mut raw = Raw::connect(port);
            let value = "x".repeat(10_000);
            let mut acked = Vec::new();
            for n in 0..100 {
                // Blocks while the disk is full: no reply before the record
                // is on disk.
                match raw.cmd(&["SET", &format!("big{n}"), &value]) {
                    Reply::Simple(s) if s == "OK" => acked.push(n),
                    Reply::Error(e) if e.starts_with("MISCONF") => {}
                    other => panic!("unexpected {other:?}"),
                }
            }
            acked
        })
    };
    let deadline = Instant::now() + TIMEOUT;
    let misconf = loop {
        let reply = reader.cmd(&["PING"]);
        if let Reply::Error(text) = reply {
            break text;
        }
        assert!(Instant::now() < deadline, "disk never filled");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(
        misconf.starts_with("MISCONF Errors writing to the AOF file: File too large"),
        "{misconf}"
    );
    assert_eq!(reader.cmd(&["SET", "refused", "x"]), e(&misconf));
    assert_eq!(
        reader.cmd(&["GET", "before"]),
        b("kept"),
        "reads keep working"
    );
    let persistence = info(&mut reader, "persistence");
    assert_eq!(info_field(&persistence, "aof_last_write_status"), "err");
    // Space comes back.
    let raised = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: plain syscall on our own child process.
    let result = unsafe {
        libc::prlimit(
            server.pid() as libc::pid_t,
            libc::RLIMIT_FSIZE,
            &raised,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(result, 0, "prlimit: {}", std::io::Error::last_os_error());
    let deadline = Instant::now() + TIMEOUT;
    while reader.cmd(&["PING"]) != Reply::simple("PONG") {
        assert!(Instant::now() < deadline, "writes did not resume");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(reader.cmd(&["SET", "after", "yes"]), ok());
    let acked = writer.join().unwrap();
    assert!(!acked.is_empty());
    assert_eq!(
        info_field(&info(&mut reader, "persistence"), "aof_last_write_status"),
        "ok"
    );
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut raw = server.raw();
    for n in acked {
        assert_eq!(
            raw.cmd(&["STRLEN", &format!("big{n}")]),
            i(10_000),
            "big{n} lost"
        );
    }
    assert_eq!(raw.cmd(&["GET", "before"]), b("kept"));
    assert_eq!(raw.cmd(&["GET", "after"]), b("yes"));
    assert_eq!(raw.cmd(&["EXISTS", "refused"]), i(0));
}

#[test]
fn appendonly_no_keeps_what_save_wrote_and_nothing_after() {
    let server = TestServer::start_with(&["--appendonly", "no", "--save", ""]);
    let mut raw = server.raw();
    assert_eq!(
        info_field(&info(&mut raw, "persistence"), "aof_enabled"),
        "0"
    );
    assert_eq!(raw.cmd(&["SET", "saved", "1"]), ok());
    assert_eq!(raw.cmd(&["SAVE"]), ok());
    assert_eq!(
        info_field(
            &info(&mut raw, "persistence"),
            "rdb_changes_since_last_save"
        ),
        "0"
    );
    assert_eq!(raw.cmd(&["SET", "unsaved", "2"]), ok());
    assert_eq!(
        info_field(
            &info(&mut raw, "persistence"),
            "rdb_changes_since_last_save"
        ),
        "1"
    );
    let dir = server.kill9();
    assert!(
        segments(&dir).is_empty(),
        "no log is written with appendonly no"
    );
    // A save point asks for the checkpoint to be loaded (with `save ""`
    // the server would start empty: data_dir.rs).
    let server = TestServer::spawn(
        dir,
        &["--appendonly", "no", "--save", "3600 1"],
        None,
        READY,
    );
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["GET", "saved"]), b("1"));
    assert_eq!(raw.cmd(&["GET", "unsaved"]), Reply::NullBulk);
    // Turning the log on later starts from the checkpoint.
    raw.send(&["SHUTDOWN", "NOSAVE"]);
    assert!(raw.is_closed());
    let dir = server.exited();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["GET", "saved"]), b("1"));
    assert_eq!(raw.cmd(&["SET", "logged", "3"]), ok());
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut raw = server.raw();
    assert_eq!(
        raw.cmd(&["MGET", "saved", "logged"]).as_array(),
        &[b("1"), b("3")]
    );
}

#[test]
fn persistence_commands_and_settings_answer_like_redis() {
    let server = TestServer::start_with(&["--save", ""]);
    let mut raw = server.raw();
    assert_eq!(
        raw.cmd(&["CONFIG", "GET", "appendfsync"]).as_array(),
        &[b("appendfsync"), b("everysec")]
    );
    assert_eq!(raw.cmd(&["CONFIG", "SET", "appendfsync", "always"]), ok());
    // Applied by CONFIG SET itself: the next write is synced before its
    // reply (it was applied by the checkpoint thread's next look).
    assert_eq!(
        info_field(&info(&mut raw, "persistence"), "strata_log_fsync_policy"),
        "always"
    );
    assert_eq!(raw.cmd(&["SET", "k", "v"]), ok());
    let persistence = info(&mut raw, "persistence");
    let written: u64 = info_field(&persistence, "strata_log_written_lsn")
        .parse()
        .unwrap();
    let synced: u64 = info_field(&persistence, "strata_log_synced_lsn")
        .parse()
        .unwrap();
    assert!(
        synced >= written,
        "always: acknowledged means synced ({synced} < {written})"
    );
    // A logging server may say `no` (its log goes on, tests/server.rs);
    // a value that is not yes or no is refused.
    assert!(matches!(
        raw.cmd(&["CONFIG", "SET", "appendonly", "maybe"]),
        Reply::Error(text) if text.contains("appendonly")
    ));
    assert_eq!(
        raw.cmd(&["CONFIG", "SET", "appendfsync", "sometimes"]),
        e(
            "ERR CONFIG SET failed (possibly related to argument 'appendfsync') - argument(s) must be one of the following: everysec, always, no"
        )
    );
    assert_eq!(raw.cmd(&["BGSAVE", "NOW"]), e("ERR syntax error"));
    assert_eq!(
        raw.cmd(&["BGREWRITEAOF"]),
        Reply::simple("Background append only file rewriting started")
    );
    let deadline = Instant::now() + TIMEOUT;
    while info_field(&info(&mut raw, "persistence"), "aof_rewrites") != "1" {
        assert!(Instant::now() < deadline, "rewrite did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = raw.cmd(&["LASTSAVE"]).as_int();
    assert!(before > 1_700_000_000);
    assert_eq!(
        raw.cmd(&["BGSAVE"]),
        Reply::simple("Background saving started")
    );
    let deadline = Instant::now() + TIMEOUT;
    while info_field(&info(&mut raw, "persistence"), "rdb_bgsave_in_progress") != "0"
        || info_field(&info(&mut raw, "persistence"), "rdb_saves") != "2"
    {
        assert!(Instant::now() < deadline, "bgsave did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        info_field(&info(&mut raw, "persistence"), "rdb_last_bgsave_status"),
        "ok"
    );
    raw.send(&["SHUTDOWN", "NOSAVE"]);
    assert!(raw.is_closed());
    let saves_before = std::fs::read_dir(server.dir.join("data"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".ckpt")
        })
        .count();
    let dir = server.exited();
    assert_eq!(saves_before, 16, "one file per range");
    let server = TestServer::spawn(dir, &[], None, READY);
    assert_eq!(server.raw().cmd(&["GET", "k"]), b("v"));
}

/// INFO right after BGSAVE's reply (in the same pipeline) shows the save
/// in progress or done, as Redis does (it forks before it answers):
/// scripts and tests that wait for `rdb_bgsave_in_progress:0` must not
/// see the moment before the checkpoint thread picked the request up.
/// Switching to `always` after writes under `everysec`: the replies that
/// follow (CONFIG SET's own, and the next reply of another client that
/// wrote before) are not held for an fsync nothing would make. A build
/// that only changed the policy left them waiting until the next write's
/// round: CONFIG SET never answered.
#[test]
fn config_set_always_after_writes_answers_at_once() {
    let server = TestServer::start_with(&["--save", ""]);
    let mut raw = server.raw();
    let mut other = server.raw();
    assert_eq!(other.cmd(&["SET", "before", "1"]), ok());
    assert_eq!(raw.cmd(&["SET", "k", "v"]), ok());
    for client in [&raw, &other] {
        (client.stream)
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
    }
    raw.send(&["CONFIG", "SET", "appendfsync", "always"]);
    assert_eq!(
        raw.try_read(),
        Some(ok()),
        "CONFIG SET appendfsync always did not answer within 3 s of writes"
    );
    other.send(&["EXISTS", "before"]);
    assert_eq!(
        other.try_read(),
        Some(Reply::Int(1)),
        "a client that wrote before the switch got no reply within 3 s"
    );
    let persistence = info(&mut raw, "persistence");
    let lsn = |name: &str| -> u64 { info_field(&persistence, name).parse().unwrap() };
    assert!(
        lsn("strata_log_synced_lsn") >= lsn("strata_log_written_lsn"),
        "written before the switch but not synced: {persistence}"
    );
    // And back: `everysec` answers at once too.
    assert_eq!(raw.cmd(&["SET", "k", "w"]), ok());
    assert_eq!(raw.cmd(&["CONFIG", "SET", "appendfsync", "everysec"]), ok());
    assert_eq!(raw.cmd(&["GET", "k"]), b("w"));
}

/// A failed fsync under `always`: the client whose write waits for it
/// loses its connection instead of waiting for ever (Redis exits then),
/// other clients still read, and writes are refused with -MISCONF. A
/// build that kept waiting left the writer without an answer.
#[test]
fn a_failed_fsync_under_always_closes_the_waiting_writer_and_keeps_reads() {
    let server =
        TestServer::start_with(&["--appendfsync", "always", "--enable-debug-command", "yes"]);
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["SET", "kept", "1"]), ok());
    assert_eq!(raw.cmd(&["DEBUG", "FAIL-FSYNC"]), ok());
    let mut writer = server.raw();
    writer
        .stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let started = Instant::now();
    writer.send(&["SET", "lost", "2"]);
    let mut byte = [0u8; 1];
    let read = std::io::Read::read(&mut writer.stream, &mut byte);
    assert!(
        matches!(read, Ok(0)),
        "the writer waiting for the failed fsync was not disconnected: {read:?} after {:?}",
        started.elapsed()
    );
    let mut reader = server.raw();
    assert_eq!(reader.cmd(&["GET", "kept"]), b("1"));
    match reader.cmd(&["SET", "refused", "3"]) {
        Reply::Error(e) => assert!(e.starts_with("MISCONF"), "{e}"),
        other => panic!("a write after the failed fsync answered {other:?}"),
    }
    let persistence = info(&mut reader, "persistence");
    assert!(
        persistence.contains("fsync failed"),
        "INFO does not say why: {persistence}"
    );
}

/// DEBUG FAIL-FSYNC without a log says so, and the server goes on.
#[test]
fn debug_fail_fsync_without_the_log_is_an_error() {
    let server = TestServer::start_with(&["--appendonly", "no", "--enable-debug-command", "yes"]);
    let mut raw = server.raw();
    match raw.cmd(&["DEBUG", "FAIL-FSYNC"]) {
        Reply::Error(e) => assert_eq!(e, "ERR the log is off (appendonly no)"),
        other => panic!("DEBUG FAIL-FSYNC with appendonly no answered {other:?}"),
    }
    assert_eq!(raw.cmd(&["SET", "k", "v"]), ok());
}

#[test]
fn bgsave_is_in_progress_from_its_reply_on() {
    let server = TestServer::start_with(&["--appendonly", "yes"]);
    let mut raw = server.raw();
    for round in 0..200 {
        raw.cmd(&["SET", &format!("k{round}"), "v"]);
        let saves = info_field(&info(&mut raw, "persistence"), "rdb_saves").to_string();
        raw.send(&["BGSAVE"]);
        raw.send(&["INFO", "persistence"]);
        assert_eq!(raw.read(), Reply::simple("Background saving started"));
        let after = raw.read().as_text();
        assert!(
            info_field(&after, "rdb_bgsave_in_progress") == "1"
                || info_field(&after, "rdb_saves") != saves,
            "round {round}: BGSAVE answered, yet INFO shows no save: {after}"
        );
        let deadline = Instant::now() + TIMEOUT;
        while info_field(&info(&mut raw, "persistence"), "rdb_bgsave_in_progress") != "0" {
            assert!(Instant::now() < deadline, "bgsave did not finish");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

#[test]
fn a_checkpoint_that_hits_a_full_disk_fails_cleanly_and_loses_nothing() {
    // Log segments stay under the file-size limit; a checkpoint range file
    // (1/16 of 2 MB) does not. Values under 4 KiB, which a checkpoint
    // copies (bigger ones it names by their place in the log).
    let server = TestServer::spawn(
        temp_dir(),
        &[
            "--save",
            "",
            "--log-segment-size",
            "16kb",
            "--auto-aof-rewrite-percentage",
            "0",
        ],
        Some(64 << 10),
        READY,
    );
    let mut raw = server.raw();
    let value = "v".repeat(3_000);
    for n in 0..700 {
        assert_eq!(raw.cmd(&["SET", &format!("k{n}"), &value]), ok());
    }
    let before = raw.cmd(&["LASTSAVE"]).as_int();
    assert_eq!(raw.cmd(&["SAVE"]), e("ERR"));
    assert_eq!(
        raw.cmd(&["BGSAVE"]),
        Reply::simple("Background saving started")
    );
    let failure = server.wait_for_log("Checkpoint (Bgsave) failed");
    assert!(failure.contains("File too large"), "{failure}");
    // The thread logs the failure before it clears the request, as Redis
    // logs before it reaps its child: a client polls, as Redis' tests do.
    wait_until("the failed BGSAVE to end", || {
        info_field(&info(&mut raw, "persistence"), "rdb_bgsave_in_progress") == "0"
    });
    let persistence = info(&mut raw, "persistence");
    assert_eq!(info_field(&persistence, "rdb_last_bgsave_status"), "err");
    assert_eq!(raw.cmd(&["LASTSAVE"]).as_int(), before);
    let leftovers: Vec<String> = std::fs::read_dir(server.dir.join("data"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".tmp") || name.ends_with(".ckpt"))
        .collect();
    assert!(leftovers.is_empty(), "left behind: {leftovers:?}");
    // The log is unaffected: writes go on and survive a kill.
    assert_eq!(raw.cmd(&["SET", "after", "ok"]), ok());
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["STRLEN", "k699"]), i(3_000));
    assert_eq!(raw.cmd(&["GET", "after"]), b("ok"));
    assert_eq!(raw.cmd(&["DBSIZE"]), i(701));
}

#[test]
fn save_points_and_auto_rewrite_set_at_runtime_take_effect() {
    // Started with neither: no save points, automatic rewrites off.
    let server = TestServer::start_with(&["--save", "", "--auto-aof-rewrite-percentage", "0"]);
    let mut raw = server.raw();
    let counter = |raw: &mut Raw, name: &str| -> u64 {
        info_field(&info(raw, "persistence"), name).parse().unwrap()
    };
    let value = "x".repeat(1000);
    for n in 0..100 {
        assert_eq!(raw.cmd(&["SET", &format!("k{n}"), &value]), ok());
    }
    assert_eq!(counter(&mut raw, "rdb_saves"), 0);
    // A save point of 1 second and 100 changes: a checkpoint follows.
    assert_eq!(raw.cmd(&["CONFIG", "SET", "save", "1 100"]), ok());
    wait_until("a checkpoint from the save point", || {
        counter(&mut raw, "rdb_saves") >= 1
    });
    assert_eq!(counter(&mut raw, "rdb_changes_since_last_save"), 0);
    let rewrites = counter(&mut raw, "aof_rewrites");
    // Overwriting the same 100 keys grows the log, never the data: with
    // the rule at 100 % over 1 MB, the log is rewritten (a checkpoint that
    // lets old segments go).
    assert_eq!(raw.cmd(&["CONFIG", "SET", "save", ""]), ok());
    assert_eq!(
        raw.cmd(&["CONFIG", "SET", "auto-aof-rewrite-min-size", "1mb"]),
        ok()
    );
    assert_eq!(
        raw.cmd(&["CONFIG", "SET", "auto-aof-rewrite-percentage", "100"]),
        ok()
    );
    let deadline = Instant::now() + TIMEOUT;
    let mut round = 0;
    while counter(&mut raw, "aof_rewrites") == rewrites {
        assert!(Instant::now() < deadline, "no automatic rewrite");
        round += 1;
        for n in 0..100 {
            let v = format!("{round}{value}");
            assert_eq!(raw.cmd(&["SET", &format!("k{n}"), &v]), ok());
        }
    }
    assert!(round >= 10, "rewritten after {round} rounds of 100 KB");
    let log_bytes = counter(&mut raw, "aof_current_size");
    assert!(
        log_bytes < 4 << 20,
        "log of {log_bytes} bytes after a rewrite"
    );
}

#[test]
fn big_values_are_named_by_checkpoints_and_their_segments_still_go() {
    let server = TestServer::start_with(&[
        "--log-segment-size",
        "256kb",
        "--auto-aof-rewrite-min-size",
        "1mb",
        "--auto-aof-rewrite-percentage",
        "100",
    ]);
    let mut raw = server.raw();
    // Written once and never again: their segments die around them, and
    // a checkpoint then copies them so those segments can go.
    let still = |k: usize| format!("still-{k}-{}", "s".repeat(8000));
    for k in 0..20 {
        assert_eq!(raw.cmd(&["SET", &format!("still:{k}"), &still(k)]), ok());
    }
    let writers = Overwriters::start(server.port, "big", 40, |round| {
        format!("{round}-{}", "x".repeat(8000))
    });
    // Checkpoints while 5 000 values of 8 KB (40 MB) are written over 100
    // keys (800 KB live).
    bgsave_during(&mut raw, &writers, 3, 5_000);
    let latest = writers.finish();
    // Two more cycles with nothing written: the first copies what is left
    // in dying segments, the second deletes them.
    for _ in 0..2 {
        checkpoint_now(&mut raw);
    }
    let live_bytes: u64 = 100 * 8_020;
    let tiering = info(&mut raw, "tiering");
    let checkpoint: u64 = info_field(&tiering, "disk_checkpoint_bytes")
        .parse()
        .unwrap();
    assert!(
        checkpoint < live_bytes / 2,
        "{checkpoint} bytes of checkpoint: the big values were copied, not named"
    );
    let log = log_bytes(&mut raw);
    assert!(
        log < 2 * live_bytes + 2 * (1 << 20) + 2 * (256 << 10),
        "log not compacted: {log} bytes"
    );
    let dir = server.kill9();
    let (status, report) = check(&dir, &[]);
    assert_eq!(status, 0, "{report}");
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut raw = server.raw();
    // Named values come back from the log when first read, and stay (no
    // RAM budget). Values in segments that were dying were copied.
    let keys: Vec<&String> = latest.iter().flat_map(|m| m.keys()).collect();
    let on_disk = |raw: &mut Raw| {
        keys.iter()
            .filter(|key| raw.cmd(&["OBJECT", "RESIDENCY", key]) == b("disk"))
            .count()
    };
    assert!(on_disk(&mut raw) >= keys.len() / 2, "values were copied");
    let all: Vec<(&String, &String)> = latest.iter().flatten().collect();
    assert_values(&mut raw, &all, "last acknowledged");
    assert_eq!(on_disk(&mut raw), 0, "values read back left RAM again");
    for k in 0..20 {
        assert_eq!(raw.cmd(&["GET", &format!("still:{k}")]), b(&still(k)));
    }
    assert_eq!(raw.cmd(&["DBSIZE"]), i(100));
}

/// Runs a whole checkpoint cycle (BGSAVE, retried while one the log's
/// growth started is still running) and waits for it to end.
fn checkpoint_now(raw: &mut Raw) {
    let field = |raw: &mut Raw, name: &str| info_field(&info(raw, "persistence"), name);
    wait_until("no checkpoint running", || {
        field(raw, "rdb_bgsave_in_progress") == "0"
    });
    let before = field(raw, "rdb_saves");
    wait_until("BGSAVE accepted", || {
        raw.cmd(&["BGSAVE"]) == Reply::simple("Background saving started")
    });
    wait_until("the checkpoint", || {
        field(raw, "rdb_saves") != before && field(raw, "rdb_bgsave_in_progress") == "0"
    });
}

/// The log's size on disk, as INFO persistence reports it.
fn log_bytes(raw: &mut Raw) -> u64 {
    info_field(&info(raw, "persistence"), "aof_current_size")
        .parse()
        .unwrap()
}

#[test]
fn writing_far_into_a_new_key_logs_the_write_not_the_zeros() {
    const OFFSET: usize = 256 << 20;
    let server = TestServer::start_with(&["--save", ""]);
    let mut raw = server.raw();
    let before = log_bytes(&mut raw);
    // SETRANGE, SETBIT and BITFIELD on keys that do not exist yet: the
    // values are 256 MB of zeros and a few bytes.
    assert_eq!(
        raw.cmd(&["SETRANGE", "r", &OFFSET.to_string(), "end"]),
        i(OFFSET as i64 + 3)
    );
    let bit = (OFFSET as u64) * 8 + 7;
    assert_eq!(raw.cmd(&["SETBIT", "b", &bit.to_string(), "1"]), i(0));
    assert_eq!(
        raw.cmd(&["BITFIELD", "f", "SET", "u8", &bit.to_string(), "255"]),
        Reply::Array(vec![i(0)])
    );
    let grown = log_bytes(&mut raw) - before;
    assert!(
        grown < 4 << 10,
        "three writes 256 MB into new keys wrote {grown} bytes of log"
    );
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut raw = server.raw();
    for key in ["r", "b", "f"] {
        let len = raw.cmd(&["STRLEN", key]);
        assert!(
            matches!(len, Reply::Int(n) if n > OFFSET as i64),
            "{key}: {len:?}"
        );
    }
    let tail = |raw: &mut Raw, key: &str, from: usize| {
        raw.cmd(&["GETRANGE", key, &(from - 2).to_string(), "-1"])
    };
    assert_eq!(
        tail(&mut raw, "r", OFFSET),
        Reply::Bulk(b"\0\0end".to_vec())
    );
    assert_eq!(tail(&mut raw, "b", OFFSET), Reply::Bulk(vec![0, 0, 1]));
    // The u8 starts at the last bit of byte OFFSET: 0x01, then 0xfe.
    assert_eq!(
        tail(&mut raw, "f", OFFSET + 1),
        Reply::Bulk(vec![0, 1, 0xfe])
    );
}

#[test]
fn changing_part_of_a_big_value_logs_the_change_not_the_value() {
    const SIZE: usize = 64 << 20;
    // No automatic checkpoint may cut the log while its growth is measured
    // (the 64 MB SET alone passes the rewrite threshold).
    let server = TestServer::start_with(&["--save", "", "--auto-aof-rewrite-percentage", "0"]);
    let mut raw = server.raw();
    let mut model = vec![b'a'; SIZE];
    assert_eq!(raw.cmd_bytes(&[b"SET", b"big", &model]), ok());
    let before = log_bytes(&mut raw);
    for n in 0..20u64 {
        let bit = n * 3_000_017 % (SIZE as u64 * 8);
        let (byte, mask) = ((bit / 8) as usize, 1u8 << (7 - bit % 8));
        let old = i64::from(model[byte] & mask != 0);
        assert_eq!(raw.cmd(&["SETBIT", "big", &bit.to_string(), "0"]), i(old));
        model[byte] &= !mask;
    }
    for n in 0..5usize {
        let offset = n * 7_000_003;
        assert_eq!(
            raw.cmd(&["SETRANGE", "big", &offset.to_string(), "patch"]),
            i(SIZE as i64)
        );
        model[offset..offset + 5].copy_from_slice(b"patch");
    }
    assert_eq!(
        raw.cmd(&[
            "BITFIELD", "big", "SET", "u16", "800", "65535", "INCRBY", "i8", "4000", "1"
        ]),
        Reply::Array(vec![i(24929), i(98)])
    );
    model[100..102].copy_from_slice(&[0xff, 0xff]);
    model[500] = b'b';
    assert_eq!(raw.cmd(&["APPEND", "big", "tail"]), i(SIZE as i64 + 4));
    model.extend_from_slice(b"tail");
    let grown = log_bytes(&mut raw) - before;
    assert!(
        grown < 16 << 10,
        "31 small changes to a 64 MB value wrote {grown} bytes of log"
    );
    // After a crash, the replayed changes rebuild the same value.
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut raw = server.raw();
    assert!(
        raw.cmd(&["GET", "big"]) == Reply::Bulk(model),
        "value after restart"
    );
}
