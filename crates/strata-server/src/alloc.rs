//! The global allocator: mimalloc, wrapped to count the bytes in use.
//!
//! `INFO memory`'s `used_memory` must be a real figure, comparable to what
//! Redis reports (the allocator's usable size of every live allocation).
//! Each thread keeps a local running delta and folds it into one shared
//! counter only when it exceeds [`FLUSH_BYTES`], so allocation-heavy threads
//! do not fight over a cache line; the error is bounded by that amount per
//! thread.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use mimalloc::MiMalloc;

/// A thread's unflushed delta stays below this many bytes.
const FLUSH_BYTES: i64 = 64 * 1024;

static USED_BYTES: AtomicI64 = AtomicI64::new(0);
static PEAK_BYTES: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static LOCAL_DELTA: Cell<i64> = const { Cell::new(0) };
}

pub struct CountingAlloc;

#[inline]
fn account(delta: i64) {
    // `try_with` because allocations can happen while a thread's locals are
    // being torn down; those go straight to the shared counter.
    let flushed = LOCAL_DELTA.try_with(|local| {
        let value = local.get() + delta;
        if value.abs() >= FLUSH_BYTES {
            local.set(0);
            value
        } else {
            local.set(value);
            0
        }
    });
    let to_shared = flushed.unwrap_or(delta);
    if to_shared != 0 {
        let now = USED_BYTES.fetch_add(to_shared, Ordering::Relaxed) + to_shared;
        PEAK_BYTES.fetch_max(now.max(0) as u64, Ordering::Relaxed);
    }
}

#[inline]
fn usable(ptr: *mut u8) -> i64 {
    // SAFETY: `ptr` was returned by mimalloc and is still live.
    unsafe { libmimalloc_sys::mi_usable_size(ptr as *const _) as i64 }
}

