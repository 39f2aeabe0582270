//! Reply encoding for RESP2 and RESP3.
//!
//! Handlers call the method for the RESP3 type they mean; the writer emits
//! it as is for a RESP3 connection and downgrades it for RESP2 exactly as
//! Redis does: a map becomes a flat array of 2×n elements, a set or push an
//! array, a double a bulk string, a boolean an integer 1/0, a verbatim string
//! or big number a bulk string, and null `$-1` (bulk) or `*-1` (array).

use bytes::{BufMut, BytesMut};

/// The protocol version a connection speaks (`HELLO 2` / `HELLO 3`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Protocol {
    #[default]
    Resp2,
    Resp3,
}

impl Protocol {
    pub fn version(self) -> i64 {
        match self {
            Protocol::Resp2 => 2,
            Protocol::Resp3 => 3,
        }
    }
}

/// Appends encoded replies to an output buffer.
pub struct ReplyWriter<'a> {
    out: &'a mut BytesMut,
    protocol: Protocol,
}

impl<'a> ReplyWriter<'a> {
    pub fn new(out: &'a mut BytesMut, protocol: Protocol) -> Self {
        ReplyWriter { out, protocol }
    }

    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// Switches encoding for the replies written from now on (HELLO answers
    /// in the protocol it selects).
    pub fn set_protocol(&mut self, protocol: Protocol) {
        self.protocol = protocol;
    }

    /// Bytes in the output buffer, including replies written before.
    pub fn len(&self) -> usize {
        self.out.len()
    }

    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    fn line(&mut self, prefix: u8, body: &[u8]) {
        self.out.reserve(body.len() + 3);
        self.out.put_u8(prefix);
        self.out.put_slice(body);
        self.out.put_slice(b"\r\n");
    }

    fn number_line(&mut self, prefix: u8, n: i64) {
        let mut digits = itoa::Buffer::new();
        self.line(prefix, digits.format(n).as_bytes());
    }

    /// Appends replies already encoded for this writer's protocol.
    pub fn encoded(&mut self, replies: &[u8]) {
        self.out.put_slice(replies);
    }

    pub fn ok(&mut self) {
        self.out.put_slice(b"+OK\r\n");
    }

    /// A simple string. Line breaks would break the framing, so they are
    /// replaced by spaces as Redis does.
    pub fn simple(&mut self, text: &str) {
        if text.contains(['\r', '\n']) {
            self.line(b'+', text.replace(['\r', '\n'], " ").as_bytes());
        } else {
            self.line(b'+', text.as_bytes());
        }
    }

    /// An error reply; `text` starts with its code (`ERR …`, `WRONGTYPE …`).
    pub fn error(&mut self, text: &str) {
        if text.contains(['\r', '\n']) {
            self.line(b'-', text.replace(['\r', '\n'], " ").as_bytes());
        } else {
            self.line(b'-', text.as_bytes());
        }
    }

    pub fn int(&mut self, n: i64) {
        self.number_line(b':', n);
    }

    pub fn bulk(&mut self, data: &[u8]) {
        self.number_line(b'$', data.len() as i64);
        self.out.reserve(data.len() + 2);
        self.out.put_slice(data);
        self.out.put_slice(b"\r\n");
    }

    /// The null bulk string: GET of a missing key.
    pub fn null_bulk(&mut self) {
        match self.protocol {
            Protocol::Resp2 => self.out.put_slice(b"$-1\r\n"),
            Protocol::Resp3 => self.out.put_slice(b"_\r\n"),
        }
    }

    /// The null array: e.g. a timed-out blocking pop.
    pub fn null_array(&mut self) {
        match self.protocol {
            Protocol::Resp2 => self.out.put_slice(b"*-1\r\n"),
            Protocol::Resp3 => self.out.put_slice(b"_\r\n"),
        }
    }

    pub fn array(&mut self, len: usize) {
        self.number_line(b'*', len as i64);
    }

    /// A map of `len` key/value pairs; the caller writes 2×len elements.
    pub fn map(&mut self, len: usize) {
        match self.protocol {
            Protocol::Resp2 => self.number_line(b'*', 2 * len as i64),
            Protocol::Resp3 => self.number_line(b'%', len as i64),
        }
    }

    pub fn set(&mut self, len: usize) {
        match self.protocol {
            Protocol::Resp2 => self.number_line(b'*', len as i64),
            Protocol::Resp3 => self.number_line(b'~', len as i64),
        }
    }

