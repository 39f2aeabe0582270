//! The backlog's history on disk: every entry of the stream is also
//! appended to files under `<dir>/replication/backlog/`, which keep
//! `repl-backlog-size` bytes of stream (1 GB unless set) while RAM keeps
//! only the most recent part ([`super::backlog`]). A replica that
//! reconnects after minutes or hours of writes continues from here
//! (`+CONTINUE`) instead of copying everything again; the disk, not RAM,
//! bounds how long it may be away.
//!
//! A file is a run of frames, one per entry (little-endian): the length
//! of its bytes (u32) and of its records (u32; `u32::MAX`: not kept),
//! the sequence number of its committed group (u64; `u64::MAX`: none),
//! the databases selected before and after it (u16 each; `u16::MAX`:
//! unknown), then the bytes and the records. The records (the committed
//! group the entry translates) are kept only while a full synchronisation
//! is being made: its replica's first entries are sent with what its copy
//! already holds left out, which needs them, and keeping them here rather
//! than in RAM is what keeps the primary's memory flat during a sync
//! under writes. Each file knows the offset its first
//! frame starts at, and every [`INDEX_EVERY_BYTES`] a frame's offset and
//! position, so a read finds its place with one short scan. A replica may
//! continue only from the start of a frame (the same rule as in RAM: an
//! offset inside an entry may have been padded differently for it).
//!
//! The files are a cache, not a log: never synced, written through a
//! buffer, deleted at start-up (a restarted server begins a new history).
//! A write that fails (a full disk) turns the spill off, with a warning;
//! the backlog then holds what RAM holds, as before.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// A frame's offset and position are noted at least this often.
const INDEX_EVERY_BYTES: u64 = 64 << 10;
/// An entry read back.
pub struct Frame {
    pub start: u64,
    pub bytes: Vec<u8>,
    /// Its committed group's sequence number and records: None when it
    /// has none (a PING) or they were not kept (`stripped`).
    pub group: Option<(u64, Vec<u8>)>,
    pub stripped: bool,
    pub db_before: Option<u16>,
    pub db_after: Option<u16>,
}

/// An entry to append: the records of its group are written only while
/// [`Spill::keep_records`] is on.
pub struct Appended<'a> {
    pub start: u64,
    pub bytes: &'a [u8],
    pub group: Option<(u64, &'a [u8])>,
    pub db_before: Option<u16>,
    pub db_after: Option<u16>,
}

/// Bytes of frame before an entry's bytes.
const FRAME_HEADER_BYTES: u64 = 20;
const NOT_KEPT: u32 = u32::MAX;
const NO_GROUP: u64 = u64::MAX;
const NO_DB: u16 = u16::MAX;

/// One file of the spill.
struct SpillFile {
    path: PathBuf,
    /// Stream offsets of its first byte and after its last.
    start: u64,
    end: u64,
    /// Bytes written to it (frames).
    len: u64,
    writer: BufWriter<File>,
    /// (offset, position) of frames, every [`INDEX_EVERY_BYTES`] or so.
    index: Vec<(u64, u64)>,
}

/// The history on disk.
pub struct Spill {
    dir: PathBuf,
    files: VecDeque<SpillFile>,
    /// Stream bytes to keep on disk.
    limit: u64,
    /// Where the next entry starts (the history's end).
    end: u64,
    /// Off after a failure, or before a directory was given.
    on: bool,
    /// Records are written too (a full synchronisation is being made).
    keep_records: bool,
}

impl Spill {
    /// A spill that keeps nothing until [`Spill::start`], then `limit`
    /// bytes of stream.
    pub fn off(limit: u64) -> Self {
        Spill {
            dir: PathBuf::new(),
            files: VecDeque::new(),
            limit,
            end: 0,
            on: false,
            keep_records: false,
        }
    }

    /// Starts keeping the history in `dir` from offset `end`, removing
    /// what an earlier run left there.
    pub fn start(&mut self, dir: &Path, end: u64) {
        // Absolute: the working directory may change (CONFIG SET dir).
        if let Err(e) = clear_dir(dir).and_then(|()| {
            self.dir = std::fs::canonicalize(dir)?;
            Ok(())
        }) {
            crate::log_warning!(
                "The replication backlog stays in RAM: {} cannot be used ({e})",
                dir.display()
            );
            return;
        }
        self.on = true;
        self.reset(end);
    }

    pub fn set_limit(&mut self, limit: u64) {
        self.limit = limit;
    }

    /// Writes the entries' records too, from now on, or no more.
    pub fn keep_records(&mut self, on: bool) {
        self.keep_records = on;
    }

    /// Whether it keeps the history.
    pub fn is_on(&self) -> bool {
        self.on
    }

    /// First offset held.
    pub fn start_offset(&self) -> u64 {
        self.files.front().map_or(self.end, |f| f.start)
    }

