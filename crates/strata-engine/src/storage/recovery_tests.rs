//! Recovery's tests: checkpoints and log replay on real files, torn
//! tails and corruption, tiering's cold values, the cold reader and
//! [`crate::tiering::fetch::ColdFetch`] as an embedder uses them.

use super::*;
use crate::storage::checkpoint;
use crate::storage::log::{FsyncPolicy, Log, LogStart};
use crate::types::collection::{List, Set, ZSet};
use std::collections::BTreeMap;
use std::sync::Arc;

const NOW_MS: u64 = 1_000_000;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "strata-recovery-{name}-{}-{}",
        std::process::id(),
        crate::keyspace::shards::random_u64()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// (db, key) → (value, deadline).
type Contents = BTreeMap<(usize, Vec<u8>), (Vec<u8>, Option<u64>)>;

/// Every key of a keyspace with its value and deadline.
fn dump(ks: &Keyspace) -> Contents {
    let mut out = BTreeMap::new();
    for db in 0..ks.db_count() {
        for key in ks.keys(db, b"*", NOW_MS) {
            let k = ks.key(&key);
            let mut shard = ks.lock(k);
            let entry = shard.peek(db, k, NOW_MS).unwrap();
            let value = entry.value().as_bytes().to_vec();
            out.insert((db, key.clone()), (value, entry.expire_at_ms()));
        }
    }
    out
}

fn start_log(dir: &Path, loaded: Loaded, segment_bytes: u64) -> Arc<Log> {
    Log::start(
        &log_dir(dir),
        segment_bytes,
        FsyncPolicy::No,
        LogStart {
            next_lsn: loaded.next_lsn,
            next_segment: loaded.next_segment,
            segments: loaded.segments,
        },
    )
    .unwrap()
}

/// A keyspace recovered from `dir`, with its log attached.
fn open(dir: &Path, segment_bytes: u64) -> Result<Keyspace, RecoveryError> {
    open_reporting(dir, segment_bytes).map(|(ks, _)| ks)
}

/// As [`open`], with the lines describing torn tails cut off.
fn open_reporting(
    dir: &Path,
    segment_bytes: u64,
) -> Result<(Keyspace, Vec<String>), RecoveryError> {
    let plan = plan(dir)?;
    let ks = match plan.seed {
        Some(seed) => Keyspace::with_seed(4, seed, plan.sharding),
        None => Keyspace::new(4),
    };
    let loaded = load(&plan, &ks, NOW_MS, LoadOptions::default(), |_| {})?;
    let truncated = loaded.truncated.clone();
    ks.attach_log(start_log(dir, loaded, segment_bytes));
    Ok((ks, truncated))
}

fn close(ks: &Keyspace) {
    ks.log().unwrap().shutdown();
}

fn set(ks: &Keyspace, db: usize, key: &[u8], value: &[u8], deadline: Option<u64>) {
    let k = ks.key(key);
    ks.lock(k)
        .set(db, k, Value::from_bytes(value), deadline, false, NOW_MS);
}

/// A mix of every kind of change, including multi-key groups.
fn workload(ks: &Keyspace, round: usize) {
    for i in 0..50 {
        let key = format!("k{i}");
        set(
            ks,
            i % 3,
            key.as_bytes(),
            format!("v{round}-{i}").as_bytes(),
            None,
        );
    }
    set(ks, 0, b"ttl", b"t", Some(NOW_MS + 60_000));
    set(ks, 0, b"int", b"12345", None);
    {
        let k = ks.key(b"k1");
        let mut shard = ks.lock(k);
        if let Some(entry) = shard.get(1, k, NOW_MS).unwrap() {
            let end = entry.value().len();
            entry.write_at(1, end, b"+appended");
        }
    }
    {
        // Changes of part of a value (SETRANGE records): past the end
        // of a value, and (below) on a key with a deadline.
        let k = ks.key(b"k4");
        let mut shard = ks.lock(k);
        if let Some(entry) = shard.get(1, k, NOW_MS).unwrap() {
            let end = entry.value().len();
            entry.write_at(1, end + 3, b"@");
        }
    }
    let k = ks.key(b"ttl");
    if let Some(entry) = ks.lock(k).get(0, k, NOW_MS).unwrap() {
        entry.write_at(0, 0, b"T");
    }
    {
        let (a, b) = (ks.key(b"k3"), ks.key(b"moved"));
        let mut shards = ks.lock_many([a, b]);
        if let Some(entry) = shards.shard(a.shard()).remove(0, a, NOW_MS) {
            let value = entry.value().as_bytes().to_vec();
            shards
                .shard(b.shard())
                .set(2, b, Value::owned(value), None, false, NOW_MS);
        }
    }
    let k = ks.key(b"k4");
    ks.lock(k).set_expire(1, k, Some(NOW_MS + 5_000), NOW_MS);
    let k = ks.key(b"k5");
    ks.lock(k).remove(2, k, NOW_MS);
    if round % 2 == 1 {
        ks.swap_db(0, 3);
    }
    if round == 2 {
        drop(ks.flush_db(1));
    }
}

