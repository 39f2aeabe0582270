//! `log/HEAD`: the newest segment the log has created, so that a missing
//! newest segment is noticed (`docs/storage.md`).
//!
//! Nothing else on disk knows how far the log went: LSN continuity finds
//! a segment missing *between* two others, and a checkpoint names the
//! segments its cold values live in, but when the newest segment of a
//! crashed server is gone, recovery replays the one before it to its end
//! and starts as if that were all (204 of 40 000 acknowledged writes were
//! lost so, with no word). The log writes HEAD when it opens a new
//! segment, before the first record goes in, and again before it deletes
//! the segment HEAD names (a checkpoint may cover it whole: HEAD first,
//! so a crash between the two leaves the segment, not a HEAD naming a
//! segment the log removed); recovery
//! and `strata-check` refuse a directory whose HEAD names a segment that
//! is neither there nor deleted by the log.
//!
//! Format (text, so an operator can read it):
//!
//! ```text
//! strata-log-head 1
//! newest <seq>
//! deleted-below <seq>
//! crc32c <8 hex digits of the CRC32C of the lines above>
//! ```
//!
//! It is replaced atomically: written to `HEAD.tmp`, synced, renamed over
//! `HEAD`, and the directory synced.

use std::io::Write;
use std::path::{Path, PathBuf};

pub(crate) const HEAD_FILE_NAME: &str = "HEAD";
const MAGIC: &str = "strata-log-head 1";

/// What HEAD says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Head {
    /// The newest segment the log created.
    pub newest: u64,
    /// Every segment below this one that is missing was deleted by the
    /// log (only raised when the log deletes the segment HEAD names).
    pub deleted_below: u64,
}

impl Head {
    /// Whether segment `newest` may be absent from the directory.
    pub(crate) fn newest_deleted(&self) -> bool {
        self.newest < self.deleted_below
    }
}

pub fn path(log_dir: &Path) -> PathBuf {
    log_dir.join(HEAD_FILE_NAME)
}

fn text_of(head: Head) -> String {
    let body = format!(
        "{MAGIC}\nnewest {}\ndeleted-below {}\n",
        head.newest, head.deleted_below
    );
    let crc = crc32c::crc32c(body.as_bytes());
    format!("{body}crc32c {crc:08x}\n")
}

/// HEAD of `log_dir`: `None` when there is none (a directory written
/// before HEAD existed, or a log that never opened a segment); an error
/// naming the file when it is unreadable or damaged.
pub fn read(log_dir: &Path) -> Result<Option<Head>, String> {
    let path = path(log_dir);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let damaged = || {
        format!(
            "{} is damaged (it names the newest log segment; restore it, or remove it to start without that check)",
            path.display()
        )
    };
    let body_end = text.rfind("crc32c ").ok_or_else(damaged)?;
    let (body, crc_line) = text.split_at(body_end);
    let crc = u32::from_str_radix(crc_line.trim_start_matches("crc32c ").trim(), 16)
        .map_err(|_| damaged())?;
    if crc32c::crc32c(body.as_bytes()) != crc {
        return Err(damaged());
    }
    let mut lines = body.lines();
    if lines.next() != Some(MAGIC) {
        return Err(damaged());
    }
    let mut number = |name: &str| -> Result<u64, String> {
        lines
            .next()
            .and_then(|line| line.strip_prefix(name))
            .and_then(|value| value.trim().parse().ok())
            .ok_or_else(damaged)
    };
    Ok(Some(Head {
        newest: number("newest ")?,
        deleted_below: number("deleted-below ")?,
    }))
}

/// Replaces HEAD of `log_dir` with `head`, durably.
pub fn write(log_dir: &Path, head: Head) -> std::io::Result<()> {
    let tmp = log_dir.join("HEAD.tmp");
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(text_of(head).as_bytes())?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, path(log_dir))?;
    std::fs::File::open(log_dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_round_trips_and_damage_is_named() {
        let dir = std::env::temp_dir().join(format!(
            "strata-head-{}-{}",
            std::process::id(),
            crate::random::random_u64()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(read(&dir).unwrap(), None);
        let head = Head {
            newest: 42,
            deleted_below: 7,
        };
        write(&dir, head).unwrap();
        assert_eq!(read(&dir).unwrap(), Some(head));
        let text = std::fs::read_to_string(path(&dir)).unwrap();
        std::fs::write(path(&dir), text.replace("newest 42", "newest 43")).unwrap();
        let error = read(&dir).unwrap_err();
        assert!(error.contains("HEAD is damaged"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
