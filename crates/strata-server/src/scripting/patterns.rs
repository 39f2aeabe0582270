//! Lua 5.1's pattern functions (`string.find`, `string.match`,
//! `string.gmatch`, `string.gsub`), written again so that a script can
//! always be stopped inside them.
//!
//! Lua's own matcher is C code that backtracks: `a?` repeated n times on n
//! `a`s takes 2^n steps, and while it runs no Lua instruction executes,
//! so the instruction hook never fires: the script is neither seen as
//! busy nor stoppable by SCRIPT KILL or SIGTERM, and its network thread is
//! lost (as in Redis). It also recursed once per quantified item on the
//! thread's stack, which 50 000 items overflowed. This matcher has the
//! same semantics (the Lua 5.1 reference manual, §5.4.1, including 5.1's
//! quirks: a pattern ends at its first NUL byte, `%` before a non-digit in
//! a replacement string is that character), but it counts its steps and
//! every [`STEPS_PER_CHECK`] asks the running script's hook
//! (`super::hook::check_running`), which marks the script busy, serves
//! the thread's other clients and stops it when killed; its recursion is
//! bounded by [`DEPTH_MAX`] ("pattern too complex", Lua 5.2's bound and
//! message). A unit test compares it with Lua's own functions on many
//! random patterns and subjects.
//!
//! Nothing here owns heap memory while it calls Lua or raises an error
//! (both may `longjmp` over these frames, `super::stack`): the match
//! state is borrowed slices and a fixed array, and results are built in a
//! `luaL_Buffer`, which keeps its pieces on the Lua stack.

use std::ffi::{CStr, c_char, c_int};

use mlua::ffi::{self, lua_State};

/// Lua's `LUA_MAXCAPTURES`.
const CAPTURES_MAX: usize = 32;
/// Deepest recursion of the matcher (one level per quantified item or
/// capture being matched): Lua 5.2's `MAXCCALLS`.
pub const DEPTH_MAX: usize = 200;
/// Matcher steps between two looks at the running script's state.
const STEPS_PER_CHECK: u32 = 1 << 14;

/// The characters that make a pattern more than plain text.
const SPECIALS: &[u8] = b"^$*+?.([%-";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Capture {
    Unfinished,
    Position,
    Len(usize),
}

/// One match attempt's state. Borrowed data and a fixed array only (see
/// the module docs).
struct Matcher<'a> {
    state: *mut lua_State,
    src: &'a [u8],
    pat: &'a [u8],
    level: usize,
    captures: [(usize, Capture); CAPTURES_MAX],
    depth: usize,
    steps: u32,
}

/// Raises Lua error `message` (with the position, as `luaL_error` does).
///
/// # Safety
/// `state` is in a protected call; the caller's frames own nothing.
unsafe fn raise(state: *mut lua_State, message: &CStr) -> ! {
    // SAFETY: as the function's contract.
    unsafe {
        ffi::luaL_error(state, c"%s".as_ptr(), message.as_ptr());
    }
    unreachable!("luaL_error does not return")
}

/// Whether byte `c` is in class `class` (the letter after `%`), in the C
/// locale, as Lua 5.1 asks `ctype.h`.
fn in_class(c: u8, class: u8) -> bool {
    let found = match class.to_ascii_lowercase() {
        b'a' => c.is_ascii_alphabetic(),
        b'c' => c.is_ascii_control(),
        b'd' => c.is_ascii_digit(),
        b'l' => c.is_ascii_lowercase(),
        b'p' => c.is_ascii_punctuation(),
        b's' => matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'),
        b'u' => c.is_ascii_uppercase(),
        b'w' => c.is_ascii_alphanumeric(),
        b'x' => c.is_ascii_hexdigit(),
        b'z' => c == 0,
        _ => return class == c,
    };
    match class.is_ascii_uppercase() {
        true => !found,
        false => found,
    }
}

