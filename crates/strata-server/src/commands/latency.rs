//! LATENCY: the latency monitor's events (`strata_engine::latency`, fed
//! when `latency-monitor-threshold` is set) and the per-command histograms
//! (`crate::observe::histogram`, kept while `latency-tracking` is on), with Redis'
//! replies.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use strata_engine::latency::{self, History, Sample};

use super::ctx::help_lines;
use super::{CmdResult, Ctx, lossy};
use crate::observe::histogram::{self, Counts};

/// Columns of LATENCY GRAPH (Redis' `LATENCY_GRAPH_COLS`).
const GRAPH_COLUMNS: usize = 80;
/// Rows of its bars, and the characters a row's step draws.
const GRAPH_ROWS: usize = 4;
const GRAPH_STEP_CHARS: &[u8] = b"_o#";

/// LATENCY LATEST: per event, its name, the time and latency of its
/// newest sample and its worst.
pub fn latency_latest(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    let events = latency::events();
    ctx.out.array(events.len());
    for (name, history) in &events {
        let latest = history.latest();
        ctx.out.array(4);
        ctx.out.bulk(name.as_bytes());
        ctx.out.int(latest.time_s as i64);
        ctx.out.int(latest.latency_ms as i64);
        ctx.out.int(history.max_ms as i64);
    }
    Ok(())
}

fn event<'e>(
    events: &'e std::collections::BTreeMap<&'static str, History>,
    name: &[u8],
) -> Option<&'e History> {
    events
        .iter()
        .find(|(event, _)| event.as_bytes().eq_ignore_ascii_case(name))
        .map(|(_, history)| history)
}

/// LATENCY HISTORY event: its samples, oldest first, as [time, latency].
pub fn latency_history(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let events = latency::events();
    let samples = event(&events, &args[2])
        .map(History::samples)
        .unwrap_or_default();
    ctx.out.array(samples.len());
    for sample in samples {
        ctx.out.array(2);
        ctx.out.int(sample.time_s as i64);
        ctx.out.int(sample.latency_ms as i64);
    }
    Ok(())
}

/// LATENCY RESET [event ...]: how many events were forgotten.
pub fn latency_reset(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let names: Vec<&[u8]> = args[2..].iter().map(|a| a.as_ref()).collect();
    ctx.out.int(latency::reset(&names) as i64);
    Ok(())
}

