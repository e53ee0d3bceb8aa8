//! Parsing of the server's requested delay: `Retry-After` and the `RateLimit` header.
//!
//! PLACEHOLDER: a minimal delay-seconds parser, to be completed (HTTP-dates, RateLimit).

use http::{HeaderMap, HeaderValue};
use std::time::{Duration, SystemTime};

/// Parses one `Retry-After` value: delay-seconds or an HTTP-date, relative to `now`.
pub fn parse(value: &HeaderValue, now: SystemTime) -> Option<Duration> {
    let _ = now;
    let text = value.to_str().ok()?.trim_matches([' ', '\t']);
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(Duration::from_secs(text.parse().unwrap_or(u64::MAX)))
}

/// The delay a response's headers ask for: the first `Retry-After` value, else the
/// `t` parameter of the `RateLimit` header.
pub fn from_headers(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    headers
        .get(http::header::RETRY_AFTER)
        .and_then(|v| parse(v, now))
}
