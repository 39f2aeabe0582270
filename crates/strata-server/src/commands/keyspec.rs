//! Key specifications: how a command names its keys, as Redis 7 declares
//! them (`COMMAND INFO`'s seventh element, "key specs").
//!
//! A spec has two steps. *Begin search* finds where its keys start: at a
//! fixed argument index, or after a keyword found from some index (forward,
//! or backward when the index is negative). *Find keys* then takes either a
//! range (up to a last key relative to the start, or counted from the end
//! when negative, every `step`-th argument) or a count read from an
//! argument (`numkeys`, as EVAL or ZUNIONSTORE have). Flags say what the
//! command does with each key: `RO`/`RW`/`OW`/`RM` (read only, read and
//! write, overwrite, remove) and `access`/`update`/`insert`/`delete`.
//!
//! Every command's keys come from here: dispatch (which values to read in
//! before a command runs), `COMMAND GETKEYS`/`GETKEYSANDFLAGS`, and the
//! legacy first/last/step triple of `COMMAND INFO`, derived as Redis does.

use bytes::Bytes;

/// Where a spec's keys begin.
#[derive(Clone, Copy, Debug)]
pub enum BeginSearch {
    /// At this argument index.
    Index(i32),
    /// After `keyword`, searched from `start_from` (from the end when
    /// negative).
    Keyword {
        keyword: &'static str,
        start_from: i32,
    },
    /// Keys the arguments do not locate (SORT's BY/GET patterns, its STORE
    /// anywhere in the arguments): the command finds them itself.
    Unknown,
}

/// Which arguments from the start are keys.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(not(test), allow(dead_code))]
pub enum FindKeys {
    /// Up to `last_key` (relative to the start; from the end of the
    /// arguments when negative), every `step`-th; `limit` > 1 divides what
    /// a negative `last_key` covers.
    Range {
        last_key: i32,
        step: i32,
        limit: i32,
    },
    /// The number of keys is the argument at `keynum_index` (relative to
    /// the start); the keys begin at `first_key` (relative too).
    Keynum {
        keynum_index: i32,
        first_key: i32,
        step: i32,
    },
    /// See [`BeginSearch::Unknown`].
    Unknown,
}

/// One key specification of a command.
#[derive(Clone, Copy, Debug)]
pub struct KeySpec {
    pub notes: &'static str,
    /// Redis' names: "RO", "RW", "OW", "RM", "access", "update", "insert",
    /// "delete", "not_key", "incomplete", "variable_flags".
    pub flags: &'static [&'static str],
    pub begin: BeginSearch,
    pub find: FindKeys,
}

/// Flags as Redis lists them, in its order.
pub const FLAG_ORDER: &[&str] = &[
    "RO",
    "RW",
    "OW",
    "RM",
    "access",
    "update",
    "insert",
    "delete",
    "not_key",
    "incomplete",
    "variable_flags",
];

/// A spec whose keys start at `index` and run to `last_key` every `step`.
pub const fn range(
    flags: &'static [&'static str],
    index: i32,
    last_key: i32,
    step: i32,
) -> KeySpec {
    KeySpec {
        notes: "",
        flags,
        begin: BeginSearch::Index(index),
        find: FindKeys::Range {
            last_key,
            step,
            limit: 0,
        },
    }
}

/// A spec whose key count is the argument at `index` (LMPOP's
/// `numkeys`), the keys following it.
pub const fn keynum(flags: &'static [&'static str], index: i32) -> KeySpec {
    KeySpec {
        notes: "",
        flags,
        begin: BeginSearch::Index(index),
        find: FindKeys::Keynum {
            keynum_index: 0,
            first_key: 1,
            step: 1,
        },
    }
}

/// A spec whose keys follow `keyword` (searched from argument
/// `start_from`) and run to `last_key` every `step` (GEORADIUS' STORE).
pub const fn keyword_range(
    flags: &'static [&'static str],
    keyword: &'static str,
    start_from: i32,
    last_key: i32,
    step: i32,
) -> KeySpec {
    KeySpec {
        notes: "",
        flags,
        begin: BeginSearch::Keyword {
            keyword,
            start_from,
        },
        find: FindKeys::Range {
            last_key,
            step,
            limit: 0,
        },
    }
}

