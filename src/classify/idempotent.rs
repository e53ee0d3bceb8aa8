//! May a request be sent twice?

use http::{HeaderMap, HeaderName, Method};

/// The `Idempotency-Key` request header: a request carrying it may be retried like an
/// idempotent one, because the server promises to apply it at most once.
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// Whether a request may be sent again after it possibly reached the server.
///
/// True for the idempotent methods of RFC 9110 §9.2.2 (GET, HEAD, OPTIONS, TRACE, PUT,
/// DELETE) and for any request carrying an [`IDEMPOTENCY_KEY`] header with a key in it.
///
/// A blank key (empty, only spaces and tabs, or the empty string `""`) is no key: the
/// server has nothing to deduplicate by. With several values, each must hold a key.
///
/// ```
/// use http::{HeaderMap, Method};
/// use tower_backoff::classify::{IDEMPOTENCY_KEY, is_idempotent};
///
/// let mut headers = HeaderMap::new();
/// assert!(is_idempotent(&Method::PUT, &headers));
/// assert!(!is_idempotent(&Method::POST, &headers));
/// headers.insert(IDEMPOTENCY_KEY, "".parse().unwrap());
/// assert!(!is_idempotent(&Method::POST, &headers));
/// headers.insert(IDEMPOTENCY_KEY, "8e03978e".parse().unwrap());
/// assert!(is_idempotent(&Method::POST, &headers));
/// ```
pub fn is_idempotent(method: &Method, headers: &HeaderMap) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    ) || has_idempotency_key(headers)
}

/// Whether `headers` carry an [`IDEMPOTENCY_KEY`], and none of its values is blank.
fn has_idempotency_key(headers: &HeaderMap) -> bool {
    let mut values = headers.get_all(IDEMPOTENCY_KEY).iter().peekable();
    values.peek().is_some() && values.all(|v| !is_blank(v.as_bytes()))
}

/// Whether a key is empty once trimmed of spaces, tabs and a pair of quotes (a structured
/// field string, as the Idempotency-Key draft spells keys).
fn is_blank(value: &[u8]) -> bool {
    let trimmed = value.trim_ascii();
    let unquoted = trimmed
        .strip_prefix(b"\"")
        .and_then(|v| v.strip_suffix(b"\""))
        .unwrap_or(trimmed);
    unquoted.trim_ascii().is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

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

    #[test]
    fn only_a_non_empty_idempotency_key_counts() {
        let with = |values: &[&'static str]| {
            let mut h = HeaderMap::new();
            for v in values {
                h.append(IDEMPOTENCY_KEY, HeaderValue::from_static(v));
            }
            is_idempotent(&Method::POST, &h)
        };
        assert!(with(&["k-1"]));
        assert!(with(&["\"k-1\""]), "a structured-field string");
        assert!(with(&[" k 1 "]));
        for blank in ["", " ", "\t ", "\"\"", " \"\" "] {
            assert!(!with(&[blank]), "{blank:?}");
        }
        assert!(!with(&["k-1", ""]), "a blank value among several");
        assert!(with(&["k-1", "k-2"]));
    }
}