/// LATENCY GRAPH event: Redis' text chart of the event's samples.
pub fn latency_graph(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let events = latency::events();
    let Some(history) = event(&events, &args[2]) else {
        return Err(format!(
            "ERR No samples available for event '{}'",
            lossy(&args[2], 128)
        )
        .into());
    };
    let name = String::from_utf8_lossy(&args[2]).to_ascii_lowercase();
    let chart = graph(&name, history, now_s());
    ctx.out.verbatim("txt", chart.as_bytes());
    Ok(())
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// How long ago `time_s` was, as the chart labels it: 5s, 3m, 2h, 1d.
fn ago(time_s: u64, now_s: u64) -> String {
    let elapsed = now_s.saturating_sub(time_s);
    match elapsed {
        0..60 => format!("{elapsed}s"),
        60..3600 => format!("{}m", elapsed / 60),
        3600..86400 => format!("{}h", elapsed / 3600),
        _ => format!("{}d", elapsed / 86400),
    }
}

/// The chart: a title line, a rule, then one column per sample: a bar of
/// [`GRAPH_ROWS`] rows scaled between the lowest and highest sample (each
/// row in three steps, `_`, `o`, `#`, full rows below as `|`), and under
/// it the sample's age written downwards.
fn graph(name: &str, history: &History, now_s: u64) -> String {
    let samples = history.samples();
    let low = samples.iter().map(|s| s.latency_ms).min().unwrap_or(0);
    let high = samples.iter().map(|s| s.latency_ms).max().unwrap_or(0);
    let mut out = format!(
        "{name} - high {high} ms, low {low} ms (all time high {} ms)\n{}\n",
        history.max_ms,
        "-".repeat(GRAPH_COLUMNS)
    );
    for chunk in samples.chunks(GRAPH_COLUMNS) {
        render_columns(&mut out, chunk, low, high, now_s);
    }
    out
}

fn render_columns(out: &mut String, samples: &[Sample], low: u64, high: u64, now_s: u64) {
    let steps = GRAPH_STEP_CHARS.len() * GRAPH_ROWS;
    let range = (high - low).max(1) as f64;
    let step_of =
        |s: &Sample| (((s.latency_ms - low) as f64 * steps as f64 / range) as usize).min(steps - 1);
    for row in 0..GRAPH_ROWS {
        let line: String = samples
            .iter()
            .map(|s| {
                let level = step_of(s) as isize
                    - ((GRAPH_ROWS - row - 1) * GRAPH_STEP_CHARS.len()) as isize;
                match level {
                    l if l < 0 => ' ',
                    l if (l as usize) < GRAPH_STEP_CHARS.len() => {
                        GRAPH_STEP_CHARS[l as usize] as char
                    }
                    _ => '|',
                }
            })
            .collect();
        out.push_str(&line);
        out.push('\n');
    }
    // A blank row, then the labels, one character per row.
    let labels: Vec<String> = samples.iter().map(|s| ago(s.time_s, now_s)).collect();
    out.push_str(&" ".repeat(samples.len()));
    out.push('\n');
    let tallest = labels.iter().map(String::len).max().unwrap_or(0);
    for row in 0..tallest {
        let line: String = labels
            .iter()
            .map(|label| label.as_bytes().get(row).map_or(' ', |&b| b as char))
            .collect();
        out.push_str(&line);
        out.push('\n');
    }
}

/// LATENCY DOCTOR: a plain-language report of the events seen and what
/// usually causes each in Strata.
pub fn latency_doctor(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    let report = doctor(&latency::events(), ctx.config.latency_monitor_threshold);
    ctx.out.verbatim("txt", report.as_bytes());
    Ok(())
}

fn doctor(events: &std::collections::BTreeMap<&'static str, History>, threshold_ms: u64) -> String {
    if threshold_ms == 0 {
        return "The latency monitor is off: set latency-monitor-threshold (in milliseconds, \
                e.g. CONFIG SET latency-monitor-threshold 100) to record latency events.\n"
            .to_owned();
    }
    if events.is_empty() {
        return format!(
            "No event took {threshold_ms} ms or more since the monitor was started or reset.\n"
        );
    }
    let mut out = format!(
        "Latency events of {threshold_ms} ms or more since the monitor was started or reset:\n\n"
    );
    for (n, (name, history)) in events.iter().enumerate() {
        let samples = history.samples();
        let total: u64 = samples.iter().map(|s| s.latency_ms).sum();
        let average = total / samples.len().max(1) as u64;
        let deviation = samples
            .iter()
            .map(|s| s.latency_ms.abs_diff(average))
            .sum::<u64>()
            / samples.len().max(1) as u64;
        let period = match (samples.first(), samples.last()) {
            (Some(first), Some(last)) if samples.len() > 1 => {
                format!(
                    ", one every {} s on average",
                    (last.time_s - first.time_s) / (samples.len() as u64 - 1)
                )
            }
            _ => String::new(),
        };
        out.push_str(&format!(
            "{}. {name}: {} latency spikes (average {average} ms, mean deviation {deviation} ms{period}); worst {} ms.\n   {}\n",
            n + 1,
            samples.len(),
            history.max_ms,
            advice(name)
        ));
    }
    out
}

/// What usually makes `event` slow in Strata.
fn advice(event: &str) -> &'static str {
    match event {
        "command" => {
            "Slow commands: check SLOWLOG GET for which; O(N) commands on big values (KEYS, SMEMBERS, HGETALL, LRANGE 0 -1, SORT) block the keys they touch."
        }
        "fast-command" => {
            "O(1) commands were slow: the machine is overloaded or swapping, or a value had to be read from disk (see cold-read)."
        }
        "log-fsync" => {
            "The disk is slow to sync the log: with appendfsync always every write waits for it; everysec takes it off the write path."
        }
        "log-write" => {
            "Writing a group commit to the log was slow: the disk is saturated (see INFO persistence and iostat)."
        }
        "checkpoint" => {
            "A checkpoint took long: checkpoint-max-rate bounds its write rate; it never blocks commands."
        }
        "compaction" => {
            "Compacting a log segment took long: it runs in the background; a slow disk lengthens it."
        }
        "cold-read" => {
            "Commands waited for values on disk: raise maxmemory, or check the device's read latency (INFO tiering)."
        }
        "expire-cycle" => {
            "Active expiry had many keys to delete at once: spread deadlines, or lower hz."
        }
        "eviction-cycle" => {
            "Eviction had much to move or delete at once: leave more room under maxmemory."
        }
        _ => "No advice for this event.",
    }
}