#[test]
fn replay_rebuilds_every_change() {
    let dir = temp_dir("replay");
    let ks = open(&dir, 4096).unwrap();
    for round in 0..4 {
        workload(&ks, round);
    }
    let expected = dump(&ks);
    assert!(expected.len() > 40, "{}", expected.len());
    close(&ks);
    let segments = plan(&dir).unwrap().segments;
    assert!(segments.len() >= 3, "small segments roll: {segments:?}");
    let recovered = open(&dir, 4096).unwrap();
    assert_eq!(dump(&recovered), expected);
    close(&recovered);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn checkpoint_taken_during_writes_plus_log_is_exact() {
    let dir = temp_dir("checkpoint");
    let ks = Arc::new(open(&dir, 64 << 10).unwrap());
    workload(&ks, 0);
    let writer = {
        let ks = ks.clone();
        std::thread::spawn(move || {
            for round in 1..40 {
                workload(&ks, round);
            }
        })
    };
    let info = checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).unwrap();
    let files = checkpoint::list(&dir).unwrap();
    assert_eq!(files.len(), checkpoint::RANGE_COUNT, "one file per range");
    let on_disk: u64 = files
        .iter()
        .map(|(_, _, path)| std::fs::metadata(path).unwrap().len())
        .sum();
    assert_eq!(on_disk, info.bytes, "direct-I/O padding cut off");
    writer.join().unwrap();
    let expected = dump(&ks);
    close(&ks);
    let recovered = open(&dir, 64 << 10).unwrap();
    assert_eq!(dump(&recovered), expected);
    close(&recovered);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn big_values_copied_piece_by_piece_while_they_change_recover_exactly() {
    let dir = temp_dir("pieces");
    let ks = Arc::new(open(&dir, 64 << 20).unwrap());
    // Above the piecewise threshold: copied in several lock holds.
    let big = vec![b'a'; 6 << 20];
    set(&ks, 0, b"big", &big, None);
    set(&ks, 0, b"grows", &big[..5 << 20], None);
    // The same key in another database, swapped back and forth: a piece
    // copied after a SWAPDB must come from the same value, not from
    // whatever the first database now holds under that key.
    set(&ks, 1, b"big", &vec![b'b'; 6 << 20], None);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (ks, stop) = (ks.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut round = 0usize;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) || round < 50 {
                round += 1;
                // Bytes all along the value, so pieces copied before and
                // after a change both exist.
                let offset = (round * 7_919 * 131) % (6 << 20);
                let k = ks.key(b"big");
                if let Some(entry) = ks.lock(k).get(0, k, NOW_MS).unwrap() {
                    entry.write_at(0, offset, format!("<{round}>").as_bytes());
                }
                let k = ks.key(b"grows");
                if let Some(entry) = ks.lock(k).get(0, k, NOW_MS).unwrap() {
                    let end = entry.value().len();
                    entry.write_at(0, end, b"+tail");
                }
                if round.is_multiple_of(5) {
                    ks.swap_db(0, 1);
                }
            }
        })
    };
    checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    let expected = dump(&ks);
    close(&ks);
    let recovered = open(&dir, 64 << 20).unwrap();
    let got = dump(&recovered);
    assert_eq!(got.len(), expected.len());
    for (key, value) in &expected {
        assert!(
            got.get(key) == Some(value),
            "{:?} differs after recovery",
            key.1
        );
    }
    close(&recovered);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Names of the files in the log directory, sorted.
