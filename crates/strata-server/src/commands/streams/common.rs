//! What every stream command shares: parsing IDs, ranges, counts and
//! trimming options, writing IDs and entries, reading and changing the
//! stream at a key.

use bytes::Bytes;
use strata_engine::keyspace::shards::KeyRef;
use strata_engine::types::collection::Stream;
use strata_engine::types::stream::{Fields, StreamId, StreamOp, StreamValue, Trim};

use crate::commands::{CmdError, Ctx, ERR_SYNTAX, is, parse_i64};

pub(super) const ERR_INVALID_ID: &str =
    "ERR Invalid stream ID specified as stream command argument";
pub(super) const ERR_START: &str = "ERR invalid start ID for the interval";
pub(super) const ERR_END: &str = "ERR invalid end ID for the interval";
pub(super) const ERR_ID_TOO_SMALL: &str =
    "ERR The ID specified in XADD is equal or smaller than the target stream top item";

// --- arguments -------------------------------------------------------------

/// An ID argument: `ms-seq`, `ms` (the sequence is `missing_seq`), `-` and
/// `+` unless `strict`, and `ms-*` where `star` allows it (XADD). Also
/// answers whether the sequence was given.
pub(super) fn parse_id_full(
    arg: &[u8],
    missing_seq: u64,
    strict: bool,
    star: bool,
) -> Result<(StreamId, bool), CmdError> {
    let invalid = || CmdError::from(ERR_INVALID_ID);
    match arg {
        b"-" if !strict => return Ok((StreamId::MIN, true)),
        b"+" if !strict => return Ok((StreamId::MAX, true)),
        _ => {}
    }
    let (ms, seq) = match arg.iter().position(|&b| b == b'-') {
        Some(dash) => (&arg[..dash], Some(&arg[dash + 1..])),
        None => (arg, None),
    };
    let ms = parse_u64(ms).ok_or_else(invalid)?;
    match seq {
        None => Ok((StreamId::new(ms, missing_seq), true)),
        Some(b"*") if star => Ok((StreamId::new(ms, 0), false)),
        Some(seq) => Ok((StreamId::new(ms, parse_u64(seq).ok_or_else(invalid)?), true)),
    }
}

pub(super) fn parse_id(arg: &[u8], missing_seq: u64, strict: bool) -> Result<StreamId, CmdError> {
    Ok(parse_id_full(arg, missing_seq, strict, false)?.0)
}

/// Unsigned decimal digits that fit 64 bits.
pub(super) fn parse_u64(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 20 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// A range bound: `(` makes it exclusive (then `-` and `+` are refused).
pub(super) fn parse_bound(arg: &[u8], missing_seq: u64, start: bool) -> Result<StreamId, CmdError> {
    if arg.len() > 1 && arg[0] == b'(' {
        let id = parse_id(&arg[1..], missing_seq, true)?;
        return if start {
            id.next().ok_or(CmdError::from(ERR_START))
        } else {
            id.prev().ok_or(CmdError::from(ERR_END))
        };
    }
    parse_id(arg, missing_seq, false)
}

/// A COUNT argument; a negative one counts as 0.
pub(super) fn parse_count(arg: &[u8]) -> Result<u64, CmdError> {
    Ok(parse_i64(arg)?.max(0) as u64)
}

/// What deleting an entry does about the groups that reference it
/// (`super::refs`: KEEPREF, DELREF, ACKED).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Refs {
    #[default]
    Keep,
    Delete,
    Acked,
}

impl Refs {
    /// The strategy `arg` names, if it names one.
    pub(super) fn parse(arg: &[u8]) -> Option<Refs> {
        match () {
            _ if is(arg, "KEEPREF") => Some(Refs::Keep),
            _ if is(arg, "DELREF") => Some(Refs::Delete),
            _ if is(arg, "ACKED") => Some(Refs::Acked),
            _ => None,
        }
    }
}

/// XADD's and XTRIM's trimming options, from `args[2..]`; for XADD also
/// NOMKSTREAM and where the ID is.
pub(super) struct TrimArgs {
    pub(super) trim: Option<Trim>,
    /// KEEPREF, DELREF or ACKED (Redis 8.2; `super::refs`).
    pub(super) refs: Refs,
    pub(super) nomkstream: bool,
    pub(super) id_at: usize,
    /// XADD's ID when it is not `*` (and whether its sequence was given),
    /// parsed where Redis parses it: before the checks that follow the
    /// options, so a bad ID is the error a bad ID and bad LIMIT give.
    pub(super) given: Option<(StreamId, bool)>,
}

