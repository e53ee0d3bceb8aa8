//! Deciding what an outcome means, separately from acting on it.
//!
//! The [retry policy](crate::RetryPolicy) asks three questions about each attempt, each
//! answered here by a small, independently testable piece:
//!
//! - Is this status worth retrying? [`StatusSet`], by default 408, 429, 502, 503 and 504.
//! - May this request be sent twice? [`is_idempotent`]: the idempotent methods of RFC 9110
//!   §9.2.2, or any request carrying an [`IDEMPOTENCY_KEY`] header.
//! - Did this error happen before the request reached the server? [`ErrorClass`], given by
//!   [`default_error_class`] (or a closure of yours) over the error seen through [`AsError`].

mod error;

pub use error::{AsError, ErrorClass, default_error_class};

use crate::ConfigError;
use http::{HeaderMap, HeaderName, Method, StatusCode};

/// The `Idempotency-Key` request header: a request carrying it may be retried like an
/// idempotent one, because the server promises to apply it at most once.
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// Whether a request may be sent again after it possibly reached the server.
///
/// True for the idempotent methods of RFC 9110 §9.2.2 (GET, HEAD, OPTIONS, TRACE, PUT,
/// DELETE) and for any request carrying an [`IDEMPOTENCY_KEY`] header.
///
/// ```
/// use http::{HeaderMap, Method};
/// use tower_backoff::classify::{IDEMPOTENCY_KEY, is_idempotent};
///
/// let mut headers = HeaderMap::new();
/// assert!(is_idempotent(&Method::PUT, &headers));
/// assert!(!is_idempotent(&Method::POST, &headers));
/// headers.insert(IDEMPOTENCY_KEY, "8e03978e".parse().unwrap());
/// assert!(is_idempotent(&Method::POST, &headers));
/// ```
pub fn is_idempotent(method: &Method, headers: &HeaderMap) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    ) || headers.contains_key(IDEMPOTENCY_KEY)
}

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

    #[test]
    fn idempotent_methods_follow_rfc_9110() {
        let h = HeaderMap::new();
        for m in ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"] {
            assert!(is_idempotent(&m.parse().unwrap(), &h), "{m}");
        }
        for m in ["POST", "PATCH", "CONNECT", "PURGE"] {
            assert!(!is_idempotent(&m.parse().unwrap(), &h), "{m}");
        }
    }
}
