//! RESP, the Redis serialization protocol, for a server.
//!
//! Two halves, no I/O:
//!
//! - [`RequestParser`] turns the bytes a client sent into commands. It accepts
//!   RESP arrays of bulk strings (what client libraries send) and inline
//!   commands (what `redis-cli` in a pipe and telnet send), yields every
//!   complete command in the buffer one by one (pipelining), and never copies
//!   a multibulk payload: arguments are [`bytes::Bytes`] slices of the input.
//!   It enforces Redis' limits ([`Limits`]); a violation is a
//!   [`ProtocolError`] whose text is Redis' own, after which the connection
//!   must be closed.
//! - [`ReplyWriter`] encodes every RESP3 type into an output buffer and, for
//!   a RESP2 connection, downgrades them the way Redis does (map → flat
//!   array, null → `$-1` or `*-1`, double → bulk string, push → array, …).
//!
//! - [`reply::scan_reply`] is the client side: it finds where a server reply
//!   ends and whether it is an error or a nil, without allocating (used by
//!   `strata-bench`).
//!
//! The parser never panics on any input: `tests/parser_props.rs` checks that
//! with proptest over arbitrary and mutated byte streams.

mod parse;
pub mod reply;
mod write;

pub use parse::{Limits, ProtocolError, RequestParser, split_args};
pub use write::{Protocol, ReplyWriter, redis_double};
