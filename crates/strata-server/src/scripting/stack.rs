//! The conversions between scripts and commands, done on the Lua stack
//! directly through Lua's C API: the arguments a script passes to
//! `redis.call` are read off the stack, the command's RESP reply is pushed
//! onto it as Redis converts it (RESP → Lua), and a script's result is
//! written as a reply (Lua → RESP, [`write_result`]). Going through mlua
//! values cost a reference per value, a vector of them per call and two
//! protected calls (each making two C closures in Lua 5.1); without them a
//! small EVALSHA runs a sixth fewer instructions (`docs/scripting.md`).
//!
//! ## Why the pushing half owns nothing
//!
//! Any Lua API call that allocates may raise a Lua error (out of memory),
//! which unwinds by `longjmp` to the script's protected call. A `longjmp`
//! over Rust frames is sound only when those frames own nothing that has
//! to be dropped, so [`push_reply`] and [`push_error_table`] work on
//! borrowed bytes only, and report their own errors as values for the
//! caller to raise once its owned values are gone. Reading arguments
//! ([`read_args`]) uses only calls that cannot raise.

use std::ffi::{CStr, c_char, c_int};

use bytes::Bytes;
use mlua::ffi::{self, lua_State};
use strata_resp::ReplyWriter;

/// Deepest nesting converted between a script and RESP, either way. Redis
/// bounds it only by the Lua stack (`lua_checkstack` of 4 slots a level,
/// some 2 000 levels) and answers "reached lua stack limit" past it;
/// this bound keeps the recursion well inside that (a result 100 tables
/// deep comes back whole, as from Redis).
const NESTING_MAX: usize = 1000;

/// The field that marks an error table whose error the server has
/// already counted in its error statistics (Redis' name): the script's
/// error reply made of it is not counted again.
pub const COUNTED: &CStr = c"ignore_error_stats_update";

/// Why `redis.call`'s arguments were refused (Redis' texts).
pub const ERR_NO_ARGS: &str = "ERR Please specify at least one argument for this redis lib call";
pub const ERR_ARG_TYPE: &str = "ERR Lua redis lib command arguments must be strings or integers";

/// The arguments on the stack of a C function called from Lua (indices 1
/// to top), as command arguments: strings as they are, numbers with all
/// their precision ([`number_text`], as Redis converts them: not Lua's
/// own `%.14g`); anything else refuses the call.
///
/// # Safety
/// `state` is the running C function's Lua state.
pub unsafe fn read_args(state: *mut lua_State) -> Result<Vec<Bytes>, &'static str> {
    // SAFETY: (whole body) `lua_gettop`, `lua_type`, `lua_tonumber` and
    // `lua_tolstring` on a string neither allocate nor raise.
    unsafe {
        let count = ffi::lua_gettop(state);
        if count == 0 {
            return Err(ERR_NO_ARGS);
        }
        let mut args = Vec::with_capacity(count as usize);
        for index in 1..=count {
            match ffi::lua_type(state, index) {
                ffi::LUA_TSTRING => {
                    let mut len = 0;
                    let text = ffi::lua_tolstring(state, index, &mut len);
                    // Lua keeps the string alive while it is on the stack.
                    let bytes = std::slice::from_raw_parts(text.cast::<u8>(), len);
                    args.push(Bytes::copy_from_slice(bytes));
                }
                ffi::LUA_TNUMBER => {
                    let number = ffi::lua_tonumber(state, index);
                    args.push(Bytes::from(number_text(number)));
                }
                _ => return Err(ERR_ARG_TYPE),
            }
        }
        Ok(args)
    }
}

/// A Lua number as Redis 7.2+ passes it to a command: an integral value
/// within ±(2^63 - 1)/2 as an integer (0 for -0), NaN with its sign as
/// `nan` or `-nan`, anything else as [`strata_resp::redis_double`] writes
/// it (`0.1 + 0.2` is `0.30000000000000004`, `1e19` is `1e+19`).
pub fn number_text(number: f64) -> String {
    if number == 0.0 {
        return "0".to_owned();
    }
    if number.is_nan() {
        return if number.is_sign_negative() {
            "-nan"
        } else {
            "nan"
        }
        .to_owned();
    }
    strata_resp::redis_double(number)
}

