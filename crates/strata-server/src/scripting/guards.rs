//! Guards around Lua 5.1 library functions whose C code a script could
//! turn against the server: each is replaced, in every VM before the
//! sandbox is built, by a C function that checks its arguments first.
//!
//! - `unpack` computes its result count in a C `int`; a range such as
//!   `-2^31 .. 2^31-1` overflows it, the overflow check is undefined
//!   behaviour the compiler removes, and the function pushes values past
//!   the stack until the process dies. Ours counts in 64 bits and answers
//!   Redis' (and Lua's) "too many results to unpack".
//! - The pattern functions (`string.find`, `match`, `gmatch`, `gsub`) are
//!   ours (`super::patterns`): Lua's recursed on the network thread's
//!   stack once per quantified item (50 000 `a?` items overflowed it) and
//!   could backtrack for ever where no hook could stop it.
//! - `string.rep` asked for more than [`REP_BYTES_MAX`] bytes is refused
//!   (Lua 5.3's "resulting string too large") rather than building a
//!   string no reply could carry.
//!
//! Every function here works on borrowed Lua values only: an error is
//! raised with `luaL_error`, which unwinds by `longjmp` over frames that
//! own nothing (see `super::stack`).

use std::ffi::c_int;

use mlua::ffi::{self, lua_State};

/// Largest string `string.rep` builds (Redis' largest bulk string).
pub const REP_BYTES_MAX: u64 = 512 << 20;

/// Lua 5.1's `LUAI_MAXCSTACK`: the most values a C function may push.
const RESULTS_MAX: i64 = 8000;

