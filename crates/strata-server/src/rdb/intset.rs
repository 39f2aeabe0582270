//! Reading Redis' intset (`intset.c`'s format), the RDB payload of a set
//! of integers: the element width (4 bytes, little-endian: 2, 4 or 8),
//! the count (4 bytes), then the sorted elements as signed little-endian
//! integers of that width.

use super::encoding::Malformed;

/// The members of `intset`, as decimal text.
pub fn members(intset: &[u8]) -> Result<Vec<Vec<u8>>, Malformed> {
    let header = intset.get(..8).ok_or(Malformed)?;
    let width = u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) as usize;
    let count = u32::from_le_bytes(header[4..].try_into().expect("4 bytes")) as usize;
    if !matches!(width, 2 | 4 | 8) || count.checked_mul(width) != Some(intset.len() - 8) {
        return Err(Malformed);
    }
    let mut out = Vec::with_capacity(count);
    let mut last = None;
    for raw in intset[8..].chunks_exact(width) {
        let n = match width {
            2 => i16::from_le_bytes(raw.try_into().expect("2 bytes")) as i64,
            4 => i32::from_le_bytes(raw.try_into().expect("4 bytes")) as i64,
            _ => i64::from_le_bytes(raw.try_into().expect("8 bytes")),
        };
        // Sorted and distinct, or the set is damaged.
        if last.is_some_and(|previous| previous >= n) {
            return Err(Malformed);
        }
        last = Some(n);
        out.push(n.to_string().into_bytes());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_read_back_and_disorder_is_refused() {
        let mut intset = Vec::new();
        intset.extend_from_slice(&4u32.to_le_bytes());
        intset.extend_from_slice(&3u32.to_le_bytes());
        for n in [-70000i32, 5, 100000] {
            intset.extend_from_slice(&n.to_le_bytes());
        }
        assert_eq!(
            members(&intset).unwrap(),
            vec![b"-70000".to_vec(), b"5".to_vec(), b"100000".to_vec()]
        );
        let mut unsorted = intset.clone();
        unsorted[8..16].rotate_left(4);
        assert!(members(&unsorted).is_err());
        assert!(members(&intset[..intset.len() - 1]).is_err());
        let mut bad_width = intset;
        bad_width[0] = 3;
        assert!(members(&bad_width).is_err());
    }
}