/// Pushes `{err = text}`, marked as counted when `counted`.
///
/// # Safety
/// `state` is a Lua state inside a protected call with room for 3 values.
pub unsafe fn push_error_table(state: *mut lua_State, text: &[u8], counted: bool) {
    // SAFETY: as the function's contract; a raised memory error unwinds
    // over this frame, which owns nothing.
    unsafe {
        ffi::lua_createtable(state, 0, 2);
        push_bytes(state, text);
        ffi::lua_setfield(state, -2, c"err".as_ptr());
        if counted {
            ffi::lua_pushboolean(state, 1);
            ffi::lua_setfield(state, -2, COUNTED.as_ptr());
        }
    }
}

/// Pushes the one RESP reply at the start of `data` as a Lua value
/// (Redis' RESP → Lua conversion); the bytes it took. An error table for
/// an error reply; `Err` for a reply it cannot convert (the caller
/// raises it).
///
/// # Safety
/// `state` is a Lua state inside a protected call.
pub unsafe fn push_reply(
    state: *mut lua_State,
    data: &[u8],
    depth: usize,
) -> Result<usize, &'static CStr> {
    if depth > NESTING_MAX {
        return Err(c"reached lua stack limit");
    }
    let line_end = find_crlf(data).ok_or(c"short reply")?;
    let line = &data[1..line_end];
    let after = line_end + 2;
    // SAFETY: (whole body) `state` is in a protected call (the contract);
    // the stack is grown before each value is pushed, and a raised error
    // unwinds over frames that own nothing.
    unsafe {
        if ffi::lua_checkstack(state, 4) == 0 {
            return Err(c"reached lua stack limit");
        }
        Ok(match data[0] {
            b'+' => {
                push_bytes(state, line);
                wrap_in_field(state, c"ok");
                after
            }
            b'-' => {
                push_bytes(state, line);
                wrap_in_field(state, c"err");
                after
            }
            b':' => {
                ffi::lua_pushnumber(state, integer(line) as f64);
                after
            }
            b'$' | b'=' => push_bulk(state, data, after, integer(line))?,
            b'*' | b'~' | b'>' => push_array(state, data, after, integer(line), depth)?,
            b'%' => {
                let len = integer(line);
                ffi::lua_createtable(state, 0, len.clamp(0, c_int::MAX as i64) as c_int);
                let mut at = after;
                for _ in 0..len {
                    at += push_reply(state, &data[at..], depth + 1)?;
                    at += push_reply(state, &data[at..], depth + 1)?;
                    ffi::lua_rawset(state, -3);
                }
                wrap_in_field(state, c"map");
                at
            }
            b'_' => {
                ffi::lua_pushnil(state);
                after
            }
            b'#' => {
                ffi::lua_pushboolean(state, (line == b"t") as c_int);
                after
            }
            b',' => {
                ffi::lua_pushnumber(state, resp_double(line));
                wrap_in_field(state, c"double");
                after
            }
            b'(' => {
                push_bytes(state, line);
                wrap_in_field(state, c"big_number");
                after
            }
            b'|' => {
                // Attributes are not shown to scripts (as in Redis): skipped,
                // the reply they describe is the value.
                let mut at = after;
                for _ in 0..2 * integer(line).max(0) {
                    at += push_reply(state, &data[at..], depth + 1)?;
                    ffi::lua_settop(state, -2);
                }
                at + push_reply(state, &data[at..], depth + 1)?
            }
            _ => return Err(c"unknown reply type"),
        })
    }
}

/// The value on top of the stack becomes `{name = value}`.
///
/// # Safety
/// `state` is a Lua state inside a protected call with a value on top.
unsafe fn wrap_in_field(state: *mut lua_State, name: &CStr) {
    // SAFETY: the contract; the table takes the value's slot.
    unsafe {
        ffi::lua_createtable(state, 0, 1);
        ffi::lua_insert(state, -2);
        ffi::lua_setfield(state, -2, name.as_ptr());
    }
}

