//! The event classes of `notify-keyspace-events` and their letters: a
//! leaf, so that the configuration parses them without reaching the
//! publisher.

pub const KEYSPACE: u32 = 1 << 0;
pub const KEYEVENT: u32 = 1 << 1;
pub const GENERIC: u32 = 1 << 2;
pub const STRING: u32 = 1 << 3;
pub const LIST: u32 = 1 << 4;
pub const SET: u32 = 1 << 5;
pub const HASH: u32 = 1 << 6;
pub const ZSET: u32 = 1 << 7;
pub const EXPIRED: u32 = 1 << 8;
pub const EVICTED: u32 = 1 << 9;
pub const STREAM: u32 = 1 << 10;
/// Accepted and shown (`m`); Strata fires no key-miss events.
pub const KEY_MISS: u32 = 1 << 11;
/// Accepted and shown (`d`): Strata has no modules.
pub const MODULE: u32 = 1 << 13;
pub const NEW: u32 = 1 << 14;
/// `A`: every class but key misses and new keys.
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// Parses `notify-keyspace-events`; `None` for a character Redis rejects.
pub fn parse_flags(classes: &str) -> Option<u32> {
    classes.chars().try_fold(0, |flags, c| {
        Some(
            flags
                | match c {
                    'A' => ALL,
                    'g' => GENERIC,
                    '$' => STRING,
                    'l' => LIST,
                    's' => SET,
                    'h' => HASH,
                    'z' => ZSET,
                    'x' => EXPIRED,
                    'e' => EVICTED,
                    'K' => KEYSPACE,
                    'E' => KEYEVENT,
                    't' => STREAM,
                    'm' => KEY_MISS,
                    'd' => MODULE,
                    'n' => NEW,
                    _ => return None,
                },
        )
    })
}

/// The flags as CONFIG GET shows them (Redis' canonical order).
pub fn flags_to_string(flags: u32) -> String {
    let mut text = String::new();
    if flags & ALL == ALL {
        text.push('A');
    } else {
        for (flag, c) in [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
            (NEW, 'n'),
        ] {
            if flags & flag != 0 {
                text.push(c);
            }
        }
    }
    for (flag, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if flags & flag != 0 {
            text.push(c);
        }
    }
    text
}
