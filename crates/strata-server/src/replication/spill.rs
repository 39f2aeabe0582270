//! The backlog's history on disk: every entry of the stream is also
//! appended to files under `<dir>/replication/backlog/`, which keep
//! `repl-backlog-size` bytes of stream (1 GB unless set) while RAM keeps
//! only the most recent part ([`super::backlog`]). A replica that
//! reconnects after minutes or hours of writes continues from here
//! (`+CONTINUE`) instead of copying everything again; the disk, not RAM,
//! bounds how long it may be away.
//!
//! A file is a run of frames, one per entry: its length (u32,
//! little-endian) and its bytes. Each file knows the offset its first
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
/// An entry read back: its start offset and its bytes.
pub type Frame = (u64, Vec<u8>);
/// Bytes of frame before an entry's bytes.
const FRAME_HEADER_BYTES: u64 = 4;

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

    /// Appends an entry starting at `start` (the history's end: entries
    /// come in order).
    pub fn append(&mut self, start: u64, bytes: &[u8]) {
        if !self.on {
            return;
        }
        if start != self.end {
            // A gap (the backlog went on without the spill): what is on
            // disk no longer continues into what comes.
            self.reset(start);
        }
        if let Err(e) = self.write(start, bytes) {
            crate::log_warning!(
                "The replication backlog on disk stopped ({e}); it keeps what RAM holds"
            );
            self.reset(start);
            self.on = false;
            return;
        }
        self.end = start + bytes.len() as u64;
        self.trim();
    }

    fn write(&mut self, start: u64, bytes: &[u8]) -> std::io::Result<()> {
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
        if file
            .index
            .last()
            .is_none_or(|&(_, at)| file.len - at >= INDEX_EVERY_BYTES)
        {
            file.index.push((start, file.len));
        }
        file.writer.write_all(&len.to_le_bytes())?;
        file.writer.write_all(bytes)?;
        file.len += FRAME_HEADER_BYTES + bytes.len() as u64;
        file.end = start + bytes.len() as u64;
        Ok(())
    }

    /// Deletes the oldest files while the others hold `limit` bytes.
    fn trim(&mut self) {
        while self.files.len() > 1 {
            let held_without_first = self.end - self.files[1].start;
            if held_without_first < self.limit {
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
            let len = u64::from(u32::from_le_bytes(header));
            if entries.is_empty() && offset < from && from < offset + len {
                // `from` lies inside an entry: not a place to continue.
                return Ok(None);
            }
            if offset == from || !entries.is_empty() {
                let mut bytes = vec![0u8; len as usize];
                handle.read_exact_at(&mut bytes, position + FRAME_HEADER_BYTES)?;
                taken += bytes.len();
                entries.push((offset, bytes));
            }
            offset += len;
            position += FRAME_HEADER_BYTES + len;
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
            .flat_map(|(_, e)| e.iter().copied())
            .collect()
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
            let entry = format!("*1\r\n$5\r\n{i:05}\r\n").repeat(1 + (i % 7) as usize);
            starts.push(at);
            spill.append(at, entry.as_bytes());
            stream.extend_from_slice(entry.as_bytes());
            at += entry.len() as u64;
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
            let (start, last) = entries.last().unwrap();
            from = start + last.len() as u64;
        }
        assert_eq!(read, stream);
        assert!(spill.holds(starts[1234]));
        assert!(!spill.holds(starts[1234] + 1), "inside an entry");
        assert!(spill.holds(at), "the end");
        assert!(!spill.holds(at + 1));
        // A smaller limit lets the oldest files go.
        spill.set_limit(1 << 20);
        let entry = b"*1\r\n$4\r\nPING\r\n";
        spill.append(at, entry);
        assert!(!spill.holds(100));
        assert!(spill.start_offset() > 100);
        assert!(at + entry.len() as u64 - spill.start_offset() >= 1 << 20);
        let files = std::fs::read_dir(&dir).unwrap().count();
        assert_eq!(files, spill.files.len());
        // A restart of the history empties the directory.
        spill.reset(5);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        assert!(spill.holds(5));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
