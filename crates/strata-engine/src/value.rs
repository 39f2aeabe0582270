//! Values as commands hand them to the keyspace ([`Value`]) and read them
//! back ([`ValueRef`]).
//!
//! A string whose bytes are the canonical decimal form of an `i64` is
//! flagged as Redis' "int" encoding (OBJECT ENCODING says `int`, INCR takes
//! a fast path); it is still stored as its text, so GET never formats.
//! Values never borrow from request buffers: the keyspace stores its own
//! exact-size copy, so a stored value cannot keep a pipelined batch alive.

use std::borrow::Cow;

/// Strings up to this length report encoding `embstr`, as in Redis.
const EMBSTR_LEN_BYTES_MAX: usize = 44;

/// A value to store. It may borrow its bytes (from a request, say): the
/// keyspace copies them once, straight into the entry's allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value<'a> {
    Int(i64),
    Str(Cow<'a, [u8]>),
    /// A hash, as its image (`hash` module).
    Hash(Cow<'a, [u8]>),
}

impl<'a> Value<'a> {
    /// The value that reads back as exactly `bytes`.
    pub fn from_bytes(bytes: &'a [u8]) -> Value<'a> {
        match parse_canonical_i64(bytes) {
            Some(n) => Value::Int(n),
            None => Value::Str(Cow::Borrowed(bytes)),
        }
    }

    /// A string value that owns its bytes.
    pub fn owned(bytes: Vec<u8>) -> Value<'static> {
        Value::Str(Cow::Owned(bytes))
    }
}

/// How a stored string is encoded (OBJECT ENCODING).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Int,
    Embstr,
    Raw,
}

/// A stored value, borrowed from its entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueRef<'a> {
    bytes: &'a [u8],
    int: bool,
    hash: bool,
}

impl<'a> ValueRef<'a> {
    pub(crate) fn new(bytes: &'a [u8], int: bool, hash: bool) -> Self {
        ValueRef { bytes, int, hash }
    }

    /// Whether this is a hash (its bytes are then its image).
    pub fn is_hash(&self) -> bool {
        self.hash
    }

    /// The string's bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The integer, when the value is int-encoded.
    pub fn as_int(&self) -> Option<i64> {
        if self.int {
            parse_canonical_i64(self.bytes)
        } else {
            None
        }
    }

    /// The Redis type name, as TYPE replies it.
    pub fn type_name(&self) -> &'static str {
        if self.hash { "hash" } else { "string" }
    }

    pub fn encoding(&self) -> Encoding {
        if self.int {
            Encoding::Int
        } else if self.bytes.len() <= EMBSTR_LEN_BYTES_MAX {
            Encoding::Embstr
        } else {
            Encoding::Raw
        }
    }

    /// The encoding's name, as OBJECT ENCODING replies it.
    pub fn encoding_name(&self) -> &'static str {
        if self.hash {
            return crate::hash::HashValue::decode_image(
                self.bytes,
                crate::hash::Limits::default(),
            )
            .map_or("hashtable", |hash| hash.encoding_name());
        }
        match self.encoding() {
            Encoding::Int => "int",
            Encoding::Embstr => "embstr",
            Encoding::Raw => "raw",
        }
    }

    /// An owned copy, to store elsewhere (COPY, RENAME, MOVE).
    pub fn to_value(&self) -> Value<'static> {
        if self.hash {
            return Value::Hash(Cow::Owned(self.bytes.to_vec()));
        }
        match self.as_int() {
            Some(n) => Value::Int(n),
            None => Value::owned(self.bytes.to_vec()),
        }
    }
}

/// The integer whose canonical decimal form is exactly `bytes`, if any.
pub fn parse_canonical_i64(bytes: &[u8]) -> Option<i64> {
    if bytes.is_empty() || bytes.len() > 20 {
        return None;
    }
    let (negative, digits) = match bytes {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, bytes),
    };
    // Rejects "+1", "01", "-0", "": those must stay strings to read back equal.
    if digits.is_empty() || (digits[0] == b'0' && (digits.len() > 1 || negative)) {
        return None;
    }
    let mut magnitude: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        magnitude = magnitude.checked_mul(10)?.checked_add((d - b'0') as u64)?;
    }
    if negative {
        (magnitude <= i64::MAX as u64 + 1).then(|| (magnitude as i64).wrapping_neg())
    } else {
        i64::try_from(magnitude).ok()
    }
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
            b"-",
        ] {
            assert_eq!(Value::from_bytes(s), Value::Str(Cow::Borrowed(s)), "{s:?}");
        }
    }

    #[test]
    fn encodings() {
        assert_eq!(ValueRef::new(b"42", true, false).encoding_name(), "int");
        assert_eq!(
            ValueRef::new(&[b'a'; 44], false, false).encoding_name(),
            "embstr"
        );
        assert_eq!(
            ValueRef::new(&[b'a'; 45], false, false).encoding_name(),
            "raw"
        );
        assert_eq!(ValueRef::new(b"-15", true, false).as_int(), Some(-15));
        assert_eq!(ValueRef::new(b"15", false, false).as_int(), None);
    }
}
