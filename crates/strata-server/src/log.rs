//! Server log in Redis' line format (`pid:M dd Mon yyyy hh:mm:ss.mmm * text`)
//! so people and tools used to reading Redis logs can read ours.
//!
//! Levels and their markers follow redis.conf's `loglevel`: debug `.`,
//! verbose `-`, notice `*`, warning `#`. Output goes to stdout, or appended
//! to `logfile` when one is configured.

use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Debug = 0,
    Verbose = 1,
    Notice = 2,
    Warning = 3,
}

impl Level {
    pub fn parse(name: &str) -> Option<Level> {
        match name.to_ascii_lowercase().as_str() {
            "debug" => Some(Level::Debug),
            "verbose" => Some(Level::Verbose),
            "notice" => Some(Level::Notice),
            "warning" => Some(Level::Warning),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Verbose => "verbose",
            Level::Notice => "notice",
            Level::Warning => "warning",
        }
    }

    fn marker(self) -> char {
        match self {
            Level::Debug => '.',
            Level::Verbose => '-',
            Level::Notice => '*',
            Level::Warning => '#',
        }
    }
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Notice as u8);
static FILE: Mutex<Option<std::fs::File>> = Mutex::new(None);

pub fn set_level(level: Level) {
    LEVEL.store(level as u8, Ordering::Relaxed);
}

/// Sends the log to `path` (appending), or to stdout for an empty path.
pub fn set_file(path: &str) -> std::io::Result<()> {
    let file = if path.is_empty() {
        None
    } else {
        Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?,
        )
    };
    *FILE.lock() = file;
    Ok(())
}

pub fn enabled(level: Level) -> bool {
    level as u8 >= LEVEL.load(Ordering::Relaxed)
}

pub fn write(level: Level, message: std::fmt::Arguments) {
    if !enabled(level) {
        return;
    }
    let line = format!(
        "{}:M {} {} {}\n",
        std::process::id(),
        timestamp(),
        level.marker(),
        message
    );
    let mut file = FILE.lock();
    match file.as_mut() {
        Some(f) => {
            let _ = f.write_all(line.as_bytes());
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            let _ = stdout.write_all(line.as_bytes());
            let _ = stdout.flush();
        }
    }
}

#[macro_export]
macro_rules! log_notice { ($($arg:tt)*) => { $crate::log::write($crate::log::Level::Notice, format_args!($($arg)*)) } }
#[macro_export]
macro_rules! log_warning { ($($arg:tt)*) => { $crate::log::write($crate::log::Level::Warning, format_args!($($arg)*)) } }
#[macro_export]
macro_rules! log_verbose { ($($arg:tt)*) => { $crate::log::write($crate::log::Level::Verbose, format_args!($($arg)*)) } }

/// `22 Nov 2026 02:28:00.123` in UTC.
fn timestamp() -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = since_epoch.as_secs();
    let (year, month, day) = civil_from_days((secs / 86_400) as i64);
    let day_secs = secs % 86_400;
    format!(
        "{day:02} {} {year} {:02}:{:02}:{:02}.{:03}",
        MONTHS[(month - 1) as usize],
        day_secs / 3600,
        day_secs / 60 % 60,
        day_secs % 60,
        since_epoch.subsec_millis()
    )
}

/// Converts days since 1970-01-01 to (year, month, day) in the proleptic
/// Gregorian calendar (Howard Hinnant's civil-from-days algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + (month <= 2) as i64;
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::civil_from_days;

    #[test]
    fn known_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_414), (2025, 11, 22));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }
}
