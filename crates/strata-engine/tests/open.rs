//! The engine through its front door only (`strata_engine::open`): open a
//! directory, write, drop without closing, tear the log's tail, damage it,
//! and open again. Each test works in its own temporary directory.

use std::path::{Path, PathBuf};

use strata_engine::open::{LoadSettings, Loaded, open};
use strata_engine::storage::recovery::RecoveryError;
use strata_engine::types::collection::{List, Str};
use strata_engine::types::list::{End, ListOp};
use strata_engine::types::value::Value;
use strata_engine::{Keyspace, storage::check};

const NOW_MS: u64 = 1_700_000_000_000;

/// A fresh directory under the system's temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "strata-engine-open-{name}-{}-{}",
            std::process::id(),
            NOW_MS
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Opens and loads `dir` with the log on.
fn start(dir: &Path) -> Result<(Keyspace, Loaded), RecoveryError> {
    let (keyspace, pending) = open(dir, 4)?;
    let loaded = pending.load(&keyspace, NOW_MS, LoadSettings::default(), |_| {})?;
    Ok((keyspace, loaded))
}

fn set(keyspace: &Keyspace, key: &[u8], value: &[u8]) {
    let key = keyspace.key(key);
    let mut shard = keyspace.lock(key);
    shard.set(0, key, Value::owned(value.to_vec()), None, false, NOW_MS);
    drop(shard);
}

fn get(keyspace: &Keyspace, key: &[u8]) -> Option<Vec<u8>> {
    let key = keyspace.key(key);
    let mut shard = keyspace.lock(key);
    let entry = shard.get_as::<Str>(0, key, NOW_MS).expect("a string")?;
    Some(entry.value().as_bytes().to_vec())
}

/// Writes everything committed to the log file (as a reply under
/// `appendfsync always` waits for) and drops the keyspace without a
/// checkpoint or a clean shutdown: what a kill leaves.
fn crash(keyspace: Keyspace) {
    let log = keyspace.log().expect("the log is on").clone();
    assert!(log.sync_now(), "the log writes and syncs");
    drop(keyspace);
    drop(log);
}

fn newest_segment(dir: &Path) -> PathBuf {
    let mut segments: Vec<PathBuf> = std::fs::read_dir(dir.join("log"))
        .expect("the log directory")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    segments.sort();
    segments.pop().expect("a segment")
}

/// Cuts the last `bytes` off `segment` (a write a crash interrupted);
/// returns the length left.
fn cut_tail(segment: &Path, bytes: u64) -> u64 {
    let len = std::fs::metadata(segment).unwrap().len();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(segment)
        .unwrap();
    file.set_len(len - bytes).unwrap();
    len - bytes
}

/// Flips the byte in the middle of `segment` (a complete record whose
/// checksum fails); returns its offset.
fn flip_middle_byte(segment: &Path) -> usize {
    let mut bytes = std::fs::read(segment).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0xff;
    std::fs::write(segment, &bytes).unwrap();
    at
}

#[test]
fn what_was_written_before_a_crash_is_there_after_it() {
    let dir = TempDir::new("crash");
    let (keyspace, loaded) = start(&dir.0).expect("an empty directory opens");
    assert_eq!((loaded.checkpoint_keys, loaded.records_replayed), (0, 0));
    for n in 0..500u32 {
        set(
            &keyspace,
            format!("k{n}").as_bytes(),
            format!("v{n}").as_bytes(),
        );
    }
    let list = keyspace.key(b"list");
    let mut shard = keyspace.lock(list);
    let push = ListOp::Push(End::Tail, vec![b"a", b"b", b"c"]);
    shard
        .change_as::<List>(0, list, NOW_MS, &push, true)
        .expect("a list");
    drop(shard);
    crash(keyspace);

    let (keyspace, loaded) = start(&dir.0).expect("it opens again");
    assert_eq!(loaded.records_replayed, 501);
    // A new keyspace hashes with its own seed: keys are made anew.
    let list = keyspace.key(b"list");
    for n in [0u32, 250, 499] {
        let value = format!("v{n}").into_bytes();
        assert_eq!(get(&keyspace, format!("k{n}").as_bytes()), Some(value));
    }
    let mut shard = keyspace.lock(list);
    let entry = shard
        .get_as::<List>(0, list, NOW_MS)
        .unwrap()
        .expect("the list");
    assert_eq!(entry.value().list().expect("a list").len(), 3);
}

