//! [`ThinBuf`]: an owned byte buffer one pointer wide, its length kept in
//! its own allocation, just before the bytes.
//!
//! Why: every key is one [`Entry`](crate::keyspace::shards::Entry) in a hash table
//! slot, and RAM per key is what tiering sells (a key whose value is on
//! disk must cost little more than its own bytes). A `Box<[u8]>` takes two
//! words of the slot, a `Box<Header>` pointing at a second allocation a
//! further one and a cache miss; a `ThinBuf` takes one word, and the
//! entry's header, key and value share its single allocation, so a lookup
//! touches one cache line behind the table.
//!
//! Layout of the allocation: the length in 1, 2 or 5 bytes, then that many
//! bytes. The pointer points at the first of those bytes, and the length
//! is read backwards from the byte before it: below 128 that byte is the
//! length; below 16 384 it is `0x80 | len >> 8`, after the low byte; else
//! it is `0xC0`, after a `u32` (little endian). A key whose value is on
//! disk is an allocation of 20-odd bytes, so the three bytes a fixed
//! `u32` would take more are a tenth of it (and often a smaller size
//! class); and what lies at a fixed place in the bytes (an entry's word
//! and shape) is read without the length at all ([`ThinBuf::data_ptr`]).
//! Lengths are bounded by [`THIN_LEN_MAX`]: a key and a value are each at
//! most `proto-max-bulk-len` (≤ 2 147 483 627 bytes), so an entry fits.
//!
//! The pointer carries its owner's bits in its top byte, where a Linux
//! process's addresses on x86-64 or AArch64 have none unless it asks for
//! them (checked at each allocation): bit 63 is the owner's one-bit tag
//! (an entry's "value on disk"), bits 56–62 seven bits of the key's hash
//! for a key table ([`ThinBuf::hash_tag`]). Every change of allocation
//! keeps both.
//!
//! This module is the engine's only hand-written allocation code; its
//! tests also run under Miri (`cargo +nightly miri test -p strata-engine
//! thin::`).

use std::alloc::{self, Layout};
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::OnceLock;

/// The longest buffer: its length must fit the `u32` of the long prefix.
pub(crate) const THIN_LEN_MAX: usize = u32::MAX as usize - LONG_PREFIX;

/// Prefix bytes of the three forms, and the lengths below which the two
/// short forms serve.
const SHORT_PREFIX: usize = 1;
const MEDIUM_PREFIX: usize = 2;
const LONG_PREFIX: usize = 5;
const SHORT_LEN_END: usize = 0x80;
const MEDIUM_LEN_END: usize = 0x4000;
/// The first byte of a medium prefix has its top bits `10`; a long one is
/// this byte.
const MEDIUM_MARK: u8 = 0x80;
const LONG_MARK: u8 = 0xC0;

/// The prefix bytes of a buffer of `len` bytes.
fn prefix_len(len: usize) -> usize {
    if len < SHORT_LEN_END {
        SHORT_PREFIX
    } else if len < MEDIUM_LEN_END {
        MEDIUM_PREFIX
    } else {
        LONG_PREFIX
    }
}

static SIZE_CLASS: OnceLock<fn(usize) -> usize> = OnceLock::new();

/// Tells the engine how its process's allocator rounds a request of n
/// bytes up (mimalloc's `mi_good_size`), so that entries choose the
/// layout that costs the least RAM and key tables take whole classes.
/// Without it, sizes are taken as exact and values stay inline. Only the
/// first call counts.
pub fn set_size_class(size_class: fn(usize) -> usize) {
    let _ = SIZE_CLASS.set(size_class);
}

/// What the allocator hands out for a request of `bytes`. Unit tests use
/// classes like mimalloc's (four per power of two), so that both layouts
/// are exercised.
pub(crate) fn size_class(bytes: usize) -> usize {
    if cfg!(test) {
        let bytes = bytes.max(8);
        if bytes <= 64 {
            return bytes.next_multiple_of(8);
        }
        let step = (bytes.next_power_of_two() / 8).max(8);
        return bytes.next_multiple_of(step);
    }
    SIZE_CLASS.get().map_or(bytes, |class| class(bytes))
}

