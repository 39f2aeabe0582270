//! HyperLogLog commands: PFADD, PFCOUNT, PFMERGE.
//!
//! An HLL is a string value in Redis' own format (`strata_engine::hll`),
//! so GET, SET, COPY and the rest treat it as the string it is, and its
//! bytes move between Redis and Strata unchanged. A change decodes the
//! registers, changes them and stores the re-encoded string (a SET record,
//! at most 12 KiB; the key's TTL is kept, as Redis edits in place).

use bytes::Bytes;
use strata_engine::Value;
use strata_engine::hll::{self, BadHll, Registers};

use super::{CmdError, CmdResult, Ctx};

const ERR_NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
const ERR_CORRUPT: &str = "INVALIDOBJ Corrupted HLL object detected";

fn bad(error: BadHll) -> CmdError {
    match error {
        BadHll::NotHll => ERR_NOT_HLL.into(),
        BadHll::Corrupt => ERR_CORRUPT.into(),
    }
}

/// The registers of the HLL at `name`: `None` when missing; WRONGTYPE for
/// another type or a string that is not an HLL.
fn load(ctx: &mut Ctx, name: &[u8]) -> Result<Option<Registers>, CmdError> {
    let (db, key, now) = (ctx.db(), ctx.key(name), ctx.now_ms);
    match ctx.keys.shard(key).get_string(db, key, now)? {
        Some(entry) => hll::decode(entry.value().as_bytes()).map(Some).map_err(bad),
        None => Ok(None),
    }
}

/// Stores `registers` at `name`, keeping its TTL.
fn save(ctx: &mut Ctx, name: &[u8], registers: &Registers) {
    let (db, key, now) = (ctx.db(), ctx.key(name), ctx.now_ms);
    let bytes = registers.encode(ctx.config.hll_sparse_max_bytes as usize);
    ctx.keys
        .shard(key)
        .set(db, key, Value::owned(bytes), None, true, now);
}

/// PFADD key [element ...]: 1 when the HLL was created or a register grew.
pub fn pfadd(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (mut registers, mut changed) = match load(ctx, &args[1])? {
        Some(registers) => (registers, false),
        None => (Registers::new(), true),
    };
    for element in &args[2..] {
        changed |= registers.add(element);
    }
    if changed {
        save(ctx, &args[1], &registers);
    }
    ctx.out.int(changed as i64);
    Ok(())
}

/// PFCOUNT key [key ...]: the estimate of the union's cardinality.
pub fn pfcount(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut union = Registers::new();
    for name in &args[1..] {
        if let Some(registers) = load(ctx, name)? {
            union.merge(&registers);
        }
    }
    ctx.out.int(union.count() as i64);
    Ok(())
}

/// PFMERGE destkey [sourcekey ...]: the destination (created if missing)
/// becomes the union of itself and the sources.
pub fn pfmerge(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut union = Registers::new();
    for name in &args[1..] {
        if let Some(registers) = load(ctx, name)? {
            union.merge(&registers);
        }
    }
    save(ctx, &args[1], &union);
    ctx.out.ok();
    Ok(())
}