impl<'a> Matcher<'a> {
    fn new(state: *mut lua_State, src: &'a [u8], pat: &'a [u8]) -> Matcher<'a> {
        Matcher {
            state,
            src,
            pat,
            level: 0,
            captures: [(0, Capture::Unfinished); CAPTURES_MAX],
            depth: 0,
            steps: 0,
        }
    }

    fn fail(&self, message: &CStr) -> ! {
        // SAFETY: the matcher runs inside a C function Lua called, and
        // owns nothing (module docs).
        unsafe { raise(self.state, message) }
    }

    /// The pattern byte at `at` (0 past the end, as Lua 5.1 reads its
    /// NUL-terminated pattern).
    fn p(&self, at: usize) -> u8 {
        self.pat.get(at).copied().unwrap_or(0)
    }

    /// Counts a step; every [`STEPS_PER_CHECK`], lets the running
    /// script's checks run (which may stop the script here).
    fn step(&mut self) {
        self.steps += 1;
        if self.steps >= STEPS_PER_CHECK {
            self.steps = 0;
            // SAFETY: a C function's state, with nothing owned here.
            unsafe { super::hook::check_running(self.state) };
        }
    }

    /// Where the single-character class starting at `at` ends.
    fn class_end(&self, mut at: usize) -> usize {
        let c = self.p(at);
        at += 1;
        match c {
            b'%' => {
                if at >= self.pat.len() {
                    self.fail(c"malformed pattern (ends with '%')");
                }
                at + 1
            }
            b'[' => {
                if self.p(at) == b'^' {
                    at += 1;
                }
                // The first character of a set is a member, `]` too.
                loop {
                    if at >= self.pat.len() {
                        self.fail(c"malformed pattern (missing ']')");
                    }
                    let c = self.p(at);
                    at += 1;
                    if c == b'%' && at < self.pat.len() {
                        at += 1;
                    }
                    if self.p(at) == b']' {
                        return at + 1;
                    }
                }
            }
            _ => at,
        }
    }

    /// Whether `c` is in the set `[...]` from `open` (its `[`) to `close`
    /// (its `]`).
    fn in_set(&self, c: u8, open: usize, close: usize) -> bool {
        let mut at = open + 1;
        let member = match self.p(at) {
            b'^' => {
                at += 1;
                false
            }
            _ => true,
        };
        while at < close {
            if self.p(at) == b'%' {
                at += 1;
                if in_class(c, self.p(at)) {
                    return member;
                }
            } else if self.p(at + 1) == b'-' && at + 2 < close {
                if self.p(at) <= c && c <= self.p(at + 2) {
                    return member;
                }
                at += 2;
            } else if self.p(at) == c {
                return member;
            }
            at += 1;
        }
        !member
    }

    /// Whether `c` matches the single-character class from `at` to `end`.
    fn single(&self, c: u8, at: usize, end: usize) -> bool {
        match self.p(at) {
            b'.' => true,
            b'%' => in_class(c, self.p(at + 1)),
            b'[' => self.in_set(c, at, end - 1),
            literal => literal == c,
        }
    }

    /// Whether the subject's byte at `s` matches the class `at..end`.
    fn single_at(&self, s: usize, at: usize, end: usize) -> bool {
        s < self.src.len() && self.single(self.src[s], at, end)
    }

    /// Matches the pattern from `p` against the subject from `s`; where the
    /// match ends.
    fn do_match(&mut self, s: usize, p: usize) -> Option<usize> {
        self.depth += 1;
        if self.depth > DEPTH_MAX {
            self.fail(c"pattern too complex");
        }
        let found = self.match_here(s, p);
        self.depth -= 1;
        found
    }

    fn match_here(&mut self, mut s: usize, mut p: usize) -> Option<usize> {
        loop {
            self.step();
            if p >= self.pat.len() {
                return Some(s);
            }
            match self.p(p) {
                b'(' if self.p(p + 1) == b')' => {
                    return self.start_capture(s, p + 2, Capture::Position);
                }
                b'(' => return self.start_capture(s, p + 1, Capture::Unfinished),
                b')' => return self.end_capture(s, p + 1),
                b'%' if self.p(p + 1) == b'b' => {
                    s = self.balanced(s, p + 2)?;
                    p += 4;
                    continue;
                }
                b'%' if self.p(p + 1) == b'f' => {
                    p += 2;
                    if self.p(p) != b'[' {
                        self.fail(c"missing '[' after '%f' in pattern");
                    }
                    let end = self.class_end(p);
                    let previous = match s {
                        0 => 0,
                        _ => self.src[s - 1],
                    };
                    let current = self.src.get(s).copied().unwrap_or(0);
                    if !self.in_set(previous, p, end - 1) && self.in_set(current, p, end - 1) {
                        p = end;
                        continue;
                    }
                    return None;
                }
                b'%' if self.p(p + 1).is_ascii_digit() => {
                    s = self.back_reference(s, self.p(p + 1))?;
                    p += 2;
                    continue;
                }
                b'$' if p + 1 == self.pat.len() => {
                    return (s == self.src.len()).then_some(s);
                }
                _ => {}
            }
            let end = self.class_end(p);
            let matched = self.single_at(s, p, end);
            match self.p(end) {
                b'?' => {
                    if matched && let Some(found) = self.do_match(s + 1, end + 1) {
                        return Some(found);
                    }
                    p = end + 1;
                }
                b'*' => return self.longest(s, p, end),
                b'+' => {
                    return if matched {
                        self.longest(s + 1, p, end)
                    } else {
                        None
                    };
                }
                b'-' => return self.shortest(s, p, end),
                _ => {
                    if !matched {
                        return None;
                    }
                    s += 1;
                    p = end;
                }
            }
        }
    }

    /// `class*`: as many as match, then fewer until the rest matches.
    fn longest(&mut self, s: usize, p: usize, end: usize) -> Option<usize> {
        let mut count = 0;
        while self.single_at(s + count, p, end) {
            self.step();
            count += 1;
        }
        loop {
            if let Some(found) = self.do_match(s + count, end + 1) {
                return Some(found);
            }
            if count == 0 {
                return None;
            }
            count -= 1;
        }
    }

    /// `class-`: as few as let the rest match.
    fn shortest(&mut self, mut s: usize, p: usize, end: usize) -> Option<usize> {
        loop {
            if let Some(found) = self.do_match(s, end + 1) {
                return Some(found);
            }
            if !self.single_at(s, p, end) {
                return None;
            }
            s += 1;
        }
    }

    fn start_capture(&mut self, s: usize, p: usize, what: Capture) -> Option<usize> {
        if self.level >= CAPTURES_MAX {
            self.fail(c"too many captures");
        }
        self.captures[self.level] = (s, what);
        self.level += 1;
        let found = self.do_match(s, p);
        if found.is_none() {
            self.level -= 1;
        }
        found
    }

    fn end_capture(&mut self, s: usize, p: usize) -> Option<usize> {
        let Some(open) = (0..self.level)
            .rev()
            .find(|&l| self.captures[l].1 == Capture::Unfinished)
        else {
            self.fail(c"invalid pattern capture");
        };
        self.captures[open].1 = Capture::Len(s - self.captures[open].0);
        let found = self.do_match(s, p);
        if found.is_none() {
            self.captures[open].1 = Capture::Unfinished;
        }
        found
    }

    /// `%bxy` at `p` (pointing at `x`): from `s`, a balanced run.
    fn balanced(&mut self, s: usize, p: usize) -> Option<usize> {
        if p + 1 >= self.pat.len() {
            self.fail(c"unbalanced pattern");
        }
        let (open, close) = (self.p(p), self.p(p + 1));
        if self.src.get(s) != Some(&open) {
            return None;
        }
        let mut depth = 1;
        for at in s + 1..self.src.len() {
            self.step();
            let c = self.src[at];
            if c == close {
                depth -= 1;
                if depth == 0 {
                    return Some(at + 1);
                }
            } else if c == open {
                depth += 1;
            }
        }
        None
    }

    /// The capture `%<digit>` names, checked as Lua checks it.
    fn capture_index(&self, digit: u8) -> usize {
        let index = digit.wrapping_sub(b'1') as usize;
        if index >= self.level || self.captures[index].1 == Capture::Unfinished {
            self.fail(c"invalid capture index");
        }
        index
    }

    /// `%1`..`%9`: the same bytes as the capture again.
    fn back_reference(&mut self, s: usize, digit: u8) -> Option<usize> {
        let (start, what) = self.captures[self.capture_index(digit)];
        let Capture::Len(len) = what else {
            // A position capture's "length" never fits (as in Lua).
            return None;
        };
        let rest = &self.src[s..];
        (rest.len() >= len && rest[..len] == self.src[start..start + len]).then_some(s + len)
    }

    /// Pushes capture `index` of the match `s..e` (the whole match when
    /// there are no captures and `index` is 0).
    ///
    /// # Safety
    /// The state has room for a value.
    unsafe fn push_capture(&self, index: usize, s: usize, e: usize) {
        // SAFETY: as the function's contract; errors unwind over frames
        // that own nothing.
        unsafe {
            if index >= self.level {
                if index != 0 {
                    self.fail(c"invalid capture index");
                }
                push_bytes(self.state, &self.src[s..e]);
                return;
            }
            let (start, what) = self.captures[index];
            match what {
                Capture::Unfinished => self.fail(c"unfinished capture"),
                Capture::Position => {
                    ffi::lua_pushinteger(self.state, start as ffi::lua_Integer + 1)
                }
                Capture::Len(len) => push_bytes(self.state, &self.src[start..start + len]),
            }
        }
    }

    /// Pushes every capture of the match `s..e` (or the whole match when
    /// there is none and `whole`); how many.
    ///
    /// # Safety
    /// A C function's state.
    unsafe fn push_captures(&self, s: usize, e: usize, whole: bool) -> c_int {
        let count = match self.level {
            0 if whole => 1,
            level => level,
        };
        // SAFETY: as the function's contract.
        unsafe {
            ffi::luaL_checkstack(self.state, count as c_int, c"too many captures".as_ptr());
            for index in 0..count {
                self.push_capture(index, s, e);
            }
        }
        count as c_int
    }
}

