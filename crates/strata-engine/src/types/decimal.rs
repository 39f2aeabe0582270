//! Redis' canonical decimal integers: the strings that read back equal
//! when stored as an integer (a leaf: values, sets and the integer
//! encodings all ask it).

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
