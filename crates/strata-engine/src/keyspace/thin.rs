//! [`ThinBuf`]: an owned byte buffer one pointer wide, its length kept at
//! the start of its own allocation.
//!
//! Why: every key is one [`Entry`](crate::keyspace::shards::Entry) in a hash table
//! slot, and RAM per key is what tiering sells (a key whose value is on
//! disk must cost little more than its own bytes). A `Box<[u8]>` takes two
//! words of the slot, a `Box<Header>` pointing at a second allocation a
//! further one and a cache miss; a `ThinBuf` takes one word, and the
//! entry's header, key and value share its single allocation, so a lookup
//! touches one cache line behind the table.
//!
//! Layout of the allocation: the length as a `u32` (little endian,
//! unaligned), then that many bytes. Lengths are bounded by
//! [`THIN_LEN_MAX`]: a key and a value are each at most
//! `proto-max-bulk-len` (≤ 2 147 483 627 bytes), so an entry fits.
//!
//! This module is the engine's only hand-written allocation code; its
//! tests also run under Miri (`cargo +nightly miri test -p strata-engine
//! thin::`).

use std::alloc::{self, Layout};
use std::ops::Range;
use std::ptr::NonNull;

/// Bytes of the length prefix.
const LEN_BYTES: usize = 4;
/// The longest buffer: its length must fit the `u32` prefix.
pub(crate) const THIN_LEN_MAX: usize = u32::MAX as usize - LEN_BYTES;

/// An owned, growable byte buffer behind one pointer (see the module
/// documentation).
pub(crate) struct ThinBuf {
    ptr: NonNull<u8>,
}

// SAFETY: a ThinBuf owns its allocation exclusively, like a Box<[u8]>.
unsafe impl Send for ThinBuf {}
// SAFETY: shared access only reads the bytes.
unsafe impl Sync for ThinBuf {}

/// Allocations are 2-aligned, so the pointer's low bit is free for the
/// owner's one-bit tag ([`ThinBuf::set_tag`]).
const ALIGN: usize = 2;
const TAG: usize = 1;

fn layout(len: usize) -> Layout {
    assert!(len <= THIN_LEN_MAX, "a {len}-byte buffer is too long");
    Layout::from_size_align(LEN_BYTES + len, ALIGN).expect("the length was checked")
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
        let Some(ptr) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        let mut buf = ThinBuf { ptr };
        buf.set_len(len);
        buf
    }

    /// The concatenation of `parts`, copied once.
    pub(crate) fn from_parts(parts: &[&[u8]]) -> ThinBuf {
        let len = parts.iter().map(|p| p.len()).sum();
        let buf = ThinBuf::allocate(len, false);
        let mut at = LEN_BYTES;
        for part in parts {
            // SAFETY: the parts add up to `len`, so every copy stays inside
            // the allocation; raw copies, because the bytes are not yet
            // initialised (no slice may be made over them).
            unsafe {
                std::ptr::copy_nonoverlapping(part.as_ptr(), buf.base().add(at), part.len());
            }
            at += part.len();
        }
        buf
    }

    /// `len` zero bytes.
    pub(crate) fn zeroed(len: usize) -> ThinBuf {
        ThinBuf::allocate(len, true)
    }

    /// The allocation's start (the pointer without its tag).
    fn base(&self) -> *mut u8 {
        self.ptr.as_ptr().map_addr(|address| address & !TAG)
    }

    /// The owner's one bit, kept in the pointer itself: readable without
    /// touching the allocation (an entry keeps "value on disk" there, so
    /// eviction passes over cold entries without a cache miss each).
    pub(crate) fn tag(&self) -> bool {
        self.ptr.as_ptr().addr() & TAG != 0
    }

    pub(crate) fn set_tag(&mut self, on: bool) {
        let tagged = self
            .ptr
            .as_ptr()
            .map_addr(|address| (address & !TAG) | if on { TAG } else { 0 });
        // SAFETY: an allocation's address is non-zero with its low bit
        // clear, so the tagged address is non-zero too.
        self.ptr = unsafe { NonNull::new_unchecked(tagged) };
    }

    fn set_len(&mut self, len: usize) {
        let prefix = (len as u32).to_le_bytes();
        // SAFETY: every allocation starts with LEN_BYTES bytes of prefix.
        unsafe {
            std::ptr::copy_nonoverlapping(prefix.as_ptr(), self.base(), LEN_BYTES);
        }
    }

    pub(crate) fn len(&self) -> usize {
        let mut prefix = [0u8; LEN_BYTES];
        // SAFETY: every allocation starts with LEN_BYTES bytes of prefix.
        unsafe {
            std::ptr::copy_nonoverlapping(self.base(), prefix.as_mut_ptr(), LEN_BYTES);
        }
        u32::from_le_bytes(prefix) as usize
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        // SAFETY: the allocation holds the prefix then `len` initialised
        // bytes (every constructor and resize writes all of them), owned
        // by self for the borrow's lifetime.
        unsafe { std::slice::from_raw_parts(self.base().add(LEN_BYTES), self.len()) }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in as_slice, borrowed exclusively.
        unsafe { std::slice::from_raw_parts_mut(self.base().add(LEN_BYTES), self.len()) }
    }

    /// Changes the length to `new_len`, keeping the first bytes; new bytes
    /// are zero. Often in place (the allocator's size classes have room).
    pub(crate) fn resize(&mut self, new_len: usize) {
        let old_len = self.len();
        if new_len == old_len {
            return;
        }
        let new_layout = layout(new_len);
        // SAFETY: ptr was allocated with layout(old_len) by this global
        // allocator; the new size is non-zero and fits isize (checked by
        // layout()).
        let raw = unsafe { alloc::realloc(self.base(), layout(old_len), new_layout.size()) };
        let Some(ptr) = NonNull::new(raw) else {
            alloc::handle_alloc_error(new_layout)
        };
        let tag = self.tag();
        self.ptr = ptr;
        self.set_tag(tag);
        if new_len > old_len {
            // SAFETY: the grown allocation holds LEN_BYTES + new_len bytes.
            unsafe {
                std::ptr::write_bytes(self.base().add(LEN_BYTES + old_len), 0, new_len - old_len);
            }
        }
        self.set_len(new_len);
    }

    /// Grows to `new_len` (far beyond the current length) with zeroed
    /// memory from the allocator, the old bytes copied in: writing one
    /// byte at 512 MB must not touch 512 MB of pages.
    pub(crate) fn grow_zeroed(&mut self, new_len: usize) {
        debug_assert!(new_len >= self.len());
        let mut grown = ThinBuf::zeroed(new_len);
        grown.as_mut_slice()[..self.len()].copy_from_slice(self.as_slice());
        grown.set_tag(self.tag());
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

/// A buffer owned through its address (an entry keeps a value's buffer
/// as the 8 bytes of its address inside its own allocation).
impl ThinBuf {
    /// Gives up the buffer for its address; [`ThinBuf::from_address`]
    /// takes it back (exactly once, or it leaks).
    pub(crate) fn into_address(self) -> usize {
        debug_assert!(!self.tag(), "a tagged buffer has no plain address");
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