/// # Safety
/// The state has room for a value.
unsafe fn push_bytes(state: *mut lua_State, bytes: &[u8]) {
    // SAFETY: as the function's contract.
    unsafe { ffi::lua_pushlstring(state, bytes.as_ptr().cast::<c_char>(), bytes.len()) };
}

/// String argument `index` (a number is converted, as Lua does), as a
/// slice Lua keeps alive while it is on the stack.
///
/// # Safety
/// A C function's state.
unsafe fn string_arg<'a>(state: *mut lua_State, index: c_int) -> &'a [u8] {
    // SAFETY: `luaL_checklstring` raises when it is not a string; the
    // string stays on the stack for the whole call.
    unsafe {
        let mut len = 0;
        let text = ffi::luaL_checklstring(state, index, &mut len);
        std::slice::from_raw_parts(text.cast::<u8>(), len)
    }
}

/// The pattern argument, up to its first NUL byte (Lua 5.1 reads it as a
/// C string).
///
/// # Safety
/// A C function's state.
unsafe fn pattern_arg<'a>(state: *mut lua_State, index: c_int) -> &'a [u8] {
    // SAFETY: as `string_arg`.
    let pattern = unsafe { string_arg(state, index) };
    let end = pattern
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(pattern.len());
    &pattern[..end]
}

