//! May a request be sent twice?

use http::{HeaderMap, HeaderName, Method};

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

#[cfg(test)]
mod tests {
    use super::*;

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
