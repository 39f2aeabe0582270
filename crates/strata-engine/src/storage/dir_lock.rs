//! One process per data directory (DESIGN.md invariant 7).
//!
//! Two servers on one directory would each believe they own the log: the
//! one that exits first deletes segments the other still appends to, and
//! writes it acknowledged are gone after a crash. So a server, and
//! `strata-check --fix`, take an exclusive `flock(2)` on the **directory
//! itself** before they touch any file in it, and hold it for life. A
//! lock on a file inside it was not enough: `rm data/strata.lock` under a
//! live server let a second one start on the same directory, and both
//! acknowledged writes. A directory cannot be unlinked while it holds
//! files, and a new one at the same path is another inode, which
//! [`DirLock::verify`] notices before each checkpoint. The kernel drops
//! the lock when the process exits in any way, `kill -9` included, so no
//! stale lock is ever left behind.
//!
//! [`LOCK_FILE_NAME`] inside the directory holds the pid of the owner
//! (also flocked, so a server of an older version that locked only the
//! file is refused too); a refused process reports it, and a deleted one
//! is written again. Read-only inspection (`strata-check` without
//! `--fix`) takes no lock.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The lock file's name inside the data directory.
pub(crate) const LOCK_FILE_NAME: &str = "strata.lock";

/// The held lock; dropping it (or exiting) releases it.
#[derive(Debug)]
pub struct DirLock {
    /// The directory, opened and flocked.
    dir: File,
    /// The pid file, flocked too.
    file: File,
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

/// Takes an exclusive flock on `file` without waiting: false when another
/// open file description holds it.
fn try_flock(file: &File) -> std::io::Result<bool> {
    // SAFETY: flock on a file descriptor we own.
    let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if locked == 0 {
        return Ok(true);
    }
    let error = std::io::Error::last_os_error();
    match error.raw_os_error() == Some(libc::EWOULDBLOCK) {
        true => Ok(false),
        false => Err(error),
    }
}

impl DirLock {
    /// Takes the lock on `dir` (which must exist) without waiting, and
    /// records this process' pid in the lock file.
    pub fn acquire(dir: &Path) -> Result<DirLock, DirLockError> {
        let path = dir.join(LOCK_FILE_NAME);
        let held = || {
            let mut text = String::new();
            let pid = File::open(dir.join(LOCK_FILE_NAME))
                .and_then(|mut file| file.read_to_string(&mut text))
                .ok()
                .and_then(|_| text.trim().parse().ok());
            DirLockError::Held {
                dir: dir.to_path_buf(),
                pid,
            }
        };
        let directory = File::open(dir).map_err(|error| DirLockError::Io {
            path: dir.to_path_buf(),
            error,
        })?;
        match try_flock(&directory) {
            Ok(true) => {}
            Ok(false) => return Err(held()),
            Err(error) => {
                return Err(DirLockError::Io {
                    path: dir.to_path_buf(),
                    error,
                });
            }
        }
        let file = Self::open_pid_file(&path).map_err(|error| DirLockError::Io {
            path: path.clone(),
            error,
        })?;
        match try_flock(&file) {
            Ok(true) => {}
            Ok(false) => return Err(held()),
            Err(error) => return Err(DirLockError::Io { path, error }),
        }
        let mut lock = DirLock {
            dir: directory,
            file,
            path,
        };
        lock.write_pid().map_err(|error| DirLockError::Io {
            path: lock.path.clone(),
            error,
        })?;
        Ok(lock)
    }

    /// Opens (creating) the pid file, without truncating it: it names
    /// the current owner until the lock is ours.
    fn open_pid_file(path: &Path) -> std::io::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
    }

    fn write_pid(&mut self) -> std::io::Result<()> {
        self.file.set_len(0)?;
        self.file.seek(SeekFrom::Start(0))?;
        writeln!(self.file, "{}", std::process::id())
    }

    /// Checks that the path still leads to the directory this process
    /// locked (run before each checkpoint): an error when it was removed
    /// or replaced, where another process may now write. A deleted lock
    /// file is written again (the directory's lock is what excludes).
    pub fn verify(&mut self) -> Result<(), String> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let locked = self
            .dir
            .metadata()
            .map_err(|e| format!("Can't check the data directory's lock: {e}"))?;
        let now = std::fs::metadata(dir).map_err(|e| {
            format!(
                "The data directory '{}' is gone ({e}): refusing to write there",
                dir.display()
            )
        })?;
        if (locked.dev(), locked.ino()) != (now.dev(), now.ino()) {
            return Err(format!(
                "The data directory '{}' was replaced while this server used it: refusing to write there",
                dir.display()
            ));
        }
        if !self.path.exists() {
            let file = Self::open_pid_file(&self.path)
                .map_err(|e| format!("Can't write the lock file again: {e}"))?;
            // The directory's lock excludes others; this one is for old
            // versions and for the pid it shows.
            let _ = try_flock(&file);
            self.file = file;
            self.write_pid()
                .map_err(|e| format!("Can't write the lock file again: {e}"))?;
        }
        Ok(())
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

    #[test]
    fn deleting_the_lock_file_does_not_release_the_directory() {
        let dir = std::env::temp_dir().join(format!(
            "strata-dirlock-{}-{}",
            std::process::id(),
            crate::random::random_u64()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let mut first = DirLock::acquire(&dir).unwrap();
        std::fs::remove_file(dir.join(LOCK_FILE_NAME)).unwrap();
        assert!(matches!(
            DirLock::acquire(&dir),
            Err(DirLockError::Held { .. })
        ));
        first.verify().unwrap();
        let pid = std::fs::read_to_string(dir.join(LOCK_FILE_NAME)).unwrap();
        assert_eq!(pid.trim(), std::process::id().to_string());
        // A directory replaced under the owner is noticed.
        let moved = dir.with_extension("moved");
        std::fs::rename(&dir, &moved).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        let error = first.verify().unwrap_err();
        assert!(error.contains("replaced"), "{error}");
        drop(first);
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(&moved).unwrap();
    }
}
