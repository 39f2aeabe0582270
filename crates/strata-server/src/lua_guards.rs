//! Guards around Lua 5.1 library functions whose C code a script could
//! turn against the server: each is replaced, in every VM before the
//! sandbox is built, by a C function that checks its arguments first.
//!
//! - `unpack` computes its result count in a C `int`; a range such as
//!   `-2^31 .. 2^31-1` overflows it, the overflow check is undefined
//!   behaviour the compiler removes, and the function pushes values past
//!   the stack until the process dies. Ours counts in 64 bits and answers
//!   Redis' (and Lua's) "too many results to unpack".
//! - The pattern functions (`string.find`, `match`, `gmatch`, `gsub`)
//!   recurse once per quantified item or capture of a pattern, on the
//!   network thread's stack: 50 000 `a?` items overflowed it (SIGABRT).
//!   Patterns with more such items than [`PATTERN_DEPTH_MAX`] (Lua 5.2's
//!   own bound on that recursion) are refused with Lua 5.2's "pattern too
//!   complex"; the matcher itself is Lua's.
//! - `string.rep` asked for more than [`REP_BYTES_MAX`] bytes is refused
//!   (Lua 5.3's "resulting string too large") rather than building a
//!   string no reply could carry.
//!
//! Every function here works on borrowed Lua values only: an error is
//! raised with `luaL_error`, which unwinds by `longjmp` over frames that
//! own nothing (see `crate::lua_stack`).

use std::ffi::{CStr, c_int};

use mlua::ffi::{self, lua_State};

/// Deepest recursion a pattern may ask of Lua's matcher: quantified
/// items and captures, counted from the pattern's text (Lua 5.2 bounds
/// the same recursion at 200, its `MAXCCALLS`).
pub const PATTERN_DEPTH_MAX: usize = 200;

/// Largest string `string.rep` builds (Redis' largest bulk string).
pub const REP_BYTES_MAX: u64 = 512 << 20;

/// Lua 5.1's `LUAI_MAXCSTACK`: the most values a C function may push.
const RESULTS_MAX: i64 = 8000;

/// Replaces `unpack`, and wraps the pattern functions and `string.rep`
/// of `state`'s globals.
///
/// # Safety
/// `state` is inside a protected call with room for 4 values; the
/// globals hold Lua's base and string libraries.
pub unsafe fn install(state: *mut lua_State) {
    // SAFETY: as the function's contract.
    unsafe {
        ffi::lua_pushcfunction(state, unpack);
        ffi::lua_setfield(state, ffi::LUA_GLOBALSINDEX, c"unpack".as_ptr());
        ffi::lua_getfield(state, ffi::LUA_GLOBALSINDEX, c"string".as_ptr());
        for (name, guard) in [
            (c"find", pattern_guard as ffi::lua_CFunction),
            (c"match", pattern_guard),
            (c"gmatch", pattern_guard),
            (c"gsub", pattern_guard),
            (c"rep", rep_guard),
        ] {
            // The original function and its name are the guard's upvalues.
            ffi::lua_getfield(state, -1, name.as_ptr());
            ffi::lua_pushstring(state, name.as_ptr());
            ffi::lua_pushcclosure(state, guard, 2);
            ffi::lua_setfield(state, -2, name.as_ptr());
        }
        ffi::lua_pop(state, 1);
    }
}

/// `unpack(list [, i [, j]])`, as Lua 5.1's with the count in 64 bits.
unsafe extern "C-unwind" fn unpack(state: *mut lua_State) -> c_int {
    // SAFETY: a C function's state; errors unwind over a frame that owns
    // nothing.
    unsafe {
        ffi::luaL_checktype(state, 1, ffi::LUA_TTABLE);
        let first = ffi::luaL_optinteger(state, 2, 1) as i64;
        let last = match ffi::lua_isnoneornil(state, 3) {
            0 => ffi::luaL_checkinteger(state, 3) as i64,
            _ => ffi::lua_objlen(state, 1) as i64,
        };
        if first > last {
            return 0;
        }
        let count = last as i128 - first as i128 + 1;
        if count >= RESULTS_MAX as i128 || ffi::lua_checkstack(state, count as c_int) == 0 {
            return ffi::luaL_error(state, c"too many results to unpack".as_ptr());
        }
        for index in first..=last {
            ffi::lua_rawgeti(state, 1, index as ffi::lua_Integer);
        }
        count as c_int
    }
}