    /// A new history from `end` on: everything before goes.
    pub fn reset(&mut self, end: u64) {
        for file in self.files.drain(..) {
            let _ = std::fs::remove_file(&file.path);
        }
        self.end = end;
    }

    /// Appends an entry (starting at the history's end: entries come in
    /// order); a reader still needs what follows `keep_from`.
    pub fn append(&mut self, entry: &Appended, keep_from: Option<u64>) {
        if !self.on {
            return;
        }
        let (start, bytes) = (entry.start, entry.bytes);
        if start != self.end {
            // A gap (the backlog went on without the spill): what is on
            // disk no longer continues into what comes.
            self.reset(start);
        }
        if let Err(e) = self.write(entry) {
            crate::log_warning!(
                "The replication backlog on disk stopped ({e}); it keeps what RAM holds"
            );
            self.reset(start);
            self.on = false;
            return;
        }
        self.end = start + bytes.len() as u64;
        self.trim(keep_from);
    }

    fn write(&mut self, entry: &Appended) -> std::io::Result<()> {
        let (start, bytes) = (entry.start, entry.bytes);
        let keep_records = self.keep_records;
        let file_bytes = (self.limit / 8).clamp(1 << 20, 64 << 20);
        let roll = self.files.back().is_none_or(|f| f.len >= file_bytes);
        if roll {
            if let Some(last) = self.files.back_mut() {
                last.writer.flush()?;
            }
            let path = self.dir.join(format!("{start:020}.stream"));
            let file = File::options()
                .create(true)
                .truncate(true)
                .read(true)
                .write(true)
                .open(&path)?;
            self.files.push_back(SpillFile {
                path,
                start,
                end: start,
                len: 0,
                writer: BufWriter::with_capacity(64 << 10, file),
                index: Vec::new(),
            });
        }
        let file = self.files.back_mut().expect("a file was opened");
        let len = u32::try_from(bytes.len()).map_err(std::io::Error::other)?;
        let (seq, records) = match entry.group {
            Some((seq, records)) => (seq, records),
            None => (NO_GROUP, &[][..]),
        };
        let records_len = if keep_records {
            u32::try_from(records.len()).map_err(std::io::Error::other)?
        } else {
            NOT_KEPT
        };
        if file
            .index
            .last()
            .is_none_or(|&(_, at)| file.len - at >= INDEX_EVERY_BYTES)
        {
            file.index.push((start, file.len));
        }
        let mut header = [0u8; FRAME_HEADER_BYTES as usize];
        header[..4].copy_from_slice(&len.to_le_bytes());
        header[4..8].copy_from_slice(&records_len.to_le_bytes());
        header[8..16].copy_from_slice(&seq.to_le_bytes());
        header[16..18].copy_from_slice(&entry.db_before.unwrap_or(NO_DB).to_le_bytes());
        header[18..20].copy_from_slice(&entry.db_after.unwrap_or(NO_DB).to_le_bytes());
        file.writer.write_all(&header)?;
        file.writer.write_all(bytes)?;
        let mut kept = 0;
        if keep_records {
            file.writer.write_all(records)?;
            kept = records.len() as u64;
        }
        file.len += FRAME_HEADER_BYTES + bytes.len() as u64 + kept;
        file.end = start + bytes.len() as u64;
        Ok(())
    }

    /// Deletes the oldest files while the others hold `limit` bytes and
    /// none holds what follows `keep_from`.
    fn trim(&mut self, keep_from: Option<u64>) {
        while self.files.len() > 1 {
            let held_without_first = self.end - self.files[1].start;
            let needed = keep_from.is_some_and(|at| self.files[0].end > at);
            if held_without_first < self.limit || needed {
                break;
            }
            let gone = self.files.pop_front().expect("more than one file");
            let _ = std::fs::remove_file(&gone.path);
        }
    }

    /// Whether an entry starts at `from` (or the history ends there).
    pub fn holds(&mut self, from: u64) -> bool {
        if !self.on || from < self.start_offset() || from > self.end {
            return false;
        }
        from == self.end || matches!(self.read(from, 1), Ok(Some(_)))
    }

