//! Reading numbers out of header values, shared by `Retry-After`, `RateLimit-*` and gRPC's
//! headers. Hostile values never panic and never wrap.

/// Strips the optional whitespace (spaces and tabs) HTTP allows around a field value.
pub(crate) fn trim_ows(bytes: &[u8]) -> &[u8] {
    let is_ows = |b: &u8| *b == b' ' || *b == b'\t';
    let start = bytes.iter().position(|b| !is_ows(b)).unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !is_ows(b))
        .map_or(start, |i| i + 1);
    &bytes[start..end]
}

/// `1*DIGIT` as a number, saturating at `u64::MAX`; `None` when empty or when anything but
/// an ASCII digit is there (a sign, a dot, whitespace: trim first with [`trim_ows`]).
pub(crate) fn digits(bytes: &[u8]) -> Option<u64> {
    if bytes.is_empty() || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = bytes.iter().try_fold(0u64, |acc, digit| {
        acc.checked_mul(10)?.checked_add(u64::from(digit - b'0'))
    });
    Some(n.unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_spaces_and_tabs_only() {
        assert_eq!(trim_ows(b" \t5 \t"), b"5");
        assert_eq!(trim_ows(b"   "), b"");
        assert_eq!(trim_ows(b""), b"");
        assert_eq!(trim_ows(b"\n5"), b"\n5");
    }

    #[test]
    fn digits_saturate_and_reject_everything_else() {
        assert_eq!(digits(b"0"), Some(0));
        assert_eq!(digits(b"0042"), Some(42));
        assert_eq!(digits(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(digits(b"99999999999999999999999"), Some(u64::MAX));
        for bad in [&b""[..], b"-1", b"+1", b"1.5", b" 1", b"1,2", b"\xff"] {
            assert_eq!(digits(bad), None, "{bad:?}");
        }
    }
}