/// A 1-based position `pos` of a string of `len` bytes, negative ones
/// counted from the end (Lua 5.1's `posrelat`), as a 0-based start.
fn start_at(pos: ffi::lua_Integer, len: usize) -> usize {
    let pos = if pos < 0 { pos + len as i64 + 1 } else { pos };
    let start = pos.max(0) - 1;
    start.clamp(0, len as i64) as usize
}

/// `string.find` and `string.match`.
///
/// # Safety
/// A C function's state.
unsafe fn find_or_match(state: *mut lua_State, find: bool) -> c_int {
    // SAFETY: as the function's contract; nothing owned is live when Lua
    // raises (module docs).
    unsafe {
        let src = string_arg(state, 1);
        let whole = string_arg(state, 2);
        let pat = pattern_arg(state, 2);
        let init = start_at(ffi::luaL_optinteger(state, 3, 1), src.len());
        let plain = ffi::lua_toboolean(state, 4) != 0 || !pat.iter().any(|b| SPECIALS.contains(b));
        if find && plain {
            // A plain search takes the whole argument, NUL bytes too.
            let found = if whole.is_empty() {
                Some(init)
            } else {
                src[init..]
                    .windows(whole.len())
                    .position(|w| w == whole)
                    .map(|at| init + at)
            };
            let pat = whole;
            return match found {
                Some(at) => {
                    ffi::lua_pushinteger(state, at as ffi::lua_Integer + 1);
                    ffi::lua_pushinteger(state, (at + pat.len()) as ffi::lua_Integer);
                    2
                }
                None => {
                    ffi::lua_pushnil(state);
                    1
                }
            };
        }
        let (anchored, pat) = match pat.first() {
            Some(b'^') => (true, &pat[1..]),
            _ => (false, pat),
        };
        let mut matcher = Matcher::new(state, src, pat);
        let mut s = init;
        loop {
            matcher.level = 0;
            if let Some(e) = matcher.do_match(s, 0) {
                if find {
                    ffi::lua_pushinteger(state, s as ffi::lua_Integer + 1);
                    ffi::lua_pushinteger(state, e as ffi::lua_Integer);
                    return matcher.push_captures(0, 0, false) + 2;
                }
                return matcher.push_captures(s, e, true);
            }
            s += 1;
            if anchored || s > src.len() {
                break;
            }
        }
        ffi::lua_pushnil(state);
        1
    }
}