/// A RESP3 double's text as a number (`inf`, `-inf`, NaN for the rest).
fn resp_double(line: &[u8]) -> f64 {
    match line {
        b"inf" => f64::INFINITY,
        b"-inf" => f64::NEG_INFINITY,
        _ => std::str::from_utf8(line)
            .ok()
            .and_then(|text| text.parse().ok())
            .unwrap_or(f64::NAN),
    }
}

/// A bulk (`$`) or verbatim (`=`) string of `len` bytes from `after`;
/// where the reply ends. A null bulk is `false`, as in Redis.
///
/// # Safety
/// `state` is a Lua state inside a protected call, grown by 4 slots.
unsafe fn push_bulk(
    state: *mut lua_State,
    data: &[u8],
    after: usize,
    len: i64,
) -> Result<usize, &'static CStr> {
    // SAFETY: the contract; at most 2 values are pushed at once.
    unsafe {
        if len < 0 {
            ffi::lua_pushboolean(state, 0);
            return Ok(after);
        }
        let end = after + len as usize;
        let body = data.get(after..end).ok_or(c"short reply")?;
        if data[0] == b'=' {
            // Verbatim: "txt:" then the text.
            ffi::lua_createtable(state, 0, 2);
            push_bytes(state, &body[4.min(body.len())..]);
            ffi::lua_setfield(state, -2, c"string".as_ptr());
            push_bytes(state, &body[..3.min(body.len())]);
            ffi::lua_setfield(state, -2, c"format".as_ptr());
            wrap_in_field(state, c"verbatim_string");
        } else {
            push_bytes(state, body);
        }
        Ok(end + 2)
    }
}

/// An array (`*`), push (`>`) or set (`~`) of `len` replies from
/// `after`; where it ends. A set is `{set = {member = true}}`.
///
/// # Safety
/// `state` is a Lua state inside a protected call, grown by 4 slots.
unsafe fn push_array(
    state: *mut lua_State,
    data: &[u8],
    after: usize,
    len: i64,
    depth: usize,
) -> Result<usize, &'static CStr> {
    // SAFETY: the contract; each element grows the stack itself.
    unsafe {
        if len < 0 {
            ffi::lua_pushboolean(state, 0);
            return Ok(after);
        }
        let set = data[0] == b'~';
        let (array, hash) = match set {
            true => (0, len.min(c_int::MAX as i64) as c_int),
            false => (len.min(c_int::MAX as i64) as c_int, 0),
        };
        ffi::lua_createtable(state, array, hash);
        let mut at = after;
        for n in 1..=len {
            at += push_reply(state, &data[at..], depth + 1)?;
            if set {
                ffi::lua_pushboolean(state, 1);
                ffi::lua_rawset(state, -3);
            } else {
                ffi::lua_rawseti(state, -2, n as ffi::lua_Integer);
            }
        }
        if set {
            wrap_in_field(state, c"set");
        }
        Ok(at)
    }
}

/// How a script ended, read off the stack: its result written, or its
/// error reply's text and whether that error is already counted.
pub type Ended = Result<(), (String, bool)>;

/// Reads a script's outcome, `(ok, value)` at stack indices 1 and 2 as
/// the trampoline returns it: a value is written to `out` (`resp3`: the
/// script chose RESP3); an error table returned (`redis.error_reply`, a
/// failed `redis.pcall`) or raised (`ok` false) is the script's error
/// reply, raised ones with where they were raised (`name`: the script's
/// SHA1 or the function's name).
///
/// # Safety
/// `state` is a Lua state inside a protected call, holding the two values.
pub unsafe fn write_result(
    state: *mut lua_State,
    out: &mut ReplyWriter,
    resp3: bool,
    name: &str,
) -> Ended {
    // SAFETY: (whole body) the contract; a raised memory error unwinds
    // over these frames, which own nothing while Lua is called (the
    // error's text is made after the last call).
    unsafe {
        let ok = ffi::lua_toboolean(state, 1) != 0;
        if ffi::lua_type(state, 2) != ffi::LUA_TTABLE {
            return match ok {
                true => {
                    write_value(state, 2, out, resp3, 0);
                    Ok(())
                }
                false => Err((format!("ERR {}", lossy(string_at(state, 2))), false)),
            };
        }
        let counted = is_counted(state, 2);
        let has_text = field(state, 2, c"err") == ffi::LUA_TSTRING; // index 3
        if ok && !has_text {
            ffi::lua_settop(state, 2);
            write_value(state, 2, out, resp3, 0);
            return Ok(());
        }
        if ok {
            return Err((lossy(string_at(state, 3)), counted));
        }
        // Raised: where, as Redis 7 words it (the trampoline's handler
        // noted `source` and `line`).
        field(state, 2, c"source"); // index 4
        field(state, 2, c"line"); // index 5
        let text = match has_text {
            true => lossy(string_at(state, 3)),
            false => "ERR unknown error".to_owned(),
        };
        let located = match (text_at(state, 4), text_at(state, 5)) {
            (Some(source), Some(line)) => format!("{text} script: {name}, on {source}:{line}."),
            _ => text,
        };
        Err((located, counted))
    }
}

