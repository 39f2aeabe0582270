//! `strata-check [--fix] [--yes] DIR`: verifies a Strata data directory.
//! The tool lives here, with the formats it reads; the `strata-check`
//! binary (in strata-server's package, with the server it is shipped
//! with) only calls [`run`].
//!
//! Reads every checkpoint and every log record, checking every CRC, the
//! checkpoint structure and LSN continuity, then replays it all into a
//! scratch keyspace exactly as a restart would (read-only; it needs as much
//! memory as the data) and prints a summary with the live keys and bytes. Nothing
//! is changed unless `--fix` is given, and then only a torn tail of the
//! newest segment is cut off (after asking, or at once with `--yes`).
//! Corruption anywhere else is reported with its file and offset and left
//! alone: what to do with it is the operator's call.
//!
//! `--fix` first takes the data directory's lock (`strata.lock`, as the
//! server does), so it refuses to touch a directory a live server uses;
//! the read-only check runs beside a live server.
//!
//! Exit status (also in `docs/storage.md`):
//! - 0: clean (or a torn tail that `--fix` just truncated);
//! - 1: a torn tail only, left in place: the normal state after a crash,
//!   which the server's start-up repairs by itself;
//! - 2: damage: corruption or a missing file that start-up refuses;
//! - 3: the check could not run: usage error, unreadable directory, or
//!   (`--fix`) the directory is in use by a running server;
//! - 4: the server starts, but damaged records in segments it keeps only
//!   for cold values leave the listed keys unreadable (each answers an
//!   error; nothing else is affected).
//!
//! It reads what start-up reads, as start-up reads it (the newest
//! checkpoint file of each range; older ones are checked and listed as
//! ignored), so "start-up stopped" here means the server refuses too.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::storage::dir_lock::DirLock;
use crate::storage::recovery;

/// Exit statuses, as documented above.
const EXIT_TORN_TAIL: u8 = 1;
const EXIT_DAMAGED: u8 = 2;
const EXIT_NOT_CHECKED: u8 = 3;
const EXIT_KEYS_UNREADABLE: u8 = 4;

/// The command line: `--fix`, `--yes`, the directory.
struct Args {
    fix: bool,
    yes: bool,
    dir: PathBuf,
}

/// The command line, or the exit status to leave with at once (help,
/// usage error).
fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Args, ExitCode> {
    let mut fix = false;
    let mut yes = false;
    let mut dir = None;
    for arg in args {
        match arg.as_str() {
            "--fix" => fix = true,
            "--yes" | "-y" => yes = true,
            "-h" | "--help" => {
                print_help();
                return Err(ExitCode::SUCCESS);
            }
            other if dir.is_none() && !other.starts_with('-') => dir = Some(PathBuf::from(other)),
            other => {
                eprintln!("strata-check: unexpected argument '{other}'");
                return Err(ExitCode::from(EXIT_NOT_CHECKED));
            }
        }
    }
    let Some(dir) = dir else {
        eprintln!("Usage: strata-check [--fix] [--yes] DIR");
        return Err(ExitCode::from(EXIT_NOT_CHECKED));
    };
    if !dir.is_dir() {
        eprintln!("strata-check: '{}' is not a directory", dir.display());
        return Err(ExitCode::from(EXIT_NOT_CHECKED));
    }
    Ok(Args { fix, yes, dir })
}

fn print_help() {
    println!("Usage: strata-check [--fix] [--yes] DIR");
    println!("Verifies every checkpoint and log record in a Strata data directory.");
    println!("--fix truncates a torn tail of the newest log segment (asks first unless --yes);");
    println!("      it refuses a directory that a running server holds.");
    println!(
        "Exit status: 0 clean, 1 torn tail only (start-up repairs it), 2 damaged (start-up refuses),"
    );
    println!("3 not checked, 4 the server starts but the listed keys are unreadable.");
}

