//! Random numbers: seeds for new data directories, and a fast per-thread
//! generator for sampling (eviction, SCAN of random keys, tests).

/// A random 64-bit seed from the OS (via std's randomly keyed hasher).
pub(crate) fn random_seed() -> u64 {
    use std::hash::{BuildHasher, RandomState as StdRandomState};
    StdRandomState::new().hash_one(std::time::SystemTime::now())
}

/// A fast per-thread pseudo-random number (xorshift64*), for sampling.
pub fn random_u64() -> u64 {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1);
            (seed ^ (&seed as *const u64 as u64)) | 1
        });
    }
    STATE.with(|state| {
        let mut x = state.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        state.set(x);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    })
}