fn log_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(log_dir(dir))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn segments_a_cycle_removes_leave_nothing_and_crash_leftovers_are_ignored() {
    let dir = temp_dir("trash");
    let ks = open(&dir, 16 << 10).unwrap();
    for round in 0..12 {
        workload(&ks, round);
        ks.log().unwrap().sync_now();
    }
    let before = log_files(&dir);
    assert!(before.len() > 2, "several segments: {before:?}");
    checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).unwrap();
    let after = log_files(&dir);
    assert!(after.len() < before.len(), "{before:?} -> {after:?}");
    assert!(
        after
            .iter()
            .all(|name| segment_seq(name).is_some() || name == crate::storage::head::HEAD_FILE_NAME),
        "only segments (and HEAD) remain: {after:?}"
    );
    workload(&ks, 9);
    let expected = dump(&ks);
    close(&ks);
    // A crash between a segment's rename and its removal leaves a
    // renamed, half-cut file: recovery must not read it as a segment, and
    // the next start removes it.
    let trash = log_dir(&dir).join("segment-0000000001.log.deleted");
    std::fs::write(&trash, b"half a record").unwrap();
    let recovered = open(&dir, 16 << 10).unwrap();
    assert_eq!(dump(&recovered), expected);
    assert!(!trash.exists(), "left-over trash removed at start");
    close(&recovered);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_cycle_cut_short_leaves_a_valid_mix_of_ranges() {
    let dir = temp_dir("partial");
    let ks = open(&dir, 16 << 10).unwrap();
    for round in 0..3 {
        workload(&ks, round);
    }
    checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).unwrap();
    for round in 3..6 {
        workload(&ks, round);
    }
    // A second cycle that a crash stops after five ranges.
    let log = ks.log().unwrap().clone();
    let mut throttle = checkpoint::Throttle::new(0);
    for range in 0..5 {
        checkpoint::write_range(&ks, &dir, range, &|| log.next_lsn(), &mut throttle, NOW_MS)
            .unwrap();
    }
    for round in 6..8 {
        workload(&ks, round);
    }
    let expected = dump(&ks);
    close(&ks);
    assert_eq!(
        checkpoint::list(&dir).unwrap().len(),
        checkpoint::RANGE_COUNT
    );
    let recovered = open(&dir, 16 << 10).unwrap();
    assert_eq!(dump(&recovered), expected);
    close(&recovered);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_missing_range_file_after_the_log_was_cut_stops_recovery() {
    let dir = temp_dir("missing");
    let ks = open(&dir, 16 << 10).unwrap();
    workload(&ks, 0);
    checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).unwrap();
    workload(&ks, 1);
    close(&ks);
    let (_, _, third) = checkpoint::list(&dir).unwrap().remove(3);
    std::fs::remove_file(third).unwrap();
    match open(&dir, 16 << 10) {
        Ok(_) => panic!("recovered without a range of the checkpoint"),
        Err(e) => {
            let text = e.to_string();
            assert!(
                text.contains("checkpoint-03-*.ckpt (shards 192..256)"),
                "{text}"
            );
            assert!(text.contains("the log starts at LSN"), "{text}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The newest segment of a crashed server deleted: recovery used to
/// replay the one before it to its end and start with the newest writes
/// gone, saying nothing (and strata-check said OK). HEAD names it.
#[test]
fn a_missing_newest_segment_stops_recovery_and_verify() {
    let dir = temp_dir("missing-newest");
    let ks = open(&dir, 16 << 10).unwrap();
    for round in 0..20 {
        workload(&ks, round);
        ks.log().unwrap().sync_now();
    }
    close(&ks);
    let plan = plan(&dir).unwrap();
    assert!(plan.segments.len() > 2, "{:?}", plan.segments);
    let newest = *plan.segments.last().unwrap();
    assert_eq!(plan.head.map(|h| h.newest), Some(newest));
    let path = segment_path(&log_dir(&dir), newest);
    let saved = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    for error in [
        open(&dir, 16 << 10).err().map(|e| e.to_string()),
        verify(&dir).err().map(|e| e.to_string()),
    ] {
        let text = error.expect("a missing newest segment is an error");
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert!(text.contains("is missing"), "{text}");
    }
    // Put back, the directory recovers whole.
    std::fs::write(&path, saved).unwrap();
    close(&open(&dir, 16 << 10).unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A checkpoint cycle that covers the newest segment whole deletes it;
/// HEAD records that, and the next start is clean.
#[test]
fn a_newest_segment_the_log_deleted_is_no_loss() {
    let dir = temp_dir("deleted-newest");
    let ks = open(&dir, 16 << 10).unwrap();
    workload(&ks, 0);
    checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).unwrap();
    // Nothing written since: the cycle's roll made no new segment, and a
    // second cycle deletes the last one.
    checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).unwrap();
    let expected = dump(&ks);
    close(&ks);
    let plan = plan(&dir).unwrap();
    let head = plan.head.unwrap();
    assert!(
        plan.segments.contains(&head.newest) || head.newest_deleted(),
        "{plan:?}"
    );
    let recovered = open(&dir, 16 << 10).unwrap();
    assert_eq!(dump(&recovered), expected);
    close(&recovered);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The log says in HEAD that it deletes the segment HEAD names before it
/// deletes it: a crash between the two (here, a HEAD that cannot be
/// written) leaves the segment in place, never a HEAD naming a segment
/// the log removed (a start refused for a loss that is none).
#[test]
fn a_failed_head_write_deletes_no_newest_segment() {
    let dir = temp_dir("head-before-delete");
    let ks = open(&dir, 16 << 10).unwrap();
    workload(&ks, 0);
    // On disk, with HEAD naming the newest segment.
    assert!(ks.log().expect("a log").sync_now());
    let head = crate::storage::head::read(&log_dir(&dir))
        .unwrap()
        .expect("HEAD");
    assert!(segment_path(&log_dir(&dir), head.newest).exists());
    // HEAD is replaced through HEAD.tmp: a directory there fails it.
    let blocker = log_dir(&dir).join("HEAD.tmp");
    std::fs::create_dir_all(&blocker).unwrap();
    assert!(
        checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).is_err(),
        "the cycle that deletes HEAD's segment could not write HEAD"
    );
    let expected = dump(&ks);
    // Dropped as a crash leaves it.
    drop(ks);
    std::fs::remove_dir(&blocker).unwrap();
    let recovered = open(&dir, 16 << 10).expect("the directory starts");
    assert_eq!(dump(&recovered), expected);
    close(&recovered);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_missing_range_file_with_no_log_left_stops_recovery() {
    let dir = temp_dir("missing-empty");
    let ks = open(&dir, 16 << 10).unwrap();
    workload(&ks, 0);
    checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).unwrap();
    close(&ks);
    let (_, _, fifth) = checkpoint::list(&dir).unwrap().remove(5);
    std::fs::remove_file(fifth).unwrap();
    match open(&dir, 16 << 10) {
        Ok(_) => panic!("recovered without a range of the checkpoint"),
        Err(e) => assert!(e.to_string().contains("range files"), "{e}"),
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_log_cut_without_its_checkpoint_stops_recovery() {
    let dir = temp_dir("no-checkpoint");
    let ks = open(&dir, 16 << 10).unwrap();
    workload(&ks, 0);
    checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).unwrap();
    workload(&ks, 1);
    close(&ks);
    for (_, _, path) in checkpoint::list(&dir).unwrap() {
        std::fs::remove_file(path).unwrap();
    }
    match open(&dir, 16 << 10) {
        Ok(_) => panic!("recovered a log cut without its checkpoint"),
        Err(e) => assert!(e.to_string().contains("needs it from 1"), "{e}"),
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_damaged_checkpoint_file_stops_recovery_naming_it() {
    let dir = temp_dir("bad-checkpoint");
    let ks = open(&dir, 16 << 10).unwrap();
    workload(&ks, 0);
    checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).unwrap();
    close(&ks);
    let (_, _, path) = checkpoint::list(&dir).unwrap().remove(7);
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();
    let error = match open(&dir, 16 << 10) {
        Ok(_) => panic!("recovered from a damaged checkpoint"),
        Err(e) => e.to_string(),
    };
    assert!(error.contains(&path.display().to_string()), "{error}");
    assert!(error.contains("Bad checkpoint"), "{error}");
    assert!(verify(&dir).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn torn_tail_at_every_byte_recovers_a_prefix() {
    let dir = temp_dir("torn");
    let ks = open(&dir, 1 << 20).unwrap();
    set(&ks, 0, b"first", b"1", None);
    let before_last = dump(&ks);
    // The last command is a group: both keys or neither.
    {
        let (a, b) = (ks.key(b"a"), ks.key(b"b"));
        let mut shards = ks.lock_many([a, b]);
        shards
            .shard(a.shard())
            .set(0, a, Value::from_bytes(b"x"), None, false, NOW_MS);
        shards
            .shard(b.shard())
            .set(0, b, Value::from_bytes(b"y"), None, false, NOW_MS);
    }
    let after_last = dump(&ks);
    close(&ks);
    let segment = segment_path(&log_dir(&dir), 1);
    let full = std::fs::read(&segment).unwrap();
    let group_len = 2 * (record::HEADER_BYTES + 2);
    let start = full.len() - group_len;
    for cut in start..=full.len() {
        let copy = temp_dir("torn-copy");
        std::fs::create_dir_all(log_dir(&copy)).unwrap();
        std::fs::write(segment_path(&log_dir(&copy), 1), &full[..cut]).unwrap();
        let recovered = open(&copy, 1 << 20).unwrap();
        let expected = if cut == full.len() {
            &after_last
        } else {
            &before_last
        };
        assert_eq!(&dump(&recovered), expected, "cut at {cut}");
        close(&recovered);
        let kept = std::fs::metadata(segment_path(&log_dir(&copy), 1))
            .unwrap()
            .len();
        assert_eq!(
            kept as usize,
            if cut == full.len() { cut } else { start },
            "truncated"
        );
        std::fs::remove_dir_all(&copy).unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Direct writes leave the newest segment padded with zeros to a block
/// boundary: that is its clean end. A crash in a multi-block write can
/// land a later block and not the one before it: zeros to the block's
/// end, then bytes; that is a torn tail, not corruption.
#[test]
fn zero_padding_is_a_clean_end_and_a_hole_before_a_block_is_a_torn_tail() {
    let dir = temp_dir("padding");
    let ks = open(&dir, 1 << 20).unwrap();
    for n in 0..5 {
        set(&ks, 0, format!("k{n}").as_bytes(), b"value", None);
    }
    let expected = dump(&ks);
    close(&ks);
    let segment = segment_path(&log_dir(&dir), 1);
    let records = std::fs::read(&segment).unwrap();
    assert!(records.len() < 4096);
    for tail in [&[][..], &[5u8; 300][..]] {
        let mut bytes = records.clone();
        bytes.resize(4096, 0);
        bytes.extend_from_slice(tail);
        std::fs::write(&segment, &bytes).unwrap();
        let (recovered, truncated) = open_reporting(&dir, 1 << 20).unwrap();
        assert_eq!(dump(&recovered), expected);
        assert_eq!(truncated.is_empty(), tail.is_empty(), "{truncated:?}");
        close(&recovered);
        assert_eq!(
            std::fs::read(&segment).unwrap(),
            records,
            "cut to the records"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The last record of the newest segment fails its checksum. With a
/// sector of zeros in it that never landed, it was cut by a crash: a
/// torn tail, cut off. Whole but with a flipped bit, it was damaged
/// after it was written (and may have been acknowledged): corruption,
/// which stops recovery naming its LSN and key (it used to be dropped as
/// a torn tail).
#[test]
fn a_damaged_last_record_is_corruption_and_a_cut_one_a_torn_tail() {
    let dir = temp_dir("last-record");
    let ks = open(&dir, 1 << 20).unwrap();
    set(&ks, 0, b"first", b"1", None);
    let before_last = dump(&ks);
    set(&ks, 0, b"last", &[7u8; 5000], None);
    close(&ks);
    let segment = segment_path(&log_dir(&dir), 1);
    let full = std::fs::read(&segment).unwrap();
    let last_len = record::HEADER_BYTES + 4 + 5000;
    let last_start = full.len() - last_len;
    // A bit flipped inside the value.
    let mut flipped = full.clone();
    flipped[last_start + last_len - 100] ^= 0x10;
    std::fs::write(&segment, &flipped).unwrap();
    for error in [
        open(&dir, 1 << 20).err().map(|e| e.to_string()),
        verify(&dir).err().map(|e| e.to_string()),
    ] {
        let text = error.expect("a damaged whole record is corruption");
        assert!(text.contains("fails its checksum"), "{text}");
        assert!(text.contains("key 'last'"), "{text}");
        assert!(text.contains(&format!("offset {last_start}")), "{text}");
    }
    // A sector of the value never written: a torn tail.
    let mut cut = full.clone();
    let sector = (last_start + 2000).next_multiple_of(512);
    let block_end = (sector + 1).next_multiple_of(4096).min(full.len());
    cut[sector..block_end].fill(0);
    std::fs::write(&segment, &cut).unwrap();
    let (recovered, truncated) = open_reporting(&dir, 1 << 20).unwrap();
    assert_eq!(dump(&recovered), before_last);
    assert_eq!(truncated.len(), 1, "{truncated:?}");
    close(&recovered);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn flipped_byte_mid_log_stops_recovery_with_file_and_offset() {
    let dir = temp_dir("flip");
    let ks = open(&dir, 1 << 20).unwrap();
    for i in 0..10 {
        set(&ks, 0, format!("key{i}").as_bytes(), b"value", None);
    }
    close(&ks);
    let segment = segment_path(&log_dir(&dir), 1);
    let mut bytes = std::fs::read(&segment).unwrap();
    let record_len = record::HEADER_BYTES + 4 + 5;
    let offset = 3 * record_len + record::HEADER_BYTES + 1;
    bytes[offset] ^= 0x40;
    std::fs::write(&segment, &bytes).unwrap();
    let error = match open(&dir, 1 << 20) {
        Ok(_) => panic!("recovered from a corrupt log"),
        Err(e) => e.to_string(),
    };
    assert!(error.contains(&segment.display().to_string()), "{error}");
    assert!(
        error.contains(&format!("offset {}", 3 * record_len)),
        "{error}"
    );
    assert!(verify(&dir).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every value of db 0, read into RAM where it is on disk.
fn read_all(ks: &Keyspace, count: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|i| {
            let key = format!("key:{i}");
            let k = ks.key(key.as_bytes());
            let mut shard = ks.lock(k);
            let entry = shard.get(0, k, NOW_MS).unwrap().expect("key exists");
            entry.value().as_bytes().to_vec()
        })
        .collect()
}

/// One eviction call asking for every value to leave RAM.
fn evict_round(ks: &Keyspace) {
    ks.evict(
        crate::tiering::eviction::EvictionPolicy::Values,
        u64::MAX,
        16,
        1 << 20,
        NOW_MS,
    );
}

/// Evicts until every value is cold. A value leaves RAM only once its log
/// write is done, which a loaded machine may delay: rounds go on for up to
/// 10 s (1000 rounds at once were not enough in a full parallel run).
fn evict_everything(ks: &Keyspace) {
    ks.log().unwrap().flush_now();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        if ks.tier().cold_keys() as usize == ks.total_keys() as usize {
            return;
        }
        evict_round(ks);
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    panic!("values stayed in RAM");
}

/// A table whose values in RAM all wait for their log write is swept
/// once: the next samples skip it (they used to sweep it on every write,
/// 88 % of the CPU with a budget the keys nearly fill) until the log is
/// written past them or the shard changes, and then its values can go.
#[test]
fn eviction_skips_a_table_with_nothing_to_move_until_it_can() {
    use crate::tiering::eviction::{Evicted, EvictionPolicy};
    let dir = temp_dir("fruitless");
    let ks = open(&dir, 1 << 20).unwrap();
    ks.tier().set_tracking(true);
    let key = ks.key(b"first");
    set(&ks, 0, b"first", b"a value", None);
    // Nothing is written yet as far as these samples know (written_pos 0).
    let sample = |written_pos: u64| {
        let mut shard = ks.lock_unlogged(key.shard());
        // The lock above marked the shard changed, as a command's would;
        // sample under a lock that does not (eviction's own).
        shard.touched = shard.touched.wrapping_sub(1);
        let (mut done, mut out) = (Evicted::default(), Vec::new());
        let hint = shard.sample(
            EvictionPolicy::Values,
            4,
            written_pos,
            NOW_MS,
            &mut done,
            &mut out,
        );
        (done, out.len(), hint)
    };
    let loc = ks.lock(key).peek(0, key, NOW_MS).unwrap().loc_raw();
    let (first, found, hint) = sample(0);
    assert_eq!(found, 0);
    assert!(first.swept > 0 && first.unwritten >= 1, "{first:?}");
    // The shard's hint for eviction cycles: nothing here until the log is
    // written past the value's record.
    assert_eq!(hint, Some(loc));
    let (again, found, _) = sample(0);
    assert_eq!(found, 0);
    assert_eq!(again.swept, 0, "swept the same table again: {again:?}");
    assert_eq!(again.unwritten, first.unwritten, "still reported pending");
    // Written past it: the value can leave, and is found.
    let (written, found, hint) = sample(u64::MAX);
    assert!(written.swept > 0 && found >= 1, "{written:?}");
    assert_eq!(hint, None);
    // Swept fruitlessly again, then the shard changes: swept again.
    assert_eq!(sample(0).1, 0);
    assert_eq!(sample(0).0.swept, 0);
    set(&ks, 0, b"first", b"another value", None);
    assert!(sample(0).0.swept > 0, "a changed shard was skipped");
    close(&ks);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The engine's reader, as an embedder would use it: values evicted to
/// the log come back through io_uring and through pread threads, and
/// a location that holds another key's record is an error, not a panic.
#[test]
#[allow(clippy::too_many_lines, reason = "one scenario, read top to bottom")]
fn the_cold_reader_reads_values_back_with_either_engine() {
    const COUNT: usize = 64;
    let dir = temp_dir("reader");
    let value = |i: usize| format!("value {i} ").repeat(30).into_bytes();
    let ks = open(&dir, 16 * 1024).unwrap();
    ks.tier().set_tracking(true);
    for i in 0..COUNT {
        set(&ks, 0, format!("key:{i}").as_bytes(), &value(i), None);
    }
    // Records longer than a first read: read again, whole.
    let long = |i: usize| format!("long value {i} ").repeat(2000).into_bytes();
    for i in 0..3 {
        set(&ks, 0, format!("long:{i}").as_bytes(), &long(i), None);
    }
    evict_everything(&ks);
    let locs: Vec<crate::tiering::location::ColdLocation> = (0..COUNT)
        .map(|i| {
            let key = format!("key:{i}");
            ks.cold_loc(0, ks.key(key.as_bytes()), NOW_MS)
                .expect("cold")
        })
        .collect();
    for use_uring in [true, false] {
        let (reader, _) =
            crate::tiering::reader::ColdReader::start(ks.tier().clone(), 2, use_uring).unwrap();
        let (sender, results) = std::sync::mpsc::channel();
        for (i, &loc) in locs.iter().enumerate() {
            let sender = sender.clone();
            let key = format!("key:{i}").into_bytes();
            reader.submit(loc, key, Box::new(move |r| sender.send((i, r)).unwrap()));
        }
        // The record at key:1's location is not key:0's.
        let sender_bad = sender.clone();
        reader.submit(
            locs[1],
            b"key:0".to_vec(),
            Box::new(move |r| sender_bad.send((usize::MAX, r)).unwrap()),
        );
        for _ in 0..=COUNT {
            let (i, result) = results
                .recv_timeout(std::time::Duration::from_secs(10))
                .expect("a read completes");
            if i == usize::MAX {
                assert!(result.is_err(), "{} read the wrong key", reader.engine());
            } else {
                assert_eq!(result.unwrap().bytes, value(i), "{}", reader.engine());
            }
        }
    }
    // A thread's own ring: reads leave with one system call, and their
    // results come back on that thread when it reaps its eventfd.
    let (reader, _) =
        crate::tiering::reader::ColdReader::start(ks.tier().clone(), 2, true).unwrap();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let eventfd = reader.start_thread_ring().expect("io_uring works here");
            let (sender, results) = std::sync::mpsc::channel();
            let mut wanted: Vec<(Vec<u8>, Vec<u8>)> = (0..COUNT)
                .map(|i| (format!("key:{i}").into_bytes(), value(i)))
                .collect();
            wanted.extend((0..3).map(|i| (format!("long:{i}").into_bytes(), long(i))));
            for (index, (key, _)) in wanted.iter().enumerate() {
                let loc = ks.cold_loc(0, ks.key(key), NOW_MS).expect("cold");
                let sender = sender.clone();
                let done = Box::new(move |r| sender.send((index, r)).unwrap());
                reader.submit(loc, key.clone(), done);
            }
            reader.flush();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            let mut received = 0;
            while received < wanted.len() {
                assert!(
                    std::time::Instant::now() < deadline,
                    "reads did not complete"
                );
                let mut poll = libc::pollfd {
                    fd: eventfd,
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd.
                unsafe { libc::poll(&mut poll, 1, 100) };
                crate::tiering::reader::reap_thread_ring();
                for (index, result) in results.try_iter() {
                    assert_eq!(result.expect("read").bytes, wanted[index].1, "{index}");
                    received += 1;
                }
            }
        });
    });
    // The whole round as a command's caller makes it: want, read,
    // install (lent to the command), release (cold again).
    let (reader, _) =
        crate::tiering::reader::ColdReader::start(ks.tier().clone(), 2, true).unwrap();
    let mut fetch = crate::tiering::fetch::ColdFetch::new(0);
    for i in 0..COUNT {
        assert!(fetch.want(&ks, format!("key:{i}").as_bytes(), NOW_MS));
    }
    assert!(!fetch.want(&ks, b"key:0", NOW_MS), "wanted once");
    assert!(!fetch.want(&ks, b"missing", NOW_MS), "not cold: not wanted");
    let (sender, receiver) = std::sync::mpsc::channel();
    fetch.submit(&reader, |index| {
        let sender = sender.clone();
        Box::new(move |result| sender.send((index, result)).unwrap())
    });
    let mut results: Vec<Option<crate::tiering::fetch::ReadResult>> =
        (0..COUNT).map(|_| None).collect();
    for _ in 0..COUNT {
        let (index, result) = receiver
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("a read completes");
        results[index] = Some(result);
    }
    let results = results.into_iter().map(Option::unwrap).collect();
    let (lent, failed) = fetch.install(&ks, results, NOW_MS);
    assert!(failed.is_empty());
    let in_ram = |ks: &Keyspace| {
        (0..COUNT)
            .filter(|i| {
                let key = format!("key:{i}");
                ks.cold_loc(0, ks.key(key.as_bytes()), NOW_MS).is_none()
            })
            .count()
    };
    assert_eq!(in_ram(&ks), COUNT, "installed");
    // Lent values are the command's until it ran: eviction leaves them.
    for _ in 0..10 {
        evict_round(&ks);
    }
    assert_eq!(in_ram(&ks), COUNT, "eviction took a lent value");
    lent.release(&ks, NOW_MS);
    assert_eq!(in_ram(&ks), 0, "lent, then released");
    close(&ks);
    drop(ks);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn cold_values_survive_checkpoints_restarts_and_compaction() {
    const COUNT: usize = 400;
    let dir = temp_dir("tiering");
    let value = |i: usize, round: usize| format!("{i}:{round}:").repeat(20).into_bytes();
    let ks = open(&dir, 16 * 1024).unwrap();
    ks.tier().set_tracking(true);
    for i in 0..COUNT {
        set(&ks, 0, format!("key:{i}").as_bytes(), &value(i, 0), None);
    }
    evict_everything(&ks);
    // Read back under the lock (the fallback path), then out again.
    let expected: Vec<Vec<u8>> = (0..COUNT).map(|i| value(i, 0)).collect();
    assert_eq!(read_all(&ks, COUNT), expected);
    evict_everything(&ks);
    let log = ks.log().unwrap().clone();
    checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).unwrap();
    let kept: Vec<u64> = log.segments().iter().map(|s| s.seq).collect();
    for seq in ks.located_segments().keys() {
        assert!(
            kept.contains(seq),
            "segment {seq} holds cold values: {kept:?}"
        );
    }
    close(&ks);
    drop(ks);

    // The checkpoint holds locations: loading reads no value.
    let ks = open(&dir, 16 * 1024).unwrap();
    ks.tier().set_tracking(true);
    assert_eq!(ks.tier().cold_keys() as usize, COUNT);
    assert_eq!(
        ks.tier()
            .stats
            .disk_reads
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    assert_eq!(read_all(&ks, COUNT), expected);

    // Overwrite most values: their old segments become mostly garbage;
    // compaction moves the rest, and the next cycle deletes them.
    for i in (0..COUNT).filter(|i| i % 5 != 0) {
        set(&ks, 0, format!("key:{i}").as_bytes(), &value(i, 1), None);
    }
    evict_everything(&ks);
    let old: Vec<u64> = ks.located_segments().keys().copied().collect();
    checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).unwrap();
    // Compaction runs between cycles, a segment per step.
    assert!(checkpoint::log_compaction_due(&ks), "nothing to compact");
    for _ in 0..old.len() {
        checkpoint::compact_log_step(&ks, 0).unwrap();
    }
    assert!(
        !checkpoint::log_compaction_due(&ks),
        "segments left to compact"
    );
    let moved = ks
        .tier()
        .stats
        .compaction_moves
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(moved > 0, "compaction moved nothing");
    evict_everything(&ks);
    checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).unwrap();
    let remaining: Vec<u64> = ks.log().unwrap().segments().iter().map(|s| s.seq).collect();
    assert!(
        old.iter().any(|seq| !remaining.contains(seq)),
        "no compacted segment was deleted: {old:?} vs {remaining:?}"
    );
    let expected: Vec<Vec<u8>> = (0..COUNT)
        .map(|i| value(i, if i % 5 == 0 { 0 } else { 1 }))
        .collect();
    assert_eq!(read_all(&ks, COUNT), expected);
    close(&ks);
    drop(ks);
    let ks = open(&dir, 16 * 1024).unwrap();
    assert_eq!(read_all(&ks, COUNT), expected);
    close(&ks);
    let verified = verify(&dir).unwrap();
    assert!(verified.torn.is_none());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A SET record of a value type this build does not know stops the
/// load with an error naming it, rather than loading the bytes as
/// something else.
#[test]
fn an_unknown_value_type_stops_the_load() {
    let dir = temp_dir("unknown-type");
    let ks = open(&dir, 1 << 20).unwrap();
    set(&ks, 0, b"known", b"v", None);
    let lsn = ks.log().unwrap().next_lsn();
    close(&ks);
    drop(ks);
    let segment = *list_segments(&log_dir(&dir)).unwrap().last().unwrap();
    let mut record = Vec::new();
    record::encode(
        &mut record,
        &record::Draft {
            kind: Kind::Set,
            db: 0,
            aux: 0,
            flags: 0,
            value_type: 7,
            key: b"strange",
            payload: b"bytes",
        },
    );
    record::seal(&mut record, lsn, 0);
    let path = crate::storage::log::segment_path(&log_dir(&dir), segment);
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    std::io::Write::write_all(&mut file, &record).unwrap();
    let error = open(&dir, 1 << 20).err().expect("the load fails");
    assert!(
        error.to_string().contains("value type 7 is not supported"),
        "{}",
        error
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// Lists: every kind of list change is a LIST_OP record that replays to
/// the same list, after a restart from the log alone, and after a
/// checkpoint (image) plus more log; an emptied list is gone after
/// replay too; a cold list comes back from disk whole.
#[test]
fn list_changes_replay_to_the_same_lists() {
    use crate::types::list::{Applied, End, ListOp};
    let dir = temp_dir("lists");
    let ks = open(&dir, 1 << 20).unwrap();
    let contents = |ks: &Keyspace, key: &[u8]| -> Option<Vec<Vec<u8>>> {
        let k = ks.key(key);
        let mut shard = ks.lock(k);
        let entry = shard.get_as::<List>(0, k, NOW_MS).unwrap()?;
        Some(entry.value().list()?.iter().map(<[u8]>::to_vec).collect())
    };
    let change = |ks: &Keyspace, key: &[u8], op: ListOp| -> Applied {
        let k = ks.key(key);
        let mut shard = ks.lock(k);
        let entry = shard.get_as::<List>(0, k, NOW_MS).unwrap().expect("a list");
        let applied = entry.change::<List>(0, &op, NOW_MS);
        if shard
            .peek(0, k, NOW_MS)
            .is_some_and(|e| e.value().list().is_some_and(|l| l.is_empty()))
        {
            shard.remove(0, k, NOW_MS);
        }
        applied
    };
    let create = |ks: &Keyspace, key: &[u8], elements: &[&[u8]]| {
        let mut list = crate::types::list::ListValue::new();
        ListOp::Push(End::Tail, elements.to_vec()).apply(&mut list, Default::default());
        let mut image = Vec::new();
        list.encode_image(&mut image);
        let k = ks.key(key);
        ks.lock(k)
            .set(0, k, Value::List(image.into()), None, false, NOW_MS);
    };
    create(&ks, b"queue", &[b"a", b"b", b"c"]);
    change(&ks, b"queue", ListOp::Push(End::Head, vec![b"z", b"y"]));
    assert_eq!(
        change(&ks, b"queue", ListOp::Pop(End::Tail, 1)),
        Applied::Popped(vec![b"c".to_vec()])
    );
    change(&ks, b"queue", ListOp::Set(1, b"Z"));
    change(
        &ks,
        b"queue",
        ListOp::Insert {
            pivot: b"a",
            after: true,
            element: b"A",
        },
    );
    change(
        &ks,
        b"queue",
        ListOp::Remove {
            count: 0,
            element: b"y",
        },
    );
    create(&ks, b"gone", &[b"x"]);
    change(&ks, b"gone", ListOp::Pop(End::Head, 5));
    let expected: Vec<Vec<u8>> = [&b"Z"[..], b"a", b"A", b"b"]
        .iter()
        .map(|e| e.to_vec())
        .collect();
    assert_eq!(contents(&ks, b"queue"), Some(expected.clone()));
    assert_eq!(contents(&ks, b"gone"), None);
    close(&ks);
    drop(ks);

    // From the log alone.
    let ks = open(&dir, 1 << 20).unwrap();
    assert_eq!(contents(&ks, b"queue"), Some(expected.clone()));
    assert_eq!(contents(&ks, b"gone"), None);
    // A checkpoint (the list's image), then more changes in the log.
    checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).unwrap();
    change(&ks, b"queue", ListOp::Trim(1, 2));
    close(&ks);
    drop(ks);
    let ks = open(&dir, 1 << 20).unwrap();
    let trimmed = expected[1..=2].to_vec();
    assert_eq!(contents(&ks, b"queue"), Some(trimmed.clone()));

    // Cold: the list leaves RAM and comes back from its image.
    ks.tier().set_tracking(true);
    change(&ks, b"queue", ListOp::Push(End::Tail, vec![b"tail"]));
    evict_everything(&ks);
    let k = ks.key(b"queue");
    assert!(ks.lock(k).peek(0, k, NOW_MS).unwrap().is_cold());
    let mut with_tail = trimmed;
    with_tail.push(b"tail".to_vec());
    assert_eq!(contents(&ks, b"queue"), Some(with_tail));
    close(&ks);
    drop(ks);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
#[allow(clippy::too_many_lines, reason = "one scenario, read top to bottom")]
fn set_and_sorted_set_changes_replay_to_the_same_values() {
    use crate::types::set::SetOp;
    use crate::types::zset::ZSetOp;
    let dir = temp_dir("sets");
    let ks = open(&dir, 1 << 20).unwrap();
    let members = |ks: &Keyspace, key: &[u8]| -> Option<Vec<Vec<u8>>> {
        let k = ks.key(key);
        let mut shard = ks.lock(k);
        let entry = shard.get_as::<Set>(0, k, NOW_MS).unwrap()?;
        let mut members = entry.value().set()?.members();
        members.sort();
        Some(members)
    };
    let entries = |ks: &Keyspace, key: &[u8]| -> Option<Vec<(f64, Vec<u8>)>> {
        let k = ks.key(key);
        let mut shard = ks.lock(k);
        let entry = shard.get_as::<ZSet>(0, k, NOW_MS).unwrap()?;
        let zset = entry.value().zset()?;
        Some(
            zset.range(0, usize::MAX)
                .into_iter()
                .map(|(s, m)| (s, m.to_vec()))
                .collect(),
        )
    };
    let set_change = |ks: &Keyspace, key: &[u8], op: SetOp| {
        let k = ks.key(key);
        let mut shard = ks.lock(k);
        if shard.get_as::<Set>(0, k, NOW_MS).unwrap().is_none() {
            let image = crate::types::set::image_of([].into_iter());
            shard.set(0, k, Value::Set(image.into()), None, false, NOW_MS);
        }
        shard
            .get_as::<Set>(0, k, NOW_MS)
            .unwrap()
            .unwrap()
            .change::<Set>(0, &op, NOW_MS);
        if shard
            .peek(0, k, NOW_MS)
            .is_some_and(|e| e.value().is_empty_collection())
        {
            shard.remove(0, k, NOW_MS);
        }
    };
    let zset_change = |ks: &Keyspace, key: &[u8], op: ZSetOp| {
        let k = ks.key(key);
        let mut shard = ks.lock(k);
        if shard.get_as::<ZSet>(0, k, NOW_MS).unwrap().is_none() {
            let image = crate::types::zset::image_of([]);
            shard.set(0, k, Value::ZSet(image.into()), None, false, NOW_MS);
        }
        shard
            .get_as::<ZSet>(0, k, NOW_MS)
            .unwrap()
            .unwrap()
            .change::<ZSet>(0, &op, NOW_MS);
        if shard
            .peek(0, k, NOW_MS)
            .is_some_and(|e| e.value().is_empty_collection())
        {
            shard.remove(0, k, NOW_MS);
        }
    };
    // Past the listpack limits too, so both encodings replay.
    let many: Vec<Vec<u8>> = (0..300).map(|i| format!("m{i}").into_bytes()).collect();
    set_change(&ks, b"s", SetOp::Add(vec![b"1", b"2", b"x"]));
    set_change(&ks, b"s", SetOp::Remove(vec![b"2", b"absent"]));
    set_change(
        &ks,
        b"big",
        SetOp::Add(many.iter().map(|m| &m[..]).collect()),
    );
    set_change(
        &ks,
        b"big",
        SetOp::Remove(many[..100].iter().map(|m| &m[..]).collect()),
    );
    set_change(&ks, b"gone", SetOp::Add(vec![b"a"]));
    set_change(&ks, b"gone", SetOp::Remove(vec![b"a"]));
    zset_change(
        &ks,
        b"z",
        ZSetOp::Put(vec![(1.5, b"a"), (-2.0, b"b"), (1.5, b"c")]),
    );
    zset_change(&ks, b"z", ZSetOp::Put(vec![(7.0, b"a")]));
    zset_change(&ks, b"z", ZSetOp::Remove(vec![b"c"]));
    let puts: Vec<(f64, &[u8])> = many
        .iter()
        .enumerate()
        .map(|(i, m)| (i as f64, &m[..]))
        .collect();
    zset_change(&ks, b"zbig", ZSetOp::Put(puts));
    let expect_s = members(&ks, b"s");
    let expect_big = members(&ks, b"big");
    let expect_z = entries(&ks, b"z");
    let expect_zbig = entries(&ks, b"zbig");
    assert_eq!(expect_s, Some(vec![b"1".to_vec(), b"x".to_vec()]));
    assert_eq!(expect_big.as_ref().map(Vec::len), Some(200));
    assert_eq!(
        expect_z,
        Some(vec![(-2.0, b"b".to_vec()), (7.0, b"a".to_vec())])
    );
    close(&ks);
    drop(ks);

    // From the log alone.
    let ks = open(&dir, 1 << 20).unwrap();
    assert_eq!(members(&ks, b"s"), expect_s);
    assert_eq!(members(&ks, b"big"), expect_big);
    assert_eq!(members(&ks, b"gone"), None);
    assert_eq!(entries(&ks, b"z"), expect_z);
    assert_eq!(entries(&ks, b"zbig"), expect_zbig);
    // A checkpoint, more log, then cold.
    checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).unwrap();
    zset_change(&ks, b"z", ZSetOp::Put(vec![(0.0, b"new")]));
    set_change(&ks, b"s", SetOp::Add(vec![b"later"]));
    close(&ks);
    drop(ks);
    let ks = open(&dir, 1 << 20).unwrap();
    let z_now = Some(vec![
        (-2.0, b"b".to_vec()),
        (0.0, b"new".to_vec()),
        (7.0, b"a".to_vec()),
    ]);
    assert_eq!(entries(&ks, b"z"), z_now);
    ks.tier().set_tracking(true);
    zset_change(&ks, b"z", ZSetOp::Remove(vec![b"b"]));
    evict_everything(&ks);
    let k = ks.key(b"z");
    assert!(ks.lock(k).peek(0, k, NOW_MS).unwrap().is_cold());
    assert_eq!(
        entries(&ks, b"z"),
        Some(vec![(0.0, b"new".to_vec()), (7.0, b"a".to_vec())])
    );
    assert_eq!(members(&ks, b"big"), expect_big);
    let s_now = Some(vec![b"1".to_vec(), b"later".to_vec(), b"x".to_vec()]);
    assert_eq!(members(&ks, b"s"), s_now);
    close(&ks);
    drop(ks);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Sets metadata item `name` to `image` as a command would.
fn put_meta(ks: &Keyspace, name: &[u8], image: &[u8]) {
    let (_, commit) = ks
        .update_meta_in(None, name, |_| Ok::<_, ()>((image.to_vec(), ())))
        .unwrap();
    assert!(commit.changed.is_empty(), "metadata is no key's change");
    assert!(commit.lsn.is_some(), "logged");
}

#[test]
fn metadata_survives_replay_checkpoints_and_a_cut_log() {
    let dir = temp_dir("meta");
    let ks = open(&dir, 4096).unwrap();
    put_meta(&ks, b"functions", b"first");
    put_meta(&ks, b"other", b"x");
    workload(&ks, 0);
    put_meta(&ks, b"functions", b"second");
    put_meta(&ks, b"other", b"");
    close(&ks);
    let ks = open(&dir, 4096).unwrap();
    assert_eq!(ks.meta(b"functions").as_deref(), Some(&b"second"[..]));
    assert_eq!(ks.meta(b"other"), None, "an empty image removes the item");
    // The checkpoint holds the image; the log after it changes it again.
    checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).unwrap();
    put_meta(&ks, b"functions", b"third");
    workload(&ks, 1);
    let expected = dump(&ks);
    close(&ks);
    let ks = open(&dir, 4096).unwrap();
    assert_eq!(ks.meta(b"functions").as_deref(), Some(&b"third"[..]));
    assert_eq!(dump(&ks), expected);
    // A second cycle cuts the log below the third image: the checkpoint
    // alone must carry it.
    checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).unwrap();
    checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).unwrap();
    close(&ks);
    let ks = open(&dir, 4096).unwrap();
    assert_eq!(ks.meta(b"functions").as_deref(), Some(&b"third"[..]));
    // FLUSHALL empties the databases, not the metadata.
    ks.flush_all();
    close(&ks);
    let ks = open(&dir, 4096).unwrap();
    assert_eq!(ks.meta(b"functions").as_deref(), Some(&b"third"[..]));
    close(&ks);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Sets `key` as a replica applying its primary's stream would, with the
/// position `image` after it.
fn set_positioned(ks: &Keyspace, key: &[u8], value: &[u8], image: &[u8]) {
    crate::storage::repl_position::with_trailer(image, || set(ks, 0, key, value, None));
}

#[test]
fn the_replication_position_survives_restarts_and_checkpoints() {
    let dir = temp_dir("position");
    let ks = open(&dir, 4096).unwrap();
    assert_eq!(ks.replication_position(), None);
    ks.save_replication_position(None, b"p0");
    assert_eq!(ks.replication_position().as_deref(), Some(&b"p0"[..]));
    set_positioned(&ks, b"a", b"1", b"p1");
    // A change made outside the stream carries no position.
    set(&ks, 0, b"local", b"x", None);
    assert_eq!(ks.replication_position().as_deref(), Some(&b"p1"[..]));
    close(&ks);
    let ks = open(&dir, 4096).unwrap();
    assert_eq!(ks.replication_position().as_deref(), Some(&b"p1"[..]));
    // Checkpoints carry it once the log below it is gone.
    for i in 0..40 {
        let key = format!("k{i}");
        set_positioned(&ks, key.as_bytes(), b"v", format!("q{i}").as_bytes());
    }
    checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).unwrap();
    checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).unwrap();
    let expected = dump(&ks);
    close(&ks);
    let ks = open(&dir, 4096).unwrap();
    assert_eq!(ks.replication_position().as_deref(), Some(&b"q39"[..]));
    assert_eq!(dump(&ks), expected);
    // Cleared, it stays cleared across a checkpoint and a restart.
    ks.save_replication_position(None, b"");
    assert_eq!(ks.replication_position(), None);
    checkpoint::run_cycle(&ks, &dir, 0, 0, NOW_MS).unwrap();
    close(&ks);
    let ks = open(&dir, 4096).unwrap();
    assert_eq!(ks.replication_position(), None);
    close(&ks);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A log cut inside the last positioned change recovers the position
/// before it together with the data before it: never one without the
/// other.
#[test]
fn a_cut_log_never_parts_a_change_from_its_position() {
    let dir = temp_dir("position-cut");
    let ks = open(&dir, 1 << 20).unwrap();
    set_positioned(&ks, b"first", b"1", b"before");
    let before_last = dump(&ks);
    set_positioned(&ks, b"second", b"2", b"after");
    let after_last = dump(&ks);
    close(&ks);
    let segment = segment_path(&log_dir(&dir), 1);
    let full = std::fs::read(&segment).unwrap();
    let last_len = record::HEADER_BYTES
        + b"second".len()
        + 1
        + record::HEADER_BYTES
        + crate::storage::repl_position::NAME.len()
        + b"after".len();
    let start = full.len() - last_len;
    for cut in start..=full.len() {
        let copy = temp_dir("position-cut-copy");
        std::fs::create_dir_all(log_dir(&copy)).unwrap();
        std::fs::write(segment_path(&log_dir(&copy), 1), &full[..cut]).unwrap();
        let recovered = open(&copy, 1 << 20).unwrap();
        let (data, position) = if cut == full.len() {
            (&after_last, &b"after"[..])
        } else {
            (&before_last, &b"before"[..])
        };
        assert_eq!(&dump(&recovered), data, "cut at {cut}");
        assert_eq!(
            recovered.replication_position().as_deref(),
            Some(position),
            "cut at {cut}"
        );
        close(&recovered);
        std::fs::remove_dir_all(&copy).unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Cleared from inside a lock hold (REPLICAOF NO ONE inside EXEC), the
/// position goes with that hold's group.
#[test]
fn a_position_saved_inside_a_lock_hold_commits_with_it() {
    let dir = temp_dir("position-nested");
    let ks = open(&dir, 4096).unwrap();
    ks.save_replication_position(None, b"p0");
    {
        let k = ks.key(b"a");
        let mut guard = ks.lock(k);
        guard.set(0, k, Value::from_bytes(b"1"), None, false, NOW_MS);
        ks.save_replication_position(None, b"");
    }
    assert_eq!(ks.replication_position(), None);
    close(&ks);
    let ks = open(&dir, 4096).unwrap();
    assert_eq!(ks.replication_position(), None);
    assert_eq!(dump(&ks).len(), 1);
    close(&ks);
    std::fs::remove_dir_all(&dir).unwrap();
}