/// A spec whose keys the arguments do not locate (see
/// [`BeginSearch::Unknown`]), with Redis' note.
pub const fn unknown(notes: &'static str, flags: &'static [&'static str]) -> KeySpec {
    KeySpec {
        notes,
        flags,
        begin: BeginSearch::Unknown,
        find: FindKeys::Unknown,
    }
}

/// [`range`] with Redis' note about the flags.
pub const fn noted(notes: &'static str, spec: KeySpec) -> KeySpec {
    KeySpec { notes, ..spec }
}

/// Why keys could not be found in a command's arguments.
#[derive(Debug, PartialEq, Eq)]
pub struct BadArguments;

impl KeySpec {
    /// Positions of this spec's keys in `args` (argument 0 is the name).
    pub fn positions(&self, args: &[Bytes]) -> Result<Vec<usize>, BadArguments> {
        Ok(self.span(args)?.collect())
    }

    /// [`KeySpec::positions`] as a range, without gathering them.
    pub fn span(
        &self,
        args: &[Bytes],
    ) -> Result<std::iter::StepBy<std::ops::RangeInclusive<usize>>, BadArguments> {
        // Empty: its start is past its end.
        const NONE: std::ops::RangeInclusive<usize> = std::ops::RangeInclusive::new(1, 0);
        let argc = args.len() as i64;
        let start = match self.begin {
            BeginSearch::Index(index) => index as i64,
            BeginSearch::Keyword {
                keyword,
                start_from,
            } => {
                let found = if start_from >= 0 {
                    (start_from as i64..argc).find(|&i| is(&args[i as usize], keyword))
                } else {
                    (1..=argc + start_from as i64)
                        .rev()
                        .find(|&i| is(&args[i as usize], keyword))
                };
                match found {
                    Some(at) => at + 1,
                    None => return Ok(NONE.step_by(1)),
                }
            }
            BeginSearch::Unknown => return Ok(NONE.step_by(1)),
        };
        if start >= argc {
            return Ok(NONE.step_by(1));
        }
        let (first, last, step) = match self.find {
            FindKeys::Unknown => return Ok(NONE.step_by(1)),
            FindKeys::Range {
                last_key,
                step,
                limit,
            } => {
                let last = if last_key >= 0 {
                    start + last_key as i64
                } else if limit <= 1 {
                    argc + last_key as i64
                } else {
                    start + (argc - start) / limit as i64 + last_key as i64
                };
                (start, last, step as i64)
            }
            FindKeys::Keynum {
                keynum_index,
                first_key,
                step,
            } => {
                let at = (start + keynum_index as i64) as usize;
                let count: i64 = args
                    .get(at)
                    .and_then(|a| std::str::from_utf8(a).ok())
                    .and_then(|t| t.parse().ok())
                    .filter(|&n| n >= 0)
                    .ok_or(BadArguments)?;
                let first = start + first_key as i64;
                // A huge count (a client's number) cannot overflow: it
                // names more keys than there are arguments.
                let last = count
                    .checked_mul(step as i64)
                    .and_then(|span| (first - 1).checked_add(span))
                    .ok_or(BadArguments)?;
                (first, last, step as i64)
            }
        };
        if last >= argc || step <= 0 {
            return Err(BadArguments);
        }
        // An empty range (no keys) when `last` is before `first`.
        match first <= last {
            true => Ok((first as usize..=last as usize).step_by(step as usize)),
            false => Ok(NONE.step_by(1)),
        }
    }
}

/// The flags of a command's only key spec when it is the usual shape,
/// one key at argument 1 (GET, SET, SPUBLISH…): dispatch, the ACL and
/// cluster routing read that key without extracting keys.
#[inline]
pub fn single_key_at_1(specs: &[KeySpec]) -> Option<KeyFlags> {
    match specs {
        [
            KeySpec {
                begin: BeginSearch::Index(1),
                find:
                    FindKeys::Range {
                        last_key: 0,
                        step: 1,
                        limit: 0,
                    },
                flags,
                ..
            },
        ] => Some(flags),
        _ => None,
    }
}

/// Every key of a command with its spec, in spec order.
pub fn keys_with_specs<'a>(
    specs: &'a [KeySpec],
    args: &[Bytes],
) -> Result<Vec<(usize, &'a KeySpec)>, BadArguments> {
    let mut found = Vec::new();
    for spec in specs {
        found.extend(spec.positions(args)?.into_iter().map(|at| (at, spec)));
    }
    Ok(found)
}

