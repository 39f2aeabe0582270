//! Compaction: moving the still-live records out of log segments that are
//! mostly garbage, so those segments can be deleted (see `tier`).

use std::fs::File;
use std::path::Path;
use std::sync::atomic::Ordering;

use crate::background::BackgroundBytes;
use crate::keyspace::shards::Keyspace;
use crate::storage::log::{Log, segment_path};
use crate::storage::record::{self, HEADER_BYTES, Kind};
use crate::tiering::location::loc;

/// Share of a segment's records still located in below which compaction
/// moves them out.
pub(crate) const COMPACT_LIVE_RATIO: f64 = 0.5;

/// Compaction: for every closed segment where fewer than
/// [`COMPACT_LIVE_RATIO`] of the records are still some entry's value,
/// reads the segment sequentially and appends those records again at the
/// head (under the key's shard lock, so a value changed meanwhile is left
/// alone). The moved entries take their new location at commit, the
/// segment's count drops to zero, and the next checkpoint cycle deletes
/// it (this cycle's files may still name it). `throttle` is told every
/// byte read, which keeps compaction within the checkpoint rate.
pub fn compact(
    keyspace: &Keyspace,
    log: &Log,
    throttle: &mut dyn FnMut(u64),
) -> std::io::Result<()> {
    for seq in segments_to_compact(keyspace, log) {
        compact_one(keyspace, log, seq, throttle);
    }
    Ok(())
}

/// [`compact`], limited to the oldest dying segment that some value is
/// still located in (compaction between checkpoint cycles takes one
/// segment at a time).
pub(crate) fn compact_oldest(
    keyspace: &Keyspace,
    log: &Log,
    throttle: &mut dyn FnMut(u64),
) -> std::io::Result<()> {
    if let Some(&seq) = segments_to_compact_now(keyspace, log).first() {
        compact_one(keyspace, log, seq, throttle);
    }
    Ok(())
}

/// What compaction between cycles takes: the dying segments that some
/// value on disk is still located in and that were dying already when
/// the last cycle began. A segment gets a cycle to die by itself: taking
/// each as soon as it was dying moved values that were about to be
/// overwritten anyway, and compacted without pause (tiered, 1000 B,
/// SET:GET 1:1 at ~85 % hits: 0.62x of all-in-RAM instead of 0.75x).
pub(crate) fn segments_to_compact_now(keyspace: &Keyspace, log: &Log) -> Vec<u64> {
    let since_last_cycle = keyspace.tier().dying_at_last_cycle();
    segments_to_compact(keyspace, log)
        .into_iter()
        .filter(|seq| since_last_cycle.contains(seq))
        .collect()
}

/// Notes the log's mostly dead segments as dying since the last cycle,
/// so compaction can take them at once: after a start, no cycle has run
/// to note them, and compaction waited for one ([`segments_to_compact_now`]).
pub(crate) fn note_dying_at_start(keyspace: &Keyspace) {
    if let Some(log) = keyspace.change_log() {
        let dying = dying_segments(keyspace, log);
        keyspace.tier().still_dying(dying);
    }
}

/// The dying segments some value is still located in, oldest first; none
/// while locations are not tracked (moved records would not take their
/// new location).
fn segments_to_compact(keyspace: &Keyspace, log: &Log) -> Vec<u64> {
    if !keyspace.tier().tracking() {
        return Vec::new();
    }
    let located = keyspace.located_segments();
    dying_segments(keyspace, log)
        .into_iter()
        .filter(|seq| located.contains_key(seq))
        .collect()
}

/// Compacts one segment; a failure is counted and kept for INFO (the
/// values stay where they are; reads check every record).
fn compact_one(keyspace: &Keyspace, log: &Log, seq: u64, throttle: &mut dyn FnMut(u64)) {
    if let Err(e) = compact_segment(keyspace, log.dir(), seq, throttle) {
        let tier = keyspace.tier();
        tier.stats.compaction_errors.fetch_add(1, Ordering::Relaxed);
        *tier.compaction_error.write() = Some(format!("segment {seq}: {e}"));
    }
}

/// The closed segments of `log` in which fewer than
/// [`COMPACT_LIVE_RATIO`] of the records are still some entry's value
/// (none included): what compaction empties, and whose values in RAM a
/// checkpoint copies rather than names (`Shard::unlocate_in`), so the
/// next cycle can delete them.
pub(crate) fn dying_segments(keyspace: &Keyspace, log: &Log) -> std::collections::BTreeSet<u64> {
    let segments = log.segments();
    let Some((_head, closed)) = segments.split_last() else {
        return Default::default();
    };
    let located = keyspace.located_segments();
    closed
        .iter()
        .filter(|segment| {
            let count = located.get(&segment.seq).copied().unwrap_or(0);
            segment.lsns.is_some_and(|(first, last)| {
                (count as f64) < (last - first + 1) as f64 * COMPACT_LIVE_RATIO
            })
        })
        .map(|segment| segment.seq)
        .collect()
}

fn compact_segment(
    keyspace: &Keyspace,
    log_dir: &Path,
    segment: u64,
    throttle: &mut dyn FnMut(u64),
) -> std::io::Result<()> {
    use std::io::Read;
    let invalid = |why: record::Invalid, at: u64| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{why} at offset {at}"),
        )
    };
    let file = File::open(segment_path(log_dir, segment))?;
    let length = file.metadata()?.len();
    const READ_BUFFER_BYTES: usize = 1 << 20;
    let mut reader = std::io::BufReader::with_capacity(READ_BUFFER_BYTES, file);
    let mut accounted = BackgroundBytes::new(READ_BUFFER_BYTES);
    let stats = &keyspace.tier().stats;
    let mut buf = Vec::new();
    let mut at = 0u64;
    while at < length {
        buf.resize(HEADER_BYTES, 0);
        reader.read_exact(&mut buf)?;
        let header = record::parse_header(&buf).map_err(|why| invalid(why, at))?;
        buf.resize(header.total_len, 0);
        accounted.set(READ_BUFFER_BYTES + buf.capacity());
        reader.read_exact(&mut buf[HEADER_BYTES..])?;
        let found = record::decode_with_header(&buf, header).map_err(|why| invalid(why, at))?;
        throttle(header.total_len as u64);
        stats
            .compaction_bytes_read
            .fetch_add(header.total_len as u64, Ordering::Relaxed);
        if found.kind == Kind::Set
            && keyspace.relocate(
                found.db as usize,
                found.key,
                loc(segment, at),
                found.payload,
            )
        {
            stats.compaction_moves.fetch_add(1, Ordering::Relaxed);
        }
        at += header.total_len as u64;
    }
    Ok(())
}