/// `string.find(s, pattern [, init [, plain]])`.
///
/// # Safety
/// Only Lua calls it, as a C function with its arguments on `state`'s stack.
pub unsafe extern "C-unwind" fn find(state: *mut lua_State) -> c_int {
    // SAFETY: Lua calls it as a C function.
    unsafe { find_or_match(state, true) }
}

/// `string.match(s, pattern [, init])`.
///
/// # Safety
/// Only Lua calls it, as a C function with its arguments on `state`'s stack.
pub unsafe extern "C-unwind" fn match_(state: *mut lua_State) -> c_int {
    // SAFETY: Lua calls it as a C function.
    unsafe { find_or_match(state, false) }
}

/// `string.gmatch(s, pattern)`: an iterator over the matches (a `^` is
/// no anchor here, as in Lua 5.1).
///
/// # Safety
/// Only Lua calls it, as a C function with its arguments on `state`'s stack.
pub unsafe extern "C-unwind" fn gmatch(state: *mut lua_State) -> c_int {
    // SAFETY: Lua calls it as a C function; the closure keeps both
    // strings and its position as upvalues.
    unsafe {
        string_arg(state, 1);
        string_arg(state, 2);
        ffi::lua_settop(state, 2);
        ffi::lua_pushinteger(state, 0);
        ffi::lua_pushcclosure(state, gmatch_next, 3);
        1
    }
}

