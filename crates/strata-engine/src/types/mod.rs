//! The value types: what a value is in RAM, how each type changes, and
//! the codecs its records and images use.
//!
//! - `value`: values going in ([`value::Value`]) and coming out
//!   ([`value::ValueRef`]); `collection`: the one trait every collection type
//!   implements (reading, changing and replaying a key are generic over it).
//! - `hash`, `list`, `set`, `zset`, `stream`: one module per type, each
//!   with its operations (apply, encode, decode) and image codec.
//! - `hll`: HyperLogLog's registers and estimate; `limits`: when
//!   collections change encoding; `decimal`: the canonical integer parser.

pub mod collection;
pub(crate) mod decimal;
pub mod hash;
pub mod hll;
pub mod limits;
pub mod list;
pub mod set;
pub mod stream;
pub mod value;
pub mod zset;