// SAFETY: every call is forwarded to mimalloc unchanged; we only observe
// sizes of pointers mimalloc itself handed out.
unsafe impl GlobalAlloc for CountingAlloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract; we pass it on.
        let ptr = unsafe { MiMalloc.alloc(layout) };
        if !ptr.is_null() {
            account(usable(ptr));
        }
        ptr
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`: the caller's contract is passed on unchanged.
        let ptr = unsafe { MiMalloc.alloc_zeroed(layout) };
        if !ptr.is_null() {
            account(usable(ptr));
        }
        ptr
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        account(-usable(ptr));
        // SAFETY: `ptr` came from this allocator (so from mimalloc) with `layout`.
        unsafe { MiMalloc.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let before = usable(ptr);
        // SAFETY: `ptr` came from mimalloc with `layout`; the caller's contract holds.
        let new_ptr = unsafe { MiMalloc.realloc(ptr, layout, new_size) };
        if !new_ptr.is_null() {
            account(usable(new_ptr) - before);
        }
        new_ptr
    }
}

/// mimalloc's `mi_option_page_max_reclaim` (its option enum's index in
/// the mimalloc v3 that `libmimalloc-sys` builds; the crate exports no
/// constant for it, and the test `option_indices_match_mimalloc` checks
/// the index against the neighbouring options' defaults).
const OPTION_PAGE_MAX_RECLAIM: libmimalloc_sys::mi_option_t = 41;

/// Pages of one size class a thread takes back into its own heap when it
/// frees into a page it filled earlier (mimalloc: unlimited).
///
/// mimalloc hands a full page back to the process (abandons it); a free
/// into it by the thread that filled it takes it back into that thread's
/// heap, and only that thread allocates from it again. Keys loaded by one
/// thread (a restore, a replica's sync, one client's import) and then
/// overwritten by clients on every network thread leave the loading
/// thread holding half-empty pages while the other threads take new
/// ones: 1 000-byte values overwritten by 4 clients grew RSS by 45 %
/// (500 k keys: 505 → 737 MB in 30 s, `used_memory` flat at 495 MB) and
/// stayed there. With a bound, pages past it stay abandoned and any
/// thread reuses them once they are below 7/8 full: +6 % (534 MB), and
/// no more CPU per SET (docs/performance.md, "Memory under overwrites
/// from every thread").
const PAGE_MAX_RECLAIM: std::ffi::c_long = 32;

/// Sets the allocator's options; `main` calls it first. An option given
/// in the environment (`MIMALLOC_PAGE_MAX_RECLAIM`) is left as given.
pub fn configure() {
    if std::env::var_os("MIMALLOC_PAGE_MAX_RECLAIM").is_none() {
        // SAFETY: mi_option_set stores a number in mimalloc's option table,
        // which allocation paths read as a plain value.
        unsafe { libmimalloc_sys::mi_option_set(OPTION_PAGE_MAX_RECLAIM, PAGE_MAX_RECLAIM) }
    }
}

/// How often threads call [`collect`].
pub const COLLECT_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// Frees this thread's empty allocator pages and lets the allocator give
/// memory freed more than its purge delay ago back to the OS.
/// Also folds this thread's unflushed count into `used_memory`, so an
/// idle server reports its memory exactly rather than within
/// [`FLUSH_BYTES`] per thread.
pub fn collect() {
    // SAFETY: mi_collect only touches the calling thread's heap and the
    // allocator's shared arenas, under their own synchronisation.
    unsafe { libmimalloc_sys::mi_collect(false) }
    let _ = LOCAL_DELTA.try_with(|local| {
        let delta = local.replace(0);
        if delta != 0 {
            USED_BYTES.fetch_add(delta, Ordering::Relaxed);
        }
    });
}

/// The usable size the allocator hands out for a request of `bytes`.
pub fn size_class(bytes: usize) -> usize {
    // SAFETY: a pure function of its argument.
    unsafe { libmimalloc_sys::mi_good_size(bytes) }
}

/// Bytes currently allocated (usable size), as `used_memory`.
pub fn used_bytes() -> u64 {
    USED_BYTES.load(Ordering::Relaxed).max(0) as u64
}

/// Memory mimalloc holds committed (read-write mapped) for the process:
/// what it allocated plus its free pages not yet returned.
pub fn committed_bytes() -> u64 {
    let mut committed = 0usize;
    // SAFETY: mi_process_info writes only through the non-null pointers
    // it is given.
    unsafe {
        libmimalloc_sys::mi_process_info(
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut committed,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
    }
    committed as u64
}

pub fn peak_bytes() -> u64 {
    PEAK_BYTES.load(Ordering::Relaxed).max(used_bytes())
}

/// Resident set size of the process, from /proc.
pub fn rss_bytes() -> u64 {
    let page = 4096;
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map(|pages| pages * page)
        .unwrap_or(0)
}

/// Returns freed pages to the OS now (MEMORY PURGE): a forced collection
/// of this thread's heap and the shared arenas.
pub fn purge() {
    // SAFETY: as in `collect`; `force` also purges what is still within
    // the allocator's purge delay.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

/// mimalloc's statistics report (MEMORY MALLOC-STATS), as text.
pub fn stats_report() -> String {
    unsafe extern "C" fn append(message: *const std::ffi::c_char, arg: *mut std::ffi::c_void) {
        // SAFETY: `arg` is the `String` passed below, alive for the call;
        // `message` is a NUL-terminated string from mimalloc.
        unsafe {
            let out = &mut *(arg as *mut String);
            out.push_str(&std::ffi::CStr::from_ptr(message).to_string_lossy());
        }
    }
    let mut out = String::new();
    // SAFETY: the callback only appends to `out`, which outlives the call.
    unsafe {
        libmimalloc_sys::mi_stats_print_out(Some(append), (&mut out as *mut String).cast());
    }
    out
}

#[cfg(test)]
mod tests {
    use libmimalloc_sys::{mi_option_get, mi_option_t};

    /// The option index [`super::configure`] sets is `page_max_reclaim`:
    /// its neighbours in mimalloc's enum hold their documented defaults
    /// (full_retain 2, max_candidates 4 at 36 and 37; cross-thread
    /// max_reclaim 32 at 42), and it holds its own (-1, unlimited) until
    /// set. A mimalloc whose enum moved fails here, not silently.
    #[test]
    fn option_indices_match_mimalloc() {
        // SAFETY: mi_option_get reads one entry of mimalloc's option table;
        // every index used here is below its end (`_mi_option_last`).
        let get = |index: mi_option_t| unsafe { mi_option_get(index) };
        assert_eq!(get(36), 2, "page_full_retain");
        assert_eq!(get(37), 4, "page_max_candidates");
        assert_eq!(get(42), 32, "page_cross_thread_max_reclaim");
        if std::env::var_os("MIMALLOC_PAGE_MAX_RECLAIM").is_none() {
            assert_eq!(get(super::OPTION_PAGE_MAX_RECLAIM), -1, "page_max_reclaim");
        }
    }
}