/// The value at `index` as text: a string, or a number as Lua writes it.
///
/// # Safety
/// `state` is a Lua state; `index` is valid.
pub unsafe fn text_at(state: *mut lua_State, index: c_int) -> Option<String> {
    // SAFETY: as the function's contract; nothing here calls into Lua
    // but to read.
    unsafe {
        match ffi::lua_type(state, index) {
            ffi::LUA_TSTRING => Some(lossy(string_at(state, index))),
            ffi::LUA_TNUMBER => Some(format_lua_number(ffi::lua_tonumber(state, index))),
            _ => None,
        }
    }
}

/// Whether the error table at `index` carries [`COUNTED`].
///
/// # Safety
/// As [`write_result`].
unsafe fn is_counted(state: *mut lua_State, index: c_int) -> bool {
    // SAFETY: as the function's contract.
    unsafe {
        let counted =
            field(state, index, COUNTED) == ffi::LUA_TBOOLEAN && ffi::lua_toboolean(state, -1) != 0;
        ffi::lua_settop(state, -2);
        counted
    }
}

/// Pushes field `name` of the table at `index` (a positive index), read
/// raw; its type.
///
/// # Safety
/// As [`write_result`].
unsafe fn field(state: *mut lua_State, index: c_int, name: &CStr) -> c_int {
    // SAFETY: as the function's contract.
    unsafe {
        ffi::lua_pushstring(state, name.as_ptr());
        ffi::lua_rawget(state, index)
    }
}

