//! A run's protected call, and the conversions around it: error texts,
//! `redis.call`'s arguments, numbers as Lua 5.1 writes them.

use std::ffi::c_int;

use mlua::ffi::{self, lua_State};
use mlua::{Lua, Value};
use strata_resp::{Protocol, ReplyWriter};

use super::*;

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
    pub(super) ended: Option<crate::scripting::stack::Ended>,
}

/// The body of a run's protected call (see [`Vm::run`]): KEYS and ARGV
/// made (globals in `visible`, or the function's arguments), the
/// trampoline called, its result written. Owns nothing while it calls
/// Lua (a raised error unwinds over it: `crate::scripting::stack`).
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
            crate::scripting::stack::write_result(state, call.out, resp3, call.name)
        });
        match written {
            Some(ended) => call.ended = Some(ended),
            None => raise_panicked(state),
        }
        0
    }
}

/// Ends the run with a Lua error after [`catch_panic`] caught a panic.
///
/// # Safety
/// `state` is in a protected call; the calling frame owns nothing.
pub unsafe fn raise_panicked(state: *mut lua_State) -> ! {
    // SAFETY: as the function's contract.
    unsafe {
        ffi::lua_pushstring(
            state,
            c"internal error (a panic, resumed after the run)".as_ptr(),
        );
        ffi::lua_error(state)
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

/// Converts a Lua argument of `redis.call` to a command argument.
pub fn lua_arg(value: &Value) -> Option<bytes::Bytes> {
    match value {
        Value::String(s) => Some(bytes::Bytes::copy_from_slice(&s.as_bytes())),
        Value::Integer(n) => Some(bytes::Bytes::from(n.to_string())),
        Value::Number(n) => Some(bytes::Bytes::from(crate::scripting::stack::number_text(*n))),
        _ => None,
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
    use super::format_lua_number;

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