/// Runs the tool with `args` (the command line without the program name)
/// and returns its exit status.
pub fn run(args: impl IntoIterator<Item = String>) -> ExitCode {
    let Args { fix, yes, dir } = match parse_args(args) {
        Ok(args) => args,
        Err(code) => return code,
    };
    // Held until exit: nothing may start on the directory while it is fixed.
    let _lock = if fix {
        match DirLock::acquire(&dir) {
            Ok(lock) => Some(lock),
            Err(e) => {
                eprintln!("strata-check: {e}");
                return ExitCode::from(EXIT_NOT_CHECKED);
            }
        }
    } else {
        None
    };
    let verified = match recovery::verify(&dir) {
        Ok(verified) => verified,
        Err(e) => {
            println!("DAMAGED: {e}");
            return ExitCode::from(EXIT_DAMAGED);
        }
    };
    print_summary(&verified);
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let locations: Vec<u64> = verified.unreadable.iter().map(|u| u.loc).collect();
    let live = match recovery::live_data(&dir, verified.db_count, now_ms, &locations) {
        Ok(live) => live,
        Err(e) => {
            println!("DAMAGED: {e}");
            return ExitCode::from(EXIT_DAMAGED);
        }
    };
    println!(
        "live data (dry-run recovery): {} keys, {} bytes of keys and values",
        live.keys, live.bytes
    );
    for damage in &verified.unreadable {
        let keys: Vec<String> = live
            .located_at
            .iter()
            .filter(|(_, _, loc)| *loc == damage.loc)
            .map(|(db, key, _)| format!("'{}' (db {db})", String::from_utf8_lossy(key)))
            .collect();
        let whose = match keys.is_empty() {
            true => "no live key uses it".to_owned(),
            false => format!("the value of {}", keys.join(", ")),
        };
        println!(
            "damaged record in {} at offset {} ({}): {whose}",
            damage.segment.display(),
            damage.offset,
            damage.why
        );
    }
    if !live.located_at.is_empty() {
        println!(
            "UNREADABLE KEYS: {} keys have their value in damaged records (listed above); \
             the server starts and serves the rest, and reading one of them answers an error",
            live.located_at.len()
        );
        return ExitCode::from(EXIT_KEYS_UNREADABLE);
    }
    let Some((path, valid_len, dropped, why)) = verified.torn else {
        println!("OK: every record and checkpoint checks out");
        return ExitCode::SUCCESS;
    };
    println!(
        "TORN TAIL: {} ({why}) at offset {valid_len}: {dropped} bytes after the last complete record",
        path.display()
    );
    if !fix {
        println!("Run with --fix to truncate it (the server also does this at start-up).");
        return ExitCode::from(EXIT_TORN_TAIL);
    }
    fix_torn_tail(&path, valid_len, yes)
}

/// What the check read: checkpoints and the log's extent.
fn print_summary(verified: &recovery::Verified) {
    if verified.checkpoints.is_empty() {
        println!("no checkpoint");
    }
    for path in &verified.ignored_checkpoints {
        println!(
            "older checkpoint {} (not loaded: a newer one covers its range)",
            path.display()
        );
    }
    for (path, summary) in &verified.checkpoints {
        println!(
            "checkpoint {}: shards {}..{}, {} keys, {} bytes, replay from LSN {}",
            path.display(),
            summary.meta.first_shard,
            summary.meta.first_shard + summary.meta.shards,
            summary.keys,
            summary.bytes,
            summary.covered.iter().min().copied().unwrap_or(0),
        );
    }
    let bytes: u64 = verified.segments.iter().map(|(_, s)| s.bytes).sum();
    let first = verified
        .segments
        .iter()
        .find_map(|(_, s)| s.lsns)
        .map(|(f, _)| f);
    let last = verified
        .segments
        .iter()
        .rev()
        .find_map(|(_, s)| s.lsns)
        .map(|(_, l)| l);
    println!(
        "log: {} segments, {} records, {} bytes, LSN range {}",
        verified.segments.len(),
        verified.records,
        bytes,
        match (first, last) {
            (Some(first), Some(last)) => format!("{first}..={last}"),
            _ => "empty".into(),
        }
    );
}

/// Truncates the torn tail at `valid_len` (asking first unless `yes`).
fn fix_torn_tail(path: &std::path::Path, valid_len: u64, yes: bool) -> ExitCode {
    if !yes {
        print!("Truncate {} to {valid_len} bytes? [y/N] ", path.display());
        let _ = std::io::stdout().flush();
        let mut answer = String::new();
        let _ = std::io::stdin().lock().read_line(&mut answer);
        if !answer.trim().eq_ignore_ascii_case("y") {
            println!("Left unchanged.");
            return ExitCode::from(EXIT_TORN_TAIL);
        }
    }
    let truncated = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|file| file.set_len(valid_len).and_then(|_| file.sync_all()));
    match truncated {
        Ok(()) => {
            println!("Truncated {} to {valid_len} bytes.", path.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("Could not truncate {}: {e}", path.display());
            ExitCode::from(EXIT_TORN_TAIL)
        }
    }
}