#[test]
fn a_torn_tail_is_cut_and_reported_and_the_rest_loads() {
    let dir = TempDir::new("torn");
    let (keyspace, _) = start(&dir.0).unwrap();
    set(&keyspace, b"kept", b"1");
    set(&keyspace, b"torn", b"2");
    crash(keyspace);
    // Cut the last record in half: a write the crash interrupted.
    cut_tail(&newest_segment(&dir.0), 10);

    let (keyspace, loaded) = start(&dir.0).expect("a torn tail is no error");
    assert_eq!(loaded.truncated.len(), 1, "{:?}", loaded.truncated);
    assert_eq!(get(&keyspace, b"kept"), Some(b"1".to_vec()));
    assert_eq!(get(&keyspace, b"torn"), None);
    // The log goes on after the cut: a new write survives the next crash.
    set(&keyspace, b"after", b"3");
    crash(keyspace);
    let (keyspace, loaded) = start(&dir.0).unwrap();
    assert!(loaded.truncated.is_empty(), "{:?}", loaded.truncated);
    assert_eq!(get(&keyspace, b"after"), Some(b"3".to_vec()));
}

#[test]
fn damage_inside_the_log_stops_the_open_and_says_where() {
    let dir = TempDir::new("corrupt");
    let (keyspace, _) = start(&dir.0).unwrap();
    for n in 0..50u32 {
        set(&keyspace, format!("k{n}").as_bytes(), &[b'x'; 100]);
    }
    crash(keyspace);
    // Flip a byte in the middle: a complete record whose checksum fails.
    let segment = newest_segment(&dir.0);
    let at = flip_middle_byte(&segment);

    match start(&dir.0) {
        Err(RecoveryError::Corrupt { file, offset, .. }) => {
            assert_eq!(file, segment);
            assert!(offset <= at as u64, "{offset} vs the byte at {at}");
        }
        Err(other) => panic!("not reported as corruption: {other}"),
        Ok(_) => panic!("a damaged record loaded"),
    }
}

#[test]
fn a_missing_newest_segment_is_named() {
    let dir = TempDir::new("missing");
    let (keyspace, _) = start(&dir.0).unwrap();
    set(&keyspace, b"k", b"v");
    crash(keyspace);
    let segment = newest_segment(&dir.0);
    std::fs::remove_file(&segment).unwrap();
    match start(&dir.0) {
        Err(error @ RecoveryError::Missing { .. }) => {
            let name = segment.file_name().unwrap().to_string_lossy().into_owned();
            assert!(error.to_string().contains(&name), "{error}");
        }
        Err(other) => panic!("not reported as missing: {other}"),
        Ok(_) => panic!("opened without its newest segment"),
    }
}

#[test]
fn start_empty_leaves_the_directory_for_a_later_open() {
    let dir = TempDir::new("cache");
    let (keyspace, _) = start(&dir.0).unwrap();
    set(&keyspace, b"k", b"v");
    crash(keyspace);
    let (keyspace, pending) = open(&dir.0, 4).unwrap();
    assert!(pending.has_data());
    let settings = LoadSettings {
        appendonly: false,
        start_empty: true,
        ..LoadSettings::default()
    };
    let loaded = pending.load(&keyspace, NOW_MS, settings, |_| {}).unwrap();
    assert!(loaded.skipped);
    assert_eq!(get(&keyspace, b"k"), None, "a pure cache starts empty");
    drop(keyspace);
    let (keyspace, _) = start(&dir.0).unwrap();
    assert_eq!(get(&keyspace, b"k"), Some(b"v".to_vec()), "the data stayed");
}

/// `strata-check` (`strata_engine::storage::check::run`) on directories this
/// engine wrote: 0 clean, 1 a torn tail left in place, 0 again after
/// `--fix --yes` cuts it, 2 a damaged record, 3 no directory.
#[test]
fn the_check_tells_clean_torn_and_damaged_apart() {
    use std::process::ExitCode;
    let check = |args: &[&str]| check::run(args.iter().map(|a| a.to_string()));
    let dir = TempDir::new("check");
    let path = dir.0.to_string_lossy().into_owned();
    let (keyspace, _) = start(&dir.0).unwrap();
    for n in 0..50u32 {
        set(&keyspace, format!("k{n}").as_bytes(), &[b'x'; 100]);
    }
    crash(keyspace);
    assert_eq!(check(&[&path]), ExitCode::SUCCESS);

    let segment = newest_segment(&dir.0);
    let left = cut_tail(&segment, 10);
    assert_eq!(check(&[&path]), ExitCode::from(1), "a torn tail");
    assert_eq!(
        std::fs::metadata(&segment).unwrap().len(),
        left,
        "left in place"
    );
    assert_eq!(check(&["--fix", "--yes", &path]), ExitCode::SUCCESS);
    assert_eq!(check(&[&path]), ExitCode::SUCCESS, "cut by --fix");

    flip_middle_byte(&segment);
    assert_eq!(check(&[&path]), ExitCode::from(2), "a damaged record");
    assert_eq!(check(&[&format!("{path}/missing")]), ExitCode::from(3));
}