unsafe extern "C-unwind" fn gmatch_next(state: *mut lua_State) -> c_int {
    // SAFETY: the closure `gmatch` made: upvalues subject, pattern and
    // the position to go on from.
    unsafe {
        let mut len = 0;
        let text = ffi::lua_tolstring(state, ffi::lua_upvalueindex(1), &mut len);
        let src = std::slice::from_raw_parts(text.cast::<u8>(), len);
        let text = ffi::lua_tolstring(state, ffi::lua_upvalueindex(2), &mut len);
        let pat = std::slice::from_raw_parts(text.cast::<u8>(), len);
        let pat = &pat[..pat.iter().position(|&b| b == 0).unwrap_or(pat.len())];
        let mut s = ffi::lua_tointeger_(state, ffi::lua_upvalueindex(3)).max(0) as usize;
        let mut matcher = Matcher::new(state, src, pat);
        while s <= src.len() {
            matcher.level = 0;
            if let Some(e) = matcher.do_match(s, 0) {
                // An empty match moves on by one, or it would repeat.
                let next = if e == s { e + 1 } else { e };
                ffi::lua_pushinteger(state, next as ffi::lua_Integer);
                ffi::lua_replace(state, ffi::lua_upvalueindex(3));
                return matcher.push_captures(s, e, true);
            }
            s += 1;
        }
        0
    }
}

/// `string.gsub(s, pattern, repl [, n])`.
///
/// # Safety
/// Only Lua calls it, as a C function with its arguments on `state`'s stack.
pub unsafe extern "C-unwind" fn gsub(state: *mut lua_State) -> c_int {
    // SAFETY: Lua calls it as a C function. The buffer lives in this
    // frame (it is not moved after `luaL_buffinit`) and keeps its pieces
    // on the Lua stack; nothing owned is live when Lua raises.
    unsafe {
        let src = string_arg(state, 1);
        let pat = pattern_arg(state, 2);
        let kind = ffi::lua_type(state, 3);
        // As Lua 5.1's `luaL_optint`: cut to a C `int`.
        let max = ffi::luaL_optinteger(state, 4, src.len() as ffi::lua_Integer + 1) as c_int
            as ffi::lua_Integer;
        if !matches!(
            kind,
            ffi::LUA_TNUMBER | ffi::LUA_TSTRING | ffi::LUA_TFUNCTION | ffi::LUA_TTABLE
        ) {
            ffi::luaL_argerror(state, 3, c"string/function/table expected".as_ptr());
        }
        let (anchored, pat) = match pat.first() {
            Some(b'^') => (true, &pat[1..]),
            _ => (false, pat),
        };
        let mut buffer = std::mem::MaybeUninit::<ffi::luaL_Buffer>::uninit();
        let buffer = buffer.as_mut_ptr();
        ffi::luaL_buffinit(state, buffer);
        let mut matcher = Matcher::new(state, src, pat);
        let mut s = 0;
        let mut count: ffi::lua_Integer = 0;
        while count < max {
            matcher.level = 0;
            let found = matcher.do_match(s, 0);
            if let Some(e) = found {
                count += 1;
                add_replacement(&matcher, buffer, kind, s, e);
            }
            match found {
                Some(e) if e > s => s = e,
                _ if s < src.len() => {
                    ffi::luaL_addchar(buffer, src[s] as c_char);
                    s += 1;
                }
                _ => break,
            }
            if anchored {
                break;
            }
        }
        ffi::luaL_addlstring(buffer, src[s..].as_ptr().cast::<c_char>(), src.len() - s);
        ffi::luaL_pushresult(buffer);
        ffi::lua_pushinteger(state, count);
        2
    }
}

