//! One process per data directory (DESIGN.md invariant 7).
//!
//! Two servers on one directory would each believe they own the log: the
//! one that exits first deletes segments the other still appends to, and
//! writes it acknowledged are gone after a crash. So a server, and
//! `strata-check --fix`, take an exclusive `flock(2)` on
//! [`LOCK_FILE_NAME`] inside the directory before they touch any other
//! file in it, and hold it for life. The kernel drops the lock when the
//! process exits in any way, `kill -9` included, so no stale lock is ever
//! left behind; the file itself stays and holds the pid of the last owner,
//! which a refused process reports. Read-only inspection (`strata-check`
//! without `--fix`) takes no lock.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// The lock file's name inside the data directory.
pub const LOCK_FILE_NAME: &str = "strata.lock";

/// The held lock; dropping it (or exiting) releases it.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
    path: PathBuf,
}

/// Why the directory could not be locked.
#[derive(Debug)]
pub enum DirLockError {
    /// Another live process holds the lock.
    Held { dir: PathBuf, pid: Option<u32> },
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
}

impl std::fmt::Display for DirLockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DirLockError::Held { dir, pid } => {
                let owner = match pid {
                    Some(pid) => format!("another process (pid {pid})"),
                    None => "another process".to_owned(),
                };
                write!(
                    f,
                    "The data directory '{}' is in use by {owner}: only one Strata process may use a data directory at a time",
                    dir.display()
                )
            }
            DirLockError::Io { path, error } => {
                write!(
                    f,
                    "Can't lock the data directory ({}): {error}",
                    path.display()
                )
            }
        }
    }
}

impl std::error::Error for DirLockError {}

impl DirLock {
    /// Takes the lock on `dir` (which must exist) without waiting, and
    /// records this process' pid in the lock file.
    pub fn acquire(dir: &Path) -> Result<DirLock, DirLockError> {
        let path = dir.join(LOCK_FILE_NAME);
        let io = |error| DirLockError::Io {
            path: path.clone(),
            error,
        };
        // No truncation on open: the file names the current owner until
        // the lock is ours.
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        // SAFETY: flock on a file descriptor we own.
        let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if locked != 0 {
            let error = std::io::Error::last_os_error();
            if error.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let mut text = String::new();
                let pid = file
                    .read_to_string(&mut text)
                    .ok()
                    .and_then(|_| text.trim().parse().ok());
                return Err(DirLockError::Held {
                    dir: dir.to_path_buf(),
                    pid,
                });
            }
            return Err(io(error));
        }
        file.set_len(0).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        writeln!(file, "{}", std::process::id()).map_err(io)?;
        Ok(DirLock { _file: file, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_with_the_owner_pid_and_released_on_drop() {
        let dir = std::env::temp_dir().join(format!(
            "strata-dirlock-{}-{}",
            std::process::id(),
            crate::random::random_u64()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let first = DirLock::acquire(&dir).unwrap();
        // flock locks belong to the open file description, so a second
        // open in the same process conflicts just as another process would.
        match DirLock::acquire(&dir) {
            Err(DirLockError::Held { dir: held, pid }) => {
                assert_eq!(held, dir);
                assert_eq!(pid, Some(std::process::id()));
            }
            other => panic!("expected Held, got {other:?}"),
        }
        let message = DirLock::acquire(&dir).unwrap_err().to_string();
        assert!(message.contains(&dir.display().to_string()), "{message}");
        assert!(
            message.contains(&format!("pid {}", std::process::id())),
            "{message}"
        );
        drop(first);
        let again = DirLock::acquire(&dir).unwrap();
        assert_eq!(again.path(), dir.join(LOCK_FILE_NAME));
        drop(again);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