/// Bytes of the allocation of a buffer of `len` bytes (before the
/// allocator's rounding).
pub(crate) fn allocation_bytes(len: usize) -> usize {
    prefix_len(len) + len
}

/// An owned, growable byte buffer behind one pointer (see the module
/// documentation).
pub(crate) struct ThinBuf {
    /// The first byte's address (the length lies just before it), with
    /// the owner's bits in the top byte.
    ptr: NonNull<u8>,
}

// SAFETY: a ThinBuf owns its allocation exclusively, like a Box<[u8]>.
unsafe impl Send for ThinBuf {}
// SAFETY: shared access only reads the bytes.
unsafe impl Sync for ThinBuf {}

/// The owner's one-bit tag ([`ThinBuf::set_tag`]).
const TAG: usize = 1 << 63;
/// The hash tag's seven bits.
const HASH_TAG_SHIFT: u32 = 56;
const HASH_TAG_BITS: usize = 0x7F << HASH_TAG_SHIFT;
/// Every bit of the pointer that is not the address.
const OWNER_BITS: usize = TAG | HASH_TAG_BITS;

fn layout(len: usize) -> Layout {
    assert!(len <= THIN_LEN_MAX, "a {len}-byte buffer is too long");
    Layout::from_size_align(prefix_len(len) + len, 1).expect("the length was checked")
}

impl ThinBuf {
    /// A buffer of `len` bytes; `zeroed` asks the allocator for zeroed
    /// memory (fresh pages come zeroed, so a huge zero-filled value costs
    /// nothing until it is written).
    fn allocate(len: usize, zeroed: bool) -> ThinBuf {
        let layout = layout(len);
        // SAFETY: the layout is never zero-sized (it holds the prefix).
        let raw = unsafe {
            if zeroed {
                alloc::alloc_zeroed(layout)
            } else {
                alloc::alloc(layout)
            }
        };
        let Some(base) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        let mut buf = ThinBuf { ptr: base };
        buf.settle(base, len, 0);
        buf
    }

    /// Points at the bytes of a buffer of `len` bytes whose allocation
    /// starts at `base`, writes the prefix, and sets the owner's `bits`.
    /// Never frees what the pointer pointed at before.
    fn settle(&mut self, base: NonNull<u8>, len: usize, bits: usize) {
        // SAFETY: the allocation holds the prefix, then the bytes.
        let data = unsafe { base.add(prefix_len(len)) };
        if data.as_ptr().addr() & OWNER_BITS != 0 {
            // Not on Linux x86-64 or AArch64 as configured by default; a
            // panic here would unwind through a half-made buffer.
            eprintln!("strata: an allocation at {data:p} leaves no room for the pointer's tags");
            std::process::abort();
        }
        self.ptr = data;
        self.write_prefix(len);
        self.set_owner_bits(bits);
    }

    /// The concatenation of `parts`, copied once.
    pub(crate) fn from_parts(parts: &[&[u8]]) -> ThinBuf {
        let len = parts.iter().map(|p| p.len()).sum();
        let buf = ThinBuf::allocate(len, false);
        let mut at = buf.data();
        for part in parts {
            // SAFETY: the parts add up to `len`, so every copy stays inside
            // the allocation; raw copies, because the bytes are not yet
            // initialised (no slice may be made over them).
            unsafe {
                std::ptr::copy_nonoverlapping(part.as_ptr(), at, part.len());
                at = at.add(part.len());
            }
        }
        buf
    }

    /// `len` zero bytes.
    pub(crate) fn zeroed(len: usize) -> ThinBuf {
        ThinBuf::allocate(len, true)
    }

    /// Where the bytes start (the pointer without its tags).
    #[inline(always)]
    fn data(&self) -> *mut u8 {
        self.ptr.as_ptr().map_addr(|address| address & !OWNER_BITS)
    }

