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
        let text = redis_double(value);
        match self.protocol {
            Protocol::Resp2 => self.bulk(text.as_bytes()),
            Protocol::Resp3 => self.line(b',', text.as_bytes()),
        }
    }

    /// A double the caller has formatted (a bulk string in RESP2).
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

/// A double as Redis 7.2+ prints it (its `d2string`): `nan`, `inf`,
/// `-inf`, `0`, `-0`; an integral value within ±(2^63 - 1)/2 as an
/// integer; any other as its shortest round-trip digits, written out while
/// the exponent is small (an integer with up to 7 zeros past its digits, a
/// fraction down to 6 zeros after the point, or with an exponent under 4)
/// and in scientific notation beyond (`1.5e+20`, `1e-7`, `1.23456e-4`).
/// (Redis finds the digits with Grisu2, which for a few values, 1e23 among
/// them, gives a longer digit string than the shortest used here.)
pub fn redis_double(value: f64) -> String {
    if value.is_nan() {
        return "nan".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    if value == 0.0 {
        return if value.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    let half = (i64::MAX / 2) as f64;
    if (-half..=half).contains(&value) && value.fract() == 0.0 {
        return (value as i64).to_string();
    }
    // Shortest digits: `value` = digits × 10^(exponent - digits + 1).
    let scientific = format!("{:e}", value.abs());
    let (mantissa, exponent) = scientific.split_once('e').expect("`{:e}` has an exponent");
    let exponent: i32 = exponent.parse().expect("`{:e}`'s exponent is an integer");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let count = digits.len() as i32;
    let shift = exponent - (count - 1);
    let mut out = String::with_capacity(32);
    if value < 0.0 {
        out.push('-');
    }
    if shift >= 0 && exponent < count + 7 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', shift as usize));
    } else if shift < 0 && (shift > -7 || exponent.abs() < 4) {
        let whole = count + shift;
        if whole <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-whole) as usize));
            out.push_str(&digits);
        } else {
            out.push_str(&digits[..whole as usize]);
            out.push('.');
            out.push_str(&digits[whole as usize..]);
        }
    } else {
        out.push_str(&digits[..1]);
        if count > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exponent < 0 { '-' } else { '+' });
        out.push_str(&exponent.abs().to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What redis-server 7.4.1 answers to ZSCORE after ZADD of each value.
    #[test]
    fn doubles_print_as_redis_7_4() {
        let cases = [
            (1.1, "1.1"),
            (0.1, "0.1"),
            (0.0001, "0.0001"),
            (0.00001, "0.00001"),
            (1e-7, "1e-7"),
            (1.5e-7, "1.5e-7"),
            (123456789.123, "123456789.123"),
            (1.5e20, "1.5e+20"),
            (1e19, "1e+19"),
            (4611686018427387904.0, "4611686018427387904"),
            (9007199254740993.0, "9007199254740992"),
            (1e15, "1000000000000000"),
            (1.25e16, "12500000000000000"),
            (-2.5e-10, "-2.5e-10"),
            (1e300, "1e+300"),
            (f64::MAX, "1.7976931348623157e+308"),
            (2.2250738585072014e-308, "2.2250738585072014e-308"),
            (5e-324, "5e-324"),
            (123e-20, "1.23e-18"),
            (0.000123456, "1.23456e-4"),
            (1234567.0001, "1234567.0001"),
            (-0.000001, "-0.000001"),
            (-0.0, "-0"),
            (f64::NEG_INFINITY, "-inf"),
            (123456789.12345679, "1.2345678912345679e+8"),
            (1234567.1234567, "1.2345671234567e+6"),
            (0.1234567891234567, "0.1234567891234567"),
            (1234567890.5, "1234567890.5"),
        ];
        for (value, text) in cases {
            assert_eq!(redis_double(value), text, "{value:e}");
        }
    }

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
