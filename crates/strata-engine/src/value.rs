//! Value types.
//!
//! A string is stored as an `i64` when its bytes are the canonical decimal
//! form of one (Redis' "int" encoding: no heap allocation, INCR without
//! parsing), otherwise as its bytes. Both are the Redis type `string`.
//! Values never borrow from request buffers: they own exact-size copies, so
//! a stored value cannot keep a whole pipelined batch alive.

use std::borrow::Cow;

/// Strings up to this length report encoding `embstr` as Redis does.
const EMBSTR_LEN_BYTES_MAX: usize = 44;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Int(i64),
    Str(Vec<u8>),
}

impl Value {
    /// Stores `bytes` with the most compact encoding that reads back equal.
    pub fn from_bytes(bytes: &[u8]) -> Value {
        match parse_canonical_i64(bytes) {
            Some(n) => Value::Int(n),
            None => Value::Str(bytes.to_vec()),
        }
    }

    /// The Redis type name, as TYPE replies it.
    pub fn type_name(&self) -> &'static str {
        "string"
    }

    /// The encoding name, as OBJECT ENCODING replies it.
    pub fn encoding(&self) -> &'static str {
        match self {
            Value::Int(_) => "int",
            Value::Str(s) if s.len() <= EMBSTR_LEN_BYTES_MAX => "embstr",
            Value::Str(_) => "raw",
        }
    }

    /// The string's bytes (formatted for the integer encoding).
    pub fn as_bytes(&self) -> Cow<'_, [u8]> {
        match self {
            Value::Int(n) => Cow::Owned(itoa::Buffer::new().format(*n).as_bytes().to_vec()),
            Value::Str(s) => Cow::Borrowed(s),
        }
    }

    /// Length in bytes of the string form.
    pub fn len(&self) -> usize {
        match self {
            Value::Int(n) => itoa::Buffer::new().format(*n).len(),
            Value::Str(s) => s.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Turns the value into mutable bytes (for APPEND, SETRANGE, SETBIT).
    pub fn make_bytes_mut(&mut self) -> &mut Vec<u8> {
        if let Value::Int(n) = *self {
            *self = Value::Str(itoa::Buffer::new().format(n).as_bytes().to_vec());
        }
        match self {
            Value::Str(s) => s,
            Value::Int(_) => unreachable!("converted above"),
        }
    }

    /// Heap bytes owned by the value (for MEMORY USAGE).
    pub fn heap_bytes(&self) -> usize {
        match self {
            Value::Int(_) => 0,
            Value::Str(s) => s.capacity(),
        }
    }
}

/// The integer whose canonical decimal form is exactly `bytes`, if any.
pub fn parse_canonical_i64(bytes: &[u8]) -> Option<i64> {
    if bytes.is_empty() || bytes.len() > 20 {
        return None;
    }
    let text = std::str::from_utf8(bytes).ok()?;
    let n: i64 = text.parse().ok()?;
    // Rejects "+1", "01", "-0": those must stay strings to read back equal.
    (itoa::Buffer::new().format(n).as_bytes() == bytes).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_encoding_only_for_canonical_forms() {
        assert_eq!(Value::from_bytes(b"123"), Value::Int(123));
        assert_eq!(
            Value::from_bytes(b"-9223372036854775808"),
            Value::Int(i64::MIN)
        );
        for s in [
            &b"0123"[..],
            b"+1",
            b"-0",
            b" 1",
            b"1.0",
            b"9223372036854775808",
            b"",
        ] {
            assert_eq!(Value::from_bytes(s), Value::Str(s.to_vec()), "{s:?}");
        }
    }

    #[test]
    fn encodings_and_lengths() {
        assert_eq!(Value::from_bytes(b"42").encoding(), "int");
        assert_eq!(Value::from_bytes(&[b'a'; 44]).encoding(), "embstr");
        assert_eq!(Value::from_bytes(&[b'a'; 45]).encoding(), "raw");
        assert_eq!(Value::Int(-15).len(), 3);
        let mut v = Value::Int(7);
        v.make_bytes_mut().push(b'x');
        assert_eq!(v.as_bytes().as_ref(), b"7x");
    }
}
