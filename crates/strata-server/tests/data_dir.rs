//! The data directory as an operator meets it: one server per directory,
//! what a start loads and a shutdown writes under `appendonly no`, what a
//! damaged checkpoint says, and what `strata-check`'s exit status means.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;

/// Runs strata-check with `args` on `dir/data`; (exit status, stdout +
/// stderr). Bounded by [`TIMEOUT`].
fn check(dir: &Path, args: &[&str]) -> (i32, String) {
    run_bounded(
        Command::new(strata_check())
            .args(args)
            .arg(dir.join("data")),
    )
}

fn checkpoint_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found: Vec<_> = std::fs::read_dir(dir.join("data"))
        .map(|entries| {
            entries
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == "ckpt"))
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

#[test]
fn a_second_server_on_the_same_directory_exits_and_the_first_loses_nothing() {
    let first = TestServer::start_with(&["--appendfsync", "always"]);
    let mut raw = first.raw();
    for n in 0..100 {
        assert_eq!(raw.cmd(&["SET", &format!("before{n}"), "v"]), ok());
    }
    let (status, lines) = TestServer::run_to_exit(&first.dir, &[]);
    assert!(!status.success(), "a second server must not start");
    let all = lines.join("\n");
    let data_dir = first.dir.join("data").display().to_string();
    assert!(all.contains(&data_dir), "names the directory: {all}");
    assert!(
        all.contains(&format!("pid {}", first.pid())),
        "names the owner's pid: {all}"
    );
    assert!(!all.contains("Ready to accept"), "{all}");
    // The first server's log is intact and it keeps acknowledging writes
    // that survive kill -9.
    for n in 0..100 {
        assert_eq!(raw.cmd(&["SET", &format!("after{n}"), "w"]), ok());
    }
    let dir = first.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["DBSIZE"]), i(200));
    for (prefix, value) in [("before", "v"), ("after", "w")] {
        let keys: Vec<String> = (0..100).map(|n| format!("{prefix}{n}")).collect();
        let mut args = vec!["MGET"];
        args.extend(keys.iter().map(String::as_str));
        let values = raw.cmd(&args);
        assert!(values.as_array().iter().all(|v| *v == b(value)), "{prefix}");
    }
}

/// The lock file deleted under a live server: a second server on the
/// directory used to start, both acknowledged writes, and the directory
/// then refused to start. The lock is the directory's own now; a
/// checkpoint writes the pid file again.
#[test]
fn a_deleted_lock_file_lets_no_second_server_in() {
    let first = TestServer::start();
    let mut raw = first.raw();
    assert_eq!(raw.cmd(&["SET", "k", "v"]), ok());
    let lock_file = first.dir.join("data").join("strata.lock");
    std::fs::remove_file(&lock_file).unwrap();
    let (status, lines) = TestServer::run_to_exit(&first.dir, &[]);
    assert!(!status.success(), "a second server must not start");
    let all = lines.join("\n");
    assert!(all.contains("is in use by another process"), "{all}");
    assert_eq!(raw.cmd(&["SAVE"]), ok());
    let pid = std::fs::read_to_string(&lock_file).unwrap();
    assert_eq!(pid.trim(), first.pid().to_string());
    assert_eq!(raw.cmd(&["SET", "k2", "v2"]), ok());
    let dir = first.kill9();
    let server = TestServer::spawn(dir, &[], None, READY);
    assert_eq!(
        server.raw().cmd(&["MGET", "k", "k2"]),
        Reply::Array(vec![b("v"), b("v2")])
    );
}

