//! MEMORY: USAGE of a key, STATS and DOCTOR (from the figures INFO
//! memory shows, `info::MemoryFigures`), MALLOC-STATS (mimalloc's own
//! report) and PURGE (mimalloc gives freed pages back to the OS).

use bytes::Bytes;

use super::ctx::help_lines;
use super::{CmdResult, Ctx, ERR_SYNTAX, is, parse_i64};
use crate::observe::info::MemoryFigures;

pub fn memory_usage(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    match args.len() {
        3 => {}
        5 if is(&args[3], "SAMPLES") => {
            parse_i64(&args[4])?;
        }
        _ => return Err(ERR_SYNTAX.into()),
    }
    let (db, key, now) = (ctx.db(), ctx.key(&args[2]), ctx.now_ms);
    let usage = ctx
        .keys
        .shard(key)
        .peek(db, key, now)
        .map(|e| e.memory_bytes());
    match usage {
        Some(bytes) => ctx.out.int(bytes as i64),
        None => ctx.out.null_bulk(),
    }
    Ok(())
}

pub fn memory_help(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    help_lines(
        ctx,
        "MEMORY",
        &[
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value.",
        ],
    );
    Ok(())
}

/// MEMORY STATS: Redis' map of memory figures, with Strata's own at the
/// end (`strata.*`).
pub fn memory_stats(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    let f = MemoryFigures::measure(ctx.server, &mut None);
    let net = f.used.saturating_sub(f.startup);
    let per_key = net.checked_div(f.keys).unwrap_or(0);
    let rss_overhead = f.rss.saturating_sub(f.used);
    let ints: [(&str, u64); 14] = [
        ("peak.allocated", f.peak),
        ("total.allocated", f.used),
        ("startup.allocated", f.startup),
        ("replication.backlog", 0),
        ("clients.slaves", 0),
        ("clients.normal", f.client_buffers),
        ("cluster.links", 0),
        ("aof.buffer", f.log_buffers),
        ("lua.caches", f.script_bytes),
        ("functions.caches", f.library_bytes),
        ("overhead.total", f.overhead()),
        ("keys.count", f.keys),
        ("keys.bytes-per-key", per_key),
        ("dataset.bytes", f.dataset),
    ];
    let ratio = |a: u64, b: u64| a as f64 / b.max(1) as f64;
    let doubles: [(&str, f64); 4] = [
        ("dataset.percentage", f.dataset_percentage()),
        ("peak.percentage", ratio(f.used, f.peak) * 100.0),
        ("rss-overhead.ratio", ratio(f.rss, f.used)),
        ("fragmentation", ratio(f.rss, f.used)),
    ];
    let tail: [(&str, u64); 3] = [
        ("rss-overhead.bytes", rss_overhead),
        ("fragmentation.bytes", rss_overhead),
        ("strata.keys-with-value-on-disk", f.values_on_disk),
    ];
    ctx.out.map(ints.len() + doubles.len() + tail.len());
    for (name, value) in ints {
        ctx.out.bulk(name.as_bytes());
        ctx.out.int(value as i64);
    }
    for (name, value) in doubles {
        ctx.out.bulk(name.as_bytes());
        ctx.out.double(value);
    }
    for (name, value) in tail {
        ctx.out.bulk(name.as_bytes());
        ctx.out.int(value as i64);
    }
    Ok(())
}

/// MEMORY DOCTOR: what in the figures deserves attention, in words.
pub fn memory_doctor(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    let report = doctor(&MemoryFigures::measure(ctx.server, &mut None));
    ctx.out.verbatim("txt", report.as_bytes());
    Ok(())
}

/// Below this much allocated (as Redis: 5 MB), there is too little to judge.
const DOCTOR_MIN_BYTES: u64 = 5 << 20;

fn doctor(f: &MemoryFigures) -> String {
    if f.used < DOCTOR_MIN_BYTES {
        return "This instance holds very little data: there is nothing to diagnose yet.\n".into();
    }
    let mut findings = Vec::new();
    if f.peak > f.used + f.used / 2 {
        findings.push(format!(
            "Peak memory: at its peak the instance allocated {} bytes, {:.0}% more than now ({} bytes). \
             RSS may stay high until the allocator returns the pages: MEMORY PURGE asks it to.",
            f.peak,
            (f.peak as f64 / f.used as f64 - 1.0) * 100.0,
            f.used
        ));
    }
    if f.rss > f.used + f.used / 2 && f.rss > f.used + (10 << 20) {
        findings.push(format!(
            "High RSS overhead: the process holds {} bytes for {} allocated (ratio {:.2}). \
             Freed memory not yet returned to the OS, or fragmentation: try MEMORY PURGE.",
            f.rss,
            f.used,
            f.rss as f64 / f.used as f64
        ));
    }
    if f.client_buffers > f.used / 5 {
        findings.push(format!(
            "Big client buffers: {} bytes of client query and output buffers. \
             Check CLIENT LIST for clients with large qbuf/omem (slow readers, big pipelines) \
             and client-output-buffer-limit.",
            f.client_buffers
        ));
    }
    if f.script_bytes > 16 << 20 {
        findings.push(format!(
            "Many cached scripts: {} bytes of EVAL scripts. Scripts made per call (with \
             values in their text) fill the cache: pass values as ARGV, or SCRIPT FLUSH.",
            f.script_bytes
        ));
    }
    if findings.is_empty() {
        return "No memory problems detected: allocation, RSS, client buffers and script caches look sane.\n".into();
    }
    let mut report = String::from("Memory findings:\n\n");
    for (n, finding) in findings.iter().enumerate() {
        report.push_str(&format!(" * {}. {finding}\n", n + 1));
    }
    report
}

/// MEMORY MALLOC-STATS: mimalloc's statistics report.
pub fn memory_malloc_stats(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    let text = crate::alloc::stats_report();
    ctx.out.verbatim("txt", text.as_bytes());
    Ok(())
}

/// MEMORY PURGE: has the allocator return freed pages to the OS now.
pub fn memory_purge(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    crate::alloc::purge();
    ctx.out.ok();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(used: u64, peak: u64, rss: u64) -> MemoryFigures {
        MemoryFigures {
            used,
            peak,
            rss,
            startup: 1 << 20,
            dataset: used / 2,
            keys: 1000,
            client_buffers: 0,
            log_buffers: 0,
            script_bytes: 0,
            library_bytes: 0,
            values_on_disk: 0,
        }
    }

    #[test]
    fn doctor_names_what_it_finds() {
        assert!(doctor(&figures(1 << 20, 1 << 20, 1 << 20)).contains("very little data"));
        assert!(doctor(&figures(100 << 20, 100 << 20, 110 << 20)).contains("No memory problems"));
        let report = doctor(&figures(100 << 20, 400 << 20, 300 << 20));
        assert!(
            report.contains("Peak memory") && report.contains("High RSS overhead"),
            "{report}"
        );
    }
}