/// The bytes of the string at `index`, valid while it stays on the stack
/// (empty for a value that is not a string: nothing is converted).
///
/// # Safety
/// `state` is a Lua state; `index` is valid.
unsafe fn string_at<'s>(state: *mut lua_State, index: c_int) -> &'s [u8] {
    // SAFETY: as the function's contract; `lua_tolstring` is called on
    // strings only, so it converts (and allocates) nothing.
    unsafe {
        if ffi::lua_type(state, index) != ffi::LUA_TSTRING {
            return b"";
        }
        let mut len = 0;
        let text = ffi::lua_tolstring(state, index, &mut len);
        std::slice::from_raw_parts(text.cast::<u8>(), len)
    }
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Writes the Lua value at `index` (positive) as a reply: Redis' Lua →
/// RESP conversion. `resp3`: booleans are booleans; doubles, maps and
/// sets are written as the client's protocol has them (a RESP2 client
/// gets a bulk string and flat arrays).
///
/// # Safety
/// As [`write_result`].
unsafe fn write_value(
    state: *mut lua_State,
    index: c_int,
    out: &mut ReplyWriter,
    resp3: bool,
    depth: usize,
) {
    // SAFETY: (whole body) as the function's contract.
    unsafe {
        match ffi::lua_type(state, index) {
            ffi::LUA_TBOOLEAN => match (ffi::lua_toboolean(state, index) != 0, resp3) {
                (false, false) => out.null_bulk(),
                (true, false) => out.int(1),
                (value, true) => out.boolean(value),
            },
            ffi::LUA_TNUMBER => out.int(c_long_long(ffi::lua_tonumber(state, index))),
            ffi::LUA_TSTRING => out.bulk(string_at(state, index)),
            ffi::LUA_TTABLE if depth < NESTING_MAX => write_table(state, index, out, resp3, depth),
            ffi::LUA_TTABLE => out.error("ERR reached lua stack limit"),
            _ => out.null_bulk(),
        }
    }
}

/// [`write_value`] of a table: an error or status table, one of RESP3's
/// typed tables (`double`, `big_number`, `verbatim_string`, `map`,
/// `set`), or an array up to its first nil.
///
/// # Safety
/// As [`write_result`].
unsafe fn write_table(
    state: *mut lua_State,
    index: c_int,
    out: &mut ReplyWriter,
    resp3: bool,
    depth: usize,
) {
    // SAFETY: (whole body) as the function's contract; every value pushed
    // is popped before the next field is looked at.
    unsafe {
        if ffi::lua_checkstack(state, 4) == 0 {
            out.error("ERR reached lua stack limit");
            return;
        }
        let top = ffi::lua_gettop(state);
        let pop = || ffi::lua_settop(state, top);
        if field(state, index, c"err") == ffi::LUA_TSTRING {
            out.error(&String::from_utf8_lossy(string_at(state, -1)));
            return pop();
        }
        pop();
        if field(state, index, c"ok") == ffi::LUA_TSTRING {
            out.simple(&String::from_utf8_lossy(string_at(state, -1)));
            return pop();
        }
        pop();
        if field(state, index, c"double") == ffi::LUA_TNUMBER {
            out.double(ffi::lua_tonumber(state, -1));
            return pop();
        }
        pop();
        if field(state, index, c"big_number") == ffi::LUA_TSTRING {
            // As Redis: line breaks cannot be in the reply's line.
            let digits = String::from_utf8_lossy(string_at(state, -1)).replace(['\r', '\n'], " ");
            out.big_number(&digits);
            return pop();
        }
        pop();
        if field(state, index, c"verbatim_string") == ffi::LUA_TTABLE {
            let verbatim = ffi::lua_gettop(state);
            let format_type = field(state, verbatim, c"format");
            let text_type = field(state, verbatim, c"string");
            let format = string_at(state, -2);
            if format_type == ffi::LUA_TSTRING
                && text_type == ffi::LUA_TSTRING
                && format.len() == 3
                && format.is_ascii()
            {
                let format = std::str::from_utf8(format).expect("ASCII");
                out.verbatim(format, string_at(state, -1));
                return pop();
            }
        }
        pop();
        let map = field(state, index, c"map") == ffi::LUA_TTABLE;
        let set = !map && {
            pop();
            field(state, index, c"set") == ffi::LUA_TTABLE
        };
        if map || set {
            let inner = ffi::lua_gettop(state);
            let mut count = 0;
            ffi::lua_pushnil(state);
            while ffi::lua_next(state, inner) != 0 {
                ffi::lua_settop(state, -2);
                count += 1;
            }
            match map {
                true => out.map(count),
                false => out.set(count),
            }
            ffi::lua_pushnil(state);
            while ffi::lua_next(state, inner) != 0 {
                let pair = ffi::lua_gettop(state);
                write_value(state, pair - 1, out, resp3, depth + 1);
                if map {
                    write_value(state, pair, out, resp3, depth + 1);
                }
                ffi::lua_settop(state, pair - 1);
            }
            return pop();
        }
        pop();
        let mut len = 0;
        while ffi::lua_rawgeti(state, index, len as ffi::lua_Integer + 1) != ffi::LUA_TNIL {
            ffi::lua_settop(state, -2);
            len += 1;
        }
        pop();
        out.array(len);
        for n in 1..=len {
            ffi::lua_rawgeti(state, index, n as ffi::lua_Integer);
            write_value(state, top + 1, out, resp3, depth + 1);
            pop();
        }
    }
}

/// # Safety
/// As [`push_reply`].
unsafe fn push_bytes(state: *mut lua_State, bytes: &[u8]) {
    // SAFETY: as the function's contract.
    unsafe { ffi::lua_pushlstring(state, bytes.as_ptr().cast::<c_char>(), bytes.len()) };
}

/// A reply line's integer (0 when it is not one, as the reply is the
/// server's own).
fn integer(line: &[u8]) -> i64 {
    // (i64::MIN included: its magnitude alone does not fit an i64.)
    std::str::from_utf8(line)
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(0)
}

/// A Lua number as Redis makes it an integer reply: C's `(long long)`
/// cast, which on x86-64 gives i64::MIN for NaN and for anything out of
/// range (Rust's `as` would saturate, and give 0 for NaN).
pub fn c_long_long(number: f64) -> i64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if number.is_nan() || !(-TWO_63..TWO_63).contains(&number) {
        i64::MIN
    } else {
        number as i64
    }
}

