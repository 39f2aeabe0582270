//! Values as commands hand them to the keyspace ([`Value`]) and read them
//! back ([`ValueRef`]).
//!
//! A string whose bytes are the canonical decimal form of an `i64` is
//! flagged as Redis' "int" encoding (OBJECT ENCODING says `int`, INCR takes
//! a fast path); it is still stored as its text, so GET never formats.
//! Values never borrow from request buffers: the keyspace stores its own
//! exact-size copy, so a stored value cannot keep a pipelined batch alive.

use std::borrow::Cow;

pub use crate::types::decimal::parse_canonical_i64;
use crate::types::hash::HashRef;
use crate::types::list::ListValue;
use crate::types::set::SetValue;
use crate::types::stream::StreamValue;
use crate::types::zset::ZSetValue;

/// Strings up to this length report encoding `embstr`, as in Redis.
const EMBSTR_LEN_BYTES_MAX: usize = 44;

/// A value to store. It may borrow its bytes (from a request, say): the
/// keyspace copies them once, straight into the entry's allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value<'a> {
    Int(i64),
    Str(Cow<'a, [u8]>),
    /// A hash, as its image (`hash` module), which the caller has built
    /// or checked ([`crate::types::hash::check_image`]).
    Hash(Cow<'a, [u8]>),
    /// A list, as its image (`list` module), which the caller has built
    /// or checked ([`crate::types::list::check_image`]).
    List(Cow<'a, [u8]>),
    /// A set, as its image (`set` module), built or checked.
    Set(Cow<'a, [u8]>),
    /// A sorted set, as its image (`zset` module), built or checked.
    ZSet(Cow<'a, [u8]>),
    /// A stream, as its image (`stream` module), built or checked.
    Stream(Cow<'a, [u8]>),
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

    /// Bytes of this value's image (a SET record's payload).
    pub fn image_len(&self) -> usize {
        match self {
            Value::Int(n) => itoa::Buffer::new().format(*n).len(),
            Value::Str(bytes)
            | Value::Hash(bytes)
            | Value::List(bytes)
            | Value::Set(bytes)
            | Value::ZSet(bytes)
            | Value::Stream(bytes) => bytes.len(),
        }
    }
}

/// The type of a value, as TYPE names it: known from the entry without
/// the value (so TYPE and WRONGTYPE never read the disk), and written in
/// SET and checkpoint records as `record::VALUE_*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueType {
    String,
    Hash,
    List,
    Set,
    ZSet,
    Stream,
}

impl ValueType {
    /// The name TYPE replies.
    pub fn name(self) -> &'static str {
        match self {
            ValueType::String => "string",
            ValueType::Hash => "hash",
            ValueType::List => "list",
            ValueType::Set => "set",
            ValueType::ZSet => "zset",
            ValueType::Stream => "stream",
        }
    }

    /// The record `value_type` byte of this type's images.
    pub(crate) fn record_code(self) -> u8 {
        match self {
            ValueType::String => crate::storage::record::VALUE_STRING,
            ValueType::Hash => crate::storage::record::VALUE_HASH,
            ValueType::List => crate::storage::record::VALUE_LIST,
            ValueType::Set => crate::storage::record::VALUE_SET,
            ValueType::ZSet => crate::storage::record::VALUE_ZSET,
            ValueType::Stream => crate::storage::record::VALUE_STREAM,
        }
    }

    /// The type of a record's `value_type` byte, if this build knows it.
    pub fn from_record_code(code: u8) -> Option<ValueType> {
        match code {
            crate::storage::record::VALUE_STRING => Some(ValueType::String),
            crate::storage::record::VALUE_HASH => Some(ValueType::Hash),
            crate::storage::record::VALUE_LIST => Some(ValueType::List),
            crate::storage::record::VALUE_SET => Some(ValueType::Set),
            crate::storage::record::VALUE_ZSET => Some(ValueType::ZSet),
            crate::storage::record::VALUE_STREAM => Some(ValueType::Stream),
            _ => None,
        }
    }
}

impl ValueType {
    /// The value of this collection type whose image is `image`, checked
    /// (a damaged image is an error naming the type); `None` for strings,
    /// whose images are their bytes.
    pub fn checked_image(self, image: &[u8]) -> Option<Result<Value<'_>, String>> {
        let ok = match self {
            ValueType::String => return None,
            ValueType::Hash => crate::types::hash::check_image(image).is_ok(),
            ValueType::List => crate::types::list::check_image(image).is_ok(),
            ValueType::Set => crate::types::set::check_image(image).is_ok(),
            ValueType::ZSet => crate::types::zset::check_image(image).is_ok(),
            ValueType::Stream => crate::types::stream::check_image(image).is_ok(),
        };
        if !ok {
            return Some(Err(format!("a {} image that does not decode", self.name())));
        }
        let image = Cow::Borrowed(image);
        Some(Ok(match self {
            ValueType::Hash => Value::Hash(image),
            ValueType::List => Value::List(image),
            ValueType::Set => Value::Set(image),
            ValueType::ZSet => Value::ZSet(image),
            ValueType::Stream => Value::Stream(image),
            ValueType::String => unreachable!("returned above"),
        }))
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
#[derive(Clone, Copy)]
pub enum ValueRef<'a> {
    /// A string; `int` when its bytes are an integer's canonical text.
    Str {
        bytes: &'a [u8],
        int: bool,
    },
    Hash(HashRef<'a>),
    List(&'a ListValue),
    Set(&'a SetValue),
    ZSet(&'a ZSetValue),
    Stream(&'a StreamValue),
}

impl std::fmt::Debug for ValueRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ValueRef::Str { bytes, int } => f
                .debug_struct("Str")
                .field("bytes", &String::from_utf8_lossy(bytes))
                .field("int", int)
                .finish(),
            ValueRef::Hash(hash) => write!(f, "Hash({} fields)", hash.len()),
            ValueRef::List(list) => write!(f, "List({} elements)", list.len()),
            ValueRef::Set(set) => write!(f, "Set({} members)", set.len()),
            ValueRef::ZSet(zset) => write!(f, "ZSet({} members)", zset.len()),
            ValueRef::Stream(stream) => write!(f, "Stream({} entries)", stream.len()),
        }
    }
}

impl<'a> ValueRef<'a> {
    /// The hash, when this is one.
    pub fn hash(&self) -> Option<HashRef<'a>> {
        match self {
            ValueRef::Hash(hash) => Some(*hash),
            _ => None,
        }
    }

    /// The list, when this is one.
    pub fn list(&self) -> Option<&'a ListValue> {
        match self {
            ValueRef::List(list) => Some(list),
            _ => None,
        }
    }

    /// The set, when this is one.
    pub fn set(&self) -> Option<&'a SetValue> {
        match self {
            ValueRef::Set(set) => Some(set),
            _ => None,
        }
    }

    /// The sorted set, when this is one.
    pub fn zset(&self) -> Option<&'a ZSetValue> {
        match self {
            ValueRef::ZSet(zset) => Some(zset),
            _ => None,
        }
    }

    /// The stream, when this is one.
    pub fn stream(&self) -> Option<&'a StreamValue> {
        match self {
            ValueRef::Stream(stream) => Some(stream),
            _ => None,
        }
    }

    /// Whether this is a list, set or sorted set with nothing in it (which
    /// a command deletes before it returns).
    pub(crate) fn is_empty_collection(&self) -> bool {
        match self {
            ValueRef::List(list) => list.is_empty(),
            ValueRef::Set(set) => set.is_empty(),
            ValueRef::ZSet(zset) => zset.is_empty(),
            _ => false,
        }
    }

    /// The string's bytes; empty for another type (string commands have
    /// answered WRONGTYPE before they read a value).
    pub fn as_bytes(&self) -> &'a [u8] {
        match self {
            ValueRef::Str { bytes, .. } => bytes,
            _ => &[],
        }
    }

    pub fn len(&self) -> usize {
        self.as_bytes().len()
    }

    pub fn is_empty(&self) -> bool {
        self.as_bytes().is_empty()
    }

    /// The integer, when the value is int-encoded.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            ValueRef::Str { bytes, int: true } => parse_canonical_i64(bytes),
            _ => None,
        }
    }

    /// The value's type.
    pub fn value_type(&self) -> ValueType {
        match self {
            ValueRef::Str { .. } => ValueType::String,
            ValueRef::Hash(_) => ValueType::Hash,
            ValueRef::List(_) => ValueType::List,
            ValueRef::Set(_) => ValueType::Set,
            ValueRef::ZSet(_) => ValueType::ZSet,
            ValueRef::Stream(_) => ValueType::Stream,
        }
    }

    /// The Redis type name, as TYPE replies it.
    pub fn type_name(&self) -> &'static str {
        self.value_type().name()
    }

    /// A string's encoding (a hash has none of these).
    pub fn encoding(&self) -> Encoding {
        match self {
            ValueRef::Str { int: true, .. } => Encoding::Int,
            ValueRef::Str { bytes, .. } if bytes.len() <= EMBSTR_LEN_BYTES_MAX => Encoding::Embstr,
            _ => Encoding::Raw,
        }
    }

    /// For a hash, set or sorted set kept in a hash table, the elements the
    /// table holds before it grows and the elements it holds (`None`
    /// otherwise): DEBUG HTSTATS-KEY.
    pub fn table_shape(&self) -> Option<(usize, usize)> {
        match self {
            ValueRef::Hash(HashRef::Value(hash)) => Some((hash.table_capacity()?, hash.len())),
            ValueRef::Set(set) => Some((set.table_capacity()?, set.len())),
            ValueRef::ZSet(zset) => Some((zset.table_capacity()?, zset.len())),
            _ => None,
        }
    }

    /// The encoding's name, as OBJECT ENCODING replies it.
    pub fn encoding_name(&self) -> &'static str {
        match self {
            ValueRef::Hash(hash) => return hash.encoding_name(),
            ValueRef::List(list) => return list.encoding_name(),
            ValueRef::Set(set) => return set.encoding_name(),
            ValueRef::ZSet(zset) => return zset.encoding_name(),
            ValueRef::Stream(stream) => return stream.encoding_name(),
            ValueRef::Str { .. } => {}
        }
        match self.encoding() {
            Encoding::Int => "int",
            Encoding::Embstr => "embstr",
            Encoding::Raw => "raw",
        }
    }

    /// An owned copy, to store elsewhere (COPY, RENAME, MOVE).
    pub fn to_value(&self) -> Value<'static> {
        match self {
            ValueRef::Hash(hash) => {
                let mut image = Vec::new();
                hash.encode_image(&mut image);
                Value::Hash(Cow::Owned(image))
            }
            ValueRef::List(list) => {
                let mut image = Vec::with_capacity(list.image_len());
                list.encode_image(&mut image);
                Value::List(Cow::Owned(image))
            }
            ValueRef::Set(set) => {
                let mut image = Vec::with_capacity(set.image_len());
                set.encode_image(&mut image);
                Value::Set(Cow::Owned(image))
            }
            ValueRef::ZSet(zset) => {
                let mut image = Vec::with_capacity(zset.image_len());
                zset.encode_image(&mut image);
                Value::ZSet(Cow::Owned(image))
            }
            ValueRef::Stream(stream) => Value::Stream(Cow::Owned(stream.image())),
            ValueRef::Str { bytes, .. } => match self.as_int() {
                Some(n) => Value::Int(n),
                None => Value::owned(bytes.to_vec()),
            },
        }
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
        let string = |bytes, int| ValueRef::Str { bytes, int };
        assert_eq!(string(b"42", true).encoding_name(), "int");
        assert_eq!(string(&[b'a'; 44], false).encoding_name(), "embstr");
        assert_eq!(string(&[b'a'; 45], false).encoding_name(), "raw");
        assert_eq!(string(b"-15", true).as_int(), Some(-15));
        assert_eq!(string(b"15", false).as_int(), None);
    }
}