/// Adds the replacement of the match `s..e` to `buffer`: the replacement
/// string with `%0`-`%9` filled in, the table's value for the first
/// capture, or the function's result for the captures; false or nil keep
/// the match.
///
/// # Safety
/// Inside `gsub`, with `buffer` its initialised buffer.
unsafe fn add_replacement(
    matcher: &Matcher,
    buffer: *mut ffi::luaL_Buffer,
    kind: c_int,
    s: usize,
    e: usize,
) {
    let state = matcher.state;
    // SAFETY: as the function's contract.
    unsafe {
        match kind {
            ffi::LUA_TFUNCTION => {
                ffi::lua_pushvalue(state, 3);
                let count = matcher.push_captures(s, e, true);
                ffi::lua_call(state, count, 1);
            }
            ffi::LUA_TTABLE => {
                matcher.push_capture(0, s, e);
                ffi::lua_gettable(state, 3);
            }
            _ => {
                add_template(matcher, buffer, s, e);
                return;
            }
        }
        if ffi::lua_toboolean(state, -1) == 0 {
            ffi::lua_settop(state, -2);
            push_bytes(state, &matcher.src[s..e]);
        } else if ffi::lua_isstring(state, -1) == 0 {
            ffi::luaL_error(
                state,
                c"invalid replacement value (a %s)".as_ptr(),
                ffi::lua_typename(state, ffi::lua_type(state, -1)),
            );
        }
        ffi::luaL_addvalue(buffer);
    }
}

