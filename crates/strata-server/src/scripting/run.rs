//! A run's protected call, and the conversions around it: error texts,
//! `redis.call`'s arguments, numbers as Lua 5.1 writes them.

use std::ffi::c_int;

use mlua::ffi::{self, lua_State};
use mlua::{Lua, Value};
use strata_resp::{Protocol, ReplyWriter};

use super::hook::*;
use super::stack::lua_error_text;

/// A value held in the Lua registry (`luaL_ref`), pushed by a run
/// through the C API rather than through mlua: a script, a library
/// function, or one of the prelude's values [`Slots`] names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot(pub(super) c_int);

/// The prelude's values a run pushes.
#[derive(Clone, Copy)]
pub(super) struct Slots {
    /// The globals scripts see (the prelude's `visible`): KEYS and ARGV
    /// go there.
    pub(super) visible: Slot,
    /// Runs a script function, turning any error into an error table.
    pub(super) trampoline: Slot,
    /// The same for a library function, given KEYS and ARGV.
    pub(super) trampoline_args: Slot,
    /// The C function a run's protected call runs ([`run_protected`]).
    pub(super) run: Slot,
    /// The protected call's error handler: the error as text.
    pub(super) error_text: Slot,
}

/// Puts `value` in the registry: its slot.
pub(super) fn pin(lua: &Lua, value: impl mlua::IntoLua) -> mlua::Result<Slot> {
    let mut slot = 0;
    // SAFETY: the protected call's stack holds `value` alone, which
    // `luaL_ref` pops.
    unsafe {
        lua.exec_raw::<()>(value, |state| {
            slot = ffi::luaL_ref(state, ffi::LUA_REGISTRYINDEX)
        })?
    };
    Ok(Slot(slot))
}

/// One run's inputs and outcome, lent to [`run_protected`] as a light
/// userdata.
pub(super) struct RunCall<'r, 'w> {
    pub(super) slots: Slots,
    pub(super) function: Slot,
    pub(super) as_arguments: bool,
    pub(super) keys: &'r [bytes::Bytes],
    pub(super) argv: &'r [bytes::Bytes],
    pub(super) name: &'r str,
    pub(super) resp3: &'r dyn Fn() -> bool,
    pub(super) out: &'r mut ReplyWriter<'w>,
    pub(super) ended: Option<super::stack::Ended>,
}

/// The body of a run's protected call (see [`Vm::run`]): KEYS and ARGV
/// made (globals in `visible`, or the function's arguments), the
/// trampoline called, its result written. Owns nothing while it calls
/// Lua (a raised error unwinds over it: `super::stack`).
pub(super) unsafe extern "C-unwind" fn run_protected(state: *mut lua_State) -> c_int {
    // SAFETY: `Vm::run` pushed a pointer to its `RunCall`, which outlives
    // this call; Lua gives a C function room for LUA_MINSTACK (20)
    // values, of which this pushes 4 at most.
    unsafe {
        let call = &mut *ffi::lua_touserdata(state, 1).cast::<RunCall>();
        ffi::lua_settop(state, 0);
        let slot = |slot: Slot| ffi::lua_rawgeti(state, ffi::LUA_REGISTRYINDEX, slot.0.into());
        if call.as_arguments {
            slot(call.slots.trampoline_args);
            slot(call.function);
            push_strings(state, call.keys);
            push_strings(state, call.argv);
            ffi::lua_call(state, 3, 2);
        } else {
            slot(call.slots.visible);
            push_strings(state, call.keys);
            ffi::lua_setfield(state, 1, c"KEYS".as_ptr());
            push_strings(state, call.argv);
            ffi::lua_setfield(state, 1, c"ARGV".as_ptr());
            ffi::lua_settop(state, 0);
            slot(call.slots.trampoline);
            slot(call.function);
            ffi::lua_call(state, 1, 2);
        }
        let written = catch_panic(|| {
            let resp3 = (call.resp3)();
            super::stack::write_result(state, call.out, resp3, call.name)
        });
        match written {
            Some(ended) => call.ended = Some(ended),
            None => raise_panicked(state),
        }
        0
    }
}

/// Pushes a new table of `items` (a sequence of strings).
///
/// # Safety
/// `state` is in a protected call, with room for 2 values.
unsafe fn push_strings(state: *mut lua_State, items: &[bytes::Bytes]) {
    // SAFETY: as the function's contract.
    unsafe {
        let count = items.len().min(c_int::MAX as usize) as c_int;
        ffi::lua_createtable(state, count, 0);
        for (n, item) in items.iter().enumerate() {
            ffi::lua_pushlstring(state, item.as_ptr().cast(), item.len());
            ffi::lua_rawseti(state, -2, n as ffi::lua_Integer + 1);
        }
    }
}

/// An error of the VM itself (out of memory, say) as a reply's text: with
/// an error code, as every reply error has.
pub(super) fn internal_error(error: &mlua::Error) -> String {
    format!("ERR {}", lua_error_text(error))
}

/// Converts a Lua argument of `redis.call` to a command argument.
pub fn lua_arg(value: &Value) -> Option<bytes::Bytes> {
    match value {
        Value::String(s) => Some(bytes::Bytes::copy_from_slice(&s.as_bytes())),
        Value::Integer(n) => Some(bytes::Bytes::from(n.to_string())),
        Value::Number(n) => Some(bytes::Bytes::from(super::stack::number_text(*n))),
        _ => None,
    }
}

/// The protocol a script's `redis.call` replies are converted from.
pub fn protocol_of(version: u8) -> Protocol {
    if version == 3 {
        Protocol::Resp3
    } else {
        Protocol::Resp2
    }
}

#[cfg(test)]
mod tests {
    use crate::scripting::stack::format_lua_number;

    #[test]
    fn numbers_are_written_as_lua_5_1_does() {
        for (n, text) in [
            (0.1 + 0.2, "0.3"),
            (123.0, "123"),
            (-12.5, "-12.5"),
            (1e14, "1e+14"),
            (99_999_999_999_999.0, "99999999999999"),
            (1e20, "1e+20"),
            (0.0001, "0.0001"),
            (0.00001234, "1.234e-05"),
            (1.0 / 3.0, "0.33333333333333"),
            (-0.0, "-0"),
            (f64::INFINITY, "inf"),
        ] {
            assert_eq!(format_lua_number(n), text, "{n}");
        }
    }
}
