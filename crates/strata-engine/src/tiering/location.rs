//! Log locations: where a record lies, as one `u64` (segment in the high
//! 32 bits, byte offset in the low 32). Entries keep the location of their
//! value's newest image; the log reports where committed records landed.

/// "No location": the value's current image is only in RAM.
pub(crate) const NO_LOC: u64 = u64::MAX;

/// A location: segment in the high 32 bits, byte offset in the low 32.
pub fn loc(segment: u64, offset: u64) -> u64 {
    assert!(segment < u32::MAX as u64 && offset <= u32::MAX as u64);
    segment << 32 | offset
}

pub(crate) fn loc_segment(loc: u64) -> u64 {
    loc >> 32
}

pub(crate) fn loc_offset(loc: u64) -> u64 {
    loc & u32::MAX as u64
}

/// Where a cold value's image lies. Only the engine sees one: an embedder
/// brings cold values in through [`crate::tiering::fetch::ColdFetch`] and never
/// handles a record offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ColdLocation(pub(crate) u64);