    /// Where the bytes start, to read what lies at a fixed place in them
    /// without their length (the caller knows the buffer is long enough).
    #[inline(always)]
    pub(crate) fn data_ptr(&self) -> *const u8 {
        self.data()
    }

    /// As [`ThinBuf::data_ptr`], to write.
    #[inline(always)]
    pub(crate) fn data_mut_ptr(&mut self) -> *mut u8 {
        self.data()
    }

    /// The allocation's start.
    fn base(&self) -> *mut u8 {
        // SAFETY: the prefix lies inside the allocation, before the bytes.
        unsafe { self.data().sub(self.read_prefix().1) }
    }

    /// The pointer's owner bits (both tags).
    fn owner_bits(&self) -> usize {
        self.ptr.as_ptr().addr() & OWNER_BITS
    }

    fn set_owner_bits(&mut self, bits: usize) {
        let tagged = self.data().map_addr(|address| address | bits);
        // SAFETY: the bytes' address is non-zero, so the tagged one is.
        self.ptr = unsafe { NonNull::new_unchecked(tagged) };
    }

    /// The owner's one bit, kept in the pointer itself: readable without
    /// touching the allocation (an entry keeps "value on disk" there, so
    /// eviction passes over cold entries without a cache miss each).
    pub(crate) fn tag(&self) -> bool {
        self.ptr.as_ptr().addr() & TAG != 0
    }

    pub(crate) fn set_tag(&mut self, on: bool) {
        self.set_owner_bits((self.owner_bits() & !TAG) | if on { TAG } else { 0 });
    }

