//! A stream entry's ID.

use std::fmt;

use crate::varint::{read_varint, write_varint};

/// An entry's ID: `ms-seq`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// The ID right after this one (`None` after [`StreamId::MAX`]).
    pub fn next(self) -> Option<StreamId> {
        match self.seq.checked_add(1) {
            Some(seq) => Some(StreamId::new(self.ms, seq)),
            None => self.ms.checked_add(1).map(|ms| StreamId::new(ms, 0)),
        }
    }

    /// The ID right before this one (`None` before [`StreamId::MIN`]).
    pub fn prev(self) -> Option<StreamId> {
        match self.seq.checked_sub(1) {
            Some(seq) => Some(StreamId::new(self.ms, seq)),
            None => self.ms.checked_sub(1).map(|ms| StreamId::new(ms, u64::MAX)),
        }
    }

    pub fn is_zero(self) -> bool {
        self == StreamId::MIN
    }

    pub(super) fn write(self, out: &mut Vec<u8>) {
        write_u64(out, self.ms);
        write_u64(out, self.seq);
    }

    pub(super) fn read(bytes: &[u8], at: &mut usize) -> Option<StreamId> {
        Some(StreamId::new(read_u64(bytes, at)?, read_u64(bytes, at)?))
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

pub(super) fn write_u64(out: &mut Vec<u8>, n: u64) {
    write_varint(out, n as usize);
}

pub(super) fn read_u64(bytes: &[u8], at: &mut usize) -> Option<u64> {
    read_usize(bytes, at).map(|n| n as u64)
}

pub(super) fn read_usize(bytes: &[u8], at: &mut usize) -> Option<usize> {
    let (n, used) = read_varint(bytes.get(*at..)?)?;
    *at += used;
    Some(n)
}