/// A key's flags (Redis' names, see [`KeySpec::flags`]).
pub type KeyFlags = &'static [&'static str];

/// A command's own part of key extraction, where its key specs cannot
/// say all (Redis' getkeys procedures): it adjusts the keys and flags the
/// specs found in `args`. Named by the command's row (`keys_hook`).
pub type KeysHook = fn(args: &[Bytes], keys: &mut Vec<(usize, KeyFlags)>);

/// Every key of a command in `args` with the flags that apply to it, as
/// Redis' key extraction finds them: its `specs`, then its `hook` for
/// what they cannot say. COMMAND GETKEYS and the ACL checks read keys so.
pub fn keys_and_flags(
    specs: &'static [KeySpec],
    hook: Option<KeysHook>,
    args: &[Bytes],
) -> Result<Vec<(usize, KeyFlags)>, BadArguments> {
    let mut keys: Vec<(usize, KeyFlags)> = keys_with_specs(specs, args)?
        .into_iter()
        .map(|(at, spec)| (at, spec.flags))
        .collect();
    if let Some(hook) = hook {
        hook(args, &mut keys);
    }
    Ok(keys)
}

/// SORT's STORE can be anywhere: found as Redis' sortGetKeys finds it
/// (LIMIT, GET and BY skipped with their arguments; the last STORE wins).
pub fn sort_keys(args: &[Bytes], keys: &mut Vec<(usize, KeyFlags)>) {
    let mut store = None;
    let mut i = 2;
    while i < args.len() {
        if is(&args[i], "limit") {
            i += 2;
        } else if is(&args[i], "get") || is(&args[i], "by") {
            i += 1;
        } else if is(&args[i], "store") && i + 1 < args.len() {
            store = Some(i + 1);
        }
        i += 1;
    }
    if let Some(at) = store {
        keys.push((at, &["OW", "update"]));
    }
}

/// MIGRATE's key argument is left empty when KEYS names the keys.
pub fn migrate_keys(args: &[Bytes], keys: &mut Vec<(usize, KeyFlags)>) {
    if keys.len() > 1 && args.get(3).is_some_and(|k| k.is_empty()) {
        keys.retain(|(at, _)| *at != 3);
    }
}

/// SET's `variable_flags`: it overwrites unless it has GET or a compare
/// condition, IFEQ or IFNE (its options follow its value: `SET k get`
/// sets "get").
pub fn set_keys(args: &[Bytes], keys: &mut Vec<(usize, KeyFlags)>) {
    let reads = (args.iter().skip(3)).any(|a| is(a, "GET") || is(a, "IFEQ") || is(a, "IFNE"));
    resolve_variable(
        keys,
        if reads {
            &["RW", "access", "update"]
        } else {
            &["OW", "update"]
        },
    );
}

/// BITFIELD's `variable_flags`: it only reads unless it has SET or INCRBY.
pub fn bitfield_keys(args: &[Bytes], keys: &mut Vec<(usize, KeyFlags)>) {
    let writes = args.iter().skip(2).any(|a| is(a, "SET") || is(a, "INCRBY"));
    resolve_variable(
        keys,
        if writes {
            &["RW", "access", "update"]
        } else {
            &["RO", "access"]
        },
    );
}

fn resolve_variable(keys: &mut [(usize, KeyFlags)], flags: KeyFlags) {
    for (_, key_flags) in keys {
        if key_flags.contains(&"variable_flags") {
            *key_flags = flags;
        }
    }
}

