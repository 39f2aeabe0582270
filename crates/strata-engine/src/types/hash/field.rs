//! One hash field in the stored layout (see the `hash` module's
//! documentation): what both the packed form and the table form are made
//! of. A leaf, so that `hash` and `hash::table` both use it without
//! naming each other's items.

use crate::varint::{varint_len, write_varint};

/// A damaged or foreign hash image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadImage;

/// The flag of a field with a deadline.
pub(super) const HAS_DEADLINE: u8 = 1;

/// One field in the stored layout (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field<'a> {
    pub name: &'a [u8],
    pub value: &'a [u8],
    /// Unix ms after which the field no longer exists.
    pub deadline: Option<u64>,
}

impl<'a> Field<'a> {
    /// Parses the field at the start of `bytes`; returns it and its length.
    pub(super) fn parse(bytes: &'a [u8]) -> Result<(Field<'a>, usize), BadImage> {
        let flags = *bytes.first().ok_or(BadImage)?;
        if flags & !HAS_DEADLINE != 0 {
            return Err(BadImage);
        }
        let mut at = 1;
        let name = read_bytes(bytes, &mut at)?;
        let value = read_bytes(bytes, &mut at)?;
        let deadline = if flags & HAS_DEADLINE != 0 {
            let raw = bytes.get(at..at + 8).ok_or(BadImage)?;
            at += 8;
            Some(u64::from_le_bytes(raw.try_into().expect("8 bytes")))
        } else {
            None
        };
        Ok((
            Field {
                name,
                value,
                deadline,
            },
            at,
        ))
    }

    /// Bytes of this field in the stored layout.
    pub fn encoded_len(&self) -> usize {
        1 + varint_len(self.name.len())
            + self.name.len()
            + varint_len(self.value.len())
            + self.value.len()
            + if self.deadline.is_some() { 8 } else { 0 }
    }

    /// Appends this field in the stored layout.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(if self.deadline.is_some() {
            HAS_DEADLINE
        } else {
            0
        });
        write_varint(out, self.name.len());
        out.extend_from_slice(self.name);
        write_varint(out, self.value.len());
        out.extend_from_slice(self.value);
        if let Some(deadline) = self.deadline {
            out.extend_from_slice(&deadline.to_le_bytes());
        }
    }

    pub fn is_live(&self, now_ms: u64) -> bool {
        self.deadline.is_none_or(|at| at > now_ms)
    }
}

/// A varint length and that many bytes, at `*at`; advances `*at`.
pub(super) fn read_bytes<'a>(bytes: &'a [u8], at: &mut usize) -> Result<&'a [u8], BadImage> {
    crate::varint::read_bytes(bytes, at).ok_or(BadImage)
}

pub(super) fn read_varint(bytes: &[u8]) -> Result<(usize, usize), BadImage> {
    crate::varint::read_varint(bytes).ok_or(BadImage)
}