/// A replacement string (argument 3) with `%0`-`%9` filled in.
///
/// # Safety
/// As [`add_replacement`].
unsafe fn add_template(matcher: &Matcher, buffer: *mut ffi::luaL_Buffer, s: usize, e: usize) {
    // SAFETY: as the function's contract.
    unsafe {
        let template = string_arg(matcher.state, 3);
        let mut at = 0;
        while at < template.len() {
            let c = template[at];
            if c != b'%' {
                ffi::luaL_addchar(buffer, c as c_char);
                at += 1;
                continue;
            }
            at += 1;
            // Past the end Lua 5.1 reads the string's terminating NUL.
            let next = template.get(at).copied().unwrap_or(0);
            match next {
                b'0' => {
                    ffi::luaL_addlstring(buffer, matcher.src[s..e].as_ptr().cast::<c_char>(), e - s)
                }
                b'1'..=b'9' => {
                    matcher.push_capture((next - b'1') as usize, s, e);
                    ffi::luaL_addvalue(buffer);
                }
                other => ffi::luaL_addchar(buffer, other as c_char),
            }
            at += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    //! Differential: each case runs with Lua's own functions and ours, in
    //! one Lua state, and the results (or error messages) must agree.

    use mlua::{Lua, Value};

    fn state_with_both() -> Lua {
        let lua = Lua::new();
        // SAFETY: installs C functions into a fresh state's globals.
        unsafe {
            lua.exec_raw::<()>((), |state| {
                mlua::ffi::lua_getfield(state, mlua::ffi::LUA_GLOBALSINDEX, c"string".as_ptr());
                for (name, function) in [
                    (c"ourfind", super::find as mlua::ffi::lua_CFunction),
                    (c"ourmatch", super::match_),
                    (c"ourgmatch", super::gmatch),
                    (c"ourgsub", super::gsub),
                ] {
                    mlua::ffi::lua_pushcfunction(state, function);
                    mlua::ffi::lua_setfield(state, -2, name.as_ptr());
                }
                mlua::ffi::lua_settop(state, -2);
            })
            .unwrap();
        }
        lua
    }

    /// Runs `call` (a Lua expression over `f`, `s`, `p`) with Lua's
    /// function and with ours: the results as text.
    fn both(lua: &Lua, function: &str, call: &str, s: &[u8], p: &[u8]) -> (String, String) {
        let run = |name: &str| -> String {
            let code = format!(
                "local f, s, p = string.{name}, ...\n local r = {{pcall(function() return {call} end)}}\n \
                 for i = 1, #r do r[i] = type(r[i]) .. ':' .. tostring(r[i]) end\n \
                 return table.concat(r, '|')"
            );
            let s = lua.create_string(s).unwrap();
            let p = lua.create_string(p).unwrap();
            match lua.load(&code).call::<Value>((s, p)).unwrap() {
                Value::String(text) => String::from_utf8_lossy(&text.as_bytes()).into_owned(),
                other => format!("{other:?}"),
            }
        };
        (run(function), run(&format!("our{function}")))
    }

    fn check(lua: &Lua, s: &[u8], p: &[u8]) {
        for (function, call) in [
            ("find", "f(s, p)"),
            ("find", "f(s, p, 3)"),
            ("find", "f(s, p, -2, false)"),
            ("match", "f(s, p)"),
            ("match", "f(s, p, 2)"),
            ("gsub", "f(s, p, '<%0>')"),
            ("gsub", "f(s, p, '%1-%%', 2)"),
            ("gsub", "f(s, p, function(a, b) return b end)"),
            ("gsub", "f(s, p, {a = 'A', b = false})"),
            (
                "gmatch",
                "(function() local t = {} for a, b in f(s, p) do t[#t + 1] = tostring(a) .. ',' .. tostring(b) if #t > 20 then break end end return table.concat(t, ';') end)()",
            ),
        ] {
            let (theirs, ours) = both(lua, function, call, s, p);
            // Error positions differ (the functions' names); the message
            // after them must not.
            let strip = |t: &str| t.rsplit(": ").next().unwrap_or(t).to_owned();
            assert_eq!(
                strip(&theirs),
                strip(&ours),
                "{call} with s = {:?}, p = {:?}",
                String::from_utf8_lossy(s),
                String::from_utf8_lossy(p)
            );
        }
    }

    #[test]
    fn agrees_with_lua_on_chosen_patterns() {
        let lua = state_with_both();
        let subjects: &[&[u8]] = &[
            b"",
            b"hello world",
            b"x=1, y=22",
            b"(a(b)c)[d]",
            b"aaa",
            b"THE (quick) fox",
            b"a\0b",
            b"  trim  ",
            b"ab ab",
        ];
        let patterns: &[&[u8]] = &[
            b"",
            b"l+",
            b"o",
            b"^h",
            b"d$",
            b"(%w+)=(%w+)",
            b"%b()",
            b"%f[%w]%w+",
            b"()a",
            b"(a)%1",
            b"[%a_][%w_]*",
            b"[^%s]+",
            b"a-b",
            b"a?a?a",
            b".-",
            b"(.)(.)",
            b"%",
            b"[a",
            b"(()",
            b"%1",
            b"%g",
            b"[%]]",
            b"[]]",
            b"[^]]",
            b"%z",
            b"a\0b",
            b"^",
            b"$",
            b"%bxy",
            b"%b",
            b"%f",
            b"%fa",
            b"(",
            b")",
            b"x*$",
            b"[a-]",
            b"[-a]",
            b"%.",
            b"^(%s*)(.-)(%s*)$",
            b"((a)(b))",
            b"%S+",
        ];
        for s in subjects {
            for p in patterns {
                check(&lua, s, p);
            }
        }
    }

    #[test]
    fn agrees_with_lua_on_random_patterns() {
        let lua = state_with_both();
        let mut seed = 12345u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) as usize
        };
        let atoms: &[&str] = &[
            "a", "b", ".", "%a", "%d", "%s", "[ab]", "[^a]", "[a-c]", "(", ")", "()", "%1", "%b()",
            "%f[%a]", "*", "+", "-", "?", "^", "$", "%", "x",
        ];
        for _ in 0..3000 {
            let pattern: String = (0..next() % 6)
                .map(|_| atoms[next() % atoms.len()])
                .collect();
            let subject: String = (0..next() % 10)
                .map(|_| ["a", "b", "c", "(", ")", " ", "1"][next() % 7])
                .collect();
            check(&lua, subject.as_bytes(), pattern.as_bytes());
        }
    }
}