    /// Asks the CPU to bring the first bytes into the cache (a table
    /// rebuild reads many entries at random addresses).
    pub(crate) fn prefetch(&self) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: SSE is part of x86-64's baseline, and a prefetch never
        // faults, whatever the address.
        unsafe {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            _mm_prefetch::<_MM_HINT_T0>(self.data().cast_const().cast::<i8>());
        }
    }

    /// The owner's seven hash bits, in the pointer's top byte (a key
    /// table's filter: see [`crate::keyspace::table::KeyTable`]).
    #[inline(always)]
    pub(crate) fn hash_tag(&self) -> u8 {
        ((self.ptr.as_ptr().addr() & HASH_TAG_BITS) >> HASH_TAG_SHIFT) as u8
    }

    /// Sets the hash tag to the low seven bits of `tag`.
    pub(crate) fn set_hash_tag(&mut self, tag: u8) {
        let high = ((tag & 0x7F) as usize) << HASH_TAG_SHIFT;
        self.set_owner_bits((self.owner_bits() & !HASH_TAG_BITS) | high);
    }

    /// Writes the prefix for a length of `len` just before the bytes.
    fn write_prefix(&mut self, len: usize) {
        let data = self.data();
        // SAFETY: an allocation for `len` bytes holds their prefix just
        // before them (`layout`, `settle`).
        unsafe {
            match prefix_len(len) {
                SHORT_PREFIX => *data.sub(1) = len as u8,
                MEDIUM_PREFIX => {
                    *data.sub(1) = MEDIUM_MARK | (len >> 8) as u8;
                    *data.sub(2) = len as u8;
                }
                _ => {
                    *data.sub(1) = LONG_MARK;
                    let long = (len as u32).to_le_bytes();
                    std::ptr::copy_nonoverlapping(long.as_ptr(), data.sub(LONG_PREFIX), 4);
                }
            }
        }
    }

    /// (length, prefix bytes), read backwards from the byte before the
    /// bytes. Every slice of the bytes comes here, so the one-byte form
    /// is tested first, inline.
    #[inline(always)]
    fn read_prefix(&self) -> (usize, usize) {
        let data = self.data();
        // SAFETY: the byte before the bytes is the prefix's last, which
        // says how long the prefix is (`write_prefix`).
        let last = unsafe { *data.sub(1) };
        if last < MEDIUM_MARK {
            (last as usize, SHORT_PREFIX)
        } else {
            read_longer_prefix(data, last)
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.read_prefix().0
    }

    #[inline]
    pub(crate) fn as_slice(&self) -> &[u8] {
        let len = self.read_prefix().0;
        // SAFETY: the allocation holds `len` initialised bytes from the
        // pointer on (every constructor and resize writes all of them),
        // owned by self for the borrow's lifetime.
        unsafe { std::slice::from_raw_parts(self.data(), len) }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        let len = self.read_prefix().0;
        // SAFETY: as in as_slice, borrowed exclusively.
        unsafe { std::slice::from_raw_parts_mut(self.data(), len) }
    }

    /// Changes the length to `new_len`, keeping the first bytes; new bytes
    /// are zero. Often in place (the allocator's size classes have room).
    pub(crate) fn resize(&mut self, new_len: usize) {
        let (old_len, old_prefix) = self.read_prefix();
        if new_len == old_len {
            return;
        }
        let bits = self.owner_bits();
        let new_layout = layout(new_len);
        let new_prefix = prefix_len(new_len);
        let kept = old_len.min(new_len);
        let base = self.base();
        if new_prefix < old_prefix {
            // Shrinking into a shorter prefix: the kept bytes move down
            // while the allocation still holds them.
            // SAFETY: both ranges lie inside the old allocation.
            unsafe { std::ptr::copy(base.add(old_prefix), base.add(new_prefix), kept) };
        }
        // SAFETY: the allocation was made with layout(old_len) by this
        // global allocator; the new size is non-zero and fits isize
        // (checked by layout()).
        let raw = unsafe { alloc::realloc(base, layout(old_len), new_layout.size()) };
        let Some(base) = NonNull::new(raw) else {
            alloc::handle_alloc_error(new_layout)
        };
        let base_ptr = base.as_ptr();
        if new_prefix > old_prefix {
            // Growing into a longer prefix: the kept bytes move up.
            // SAFETY: the grown allocation holds new_prefix + new_len
            // bytes, and new_len > kept.
            unsafe { std::ptr::copy(base_ptr.add(old_prefix), base_ptr.add(new_prefix), kept) };
        }
        if new_len > old_len {
            // SAFETY: the grown allocation holds new_prefix + new_len bytes.
            unsafe {
                std::ptr::write_bytes(base_ptr.add(new_prefix + old_len), 0, new_len - old_len)
            };
        }
        self.settle(base, new_len, bits);
    }

    /// Grows to `new_len` (far beyond the current length) with zeroed
    /// memory from the allocator, the old bytes copied in: writing one
    /// byte at 512 MB must not touch 512 MB of pages.
    pub(crate) fn grow_zeroed(&mut self, new_len: usize) {
        debug_assert!(new_len >= self.len());
        let mut grown = ThinBuf::zeroed(new_len);
        grown.as_mut_slice()[..self.len()].copy_from_slice(self.as_slice());
        grown.set_owner_bits(self.owner_bits());
        *self = grown;
    }

    /// Replaces the bytes in `range` with `with` (as `Vec::splice`),
    /// moving the tail once and reallocating at most once.
    pub(crate) fn replace_range(&mut self, range: Range<usize>, with: &[u8]) {
        let len = self.len();
        assert!(
            range.start <= range.end && range.end <= len,
            "range out of bounds"
        );
        let new_len = len - range.len() + with.len();
        if with.len() > range.len() {
            self.resize(new_len);
        }
        let bytes = self.as_mut_slice();
        bytes.copy_within(range.end..len, range.start + with.len());
        bytes[range.start..range.start + with.len()].copy_from_slice(with);
        if with.len() < range.len() {
            self.resize(new_len);
        }
    }
}

/// The two- and five-byte prefixes (see [`ThinBuf::read_prefix`]).
#[cold]
#[inline(never)]
fn read_longer_prefix(data: *mut u8, last: u8) -> (usize, usize) {
    // SAFETY: a last byte of MEDIUM_MARK or more ends a prefix of
    // MEDIUM_PREFIX or LONG_PREFIX bytes, all before `data`.
    unsafe {
        if last < LONG_MARK {
            let low = *data.sub(2);
            (
                (((last & !MEDIUM_MARK) as usize) << 8) | low as usize,
                MEDIUM_PREFIX,
            )
        } else {
            let mut long = [0u8; 4];
            std::ptr::copy_nonoverlapping(data.sub(LONG_PREFIX), long.as_mut_ptr(), 4);
            (u32::from_le_bytes(long) as usize, LONG_PREFIX)
        }
    }
}

