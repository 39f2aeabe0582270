//! HyperLogLog commands: PFADD, PFCOUNT, PFMERGE, PFDEBUG, PFSELFTEST.
//!
//! An HLL is a string value in Redis' own format (`strata_engine::types::hll`),
//! so GET, SET, COPY and the rest treat it as the string it is, and its
//! bytes move between Redis and Strata unchanged. A change decodes the
//! registers, changes them and stores the re-encoded string (a SET record,
//! at most 12 KiB; the key's TTL is kept, as Redis edits in place). As in
//! Redis, a dense HLL stays dense, PFADD marks the cached cardinality
//! stale, and PFCOUNT of one key writes the cardinality it computed back
//! into the value (so the bytes are Redis' after the same commands).

use crate::events::notify;
use bytes::Bytes;
use strata_engine::Value;
use strata_engine::types::collection::Str;
use strata_engine::types::hll::{self, BadHll, Hll, REGISTERS, Registers};

use super::{CmdError, CmdResult, Ctx, is};

const ERR_NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
const ERR_CORRUPT: &str = "INVALIDOBJ Corrupted HLL object detected";

fn bad(error: BadHll) -> CmdError {
    match error {
        BadHll::NotHll => ERR_NOT_HLL.into(),
        BadHll::Corrupt => ERR_CORRUPT.into(),
    }
}

/// The HLL at `name`: `None` when missing; WRONGTYPE for another type or
/// a string that is not an HLL.
fn load(ctx: &mut Ctx, name: &[u8]) -> Result<Option<Hll>, CmdError> {
    let (db, key, now) = (ctx.db(), ctx.key(name), ctx.now_ms);
    match ctx.keys.shard(key).get_as::<Str>(db, key, now)? {
        Some(entry) => hll::decode(entry.value().as_bytes()).map(Some).map_err(bad),
        None => Ok(None),
    }
}

/// Stores `hll` at `name`, keeping its TTL.
fn save(ctx: &mut Ctx, name: &[u8], hll: &Hll) {
    let (db, key, now) = (ctx.db(), ctx.key(name), ctx.now_ms);
    let bytes = hll.encode(ctx.config.hll_sparse_max_bytes as usize);
    ctx.keys
        .shard(key)
        .set(db, key, Value::owned(bytes), None, true, now);
}

/// PFADD key [element ...]: 1 when the HLL was created or a register grew.
pub fn pfadd(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (mut hll, mut changed) = match load(ctx, &args[1])? {
        Some(hll) => (hll, false),
        None => (Hll::new(), true),
    };
    for element in &args[2..] {
        changed |= hll.registers.add(element);
    }
    if changed {
        hll.invalidate();
        save(ctx, &args[1], &hll);
        ctx.notify(notify::STRING, "pfadd", &args[1]);
    }
    ctx.out.int(changed as i64);
    Ok(())
}

/// PFCOUNT key [key ...]: the estimate of the union's cardinality. One
/// key's estimate is cached in the value, as Redis does.
pub fn pfcount(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if let [_, name] = args {
        let count = match load(ctx, name)? {
            None => 0,
            Some(hll) => match hll.cached() {
                Some(count) => count,
                None => {
                    let mut hll = hll;
                    let count = hll.registers.count();
                    hll.set_cache(count);
                    save(ctx, name, &hll);
                    count
                }
            },
        };
        ctx.out.int(count as i64);
        return Ok(());
    }
    let mut union = Registers::new();
    for name in &args[1..] {
        if let Some(hll) = load(ctx, name)? {
            union.merge(&hll.registers);
        }
    }
    ctx.out.int(union.count() as i64);
    Ok(())
}

/// PFMERGE destkey [sourcekey ...]: the destination (created if missing)
/// becomes the union of itself and the sources; dense if any of them is.
pub fn pfmerge(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut merged = Hll::new();
    for (n, name) in args[1..].iter().enumerate() {
        if let Some(hll) = load(ctx, name)? {
            merged.registers.merge(&hll.registers);
            merged.dense |= hll.dense;
            if n == 0 {
                // The destination keeps its cached count, marked stale, as
                // Redis changes the destination in place (GET shows it).
                merged.cache = hll.cache;
            }
        }
    }
    merged.invalidate();
    save(ctx, &args[1], &merged);
    ctx.notify(notify::STRING, "pfadd", &args[1]);
    ctx.out.ok();
    Ok(())
}

/// PFDEBUG GETREG|DECODE|ENCODING|TODENSE key.
pub fn pfdebug(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (subcommand, name) = (&args[1], &args[2]);
    let Some(mut hll) = load(ctx, name)? else {
        return Err("ERR The specified key does not exist".into());
    };
    if is(subcommand, "getreg") {
        if !hll.dense {
            hll.dense = true;
            save(ctx, name, &hll);
        }
        ctx.out.array(REGISTERS);
        for &register in hll.registers.0.iter() {
            ctx.out.int(register as i64);
        }
    } else if is(subcommand, "decode") {
        let (db, key, now) = (ctx.db(), ctx.key(name), ctx.now_ms);
        let text = ctx
            .keys
            .shard(key)
            .get_as::<Str>(db, key, now)?
            .and_then(|e| hll::sparse_text(e.value().as_bytes()))
            .ok_or(CmdError::from("ERR HLL encoding is not sparse"))?;
        ctx.out.bulk(text.as_bytes());
    } else if is(subcommand, "encoding") {
        ctx.out.simple(if hll.dense { "dense" } else { "sparse" });
    } else if is(subcommand, "todense") {
        let converted = !hll.dense;
        if converted {
            hll.dense = true;
            save(ctx, name, &hll);
        }
        ctx.out.int(converted as i64);
    } else {
        return Err(format!(
            "ERR Unknown PFDEBUG subcommand '{}'",
            String::from_utf8_lossy(subcommand)
        )
        .into());
    }
    Ok(())
}

/// PFSELFTEST: the HLL implementation's self test.
pub fn pfselftest(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    hll::self_test().map_err(CmdError::from)?;
    ctx.out.ok();
    Ok(())
}