/// A pattern function (upvalue 1; its name upvalue 2) called only once
/// its pattern (argument 2) is known to stay within
/// [`PATTERN_DEPTH_MAX`]; `string.find` with `plain` set takes no pattern.
unsafe extern "C-unwind" fn pattern_guard(state: *mut lua_State) -> c_int {
    // SAFETY: a C function's state, with the upvalues `install` gave it;
    // errors unwind over a frame that owns nothing (the pattern is
    // borrowed from the stack, where Lua keeps it alive).
    unsafe {
        let name = CStr::from_ptr(ffi::lua_tostring(state, ffi::lua_upvalueindex(2)));
        let plain = name == c"find" && ffi::lua_toboolean(state, 4) != 0;
        if !plain && ffi::lua_type(state, 2) == ffi::LUA_TSTRING {
            let mut len = 0;
            let text = ffi::lua_tolstring(state, 2, &mut len);
            let pattern = std::slice::from_raw_parts(text.cast::<u8>(), len);
            if pattern_depth(pattern) > PATTERN_DEPTH_MAX {
                return ffi::luaL_error(state, c"pattern too complex".as_ptr());
            }
        }
        call_original(state)
    }
}

/// `string.rep(s, n)` refused when the result would exceed
/// [`REP_BYTES_MAX`].
unsafe extern "C-unwind" fn rep_guard(state: *mut lua_State) -> c_int {
    // SAFETY: as `pattern_guard`.
    unsafe {
        if ffi::lua_type(state, 1) == ffi::LUA_TSTRING && ffi::lua_isnumber(state, 2) != 0 {
            let len = ffi::lua_objlen(state, 1) as u64;
            let times = ffi::lua_tonumber(state, 2);
            if times >= 1.0 && len > 0 && len as f64 * times > REP_BYTES_MAX as f64 {
                return ffi::luaL_error(state, c"resulting string too large".as_ptr());
            }
        }
        call_original(state)
    }
}

/// Calls upvalue 1 with this call's arguments; returns its results.
///
/// # Safety
/// `state` is a C function's state whose upvalue 1 is a function.
unsafe fn call_original(state: *mut lua_State) -> c_int {
    // SAFETY: as the function's contract; the arguments stay on the
    // stack, the function goes below them.
    unsafe {
        let args = ffi::lua_gettop(state);
        ffi::luaL_checkstack(state, 1, std::ptr::null());
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
        ffi::lua_insert(state, 1);
        ffi::lua_call(state, args, ffi::LUA_MULTRET);
        ffi::lua_gettop(state)
    }
}

/// How deep Lua 5.1's matcher may recurse for `pattern`: one level per
/// capture bracket and per item followed by `?`, `*`, `+` or `-`, as
/// counted from the text (sets and `%` escapes are skipped whole, so
/// their characters never count).
pub fn pattern_depth(pattern: &[u8]) -> usize {
    let mut depth = 0;
    let mut at = 0;
    while at < pattern.len() {
        match pattern[at] {
            b'%' if pattern.get(at + 1) == Some(&b'b') => at += 4,
            b'%' => at += 2,
            b'[' => at = set_end(pattern, at + 1),
            b'(' | b')' => {
                depth += 1;
                at += 1;
            }
            b'?' | b'*' | b'+' | b'-' if at > 0 => {
                depth += 1;
                at += 1;
            }
            _ => at += 1,
        }
    }
    depth
}

/// Where the set opened just before `at` ends (after its `]`), as Lua
/// reads it: a `^` and then a `]` first are members, `%` escapes the
/// next byte. An unclosed set runs to the end (Lua raises its own error).
fn set_end(pattern: &[u8], mut at: usize) -> usize {
    if pattern.get(at) == Some(&b'^') {
        at += 1;
    }
    if pattern.get(at) == Some(&b']') {
        at += 1;
    }
    while at < pattern.len() {
        match pattern[at] {
            b'%' => at += 2,
            b']' => return at + 1,
            _ => at += 1,
        }
    }
    pattern.len()
}

#[cfg(test)]
mod tests {
    use super::pattern_depth;

    #[test]
    fn pattern_depth_counts_quantified_items_and_captures() {
        for (pattern, depth) in [
            ("abc", 0),
            ("a?b*c+d-", 4),
            ("(a)(b)", 4),
            ("%?%*%(", 0),
            ("[?*+-()]", 0),
            ("[]?]", 0),
            ("[^]*]+", 1),
            ("[%]*]*", 1),
            ("-abc", 0),
            // `%bxy` is matched without recursion; the `*` after it, a
            // literal there, is counted anyway (an overestimate is safe).
            ("%bxy*", 1),
            ("[abc", 0),
        ] {
            assert_eq!(pattern_depth(pattern.as_bytes()), depth, "{pattern}");
        }
        let hostile = "a?".repeat(50_000) + &"a".repeat(50_000);
        assert_eq!(pattern_depth(hostile.as_bytes()), 50_000);
    }
}