fn find_crlf(data: &[u8]) -> Option<usize> {
    data.windows(2).position(|pair| pair == b"\r\n")
}

/// The text of a Lua error, without mlua's traceback.
pub fn lua_error_text(error: &mlua::Error) -> String {
    match error {
        mlua::Error::RuntimeError(text) | mlua::Error::SyntaxError { message: text, .. } => {
            text.clone()
        }
        mlua::Error::CallbackError { cause, .. } => lua_error_text(cause),
        other => other.to_string(),
    }
}

/// A number as Lua 5.1's `tostring` writes it: C's `%.14g`.
pub fn format_lua_number(n: f64) -> String {
    format_g(n, 14)
}

/// A number as C's `%.<digits>g` writes it (`digits` ≥ 1).
pub fn format_g(n: f64, digits: usize) -> String {
    if n.is_nan() {
        return "nan".into();
    }
    if n.is_infinite() {
        return if n > 0.0 { "inf" } else { "-inf" }.into();
    }
    if n == 0.0 {
        return if n.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let strip = |text: &str| -> String {
        match text.contains('.') {
            true => text.trim_end_matches('0').trim_end_matches('.').to_owned(),
            false => text.to_owned(),
        }
    };
    // `digits` significant digits, rounded; the exponent decides the style.
    let scientific = format!("{n:.*e}", digits - 1);
    let (mantissa, exponent) = scientific.split_once('e').expect("{:e} writes an exponent");
    let exponent: i32 = exponent.parse().expect("a decimal exponent");
    if !(-4..digits as i32).contains(&exponent) {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", strip(mantissa), exponent.abs())
    } else {
        strip(&format!("{n:.*}", (digits as i32 - 1 - exponent) as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_written_as_redis_passes_them() {
        // redis-server 7.4.1's GET after SET of each from a script.
        assert_eq!(number_text(3.0), "3");
        assert_eq!(number_text(-42.0), "-42");
        assert_eq!(number_text(0.5), "0.5");
        assert_eq!(number_text(0.1), "0.1");
        assert_eq!(number_text(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(number_text(9_007_199_254_740_991.0), "9007199254740991");
        assert_eq!(number_text(1e17), "100000000000000000");
        assert_eq!(number_text(1e19), "1e+19");
        assert_eq!(number_text(1e-7), "1e-7");
        assert_eq!(number_text(-0.0), "0");
        assert_eq!(number_text(f64::INFINITY), "inf");
        assert_eq!(number_text(-f64::NAN), "-nan");
    }

    #[test]
    fn reply_integers_are_read_whole_or_as_zero() {
        assert_eq!(integer(b"123"), 123);
        assert_eq!(integer(b"-7"), -7);
        assert_eq!(integer(b"x"), 0);
        assert_eq!(integer(b"99999999999999999999"), 0);
        assert_eq!(integer(b"-9223372036854775808"), i64::MIN);
    }

    #[test]
    fn numbers_become_integers_as_cs_cast_makes_them() {
        assert_eq!(c_long_long(1.9), 1);
        assert_eq!(c_long_long(-1.9), -1);
        assert_eq!(c_long_long(-9_223_372_036_854_775_808.0), i64::MIN);
        assert_eq!(c_long_long(9_223_372_036_854_775_807.0), i64::MIN);
        assert_eq!(c_long_long(1e19), i64::MIN);
        assert_eq!(c_long_long(f64::INFINITY), i64::MIN);
        assert_eq!(c_long_long(f64::NAN), i64::MIN);
    }
}