    /// Entries (their start offsets and bytes) from offset `from` (an
    /// entry's start) on, up to about `max_bytes` and at most to the end
    /// of `from`'s file. None when no entry starts there.
    pub fn read(&mut self, from: u64, max_bytes: usize) -> std::io::Result<Option<Vec<Frame>>> {
        let Some(file) = self
            .files
            .iter_mut()
            .find(|f| f.start <= from && from < f.end)
        else {
            return Ok(None);
        };
        file.writer.flush()?;
        let at = file.index.partition_point(|&(offset, _)| offset <= from);
        let (mut offset, mut position) = file.index[at.saturating_sub(1)];
        let handle = file.writer.get_ref();
        let mut entries = Vec::new();
        let mut taken = 0;
        let mut header = [0u8; FRAME_HEADER_BYTES as usize];
        while position < file.len && taken < max_bytes.max(1) {
            handle.read_exact_at(&mut header, position)?;
            let field = |at: usize, n: usize| {
                let mut word = [0u8; 8];
                word[..n].copy_from_slice(&header[at..at + n]);
                u64::from_le_bytes(word)
            };
            let len = field(0, 4);
            let records_len = field(4, 4) as u32;
            let kept = if records_len == NOT_KEPT {
                0
            } else {
                u64::from(records_len)
            };
            if entries.is_empty() && offset < from && from < offset + len {
                // `from` lies inside an entry: not a place to continue.
                return Ok(None);
            }
            if offset == from || !entries.is_empty() {
                let mut bytes = vec![0u8; len as usize];
                handle.read_exact_at(&mut bytes, position + FRAME_HEADER_BYTES)?;
                let seq = field(8, 8);
                let group = if seq == NO_GROUP || records_len == NOT_KEPT {
                    None
                } else {
                    let mut records = vec![0u8; kept as usize];
                    handle.read_exact_at(&mut records, position + FRAME_HEADER_BYTES + len)?;
                    Some((seq, records))
                };
                let db = |raw: u64| (raw != u64::from(NO_DB)).then_some(raw as u16);
                taken += bytes.len();
                entries.push(Frame {
                    start: offset,
                    bytes,
                    group,
                    stripped: seq != NO_GROUP && records_len == NOT_KEPT,
                    db_before: db(field(16, 2)),
                    db_after: db(field(18, 2)),
                });
            }
            offset += len;
            position += FRAME_HEADER_BYTES + len + kept;
        }
        Ok((!entries.is_empty()).then_some(entries))
    }
}

/// Makes `dir` exist and hold nothing.
fn clear_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "stream") {
            std::fs::remove_file(path)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("strata-spill-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn bytes_of(entries: &[Frame]) -> Vec<u8> {
        entries
            .iter()
            .flat_map(|e| e.bytes.iter().copied())
            .collect()
    }

    fn entry(start: u64, bytes: &[u8]) -> Appended<'_> {
        Appended {
            start,
            bytes,
            group: Some((start, b"records")),
            db_before: None,
            db_after: Some(3),
        }
    }

    #[test]
    fn entries_read_back_from_their_starts_only_and_old_files_go() {
        let dir = temp_dir("read");
        let mut spill = Spill::off(4 << 20);
        spill.start(&dir, 100);
        let mut starts = Vec::new();
        let mut stream = Vec::new();
        let mut at = 100u64;
        for i in 0..60_000u32 {
            let text = format!("*1\r\n$5\r\n{i:05}\r\n").repeat(1 + (i % 7) as usize);
            starts.push(at);
            spill.keep_records(i % 2 == 0);
            spill.append(&entry(at, text.as_bytes()), None);
            stream.extend_from_slice(text.as_bytes());
            at += text.len() as u64;
        }
        // Everything since the start, read in pieces, is the stream.
        let mut from = 100;
        let mut read = Vec::new();
        while from < at {
            let entries = spill
                .read(from, 100_000)
                .unwrap()
                .expect("an entry starts there");
            read.extend_from_slice(&bytes_of(&entries));
            for frame in &entries {
                // Records where they were kept, none where not.
                let kept = frame.group.as_ref().map(|(seq, r)| (*seq, r.as_slice()));
                let even = starts.binary_search(&frame.start).unwrap() % 2 == 0;
                assert_eq!(kept, even.then_some((frame.start, &b"records"[..])));
                assert_eq!(frame.stripped, !even);
                assert_eq!((frame.db_before, frame.db_after), (None, Some(3)));
            }
            let last = entries.last().unwrap();
            from = last.start + last.bytes.len() as u64;
        }
        assert_eq!(read, stream);
        assert!(spill.holds(starts[1234]));
        assert!(!spill.holds(starts[1234] + 1), "inside an entry");
        assert!(spill.holds(at), "the end");
        assert!(!spill.holds(at + 1));
        // A smaller limit lets the oldest files go.
        spill.set_limit(1 << 20);
        let ping = b"*1\r\n$4\r\nPING\r\n";
        spill.append(&entry(at, ping), None);
        assert!(!spill.holds(100));
        assert!(spill.start_offset() > 100);
        assert!(at + ping.len() as u64 - spill.start_offset() >= 1 << 20);
        let files = std::fs::read_dir(&dir).unwrap().count();
        assert_eq!(files, spill.files.len());
        // A restart of the history empties the directory.
        spill.reset(5);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        assert!(spill.holds(5));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