/// COMMAND INFO's first key, last key and step, derived from the specs as
/// Redis derives them, and whether the command has "movablekeys" (keys the
/// triple cannot describe).
pub fn legacy_range(specs: &[KeySpec]) -> ((i32, i32, i32), bool) {
    let simple = |spec: &KeySpec| match (spec.begin, spec.find) {
        (BeginSearch::Index(index), FindKeys::Range { last_key, step, .. }) => {
            Some((index, last_key, step))
        }
        _ => None,
    };
    let incomplete = |spec: &KeySpec| spec.flags.contains(&"incomplete");
    if let [spec] = specs
        && let Some((index, last_key, step)) = simple(spec)
    {
        let last = if last_key >= 0 {
            index + last_key
        } else {
            last_key
        };
        return ((index, last, step), incomplete(spec));
    }
    let mut movable = false;
    let (mut first, mut last, mut previous_last) = (i32::MAX, 0i32, 0i32);
    for spec in specs {
        let Some((index, last_key, step)) = simple(spec) else {
            movable = true;
            continue;
        };
        if step != 1 || (previous_last != 0 && previous_last != index - 1) {
            movable = true;
            continue;
        }
        movable |= incomplete(spec);
        first = first.min(index);
        let absolute = if last_key >= 0 {
            last_key + index
        } else {
            last_key
        };
        // Unsigned comparison, as Redis: a negative (from the end) wins.
        last = (last as u32).max(absolute as u32) as i32;
        previous_last = last;
    }
    if first == i32::MAX {
        // No range spec at all: no triple; keys only the specs can find.
        return ((0, 0, 0), !specs.is_empty());
    }
    ((first, last, 1), movable)
}

fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Vec<Bytes> {
        text.split(' ')
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    const RO: &[&str] = &["RO", "access"];

    #[test]
    fn ranges_keywords_and_counts() {
        // LMPOP's numkeys: the keys follow it; a count past the arguments
        // (or past any integer) names no keys.
        let lmpop = keynum(&["RW"], 1);
        assert_eq!(lmpop.positions(&args("lmpop 2 a b LEFT")), Ok(vec![2, 3]));
        assert_eq!(lmpop.positions(&args("lmpop 5 a LEFT")), Err(BadArguments));
        assert_eq!(
            lmpop.positions(&args("lmpop 9223372036854775807 a")),
            Err(BadArguments)
        );
        assert_eq!(range(RO, 1, 0, 1).positions(&args("GET k")), Ok(vec![1]));
        assert_eq!(
            range(RO, 1, -1, 2).positions(&args("MSET a 1 b 2")),
            Ok(vec![1, 3])
        );
        let keynum = KeySpec {
            notes: "",
            flags: RO,
            begin: BeginSearch::Index(2),
            find: FindKeys::Keynum {
                keynum_index: 0,
                first_key: 1,
                step: 1,
            },
        };
        assert_eq!(keynum.positions(&args("EVAL s 2 a b x")), Ok(vec![3, 4]));
        assert_eq!(keynum.positions(&args("EVAL s 3 a b")), Err(BadArguments));
        assert_eq!(keynum.positions(&args("EVAL s x a b")), Err(BadArguments));
        let keyword = KeySpec {
            notes: "",
            flags: RO,
            begin: BeginSearch::Keyword {
                keyword: "STREAMS",
                start_from: 1,
            },
            find: FindKeys::Range {
                last_key: -1,
                step: 1,
                limit: 2,
            },
        };
        assert_eq!(
            keyword.positions(&args("XREAD COUNT 2 STREAMS a b 0 0")),
            Ok(vec![4, 5])
        );
        assert_eq!(keyword.positions(&args("XREAD COUNT 2")), Ok(vec![]));
    }

    #[test]
    fn legacy_triples_as_redis_derives_them() {
        // BITOP: destination at 2, sources from 3 to the end.
        let bitop = [range(RO, 2, 0, 1), range(RO, 3, -1, 1)];
        assert_eq!(legacy_range(&bitop), ((2, -1, 1), false));
        // RENAME: two single keys, consecutive.
        let rename = [range(RO, 1, 0, 1), range(RO, 2, 0, 1)];
        assert_eq!(legacy_range(&rename), ((1, 2, 1), false));
        assert_eq!(legacy_range(&[range(RO, 1, -1, 2)]), ((1, -1, 2), false));
        assert_eq!(legacy_range(&[]), ((0, 0, 0), false));
    }
}