/// LATENCY HISTOGRAM [command ...]: per command (those called since the
/// last CONFIG RESETSTAT), its calls and cumulative counts per µs edge.
pub fn latency_histogram(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let table = &ctx.server.commands;
    let ids: Vec<usize> = if args.len() == 2 {
        (0..table.specs.len()).collect()
    } else {
        let mut ids = Vec::new();
        for name in &args[2..] {
            let name = String::from_utf8_lossy(name).to_ascii_lowercase();
            let Some(id) = table.full_names.iter().position(|n| *n == name) else {
                continue;
            };
            // A container stands for its subcommands.
            let prefix = format!("{name}|");
            let subs: Vec<usize> = (0..table.full_names.len())
                .filter(|&i| table.full_names[i].starts_with(&prefix))
                .collect();
            if subs.is_empty() {
                ids.push(id);
            } else {
                ids.extend(subs);
            }
        }
        ids.sort_unstable();
        ids.dedup();
        ids
    };
    let measured: Vec<(usize, Counts)> = ids
        .into_iter()
        .map(|id| (id, command_counts(ctx, id)))
        .filter(|(_, counts)| histogram::total(counts) > 0)
        .collect();
    ctx.out.map(measured.len());
    for (id, counts) in measured {
        ctx.out.bulk(ctx.server.commands.full_names[id].as_bytes());
        ctx.out.map(2);
        ctx.out.bulk(b"calls");
        ctx.out.int(histogram::total(&counts) as i64);
        ctx.out.bulk(b"histogram_usec");
        let report = histogram::redis_report(&counts);
        ctx.out.map(report.len());
        for (micros, cumulative) in report {
            ctx.out.int(micros as i64);
            ctx.out.int(cumulative as i64);
        }
    }
    Ok(())
}

/// Command `id`'s histogram summed over the network threads.
fn command_counts(ctx: &Ctx, id: usize) -> Counts {
    crate::observe::info::command_histogram(ctx.server, id)
}

pub fn latency_help(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    help_lines(
        ctx,
        "LATENCY",
        &[
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
        ],
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graph_scales_bars_and_labels_ages() {
        // Three samples: 10, 20, 30 ms, 2, 1 and 0 s ago.
        let mut history = History::default();
        history.add_sample(100, 10);
        history.add_sample(101, 20);
        history.add_sample(102, 30);
        let chart = graph("command", &history, 102);
        let lines: Vec<&str> = chart.lines().collect();
        assert_eq!(
            lines[0],
            "command - high 30 ms, low 10 ms (all time high 30 ms)"
        );
        assert_eq!(lines[1], "-".repeat(80));
        // The lowest sample is a floor mark, the highest a full bar.
        let column = |c: usize| -> String {
            lines[2..6]
                .iter()
                .map(|l| l.as_bytes()[c] as char)
                .collect()
        };
        assert_eq!(column(0), "   _");
        assert_eq!(column(2), "#|||");
        assert_eq!(lines[7], "210");
        assert_eq!(lines[8], "sss");
    }
}
