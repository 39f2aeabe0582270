//! The instruction hook (a run that became busy, SCRIPT KILL, FUNCTION
//! LOAD's deadline) and the panics kept from unwinding through Lua.

use std::time::Instant;

use mlua::ffi::{self, lua_State};

use super::cache::{Running, Scripts};

thread_local! {
    /// FUNCTION LOAD's deadline for the library being loaded (`None`:
    /// none), checked by [`count_hook`].
    pub(super) static LOAD_DEADLINE: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

/// A run the hook checks: the cache, the run and `busy-reply-threshold`.
type Watched = (std::sync::Arc<Scripts>, std::sync::Arc<Running>, u64);

thread_local! {
    /// This thread's run being made, set by [`super::vm::Vm::run`].
    pub(super) static WATCHED: std::cell::RefCell<Option<Watched>> = const { std::cell::RefCell::new(None) };
}

/// What the instruction hook does, for C code that runs long without Lua
/// instructions (`super::patterns`): notes a busy run, serves the
/// thread's other clients, and raises the error that stops a killed run.
///
/// # Safety
/// `state` is in a protected call; the caller's frames own nothing.
pub(crate) unsafe fn check_running(state: *mut lua_State) {
    // SAFETY: as the function's contract.
    unsafe { count_hook(state, std::ptr::null_mut()) }
}

/// Whether the code running on this thread must stop: the error to raise.
fn hook_verdict() -> Result<(), &'static str> {
    if LOAD_DEADLINE
        .get()
        .is_some_and(|deadline| Instant::now() > deadline)
    {
        return Err("FUNCTION LOAD timeout");
    }
    WATCHED.with(|watched| match &*watched.borrow() {
        Some((scripts, running, busy_after_ms)) => running.check(scripts, *busy_after_ms),
        None => Ok(()),
    })
}

/// Called every [`HOOK_INSTRUCTIONS`] Lua instructions, in the main state
/// and in every coroutine: notes a run that became busy, serves the
/// thread's other clients meanwhile, and stops a killed run or a library
/// past its load deadline by raising an error. A script's error is an
/// error table (the reply's text as Redis words it); FUNCTION LOAD's a
/// string, which its caller words.
pub(super) unsafe extern "C-unwind" fn count_hook(state: *mut lua_State, _: *mut ffi::lua_Debug) {
    let verdict = catch_panic(hook_verdict);
    // SAFETY: Lua calls a hook inside the running code's protected call;
    // this frame owns nothing when an error is raised.
    unsafe {
        match verdict {
            Some(Ok(())) => {}
            Some(Err(text)) if LOAD_DEADLINE.get().is_some() => {
                ffi::lua_pushlstring(state, text.as_ptr().cast(), text.len());
                ffi::lua_error(state);
            }
            Some(Err(text)) => {
                super::stack::push_error_table(state, text.as_bytes(), false);
                ffi::lua_error(state);
            }
            None => raise_panicked(state),
        }
    }
}

thread_local! {
    /// A panic caught in Rust code that Lua called during a run, resumed
    /// once the run's protected call returned (see [`catch_panic`]).
    pub(super) static CAUGHT_PANIC: std::cell::RefCell<Option<Box<dyn std::any::Any + Send>>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `f`, Rust code called from Lua during a run: a panic must not
/// unwind through Lua's C frames, so it is kept for [`super::Vm::run`] to resume
/// after the protected call, and `None` says the caller should raise a
/// Lua error to end the run.
pub fn catch_panic<R>(f: impl FnOnce() -> R) -> Option<R> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(value) => Some(value),
        Err(payload) => {
            CAUGHT_PANIC.with(|caught| *caught.borrow_mut() = Some(payload));
            None
        }
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
