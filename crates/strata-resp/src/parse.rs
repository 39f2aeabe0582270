//! Incremental request parser.
//!
//! The parser is stateful so that a large request arriving in many reads is
//! scanned once: for a multibulk request it remembers how many arguments it
//! has already located and where the next one starts. Nothing is consumed
//! from the buffer until a whole command is there; then the command's bytes
//! are split off, frozen, and every argument is a zero-copy slice of them.

use bytes::{Buf, Bytes, BytesMut};

/// Redis' protocol limits. Defaults are Redis 7's.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// `proto-max-bulk-len`: the largest bulk string a client may send.
    pub bulk_len_bytes_max: u64,
    /// The largest number of arguments in one multibulk request.
    pub multibulk_len_max: u64,
    /// The longest inline request, and the longest `*`/`$` header line.
    pub inline_len_bytes_max: usize,
    /// The client must still authenticate: Redis then allows at most
    /// [`UNAUTHENTICATED_ARGS_MAX`] arguments of at most
    /// [`UNAUTHENTICATED_BULK_BYTES_MAX`] bytes, so an unknown client cannot
    /// make the server buffer much.
    pub auth_required: bool,
}

/// Arguments a client that must still authenticate may send in one request.
pub(crate) const UNAUTHENTICATED_ARGS_MAX: i64 = 10;
/// Bytes of one argument such a client may send.
pub(crate) const UNAUTHENTICATED_BULK_BYTES_MAX: usize = 16 * 1024;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            bulk_len_bytes_max: 512 * 1024 * 1024,
            // Redis 7: anything up to INT_MAX. The memory this can take is
            // bounded by the query buffer limit, which counts the located
            // arguments too ([`RequestParser::buffered_bytes`]).
            multibulk_len_max: i32::MAX as u64,
            inline_len_bytes_max: 64 * 1024,
            auth_required: false,
        }
    }
}

/// A request that breaks the protocol. The text is what Redis replies after
/// `-ERR Protocol error: `; the connection must be closed afterwards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Protocol error: {}", self.0)
    }
}

impl std::error::Error for ProtocolError {}

/// Where the parser stands inside a multibulk request that is not complete.
#[derive(Debug, Default)]
struct Multibulk {
    /// Number of arguments announced by the `*<n>` header.
    arg_count: usize,
    /// Offset of the next unparsed byte.
    pos: usize,
}

#[derive(Debug, Default)]
pub struct RequestParser {
    multibulk: Option<Multibulk>,
    /// Byte ranges (start, end) of the current request's arguments located
    /// so far, relative to the start of the buffer; kept between requests
    /// (up to [`ARGS_RETAINED_MAX`]) so that parsing a request allocates
    /// nothing once the caller recycles argument vectors.
    ranges: Vec<(usize, usize)>,
    /// An argument vector handed back by the caller ([`RequestParser::recycle`])
    /// for the next request to fill.
    spare: Vec<Bytes>,
}

/// Argument ranges whose room the parser keeps between requests.
const ARGS_RETAINED_MAX: usize = 16;

/// Upper bound for the argument vector preallocated from an untrusted `*<n>`.
const ARGS_PREALLOC_MAX: usize = 1024;

