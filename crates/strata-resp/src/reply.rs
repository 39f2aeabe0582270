//! Scanning server replies, for clients (the `strata-bench` load generator).
//!
//! A load generator needs to know where each reply ends and whether it was
//! an error or a nil, not to build it: [`scan_reply`] walks one complete
//! reply (nested aggregates included) without allocating, so a client can
//! keep up with a server answering millions of requests per second.

use crate::ProtocolError;

/// What a complete reply was, as far as a benchmark cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyKind {
    /// `-ERR …`: the byte range of the error text within the scanned buffer.
    Error { start: usize, end: usize },
    /// `$-1`, `*-1` or RESP3 `_`: e.g. GET of a missing key.
    Null,
    /// Anything else.
    Value,
}

/// Deepest aggregate nesting accepted from a server.
const NESTING_DEPTH_MAX: usize = 64;

/// Scans the reply at the start of `buf`. Returns its length and kind, or
/// `None` if it is not complete yet.
pub fn scan_reply(buf: &[u8]) -> Result<Option<(usize, ReplyKind)>, ProtocolError> {
    scan_at(buf, 0, 0)
}

fn line_end(buf: &[u8], from: usize) -> Option<usize> {
    memchr::memchr(b'\n', &buf[from..]).map(|i| from + i)
}

fn number(buf: &[u8], start: usize, end: usize) -> Result<i64, ProtocolError> {
    let digits = &buf[start..end];
    let digits = digits.strip_suffix(b"\r").unwrap_or(digits);
    std::str::from_utf8(digits)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            ProtocolError(format!(
                "invalid length in reply: {:?}",
                String::from_utf8_lossy(digits)
            ))
        })
}

fn scan_at(
    buf: &[u8],
    at: usize,
    depth: usize,
) -> Result<Option<(usize, ReplyKind)>, ProtocolError> {
    if depth > NESTING_DEPTH_MAX {
        return Err(ProtocolError("reply nested too deeply".into()));
    }
    let Some(&kind) = buf.get(at) else {
        return Ok(None);
    };
    let Some(eol) = line_end(buf, at) else {
        return Ok(None);
    };
    let after_line = eol + 1;
    match kind {
        b'+' | b':' | b',' | b'#' | b'(' => Ok(Some((after_line - at, ReplyKind::Value))),
        b'_' => Ok(Some((after_line - at, ReplyKind::Null))),
        b'-' => {
            let end = if eol > at + 1 && buf[eol - 1] == b'\r' {
                eol - 1
            } else {
                eol
            };
            Ok(Some((
                after_line - at,
                ReplyKind::Error { start: at + 1, end },
            )))
        }
        b'$' | b'=' | b'!' => {
            let len = number(buf, at + 1, eol)?;
            if len < 0 {
                return Ok(Some((after_line - at, ReplyKind::Null)));
            }
            let end = after_line.saturating_add(len as usize).saturating_add(2);
            if buf.len() < end {
                return Ok(None);
            }
            Ok(Some((end - at, ReplyKind::Value)))
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let count = number(buf, at + 1, eol)?;
            if count < 0 {
                return Ok(Some((after_line - at, ReplyKind::Null)));
            }
            let elements = if matches!(kind, b'%' | b'|') {
                count.saturating_mul(2)
            } else {
                count
            };
            let mut position = after_line;
            for _ in 0..elements {
                match scan_at(buf, position, depth + 1)? {
                    Some((len, _)) => position += len,
                    None => return Ok(None),
                }
            }
            Ok(Some((position - at, ReplyKind::Value)))
        }
        other => Err(ProtocolError(format!(
            "unexpected reply type byte {other:#04x}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scans_every_type() {
        assert_eq!(scan_reply(b"+OK\r\n").unwrap(), Some((5, ReplyKind::Value)));
        assert_eq!(scan_reply(b"$-1\r\n").unwrap(), Some((5, ReplyKind::Null)));
        assert_eq!(scan_reply(b"_\r\n").unwrap(), Some((3, ReplyKind::Null)));
        assert_eq!(
            scan_reply(b"$3\r\nabc\r\n+x").unwrap(),
            Some((9, ReplyKind::Value))
        );
        assert_eq!(
            scan_reply(b"-ERR bad\r\n").unwrap(),
            Some((10, ReplyKind::Error { start: 1, end: 8 }))
        );
        assert_eq!(
            scan_reply(b"*2\r\n:1\r\n%1\r\n+a\r\n$1\r\nb\r\n").unwrap(),
            Some((23, ReplyKind::Value))
        );
        assert_eq!(scan_reply(b"*-1\r\n").unwrap(), Some((5, ReplyKind::Null)));
    }

    #[test]
    fn incomplete_replies_wait() {
        for partial in [
            &b""[..],
            b"+OK",
            b"$3\r\nab",
            b"*2\r\n:1\r\n",
            b"%1\r\n+a\r\n",
        ] {
            assert_eq!(scan_reply(partial).unwrap(), None, "{partial:?}");
        }
        assert!(scan_reply(b"?\r\n").is_err());
        // Absurd announced sizes wait for bytes that never come; no overflow.
        assert_eq!(scan_reply(b"%9223372036854775807\r\n").unwrap(), None);
        assert_eq!(scan_reply(b"$9223372036854775807\r\n").unwrap(), None);
    }
}
