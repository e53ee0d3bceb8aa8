//! Which response statuses are worth retrying.

use crate::error::ConfigError;
use http::StatusCode;

/// A set of response statuses, stored as a bit set over 100..=999 (no allocation, `Copy`).
///
/// Only client and server errors (4xx, 5xx) can be members: retrying a success or a
/// redirect is a configuration mistake, reported as a [`ConfigError`].
///
/// ```
/// use http::StatusCode;
/// use tower_backoff::classify::StatusSet;
///
/// let set = StatusSet::DEFAULT.with(StatusCode::INTERNAL_SERVER_ERROR)?;
/// assert!(set.contains(StatusCode::INTERNAL_SERVER_ERROR));
/// assert!(set.contains(StatusCode::TOO_MANY_REQUESTS));
/// assert!(StatusSet::DEFAULT.with(StatusCode::OK).is_err());
/// # Ok::<(), tower_backoff::ConfigError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct StatusSet([u64; 16]);

impl StatusSet {
    /// No status at all: only transport errors are retried.
    pub const EMPTY: Self = Self([0; 16]);

    /// The statuses retried by default: 408 Request Timeout, 429 Too Many Requests,
    /// 502 Bad Gateway, 503 Service Unavailable and 504 Gateway Timeout — the statuses that
    /// say "the server (or a proxy before it) could not handle this now", not "this request
    /// is wrong".
    pub const DEFAULT: Self = Self::EMPTY
        .with_code(408)
        .with_code(429)
        .with_code(502)
        .with_code(503)
        .with_code(504);

    const fn with_code(mut self, code: u16) -> Self {
        self.0[(code / 64) as usize] |= 1 << (code % 64);
        self
    }

    /// This set plus `status`; an error unless `status` is a 4xx or 5xx.
    pub fn with(self, status: StatusCode) -> Result<Self, ConfigError> {
        if status.is_client_error() || status.is_server_error() {
            Ok(self.with_code(status.as_u16()))
        } else {
            Err(ConfigError::new(
                "retry_status",
                status.as_u16(),
                "only 4xx and 5xx statuses can be retried",
            ))
        }
    }

    /// This set without `status`.
    pub fn without(mut self, status: StatusCode) -> Self {
        let code = status.as_u16();
        self.0[(code / 64) as usize] &= !(1 << (code % 64));
        self
    }

    /// Whether `status` is in the set.
    pub fn contains(&self, status: StatusCode) -> bool {
        let code = status.as_u16();
        self.0[(code / 64) as usize] & (1 << (code % 64)) != 0
    }

    /// The statuses in the set, in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = StatusCode> + '_ {
        (100u16..1000)
            .filter_map(|c| StatusCode::from_u16(c).ok())
            .filter(|s| self.contains(*s))
    }
}

impl Default for StatusSet {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl std::fmt::Debug for StatusSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set()
            .entries(self.iter().map(|s| s.as_u16()))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_set_holds_exactly_what_was_inserted() {
        let mut set = StatusSet::EMPTY;
        for code in [400, 429, 463, 464, 503, 599] {
            set = set.with(StatusCode::from_u16(code).unwrap()).unwrap();
        }
        for code in 100..=999 {
            let status = StatusCode::from_u16(code).unwrap();
            let expected = [400, 429, 463, 464, 503, 599].contains(&code);
            assert_eq!(set.contains(status), expected, "{code}");
        }
    }

    #[test]
    fn default_set_is_exactly_the_documented_statuses() {
        let codes: Vec<u16> = StatusSet::DEFAULT.iter().map(|s| s.as_u16()).collect();
        assert_eq!(codes, [408, 429, 502, 503, 504]);
    }

    #[test]
    fn with_and_without_edit_one_bit() {
        let set = StatusSet::EMPTY
            .with(StatusCode::from_u16(599).unwrap())
            .unwrap();
        assert!(set.contains(StatusCode::from_u16(599).unwrap()));
        assert!(!set.contains(StatusCode::from_u16(598).unwrap()));
        let set = set.without(StatusCode::from_u16(599).unwrap());
        assert_eq!(set, StatusSet::EMPTY);
    }

    #[test]
    fn success_and_redirect_statuses_are_rejected() {
        for code in [100, 200, 204, 301, 399, 600, 999] {
            let err = StatusSet::DEFAULT
                .with(StatusCode::from_u16(code).unwrap())
                .unwrap_err();
            assert_eq!(err.field(), "retry_status");
            assert_eq!(err.value(), code.to_string());
        }
    }
}