#[test]
fn strata_check_fix_refuses_a_directory_in_use_while_the_read_only_check_runs() {
    let server = TestServer::start();
    assert_eq!(server.raw().cmd(&["SET", "k", "v"]), ok());
    let (status, report) = check(&server.dir, &[]);
    assert_eq!(status, 0, "{report}");
    let (status, report) = check(&server.dir, &["--fix", "--yes"]);
    assert_eq!(status, 3, "{report}");
    assert!(
        report.contains(&format!("pid {}", server.pid())),
        "{report}"
    );
    assert_eq!(server.raw().cmd(&["GET", "k"]), b("v"));
    let dir = server.kill9();
    let (status, report) = check(&dir, &["--fix", "--yes"]);
    assert_eq!(status, 0, "{report}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn strata_check_exit_status_tells_clean_torn_tail_and_damage_apart() {
    let server = TestServer::start();
    let mut raw = server.raw();
    for n in 0..20 {
        assert_eq!(raw.cmd(&["SET", &format!("k{n}"), "value"]), ok());
    }
    let dir = server.kill9();
    let (status, report) = check(&dir, &[]);
    assert_eq!(status, 0, "clean: {report}");
    let log_dir = dir.join("data/log");
    let mut segments: Vec<_> = std::fs::read_dir(&log_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    segments.sort();
    let segment = segments.pop().unwrap();
    let original = common::log_records(&segment);
    // A torn tail: the last record cut short.
    std::fs::write(&segment, &original[..original.len() - 5]).unwrap();
    let (status, report) = check(&dir, &[]);
    assert_eq!(status, 1, "torn tail: {report}");
    // Damage: a flipped bit in the middle of the log.
    let mut damaged = original.clone();
    damaged[original.len() / 2] ^= 0x01;
    std::fs::write(&segment, &damaged).unwrap();
    let (status, report) = check(&dir, &[]);
    assert_eq!(status, 2, "damage: {report}");
    assert!(report.contains("Corrupt log"), "{report}");
    // Not checked: no such directory, or bad usage.
    let (status, _) = check(&dir.join("missing"), &[]);
    assert_eq!(status, 3);
    let (status, _) = check(&dir, &["--bogus"]);
    assert_eq!(status, 3);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Segment files of `dir`'s log, oldest first.
fn segment_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut segments: Vec<_> = std::fs::read_dir(dir.join("data/log"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    segments.sort();
    segments
}

/// The newest segment of a server killed with -9 deleted: 204 of 40 000
/// acknowledged writes used to vanish with no word, and strata-check said
/// OK. Both now refuse, naming the file.
#[test]
fn a_missing_newest_segment_stops_start_up_and_strata_check() {
    let server = TestServer::start_with(&["--log-segment-size", "1mb", "--appendfsync", "always"]);
    let mut raw = server.raw();
    let value = "v".repeat(1000);
    for n in 0..3000 {
        raw.send(&["SET", &format!("key:{n}"), &value]);
    }
    for _ in 0..3000 {
        assert_eq!(raw.read(), ok());
    }
    let dir = server.kill9();
    let segments = segment_files(&dir);
    assert!(segments.len() >= 3, "{segments:?}");
    let newest = segments.last().unwrap();
    let saved = std::fs::read(newest).unwrap();
    std::fs::remove_file(newest).unwrap();
    let (status, report) = check(&dir, &[]);
    assert_eq!(status, 2, "{report}");
    assert!(report.contains(&newest.display().to_string()), "{report}");
    let (status, lines) = TestServer::run_to_exit(&dir, &[]);
    assert!(!status.success());
    let all = lines.join("\n");
    assert!(all.contains("is missing"), "{all}");
    assert!(all.contains(&newest.display().to_string()), "{all}");
    // Put back, every acknowledged write is there.
    std::fs::write(newest, saved).unwrap();
    let server = TestServer::spawn(dir, &[], None, READY);
    assert_eq!(server.raw().cmd(&["DBSIZE"]), i(3000));
}

/// A bit flipped in the last complete record of the newest segment (under
/// `appendfsync always`: acknowledged): it was dropped as a torn tail,
/// with a warning that said it was never acknowledged. Both start-up and
/// strata-check call it damage now.
#[test]
fn bit_rot_in_the_last_record_is_damage_not_a_torn_tail() {
    let server = TestServer::start_with(&["--appendfsync", "always"]);
    let mut raw = server.raw();
    for n in 0..50 {
        assert_eq!(raw.cmd(&["SET", &format!("k{n}"), &"x".repeat(300)]), ok());
    }
    let dir = server.kill9();
    let segment = segment_files(&dir).pop().unwrap();
    let mut bytes = std::fs::read(&segment).unwrap();
    let end = common::log_records(&segment).len();
    bytes[end - 10] ^= 0x04;
    std::fs::write(&segment, &bytes).unwrap();
    let (status, report) = check(&dir, &[]);
    assert_eq!(status, 2, "{report}");
    assert!(report.contains("fails its checksum"), "{report}");
    let (status, lines) = TestServer::run_to_exit(&dir, &[]);
    assert!(!status.success());
    let all = lines.join("\n");
    assert!(all.contains("key 'k49'"), "{all}");
}

/// Damage in a segment kept only for cold values: the server starts and
/// serves the rest, the keys whose value is there answer an error; and
/// strata-check now says the same (exit 4, naming the key) instead of
/// "Start-up stopped" (exit 2).
#[test]
fn damage_under_cold_values_names_the_keys_and_agrees_with_start_up() {
    let server = TestServer::start_with(&[
        "--maxmemory",
        "8mb",
        "--maxmemory-policy",
        "tiered",
        "--log-segment-size",
        "4mb",
    ]);
    let mut raw = server.raw();
    let value = "c".repeat(1000);
    for n in 0..30_000 {
        raw.send(&["SET", &format!("cold:{n:05}"), &value]);
        if n % 1000 == 999 {
            for _ in 0..1000 {
                assert_eq!(raw.read(), ok());
            }
        }
    }
    // A key whose value is only on disk when the checkpoint is written.
    let mut con = server.client();
    let victim = (0..1000)
        .map(|n| format!("cold:{n:05}"))
        .find(|key| on_disk(&mut con, key))
        .expect("early values went cold");
    assert_eq!(raw.cmd(&["SAVE"]), ok());
    let dir = server.kill9();
    let oldest = segment_files(&dir).remove(0);
    let mut bytes = std::fs::read(&oldest).unwrap();
    // Its SET record in the oldest segment: header (total length at 8..12,
    // 40 bytes), key, then the value.
    let mut at = 0;
    let start = loop {
        assert!(
            at + 40 < bytes.len(),
            "{victim} not in {}",
            oldest.display()
        );
        let len = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        if bytes[at + 40..].starts_with(victim.as_bytes()) {
            break at;
        }
        at += len;
    };
    bytes[start + 40 + victim.len() + 100] ^= 0x01;
    std::fs::write(&oldest, &bytes).unwrap();
    let (status, report) = check(&dir, &[]);
    assert_eq!(status, 4, "{report}");
    assert!(report.contains(&format!("'{victim}' (db 0)")), "{report}");
    assert!(!report.contains("Start-up stopped"), "{report}");
    let server = TestServer::spawn(dir, &[], None, READY);
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["DBSIZE"]), i(30_000));
    let reply = raw.cmd(&["GET", &victim]);
    assert!(
        matches!(&reply, Reply::Error(text) if text.contains("could not read the value")),
        "{reply:?}"
    );
    assert_eq!(raw.cmd(&["GET", "cold:29999"]), b(&value));
}

#[test]
fn a_corrupt_checkpoint_stops_start_up_naming_the_file_and_offset() {
    let server = TestServer::start();
    let mut raw = server.raw();
    for n in 0..500 {
        assert_eq!(raw.cmd(&["SET", &format!("key:{n}"), "some value"]), ok());
    }
    assert_eq!(raw.cmd(&["SAVE"]), ok());
    let dir = server.kill9();
    let file = checkpoint_files(&dir)
        .into_iter()
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let mut bytes = std::fs::read(&file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&file, &bytes).unwrap();
    let (status, lines) = TestServer::run_to_exit(&dir, &[]);
    assert!(!status.success());
    let all = lines.join("\n");
    assert!(
        all.contains(&format!("Bad checkpoint {} at offset ", file.display())),
        "{all}"
    );
    let (status, report) = check(&dir, &[]);
    assert_eq!(status, 2, "{report}");
    assert!(report.contains(&file.display().to_string()), "{report}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `appendonly no` + `save ""`: a shutdown writes nothing, a start loads
/// nothing; SHUTDOWN SAVE and SAVE still write, and a save point loads.
#[test]
fn save_empty_without_the_log_means_no_checkpoint_written_or_loaded() {
    let cache = ["--appendonly", "no", "--save", ""];
    let server = TestServer::start_with(&cache);
    assert_eq!(server.raw().cmd(&["SET", "k", "v"]), ok());
    let mut raw = server.raw();
    raw.send(&["SHUTDOWN"]);
    assert!(raw.is_closed());
    let dir = server.exited();
    assert!(checkpoint_files(&dir).is_empty(), "SHUTDOWN wrote nothing");
    // SIGTERM likewise.
    let server = TestServer::spawn(dir, &cache, None, READY);
    assert_eq!(server.raw().cmd(&["DBSIZE"]), i(0));
    assert_eq!(server.raw().cmd(&["SET", "k", "v"]), ok());
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(server.pid() as i32, libc::SIGTERM) };
    let dir = server.exited();
    assert!(checkpoint_files(&dir).is_empty(), "SIGTERM wrote nothing");
    // SHUTDOWN SAVE writes one; the same configuration does not load it,
    // and says so; a save point loads it.
    let server = TestServer::spawn(dir, &cache, None, READY);
    assert_eq!(server.raw().cmd(&["SET", "saved", "yes"]), ok());
    let mut raw = server.raw();
    raw.send(&["SHUTDOWN", "SAVE"]);
    assert!(raw.is_closed());
    let dir = server.exited();
    assert!(
        !checkpoint_files(&dir).is_empty(),
        "SHUTDOWN SAVE wrote one"
    );
    let server = TestServer::spawn(dir, &cache, None, LISTENING);
    server.wait_for_log("Not loading the checkpoint");
    server.wait_for_log(READY);
    assert_eq!(server.raw().cmd(&["GET", "saved"]), Reply::NullBulk);
    let dir = server.kill9();
    let server = TestServer::spawn(
        dir,
        &["--appendonly", "no", "--save", "3600 1"],
        None,
        READY,
    );
    assert_eq!(server.raw().cmd(&["GET", "saved"]), b("yes"));
    // SAVE in the pure-cache configuration replaces it.
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &cache, None, READY);
    assert_eq!(server.raw().cmd(&["SET", "fresh", "1"]), ok());
    assert_eq!(server.raw().cmd(&["SAVE"]), ok());
    let dir = server.kill9();
    let server = TestServer::spawn(dir, &["--appendonly", "no"], None, READY);
    let mut raw = server.raw();
    assert_eq!(raw.cmd(&["GET", "fresh"]), b("1"));
    assert_eq!(raw.cmd(&["GET", "saved"]), Reply::NullBulk);
    // SAVE and NOSAVE together are Redis 7's syntax error, not a shutdown.
    assert_eq!(
        raw.cmd(&["SHUTDOWN", "NOSAVE", "SAVE"]),
        e("ERR syntax error")
    );
    assert_eq!(raw.cmd(&["PING"]), Reply::simple("PONG"));
}

/// strata-check --fix without --yes asks, and only "y" truncates; on a
/// clean directory it has nothing to ask.
#[test]
fn strata_check_fix_asks_before_truncating() {
    let answer = |dir: &Path, text: &str| -> (i32, String) {
        use std::io::Write;
        let mut child = Command::new(strata_check())
            .arg("--fix")
            .arg(dir.join("data"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        let status = wait_bounded(&mut child);
        let output = child.wait_with_output().unwrap();
        (
            status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).into_owned(),
        )
    };
    let server = TestServer::start();
    assert_eq!(server.raw().cmd(&["SET", "a", "1"]), ok());
    let dir = server.kill9();
    let (status, report) = answer(&dir, "");
    assert_eq!(status, 0, "clean: {report}");
    assert!(!report.contains("Truncate"), "nothing to ask: {report}");
    let segment = std::fs::read_dir(dir.join("data/log"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .max()
        .unwrap();
    let mut bytes = common::log_records(&segment);
    bytes.extend_from_slice(&[9; 21]);
    std::fs::write(&segment, &bytes).unwrap();
    let (status, report) = answer(&dir, "n\n");
    assert_eq!(status, 1, "declined: {report}");
    assert!(report.contains("Left unchanged"), "{report}");
    assert_eq!(
        std::fs::metadata(&segment).unwrap().len() as usize,
        bytes.len()
    );
    let (status, report) = answer(&dir, "y\n");
    assert_eq!(status, 0, "accepted: {report}");
    assert_eq!(
        std::fs::metadata(&segment).unwrap().len() as usize,
        bytes.len() - 21
    );
    let server = TestServer::spawn(dir, &[], None, READY);
    assert_eq!(server.raw().cmd(&["GET", "a"]), b("1"));
}

/// What each SHUTDOWN variant writes (log on): NOSAVE no checkpoint, SAVE
/// and the default (as NOW and FORCE) one; every acknowledged write comes
/// back either way; ABORT with no shutdown in progress is Redis' error.
#[test]
fn shutdown_variants_and_what_they_write() {
    for (variant, writes_checkpoint) in [
        (&["SHUTDOWN", "NOSAVE"][..], false),
        (&["SHUTDOWN", "SAVE"][..], true),
        (&["SHUTDOWN"][..], true),
        (&["SHUTDOWN", "NOW"][..], true),
        (&["SHUTDOWN", "FORCE"][..], true),
    ] {
        let server = TestServer::start();
        let mut raw = server.raw();
        assert_eq!(raw.cmd(&["SET", "k", "v"]), ok());
        assert_eq!(
            raw.cmd(&["SHUTDOWN", "ABORT"]),
            e("ERR No shutdown in progress.")
        );
        raw.send(variant);
        assert!(raw.is_closed(), "{variant:?}");
        let dir = server.exited();
        assert_eq!(
            !checkpoint_files(&dir).is_empty(),
            writes_checkpoint,
            "{variant:?}"
        );
        let server = TestServer::spawn(dir, &[], None, READY);
        assert_eq!(server.raw().cmd(&["GET", "k"]), b("v"), "{variant:?}");
    }
}

/// Copies the data directory in `tests/fixtures/<name>` under a new
/// temporary directory (as its `data`), for a server to start on.
fn fixture(name: &str) -> std::path::PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let dir = temp_dir();
    let copy = |from: &Path, to: &Path| {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_file() {
                std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
            }
        }
    };
    copy(&source, &dir.join("data"));
    copy(&source.join("log"), &dir.join("data/log"));
    dir
}

/// What the format-3 fixture holds: written by the previous release
/// (40 keys and more, a SAVE, then more writes in the log only, then
/// `kill -9`).
fn check_format_v3_contents(r: &mut Raw) {
    let mut args = vec!["MGET".to_owned()];
    args.extend((1..=60).map(|n| format!("key:{n}")));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let values = r.cmd(&args);
    for (n, got) in (1..=60).zip(values.as_array()) {
        let expected = if n == 1 {
            Reply::NullBulk
        } else {
            b(&format!("value-{n}"))
        };
        assert_eq!(got, &expected, "key:{n}");
    }
    assert_eq!(r.cmd(&["GET", "counter"]), b("43"));
    assert_eq!(r.cmd(&["EXPIRETIME", "volatile"]), i(4102444800));
    assert_eq!(r.cmd(&["SELECT", "3"]), ok());
    assert_eq!(r.cmd(&["GET", "in3"]), b("three"));
    assert_eq!(r.cmd(&["SELECT", "5"]), ok());
    assert_eq!(r.cmd(&["GET", "in5"]), b("five"));
    assert_eq!(r.cmd(&["SELECT", "0"]), ok());
    assert_eq!(r.cmd(&["DBSIZE"]), i(61));
}

#[test]
fn a_data_directory_of_the_previous_format_loads_and_keeps_its_sharding() {
    let server = TestServer::spawn(fixture("format-v3"), &[], None, READY);
    let mut r = server.raw();
    check_format_v3_contents(&mut r);
    let persistence = r.cmd(&["INFO", "persistence"]).as_text();
    assert_eq!(info_field(&persistence, "strata_key_sharding"), "hash");
    // Written again (format 4) and restarted: the same keys, the same rule.
    assert_eq!(r.cmd(&["SET", "after", "upgrade"]), ok());
    r.send(&["SHUTDOWN"]);
    assert!(r.is_closed());
    let server = TestServer::spawn(server.exited(), &[], None, READY);
    let mut r = server.raw();
    assert_eq!(r.cmd(&["GET", "after"]), b("upgrade"));
    assert_eq!(r.cmd(&["DEL", "after"]), i(1));
    check_format_v3_contents(&mut r);
    let persistence = r.cmd(&["INFO", "persistence"]).as_text();
    assert_eq!(info_field(&persistence, "strata_key_sharding"), "hash");
    // A new directory shards by slot.
    let fresh = TestServer::start();
    let persistence = fresh.raw().cmd(&["INFO", "persistence"]).as_text();
    assert_eq!(info_field(&persistence, "strata_key_sharding"), "slot");
}
