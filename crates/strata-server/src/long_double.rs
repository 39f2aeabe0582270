//! INCRBYFLOAT's arithmetic as Redis does it: both operands parsed with
//! `strtold`, summed in C's `long double` (80-bit extended on x86-64) and
//! printed with `%.17Lf` without trailing zeros. An `f64` answers
//! differently for everyday inputs (0.1 + 0.2 prints `0.3` in Redis) and
//! overflows where Redis does not, so the sum is done in C
//! (`csrc/long_double.c`, built by `build.rs`).

/// Why an increment could not be applied.
#[derive(Debug, PartialEq, Eq)]
pub enum AddError {
    /// The stored value is not a float.
    CurrentNotFloat,
    /// The increment is not a float.
    IncrementNotFloat,
    /// The sum is NaN or infinite.
    NotFinite,
    /// The increment itself is infinite (HINCRBYFLOAT says so apart).
    IncrementNotFinite,
}

/// Bytes for the printed sum: long double's largest value printed with 17
/// decimals has under 5 000 digits.
const TEXT_MAX: usize = 5120;

unsafe extern "C" {
    fn strata_long_double_add(
        current: *const u8,
        current_len: usize,
        has_current: i32,
        increment: *const u8,
        increment_len: usize,
        out: *mut u8,
        out_cap: usize,
    ) -> i64;
    fn strata_human_double(value: f64, out: *mut u8, out_cap: usize) -> i64;
}

/// `value` as Redis prints a coordinate (GEOPOS, WITHCOORD): widened to
/// long double and printed `%.17Lf` without trailing zeros.
pub fn human(value: f64) -> Vec<u8> {
    let mut out = vec![0u8; TEXT_MAX];
    // SAFETY: the C side writes at most `out.len()` bytes (NUL included).
    let len = unsafe { strata_human_double(value, out.as_mut_ptr(), out.len()) };
    out.truncate(len.max(0) as usize);
    out
}

/// `current + increment` as Redis' INCRBYFLOAT prints it; a missing
/// current value counts as 0.
pub fn add(current: Option<&[u8]>, increment: &[u8]) -> Result<Vec<u8>, AddError> {
    let mut out = vec![0u8; TEXT_MAX];
    let (current_ptr, current_len) =
        current.map_or((std::ptr::null(), 0), |c| (c.as_ptr(), c.len()));
    // SAFETY: every pointer comes with its length; the C side reads within
    // them and writes at most `out.len()` bytes (NUL included) into `out`.
    let len = unsafe {
        strata_long_double_add(
            current_ptr,
            current_len,
            i32::from(current.is_some()),
            increment.as_ptr(),
            increment.len(),
            out.as_mut_ptr(),
            out.len(),
        )
    };
    match len {
        -1 => Err(AddError::CurrentNotFloat),
        -2 => Err(AddError::IncrementNotFloat),
        -5 => Err(AddError::IncrementNotFinite),
        // -4 (longer than any long double prints) cannot happen; answer
        // as for a sum out of range rather than store a cut value.
        n if n < 0 => Err(AddError::NotFinite),
        n => {
            out.truncate(n as usize);
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_as_redis_prints_them() {
        // Each expected text was printed by redis-server 7.0.15 on x86-64.
        let sum = |a: &str, b: &str| {
            String::from_utf8(add(Some(a.as_bytes()), b.as_bytes()).unwrap()).unwrap()
        };
        assert_eq!(sum("0.1", "0.2"), "0.3");
        assert_eq!(sum("1.1", "2.2"), "3.3");
        assert_eq!(sum("10.5", "0.1"), "10.6");
        assert_eq!(add(None, b"5.0e-5").unwrap(), b"0.00005");
        assert_eq!(add(None, b"3.0e3").unwrap(), b"3000");
        assert_eq!(
            sum("1.7976931348623157e308", "1.7976931348623157e308"),
            "359538626972463139991842093548208868096772893888658356970628841530353257046248792709403737216774171128857586838851041378617416726902272110715794556052955234146997955372576789671236326588091188869859074894581254961338834769297758245552436667197907705664206565009503223382416235440319971852753604933726679072768"
        );
    }

    #[test]
    fn refuses_what_redis_refuses() {
        assert_eq!(add(Some(b"abc"), b"1"), Err(AddError::CurrentNotFloat));
        assert_eq!(add(Some(b"1"), b" 1"), Err(AddError::IncrementNotFloat));
        assert_eq!(add(Some(b"1"), b"1 "), Err(AddError::IncrementNotFloat));
        assert_eq!(add(Some(b"1"), b""), Err(AddError::IncrementNotFloat));
        assert_eq!(add(Some(b"1"), b"nan"), Err(AddError::IncrementNotFloat));
        assert_eq!(
            add(Some(b"1"), b"1e99999"),
            Err(AddError::IncrementNotFloat)
        );
        assert_eq!(add(Some(b"1"), b"inf"), Err(AddError::IncrementNotFinite));
        assert_eq!(add(Some(b"1\x002"), b"1"), Err(AddError::CurrentNotFloat));
        assert_eq!(add(Some(b"1"), b"1\x00"), Err(AddError::IncrementNotFloat));
        assert_eq!(add(Some(b"-0"), b"0").unwrap(), b"0");
    }
}