impl RequestParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// True while part of a request has been seen but not all of it.
    pub fn in_request(&self) -> bool {
        self.multibulk.is_some()
    }

    /// Parses the next complete command from `buf`, consuming its bytes.
    ///
    /// `Ok(None)` means more bytes are needed (nothing was consumed that
    /// belongs to an incomplete command). Empty requests (`*0`, a blank
    /// inline line) are skipped as Redis does.
    pub fn next(
        &mut self,
        buf: &mut BytesMut,
        limits: &Limits,
    ) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        loop {
            if self.multibulk.is_none() {
                let Some(&first) = buf.first() else {
                    return Ok(None);
                };
                if first != b'*' {
                    match parse_inline(buf, limits)? {
                        InlineOutcome::Incomplete => return Ok(None),
                        InlineOutcome::Empty => continue,
                        InlineOutcome::Command(args) => return Ok(Some(args)),
                    }
                }
                let Some((count, header_len)) = read_header(buf, 0, limits)
                    .map_err(|_| ProtocolError("too big mbulk count string".into()))?
                else {
                    return Ok(None);
                };
                let count = count.map_err(|_| ProtocolError("invalid multibulk length".into()))?;
                if count > limits.multibulk_len_max as i64 {
                    return Err(ProtocolError("invalid multibulk length".into()));
                }
                if limits.auth_required && count > UNAUTHENTICATED_ARGS_MAX {
                    return Err(ProtocolError("unauthenticated multibulk length".into()));
                }
                if count <= 0 {
                    buf.advance(header_len);
                    continue;
                }
                let count = count as usize;
                self.ranges.clear();
                self.ranges.reserve(count.min(ARGS_PREALLOC_MAX));
                self.multibulk = Some(Multibulk {
                    arg_count: count,
                    pos: header_len,
                });
            }
            return self.continue_multibulk(buf, limits);
        }
    }

    fn continue_multibulk(
        &mut self,
        buf: &mut BytesMut,
        limits: &Limits,
    ) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        let mb = self
            .multibulk
            .as_mut()
            .expect("called inside a multibulk request");
        while self.ranges.len() < mb.arg_count {
            let Some(&marker) = buf.get(mb.pos) else {
                return Ok(None);
            };
            if marker != b'$' {
                return Err(ProtocolError(format!(
                    "expected '$', got '{}'",
                    marker as char
                )));
            }
            let Some((len, header_len)) = read_header(buf, mb.pos, limits)
                .map_err(|_| ProtocolError("too big bulk count string".into()))?
            else {
                return Ok(None);
            };
            let len = match len {
                Ok(len) if len >= 0 && len as u64 <= limits.bulk_len_bytes_max => len as usize,
                _ => return Err(ProtocolError("invalid bulk length".into())),
            };
            if limits.auth_required && len > UNAUTHENTICATED_BULK_BYTES_MAX {
                return Err(ProtocolError("unauthenticated bulk length".into()));
            }
            let start = mb.pos + header_len;
            // The payload is followed by "\r\n"; like Redis we skip those two
            // bytes without insisting on their value.
            let end = start.saturating_add(len);
            if buf.len() < end.saturating_add(2) {
                return Ok(None);
            }
            self.ranges.push((start, end));
            mb.pos = end + 2;
        }
        let mb = self.multibulk.take().expect("checked above");
        let frame = buf.split_to(mb.pos).freeze();
        let mut args = std::mem::take(&mut self.spare);
        args.extend(
            self.ranges
                .iter()
                .map(|&(start, end)| frame.slice(start..end)),
        );
        if self.ranges.capacity() > ARGS_RETAINED_MAX {
            self.ranges = Vec::new();
        }
        Ok(Some(args))
    }

    /// Takes back a request's argument vector once the caller is done with
    /// it, so the next request reuses its room instead of allocating.
    pub fn recycle(&mut self, mut args: Vec<Bytes>) {
        if args.capacity() <= ARGS_RETAINED_MAX {
            args.clear();
            self.spare = args;
        }
    }

    /// Bytes the parser holds for the request in progress (where its
    /// arguments are): with the input buffer, what a query buffer limit
    /// must count, since a request of many tiny arguments costs more here
    /// than in the buffer.
    pub fn buffered_bytes(&self) -> usize {
        self.multibulk.as_ref().map_or(0, |_| {
            self.ranges.capacity() * std::mem::size_of::<(usize, usize)>()
        })
    }

    /// How many more bytes the current request needs at least, when known;
    /// lets the caller reserve a large bulk string in one allocation.
    pub fn bytes_needed_hint(&self, buf: &BytesMut) -> usize {
        let Some(mb) = &self.multibulk else { return 0 };
        let Some(&b'$') = buf.get(mb.pos) else {
            return 0;
        };
        match read_header(buf, mb.pos, &Limits::default()) {
            Ok(Some((Ok(len), header_len))) if len > 0 => (mb.pos + header_len)
                .saturating_add(len as usize)
                .saturating_add(2)
                .saturating_sub(buf.len()),
            _ => 0,
        }
    }
}

struct HeaderTooLong;

/// Reads a `*<n>\r\n` or `$<n>\r\n` header starting at `at`. Returns the
/// parsed number (or an error if it is not one) and the header's length.
#[allow(clippy::type_complexity)]
fn read_header(
    buf: &[u8],
    at: usize,
    limits: &Limits,
) -> Result<Option<(Result<i64, ()>, usize)>, HeaderTooLong> {
    let rest = &buf[at..];
    let Some(cr) = memchr::memchr(b'\r', rest) else {
        if rest.len() > limits.inline_len_bytes_max {
            return Err(HeaderTooLong);
        }
        return Ok(None);
    };
    if cr > limits.inline_len_bytes_max {
        return Err(HeaderTooLong);
    }
    if rest.len() < cr + 2 {
        return Ok(None);
    }
    Ok(Some((parse_i64(&rest[1..cr]), cr + 2)))
}

/// Strict decimal integer, as Redis' `string2ll`: optional '-', no '+', no
/// leading zeros, no spaces, fits in i64.
pub(crate) fn parse_i64(digits: &[u8]) -> Result<i64, ()> {
    let (negative, body) = match digits {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, digits),
    };
    if body.is_empty() || body.len() > 20 || (body[0] == b'0' && (body.len() > 1 || negative)) {
        return Err(());
    }
    let mut value: u64 = 0;
    for &d in body {
        if !d.is_ascii_digit() {
            return Err(());
        }
        value = value
            .checked_mul(10)
            .ok_or(())?
            .checked_add((d - b'0') as u64)
            .ok_or(())?;
    }
    if negative {
        if value > i64::MAX as u64 + 1 {
            return Err(());
        }
        Ok((value as i64).wrapping_neg())
    } else {
        i64::try_from(value).map_err(|_| ())
    }
}