/// Replaces `unpack` and the pattern functions, and wraps `string.rep`,
/// in `state`'s globals.
///
/// # Safety
/// `state` is inside a protected call with room for 4 values; the
/// globals hold Lua's base and string libraries.
pub unsafe fn install(state: *mut lua_State) {
    // SAFETY: as the function's contract.
    unsafe {
        for (name, function) in [
            (c"unpack", unpack as ffi::lua_CFunction),
            (c"pcall", pcall),
            (c"xpcall", xpcall),
        ] {
            ffi::lua_pushcfunction(state, function);
            ffi::lua_setfield(state, ffi::LUA_GLOBALSINDEX, name.as_ptr());
        }
        ffi::lua_getfield(state, ffi::LUA_GLOBALSINDEX, c"coroutine".as_ptr());
        ffi::lua_pushcfunction(state, resume);
        ffi::lua_setfield(state, -2, c"resume".as_ptr());
        ffi::lua_pop(state, 1);
        ffi::lua_getfield(state, ffi::LUA_GLOBALSINDEX, c"string".as_ptr());
        // The original function is the guard's upvalue.
        ffi::lua_getfield(state, -1, c"rep".as_ptr());
        ffi::lua_pushcclosure(state, rep_guard, 1);
        ffi::lua_setfield(state, -2, c"rep".as_ptr());
        for (name, function) in [
            (c"find", super::patterns::find as ffi::lua_CFunction),
            (c"match", super::patterns::match_),
            (c"gmatch", super::patterns::gmatch),
            (c"gsub", super::patterns::gsub),
        ] {
            ffi::lua_pushcfunction(state, function);
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
        // As Lua 5.1's `luaL_optint`: the integer cut to a C `int`.
        let first = ffi::luaL_optinteger(state, 2, 1) as c_int;
        let last = match ffi::lua_isnoneornil(state, 3) {
            0 => ffi::luaL_checkinteger(state, 3) as c_int,
            _ => ffi::lua_objlen(state, 1) as c_int,
        };
        if first > last {
            return 0;
        }
        let count = last as i64 - first as i64 + 1;
        if count >= RESULTS_MAX || ffi::lua_checkstack(state, count as c_int) == 0 {
            return ffi::luaL_error(state, c"too many results to unpack".as_ptr());
        }
        for index in first..=last {
            // The C function itself (an `int` index): mlua's wrapper takes
            // a 64-bit one and panics past `int`, and a panic must not
            // unwind through Lua's C frames.
            ffi::lua_rawgeti_(state, 1, index);
        }
        count as c_int
    }
}

/// `pcall(f, ...)`, as Lua 5.1's but with room made for the status it
/// adds: Lua 5.1 pushed it past the frame's stack when `f` returned many
/// values (an API check failure; a write into the stack's spare slots in
/// release builds). Lua 5.2 makes the room too.
unsafe extern "C-unwind" fn pcall(state: *mut lua_State) -> c_int {
    // SAFETY: a C function's state; errors unwind over a frame that owns
    // nothing.
    unsafe {
        ffi::luaL_checkany(state, 1);
        let status = ffi::lua_pcall(state, ffi::lua_gettop(state) - 1, ffi::LUA_MULTRET, 0);
        ffi::luaL_checkstack(state, 1, c"too many results".as_ptr());
        ffi::lua_pushboolean(state, (status == 0) as c_int);
        ffi::lua_insert(state, 1);
        ffi::lua_gettop(state)
    }
}

/// `xpcall(f, handler)`, as Lua 5.1's (extra arguments ignored), with the
/// same room made as [`pcall`].
unsafe extern "C-unwind" fn xpcall(state: *mut lua_State) -> c_int {
    // SAFETY: as `pcall`.
    unsafe {
        ffi::luaL_checkany(state, 2);
        ffi::lua_settop(state, 2);
        ffi::lua_insert(state, 1);
        let status = ffi::lua_pcall(state, 0, ffi::LUA_MULTRET, 1);
        ffi::luaL_checkstack(state, 1, c"too many results".as_ptr());
        ffi::lua_pushboolean(state, (status == 0) as c_int);
        ffi::lua_replace(state, 1);
        ffi::lua_gettop(state)
    }
}

unsafe extern "C" {
    /// Lua 5.1's `lua_setlevel` (not in mlua's bindings): a resumed
    /// coroutine counts its C calls from its resumer's.
    fn lua_setlevel(from: *mut lua_State, to: *mut lua_State);
}

/// `coroutine.resume(co, ...)`, as Lua 5.1's with room made for the
/// status before the results (as [`pcall`]).
unsafe extern "C-unwind" fn resume(state: *mut lua_State) -> c_int {
    // SAFETY: as `pcall`; `co` is a thread argument Lua keeps alive while
    // it is on the stack.
    unsafe {
        let co = ffi::lua_tothread(state, 1);
        if co.is_null() {
            return ffi::luaL_argerror(state, 1, c"coroutine expected".as_ptr());
        }
        let args = ffi::lua_gettop(state) - 1;
        if ffi::lua_checkstack(co, args) == 0 {
            return ffi::luaL_error(state, c"too many arguments to resume".as_ptr());
        }
        let status = match coroutine_status(state, co) {
            Ok(()) => {
                ffi::lua_xmove(state, co, args);
                lua_setlevel(state, co);
                ffi::lua_resume_(co, args)
            }
            Err(what) => {
                ffi::lua_pushboolean(state, 0);
                ffi::lua_pushfstring(state, c"cannot resume %s coroutine".as_ptr(), what.as_ptr());
                return 2;
            }
        };
        if status == 0 || status == ffi::LUA_YIELD {
            let results = ffi::lua_gettop(co);
            if ffi::lua_checkstack(state, results + 1) == 0 {
                return ffi::luaL_error(state, c"too many results to resume".as_ptr());
            }
            ffi::lua_pushboolean(state, 1);
            ffi::lua_xmove(co, state, results);
            return results + 1;
        }
        ffi::lua_pushboolean(state, 0);
        ffi::lua_xmove(co, state, 1);
        2
    }
}

/// Whether `co` can be resumed from `state`; why not otherwise (Lua 5.1's
/// words: running, normal or dead).
///
/// # Safety
/// Both are states of one Lua universe.
unsafe fn coroutine_status(
    state: *mut lua_State,
    co: *mut lua_State,
) -> Result<(), &'static std::ffi::CStr> {
    if state == co {
        return Err(c"running");
    }
    // SAFETY: as the function's contract.
    unsafe {
        match ffi::lua_status(co) {
            ffi::LUA_YIELD => Ok(()),
            0 => {
                let mut frame = std::mem::MaybeUninit::<ffi::lua_Debug>::zeroed();
                if ffi::lua_getstack(co, 0, frame.as_mut_ptr()) > 0 {
                    Err(c"normal")
                } else if ffi::lua_gettop(co) == 0 {
                    Err(c"dead")
                } else {
                    Ok(())
                }
            }
            _ => Err(c"dead"),
        }
    }
}

/// `string.rep(s, n)` (the original is upvalue 1) refused when the
/// result would exceed [`REP_BYTES_MAX`].
unsafe extern "C-unwind" fn rep_guard(state: *mut lua_State) -> c_int {
    // SAFETY: a C function's state, with the upvalue `install` gave it;
    // errors unwind over a frame that owns nothing.
    unsafe {
        if ffi::lua_type(state, 1) == ffi::LUA_TSTRING && ffi::lua_isnumber(state, 2) != 0 {
            let len = ffi::lua_objlen(state, 1) as u64;
            // As Lua 5.1's `luaL_checkint`: the count cut to a C `int`.
            let times = ffi::lua_tointeger_(state, 2) as c_int;
            if len == 0 || times <= 0 {
                // Nothing to repeat: Lua's loop would still spin `times`
                // times in C, where no hook fires (2^31 turns: seconds).
                ffi::lua_pushlstring(state, c"".as_ptr(), 0);
                return 1;
            }
            if len * times as u64 > REP_BYTES_MAX {
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