pub(super) fn parse_trim_args(
    args: &[Bytes],
    xadd: bool,
    node_entries: u64,
) -> Result<TrimArgs, CmdError> {
    const ERR_BOTH: &str =
        "ERR syntax error, MAXLEN and MINID options at the same time are not compatible";
    let mut i = 2;
    let (mut strategy, mut approx, mut limit) = (None, false, None);
    let mut nomkstream = false;
    let mut refs = None;
    let mut given = None;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = &args[i][..];
        if xadd && opt == b"*" {
            break;
        }
        if (is(opt, "maxlen") || is(opt, "minid")) && more > 0 {
            if strategy.is_some() {
                return Err(ERR_BOTH.into());
            }
            approx = false;
            if more >= 2 && (&args[i + 1][..] == b"~" || &args[i + 1][..] == b"=") {
                approx = &args[i + 1][..] == b"~";
                i += 1;
            }
            let value = &args[i + 1];
            strategy = Some(if is(opt, "maxlen") {
                let len = parse_i64(value)?;
                if len < 0 {
                    return Err("ERR The MAXLEN argument must be >= 0.".into());
                }
                Trim::MaxLen {
                    len: len as u64,
                    approx: false,
                    limit: 0,
                }
            } else {
                Trim::MinId {
                    id: parse_id(value, 0, true)?,
                    approx: false,
                    limit: 0,
                }
            });
            i += 2;
        } else if is(opt, "limit") && more > 0 {
            let n = parse_i64(&args[i + 1])?;
            if n < 0 {
                return Err("ERR The LIMIT argument must be >= 0.".into());
            }
            limit = Some(n as u64);
            i += 2;
        } else if xadd && is(opt, "nomkstream") {
            nomkstream = true;
            i += 1;
        } else if let Some(parsed) = Refs::parse(opt).filter(|_| refs.is_none()) {
            // Once only: XADD then takes a second one for the ID (Redis
            // answers that it is not a valid ID), XTRIM a syntax error.
            refs = Some(parsed);
            i += 1;
        } else if xadd {
            given = Some(parse_id_full(opt, 0, true, true)?);
            break;
        } else {
            return Err(ERR_SYNTAX.into());
        }
    }
    if limit.is_some_and(|n| n > 0) && strategy.is_none() {
        return Err(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy".into(),
        );
    }
    if !xadd && strategy.is_none() {
        return Err("ERR syntax error, XTRIM must be called with a trimming strategy".into());
    }
    if limit.is_some() && !approx {
        return Err("ERR syntax error, LIMIT cannot be used without the special ~ option".into());
    }
    // Approximate trimming does at most 100 nodes' work unless told.
    let limit = if approx {
        limit.unwrap_or(100 * node_entries)
    } else {
        0
    };
    let trim = strategy.map(|s| match s {
        Trim::MaxLen { len, .. } => Trim::MaxLen { len, approx, limit },
        Trim::MinId { id, .. } => Trim::MinId { id, approx, limit },
    });
    Ok(TrimArgs {
        trim,
        refs: refs.unwrap_or_default(),
        nomkstream,
        id_at: i,
        given,
    })
}

// --- replies ---------------------------------------------------------------

pub(super) fn write_id(out: &mut strata_resp::ReplyWriter, id: StreamId) {
    // `ms-seq` on the stack: every XADD answers one, and formatting it
    // into a String was an allocation and two `Display` calls per XADD.
    let (mut ms, mut seq) = (itoa::Buffer::new(), itoa::Buffer::new());
    let (ms, seq) = (ms.format(id.ms).as_bytes(), seq.format(id.seq).as_bytes());
    let mut text = [0u8; 41];
    text[..ms.len()].copy_from_slice(ms);
    text[ms.len()] = b'-';
    text[ms.len() + 1..ms.len() + 1 + seq.len()].copy_from_slice(seq);
    out.bulk(&text[..ms.len() + 1 + seq.len()]);
}

/// `[id, [field, value, ...]]`.
pub(super) fn write_entry(out: &mut strata_resp::ReplyWriter, id: StreamId, fields: Fields) {
    out.array(2);
    write_id(out, id);
    out.array(fields.len());
    for item in fields.iter() {
        out.bulk(item);
    }
}

pub(super) fn no_group(key: &[u8], group: &[u8]) -> CmdError {
    format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        String::from_utf8_lossy(key),
        String::from_utf8_lossy(group)
    )
    .into()
}

// --- reading and changing ---------------------------------------------------

/// Runs `read` on the stream at `name` (`None` when missing); WRONGTYPE
/// for another type.
pub(super) fn with_stream<R>(
    ctx: &mut Ctx,
    name: &[u8],
    read: impl FnOnce(Option<&StreamValue>, &mut strata_resp::ReplyWriter) -> R,
) -> Result<R, CmdError> {
    let (db, key, now) = (ctx.db(), ctx.key(name), ctx.now_ms);
    let entry = ctx.keys.shard(key).get_as::<Stream>(db, key, now)?;
    Ok(read(
        entry.as_ref().and_then(|e| e.value().stream()),
        &mut ctx.out,
    ))
}

/// Applies `op` to the stream at `key` (creating it when the operation
/// makes one and `create`); answers what it changed.
pub(super) fn change(
    ctx: &mut Ctx,
    key: KeyRef,
    op: &StreamOp,
    create: bool,
) -> Result<u64, CmdError> {
    let (db, now) = (ctx.db(), ctx.now_ms);
    let shard = ctx.keys.shard(key);
    Ok(shard
        .change_as::<Stream>(db, key, now, op, create)?
        .unwrap_or(0))
}

pub(super) fn node_limits(ctx: &Ctx) -> (u64, u64) {
    (
        ctx.config.stream_node_max_entries,
        ctx.config.stream_node_max_bytes,
    )
}

/// Redis' error for an unknown subcommand or wrong arguments.
pub(super) fn subcommand_syntax(command: &str, sub: &[u8]) -> CmdError {
    format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {command} HELP.",
        String::from_utf8_lossy(sub)
    )
    .into()
}