/// A buffer owned through its address (an entry keeps a value's buffer
/// as the 8 bytes of its address inside its own allocation).
impl ThinBuf {
    /// Gives up the buffer for its address; [`ThinBuf::from_address`]
    /// takes it back (exactly once, or it leaks).
    pub(crate) fn into_address(self) -> usize {
        debug_assert!(
            self.owner_bits() == 0,
            "a tagged buffer has no plain address"
        );
        let ptr = self.ptr;
        std::mem::forget(self);
        ptr.as_ptr().expose_provenance()
    }

    /// # Safety
    ///
    /// `address` came from [`ThinBuf::into_address`] and no other
    /// `ThinBuf` owns it now.
    pub(crate) unsafe fn from_address(address: usize) -> ThinBuf {
        let ptr = std::ptr::with_exposed_provenance_mut::<u8>(address);
        ThinBuf {
            // SAFETY: addresses come from live, non-null allocations.
            ptr: unsafe { NonNull::new_unchecked(ptr) },
        }
    }

    /// The bytes of the buffer at `address`, for as long as its owner
    /// keeps it (the caller ties the lifetime to the owner's borrow).
    ///
    /// # Safety
    ///
    /// `address` came from [`ThinBuf::into_address`], is not reclaimed
    /// or changed during `'a`.
    pub(crate) unsafe fn slice_at<'a>(address: usize) -> &'a [u8] {
        // SAFETY: the caller's promise; the handle is not dropped.
        let handle = std::mem::ManuallyDrop::new(unsafe { ThinBuf::from_address(address) });
        let bytes = handle.as_slice();
        // SAFETY: the bytes belong to the allocation, not to the handle.
        unsafe { std::slice::from_raw_parts(bytes.as_ptr(), bytes.len()) }
    }
}

impl Drop for ThinBuf {
    fn drop(&mut self) {
        // SAFETY: allocated by this global allocator with layout(len),
        // and never used again.
        unsafe { alloc::dealloc(self.base(), layout(self.len())) }
    }
}