    pub fn push(&mut self, len: usize) {
        match self.protocol {
            Protocol::Resp2 => self.number_line(b'*', len as i64),
            Protocol::Resp3 => self.number_line(b'>', len as i64),
        }
    }

    /// RESP3 attributes (`|`): `len` key/value pairs the caller writes,
    /// then the reply they describe. Nothing in RESP2, where the caller
    /// must leave the pairs out too.
    pub fn attribute(&mut self, len: usize) {
        if self.protocol == Protocol::Resp3 {
            self.number_line(b'|', len as i64);
        }
    }

    pub fn double(&mut self, value: f64) {
        let text = format_double(value);
        match self.protocol {
            Protocol::Resp2 => self.bulk(text.as_bytes()),
            Protocol::Resp3 => self.line(b',', text.as_bytes()),
        }
    }

    /// A double the caller has formatted (a bulk string in RESP2), for
    /// replies whose text must be exactly Redis' (`%.17g` scores).
    pub fn double_text(&mut self, text: &[u8]) {
        match self.protocol {
            Protocol::Resp2 => self.bulk(text),
            Protocol::Resp3 => self.line(b',', text),
        }
    }

    pub fn boolean(&mut self, value: bool) {
        match self.protocol {
            Protocol::Resp2 => self.int(value as i64),
            Protocol::Resp3 => self.line(b'#', if value { b"t" } else { b"f" }),
        }
    }

    /// A verbatim string (`=`) with a three-letter format such as `txt`.
    pub fn verbatim(&mut self, format: &str, data: &[u8]) {
        debug_assert_eq!(format.len(), 3, "verbatim formats are three bytes");
        match self.protocol {
            Protocol::Resp2 => self.bulk(data),
            Protocol::Resp3 => {
                self.number_line(b'=', (data.len() + 4) as i64);
                self.out.put_slice(format.as_bytes());
                self.out.put_u8(b':');
                self.out.put_slice(data);
                self.out.put_slice(b"\r\n");
            }
        }
    }

    pub fn big_number(&mut self, digits: &str) {
        match self.protocol {
            Protocol::Resp2 => self.bulk(digits.as_bytes()),
            Protocol::Resp3 => self.line(b'(', digits.as_bytes()),
        }
    }
}

/// Shortest text that reads back as the same double, without exponent, as
/// Redis prints human-readable doubles; infinities as `inf`/`-inf`.
pub fn format_double(value: f64) -> String {
    if value.is_nan() {
        "nan".to_owned()
    } else if value.is_infinite() {
        if value > 0.0 { "inf" } else { "-inf" }.to_owned()
    } else {
        format!("{value}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(protocol: Protocol, f: impl FnOnce(&mut ReplyWriter)) -> Vec<u8> {
        let mut out = BytesMut::new();
        f(&mut ReplyWriter::new(&mut out, protocol));
        out.to_vec()
    }

    #[test]
    fn resp2_downgrades_like_redis() {
        let got = encode(Protocol::Resp2, |w| {
            w.map(1);
            w.bulk(b"k");
            w.double(1.5);
            w.null_bulk();
            w.null_array();
            w.boolean(true);
            w.set(0);
            w.push(1);
            w.verbatim("txt", b"hi");
            w.big_number("123");
        });
        assert_eq!(
            got,
            b"*2\r\n$1\r\nk\r\n$3\r\n1.5\r\n$-1\r\n*-1\r\n:1\r\n*0\r\n*1\r\n$2\r\nhi\r\n$3\r\n123\r\n"
        );
    }

    #[test]
    fn resp3_types() {
        let got = encode(Protocol::Resp3, |w| {
            w.map(1);
            w.bulk(b"k");
            w.double(f64::INFINITY);
            w.null_bulk();
            w.boolean(false);
            w.set(2);
            w.push(3);
            w.verbatim("txt", b"hi");
            w.big_number("123");
        });
        assert_eq!(
            got,
            b"%1\r\n$1\r\nk\r\n,inf\r\n_\r\n#f\r\n~2\r\n>3\r\n=6\r\ntxt:hi\r\n(123\r\n"
        );
    }

    #[test]
    fn line_breaks_in_errors_are_sanitized() {
        let got = encode(Protocol::Resp2, |w| w.error("ERR a\r\nb"));
        assert_eq!(got, b"-ERR a  b\r\n");
    }
}
