//! The `grpc-timeout` header: the time a call has left, as its client announces it.

use http::HeaderMap;
use http::header::{HeaderName, HeaderValue};
use std::time::Duration;

/// The header in which a gRPC client announces the time its call has left.
pub const GRPC_TIMEOUT: &str = "grpc-timeout";

/// The largest value the header may carry: at most eight digits.
const MAX_VALUE: u64 = 99_999_999;

/// The units of `grpc-timeout`, finest first, with their length in nanoseconds.
const UNITS: [(u8, u64); 6] = [
    (b'n', 1),
    (b'u', 1_000),
    (b'm', 1_000_000),
    (b'S', 1_000_000_000),
    (b'M', 60_000_000_000),
    (b'H', 3_600_000_000_000),
];

/// The time a call has left, read from its `grpc-timeout` header: up to eight digits and
/// a unit (`H`, `M`, `S`, `m`, `u`, `n`). `None` when absent or malformed.
///
/// ```
/// use std::time::Duration;
/// use tower_backoff::grpc::{GRPC_TIMEOUT, timeout};
///
/// let mut headers = http::HeaderMap::new();
/// headers.insert(GRPC_TIMEOUT, "250m".parse().unwrap());
/// assert_eq!(timeout(&headers), Some(Duration::from_millis(250)));
/// ```
pub fn timeout(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(GRPC_TIMEOUT)?.as_bytes();
    let (&unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let count: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    let (_, nanos) = UNITS.iter().find(|(u, _)| *u == unit)?;
    let total = u128::from(count) * u128::from(*nanos);
    Some(duration_from_nanos(total))
}

/// Sets `grpc-timeout` to `left`, in the finest unit that fits eight digits (rounded
/// down, so a call never announces more time than it has).
pub fn set_timeout(headers: &mut HeaderMap, left: Duration) {
    let nanos = left.as_nanos();
    let (unit, count) = UNITS
        .iter()
        .map(|&(unit, len)| (unit, nanos / u128::from(len)))
        .find(|&(_, count)| count <= u128::from(MAX_VALUE))
        .unwrap_or((b'H', u128::from(MAX_VALUE)));
    let value = format!("{count}{}", char::from(unit));
    if let Ok(value) = HeaderValue::try_from(value) {
        headers.insert(HeaderName::from_static(GRPC_TIMEOUT), value);
    }
}

fn duration_from_nanos(nanos: u128) -> Duration {
    const PER_SEC: u128 = 1_000_000_000;
    match u64::try_from(nanos / PER_SEC) {
        // The remainder is below 10^9: it fits a u32.
        Ok(secs) => Duration::new(secs, (nanos % PER_SEC) as u32),
        Err(_) => Duration::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(value: &str) -> Option<Duration> {
        let mut headers = HeaderMap::new();
        headers.insert(GRPC_TIMEOUT, value.parse().unwrap());
        timeout(&headers)
    }

    #[test]
    fn every_unit_is_read_and_malformed_values_are_not() {
        assert_eq!(read("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(read("3M"), Some(Duration::from_secs(180)));
        assert_eq!(read("1S"), Some(Duration::from_secs(1)));
        assert_eq!(read("15m"), Some(Duration::from_millis(15)));
        assert_eq!(read("7u"), Some(Duration::from_micros(7)));
        assert_eq!(read("99999999n"), Some(Duration::from_nanos(99_999_999)));
        for bad in ["", "S", "123456789S", "1s", "-1S", "1.5S", " 1S"] {
            assert_eq!(read(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_written_timeout_reads_back_no_longer_than_it_was() {
        for left in [
            Duration::ZERO,
            Duration::from_nanos(999),
            Duration::from_millis(900),
            Duration::from_secs(29),
            Duration::from_secs(86_400 * 365),
            Duration::MAX,
        ] {
            let mut headers = HeaderMap::new();
            set_timeout(&mut headers, left);
            let value = headers[GRPC_TIMEOUT].to_str().unwrap().to_owned();
            let back = timeout(&headers).unwrap();
            assert!(back <= left, "{left:?} -> {value}");
            assert!(value.len() <= 9, "{value}");
        }
        let mut headers = HeaderMap::new();
        set_timeout(&mut headers, Duration::from_millis(900));
        assert_eq!(headers[GRPC_TIMEOUT], "900000u");
    }
}