impl std::fmt::Debug for ThinBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ThinBuf({} bytes)", self.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_pointer_wide() {
        assert_eq!(size_of::<ThinBuf>(), size_of::<usize>());
        assert_eq!(size_of::<Option<ThinBuf>>(), size_of::<usize>());
    }

    #[test]
    fn parts_are_concatenated() {
        let buf = ThinBuf::from_parts(&[b"ab", b"", b"cde"]);
        assert_eq!(buf.len(), 5);
        assert_eq!(buf.as_slice(), b"abcde");
        let empty = ThinBuf::from_parts(&[]);
        assert_eq!(empty.as_slice(), b"");
    }

    #[test]
    fn resize_keeps_the_start_and_zero_fills() {
        let mut buf = ThinBuf::from_parts(&[b"hello"]);
        buf.resize(8);
        assert_eq!(buf.as_slice(), b"hello\0\0\0");
        buf.as_mut_slice()[7] = b'!';
        buf.resize(300);
        assert_eq!(&buf.as_slice()[..8], b"hello\0\0!");
        assert!(buf.as_slice()[8..].iter().all(|&b| b == 0));
        buf.resize(2);
        assert_eq!(buf.as_slice(), b"he");
        buf.resize(0);
        assert_eq!(buf.as_slice(), b"");
    }

    #[test]
    fn grow_zeroed_copies_the_old_bytes() {
        let mut buf = ThinBuf::from_parts(&[b"xyz"]);
        buf.grow_zeroed(4096);
        assert_eq!(&buf.as_slice()[..3], b"xyz");
        assert!(buf.as_slice()[3..].iter().all(|&b| b == 0));
        assert_eq!(ThinBuf::zeroed(16).as_slice(), &[0u8; 16]);
    }

    #[test]
    fn the_tag_survives_growth_and_leaves_the_bytes_alone() {
        let mut buf = ThinBuf::from_parts(&[b"tagged"]);
        assert!(!buf.tag());
        buf.set_tag(true);
        assert!(buf.tag());
        assert_eq!(buf.as_slice(), b"tagged");
        buf.resize(5000);
        assert!(buf.tag());
        assert_eq!(&buf.as_slice()[..6], b"tagged");
        buf.replace_range(0..1, b"T");
        buf.set_tag(false);
        assert!(!buf.tag());
        assert_eq!(&buf.as_slice()[..6], b"Tagged");
    }

    #[test]
    fn owned_through_an_address() {
        let address = ThinBuf::from_parts(&[b"value"]).into_address();
        // SAFETY: the address is live and owned by nobody else.
        assert_eq!(unsafe { ThinBuf::slice_at(address) }, b"value");
        // SAFETY: the same address, taken back once.
        let mut buf = unsafe { ThinBuf::from_address(address) };
        buf.resize(1000);
        assert_eq!(&buf.as_slice()[..5], b"value");
    }

    #[test]
    fn lengths_across_the_prefix_forms() {
        // Each form's edges, grown and shrunk through the others.
        let lengths = [0, 1, 127, 128, 129, 16_383, 16_384, 16_385, 70_000];
        for &from in &lengths {
            for &to in &lengths {
                let start: Vec<u8> = (0..from).map(|i| (i % 251) as u8).collect();
                let mut buf = ThinBuf::from_parts(&[&start]);
                buf.set_tag(true);
                buf.set_hash_tag(0x55);
                assert_eq!(buf.as_slice(), &start[..]);
                buf.resize(to);
                let mut model = start.clone();
                model.resize(to, 0);
                assert_eq!(buf.len(), to, "{from} -> {to}");
                assert_eq!(buf.as_slice(), &model[..], "{from} -> {to}");
                assert!(buf.tag() && buf.hash_tag() == 0x55, "{from} -> {to}");
            }
        }
    }

    #[test]
    fn the_prefix_is_as_short_as_the_length_allows() {
        assert_eq!(layout(0).size(), 1);
        assert_eq!(layout(127).size(), 128);
        assert_eq!(layout(128).size(), 130);
        assert_eq!(layout(16_383).size(), 16_385);
        assert_eq!(layout(16_384).size(), 16_389);
    }

    #[test]
    fn the_hash_tag_and_the_tag_are_independent() {
        let mut buf = ThinBuf::from_parts(&[b"key"]);
        assert_eq!(buf.hash_tag(), 0);
        buf.set_hash_tag(0xFF);
        assert_eq!(buf.hash_tag(), 0x7F, "seven bits kept");
        assert!(!buf.tag());
        buf.set_tag(true);
        buf.set_hash_tag(3);
        assert!(buf.tag());
        assert_eq!(buf.hash_tag(), 3);
        buf.grow_zeroed(100_000);
        assert!(buf.tag());
        assert_eq!(buf.hash_tag(), 3);
        assert_eq!(&buf.as_slice()[..3], b"key");
        buf.set_tag(false);
        assert_eq!(buf.hash_tag(), 3);
    }

    #[test]
    fn replace_range_matches_vec_splice() {
        let start = b"0123456789";
        let cases: &[(Range<usize>, &[u8])] = &[
            (0..0, b"ab"),
            (10..10, b"tail"),
            (2..5, b"X"),
            (2..5, b"XYZ"),
            (2..5, b"XYZW+"),
            (0..10, b""),
            (3..3, b""),
            (9..10, b"longer than it was"),
        ];
        for (range, with) in cases {
            let mut buf = ThinBuf::from_parts(&[start]);
            buf.replace_range(range.clone(), with);
            let mut model = start.to_vec();
            model.splice(range.clone(), with.iter().copied());
            assert_eq!(buf.as_slice(), &model[..], "{range:?} {with:?}");
        }
    }
}