enum InlineOutcome {
    Incomplete,
    Empty,
    Command(Vec<Bytes>),
}

fn parse_inline(buf: &mut BytesMut, limits: &Limits) -> Result<InlineOutcome, ProtocolError> {
    let Some(newline) = memchr::memchr(b'\n', buf) else {
        if buf.len() > limits.inline_len_bytes_max {
            return Err(ProtocolError("too big inline request".into()));
        }
        return Ok(InlineOutcome::Incomplete);
    };
    if newline > limits.inline_len_bytes_max {
        return Err(ProtocolError("too big inline request".into()));
    }
    let line = buf.split_to(newline + 1);
    let mut line = &line[..newline];
    if let [rest @ .., b'\r'] = line {
        line = rest;
    }
    let args =
        split_args(line).ok_or_else(|| ProtocolError("unbalanced quotes in request".into()))?;
    if args.is_empty() {
        return Ok(InlineOutcome::Empty);
    }
    Ok(InlineOutcome::Command(args))
}

/// Splits an inline request into arguments with Redis' quoting rules
/// (`sdssplitargs`): whitespace separates, "double quotes" understand
/// `\n \r \t \b \a \\ \" \xHH`, 'single quotes' understand `\'`, and a
/// closing quote must be followed by whitespace or the end. `None` for
/// unbalanced quotes. The same rules apply to redis.conf lines.
pub fn split_args(line: &[u8]) -> Option<Vec<Bytes>> {
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= line.len() {
            return Some(args);
        }
        let mut current = Vec::new();
        let mut in_double = false;
        let mut in_single = false;
        loop {
            if in_double {
                let c = *line.get(i)?;
                if c == b'\\'
                    && i + 3 < line.len()
                    && line[i + 1] == b'x'
                    && let (Some(h), Some(l)) = (hex(line[i + 2]), hex(line[i + 3]))
                {
                    current.push(h * 16 + l);
                    i += 4;
                    continue;
                }
                if c == b'\\' && i + 1 < line.len() {
                    current.push(match line[i + 1] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                    i += 2;
                } else if c == b'"' {
                    if i + 1 < line.len() && !line[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    current.push(c);
                    i += 1;
                }
            } else if in_single {
                let c = *line.get(i)?;
                if c == b'\\' && i + 1 < line.len() && line[i + 1] == b'\'' {
                    current.push(b'\'');
                    i += 2;
                } else if c == b'\'' {
                    if i + 1 < line.len() && !line[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    current.push(c);
                    i += 1;
                }
            } else {
                match line.get(i) {
                    None => break,
                    Some(c) if c.is_ascii_whitespace() => break,
                    Some(b'"') => in_double = true,
                    Some(b'\'') => in_single = true,
                    Some(&c) => current.push(c),
                }
                i += 1;
            }
        }
        args.push(Bytes::from(current));
    }
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recycled_argument_vector_comes_back_empty_and_refilled() {
        let mut parser = RequestParser::new();
        let mut buf = BytesMut::new();
        buf.extend_from_slice(
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
        );
        let limits = Limits::default();
        let first = parser.next(&mut buf, &limits).unwrap().unwrap();
        assert_eq!(first.len(), 3);
        let room = first.as_ptr();
        parser.recycle(first);
        let second = parser.next(&mut buf, &limits).unwrap().unwrap();
        assert_eq!(
            second,
            vec![Bytes::from_static(b"GET"), Bytes::from_static(b"k")]
        );
        assert_eq!(second.as_ptr(), room, "the recycled vector was reused");
        // A vector too big to keep is dropped, not retained.
        parser.recycle(Vec::with_capacity(ARGS_RETAINED_MAX + 1));
        assert_eq!(parser.spare.capacity(), 0);
    }

    fn parse_all(input: &[u8]) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
        let mut parser = RequestParser::new();
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        while let Some(cmd) = parser.next(&mut buf, &Limits::default())? {
            out.push(cmd.iter().map(|a| a.to_vec()).collect());
        }
        Ok(out)
    }

    fn cmd(args: &[&str]) -> Vec<Vec<u8>> {
        args.iter().map(|a| a.as_bytes().to_vec()).collect()
    }

    #[test]
    fn multibulk_pipeline() {
        let got = parse_all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n").unwrap();
        assert_eq!(got, vec![cmd(&["GET", "k"]), cmd(&["PING"])]);
    }

    #[test]
    fn byte_by_byte_equals_all_at_once() {
        let input = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nva\r\nl\r\nPING\r\n";
        let mut parser = RequestParser::new();
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for &b in input.iter() {
            buf.extend_from_slice(&[b]);
            while let Some(c) = parser.next(&mut buf, &Limits::default()).unwrap() {
                got.push(c.iter().map(|a| a.to_vec()).collect::<Vec<_>>());
            }
        }
        assert_eq!(got, vec![cmd(&["SET", "key", "va\r\nl"]), cmd(&["PING"])]);
    }

    #[test]
    fn inline_with_quotes() {
        let got = parse_all(b"set \"a b\" 'c\\'d' \"\\x41\\n\"\r\n\r\nping\n").unwrap();
        assert_eq!(
            got,
            vec![cmd(&["set", "a b", "c'd", "A\n"]), cmd(&["ping"])]
        );
        assert_eq!(
            parse_all(b"set \"ab\r\n"),
            Err(ProtocolError("unbalanced quotes in request".into()))
        );
        assert_eq!(
            parse_all(b"set \"a\"b\r\n"),
            Err(ProtocolError("unbalanced quotes in request".into()))
        );
    }

    #[test]
    fn empty_and_negative_multibulk_are_skipped() {
        assert_eq!(
            parse_all(b"*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n").unwrap(),
            vec![cmd(&["PING"])]
        );
    }

    #[test]
    fn a_client_that_must_authenticate_sends_little() {
        let limits = Limits {
            auth_required: true,
            ..Limits::default()
        };
        let parse = |input: &[u8]| RequestParser::new().next(&mut BytesMut::from(input), &limits);
        assert_eq!(
            parse(b"*11\r\n"),
            Err(ProtocolError("unauthenticated multibulk length".into()))
        );
        assert_eq!(
            parse(b"*2\r\n$4\r\nAUTH\r\n$16385\r\n"),
            Err(ProtocolError("unauthenticated bulk length".into()))
        );
        let auth = parse(b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n").unwrap();
        assert_eq!(auth.map(|args| args.len()), Some(2));
    }

    #[test]
    fn located_arguments_count_as_buffered() {
        let mut parser = RequestParser::new();
        let mut buf = BytesMut::from(&b"*1000\r\n"[..]);
        for _ in 0..500 {
            buf.extend_from_slice(b"$0\r\n\r\n");
        }
        assert_eq!(parser.next(&mut buf, &Limits::default()), Ok(None));
        assert!(parser.buffered_bytes() >= 500 * 16);
    }

    #[test]
    fn limits_give_redis_messages() {
        assert_eq!(
            parse_all(b"*2147483648\r\n"),
            Err(ProtocolError("invalid multibulk length".into()))
        );
        // Redis 7 accepts any count up to INT_MAX.
        assert_eq!(parse_all(b"*2000000\r\n"), Ok(vec![]));
        assert_eq!(
            parse_all(b"*x\r\n"),
            Err(ProtocolError("invalid multibulk length".into()))
        );
        assert_eq!(
            parse_all(b"*1\r\n$536870913\r\n"),
            Err(ProtocolError("invalid bulk length".into()))
        );
        assert_eq!(
            parse_all(b"*1\r\n$-1\r\n"),
            Err(ProtocolError("invalid bulk length".into()))
        );
        assert_eq!(
            parse_all(b"*1\r\n:1\r\n"),
            Err(ProtocolError("expected '$', got ':'".into()))
        );
        let long_inline = vec![b'a'; 64 * 1024 + 1];
        assert_eq!(
            parse_all(&long_inline),
            Err(ProtocolError("too big inline request".into()))
        );
        let mut long_header = b"*1".to_vec();
        long_header.extend(std::iter::repeat_n(b'1', 64 * 1024 + 1));
        assert_eq!(
            parse_all(&long_header),
            Err(ProtocolError("too big mbulk count string".into()))
        );
    }

    #[test]
    fn incomplete_consumes_nothing() {
        let mut parser = RequestParser::new();
        let mut buf = BytesMut::from(&b"*2\r\n$3\r\nGET\r\n$10\r\nabc"[..]);
        assert!(parser.next(&mut buf, &Limits::default()).unwrap().is_none());
        assert_eq!(buf.len(), 21);
        assert_eq!(parser.bytes_needed_hint(&buf), 9);
    }

    #[test]
    fn integers_are_strict() {
        assert_eq!(parse_i64(b"0"), Ok(0));
        assert_eq!(parse_i64(b"-9223372036854775808"), Ok(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775808"), Err(()));
        assert_eq!(parse_i64(b"01"), Err(()));
        assert_eq!(parse_i64(b"+1"), Err(()));
        assert_eq!(parse_i64(b"-0"), Err(()));
        assert_eq!(parse_i64(b""), Err(()));
    }
}
