//! The delay a server asks for: `Retry-After`, else the `RateLimit` reset.
//!
//! A 429 or 503 response often says how long to wait. Waiting less than that wastes an attempt
//! on a server that has already said no; waiting much longer wastes the caller's time. This
//! module turns those headers into a [`Duration`], relative to a `now` the caller passes in (so
//! tests and the retry layer control the clock).
//!
//! # `Retry-After` ([RFC 9110 §10.2.3])
//!
//! [`parse`] reads one field value:
//!
//! | value | result |
//! | --- | --- |
//! | delay-seconds: `1*DIGIT`, spaces/tabs around it allowed | `Some(that many seconds)` |
//! | more seconds than a `u64` holds (e.g. `10^20`) | `Some(Duration::from_secs(u64::MAX))`: saturates, never fails |
//! | an HTTP-date after `now`, in any of the three formats of [RFC 9110 §5.6.7] | `Some(date - now)`, exact to the second |
//! | an HTTP-date at or before `now` | `Some(Duration::ZERO)`: retry at once |
//! | anything else: a sign (`+5`, `-5`), a fraction (`1.5`), a list (`5, 10`), empty or blank, bytes outside ASCII, an impossible date (Feb 30, hour 25, a weekday that does not match the date), a date before 1970 | `None` |
//!
//! The three date formats are those of the `httpdate` crate, which is case-sensitive as the
//! RFC demands and checks that the weekday matches the date:
//!
//! * IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT` (the only one a server should send);
//! * obsolete RFC 850: `Sunday, 06-Nov-94 08:49:37 GMT` (a two-digit year means 1970–2069);
//! * obsolete asctime: `Sun Nov  6 08:49:37 1994`.
//!
//! Years run from 1970 to 9999, so the largest date gives a huge but finite delay. No input
//! panics.
//!
//! # Which header wins: [`from_headers`]
//!
//! 1. `retry-after-ms` (OpenAI's and Azure's), else `x-ms-retry-after-ms` (Azure's older
//!    name): milliseconds, `1*DIGIT`, read first as their SDKs read them.
//! 2. The **first** `Retry-After` field value, if [`parse`] accepts it. Later values are never
//!    read: a sender must not repeat the field, and picking any other one would be arbitrary.
//!    An invalid first value is ignored as if the field were absent (RFC 9110 lets a recipient
//!    ignore an invalid field), and the next rule applies.
//! 3. The `RateLimit` field of [draft-ietf-httpapi-ratelimit-headers] (drafts 08 and later): a
//!    Structured Field List of quota policies such as
//!    `"burst";r=0;t=5, "day";r=100;t=3600`, where `r` is the quota units remaining and `t` the
//!    seconds until that quota resets. Only the policies that are **exhausted** (`r=0`) explain
//!    the refusal, and the request can only pass once *all* of them have reset, so the delay is
//!    the **largest `t` among the items with `r=0`**. When no item has `r=0`, the field is not a
//!    reason to wait (waiting for a daily quota that still has room would be a guess of up to a
//!    day) and gives `None`: the caller's own backoff applies. An item without an integer `r` or
//!    `t`, or with a negative one, is skipped; a field that is not a valid Structured Field List
//!    (RFC 8941, e.g. an integer of more than 15 digits) is ignored whole, as RFC 8941 requires.
//!    Several `RateLimit` lines are one list, as if joined with commas. A line that is no List
//!    may be draft 07's Dictionary, one policy: `limit=50, remaining=0, reset=5`.
//! 4. The older drafts' `RateLimit-Reset: <seconds>` (drafts up to 06), unless a
//!    `RateLimit-Remaining` field is present and says anything but `0`. Some servers send a Unix
//!    timestamp there instead of seconds; a value above 10⁹ (year 2001 as a timestamp, 31 years
//!    as a delay) is read as a timestamp, above 10¹² as one in milliseconds.
//!
//! Dates and timestamps are on the server's clock. Their delay is measured from `now`, or
//! from the response's `Date` where `now` is more than the second `Date` is truncated to
//! away from it: a server's clock skew does not stretch a wait.
//!
//! These headers describe a refusal; the caller decides whether the response was one (a 429 or
//! a 503, say) before asking for the delay.
//!
//! ```
//! use http::{HeaderMap, HeaderValue};
//! use std::time::Duration;
//! use tower_backoff::retry_after;
//!
//! let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
//!
//! // delay-seconds and HTTP-dates
//! let secs = HeaderValue::from_static("120");
//! assert_eq!(retry_after::parse(&secs, now), Some(Duration::from_secs(120)));
//! let date = HeaderValue::from_static("Sun, 06 Nov 1994 08:50:07 GMT");
//! assert_eq!(retry_after::parse(&date, now), Some(Duration::from_secs(30)));
//! let past = HeaderValue::from_static("Sat, 05 Nov 1994 08:49:37 GMT");
//! assert_eq!(retry_after::parse(&past, now), Some(Duration::ZERO));
//! assert_eq!(retry_after::parse(&HeaderValue::from_static("-5"), now), None);
//!
//! // RateLimit: the largest reset among the exhausted quotas
//! let mut headers = HeaderMap::new();
//! headers.insert("ratelimit", HeaderValue::from_static(r#""burst";r=0;t=5, "day";r=0;t=60"#));
//! assert_eq!(retry_after::from_headers(&headers, now), Some(Duration::from_secs(60)));
//!
//! // ...but Retry-After wins
//! headers.insert("retry-after", HeaderValue::from_static("7"));
//! assert_eq!(retry_after::from_headers(&headers, now), Some(Duration::from_secs(7)));
//! ```
//!
//! [RFC 9110 §10.2.3]: https://www.rfc-editor.org/rfc/rfc9110#section-10.2.3
//! [RFC 9110 §5.6.7]: https://www.rfc-editor.org/rfc/rfc9110#section-5.6.7
//! [draft-ietf-httpapi-ratelimit-headers]: https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/

use crate::header::{self, trim_ows};
use http::{HeaderMap, HeaderValue};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

mod rate_limit;
mod said;
pub(crate) use said::ServerSaid;

/// The `RateLimit` field of draft-ietf-httpapi-ratelimit-headers, drafts 07 and later.
const RATE_LIMIT: &str = "ratelimit";
/// The reset field of drafts up to 06.
const RATE_LIMIT_RESET: &str = "ratelimit-reset";
/// The remaining-quota field of drafts up to 06.
const RATE_LIMIT_REMAINING: &str = "ratelimit-remaining";

/// `Retry-After` in milliseconds, as OpenAI and Azure send it.
const RETRY_AFTER_MS: &str = "retry-after-ms";
/// Azure's older name for [`RETRY_AFTER_MS`].
const X_MS_RETRY_AFTER_MS: &str = "x-ms-retry-after-ms";

/// The de facto remaining-quota field (GitHub's, and many APIs' before the drafts).
const X_RATE_LIMIT_REMAINING: &str = "x-ratelimit-remaining";
/// The de facto reset field that goes with it: seconds, or a Unix timestamp.
const X_RATE_LIMIT_RESET: &str = "x-ratelimit-reset";

/// A `RateLimit-Reset` above this many seconds is a Unix timestamp, not a delay.
///
/// 10⁹ s is 31.7 years as a delay — no server means that — and September 2001 as a timestamp,
/// earlier than any clock a server runs on today.
const RESET_TIMESTAMP_THRESHOLD: u64 = 1_000_000_000;

/// A reset above this is a Unix timestamp in milliseconds: in seconds, it would be past
/// the year 33,000.
const RESET_MILLIS_THRESHOLD: u64 = 1_000_000_000_000;

/// Parses one `Retry-After` value: delay-seconds or an HTTP-date, relative to `now`.
///
/// Returns `None` for anything that is neither; a date at or before `now` is
/// `Some(Duration::ZERO)`; more seconds than a `u64` holds saturate to
/// `Duration::from_secs(u64::MAX)`. See the [module docs](self) for the full table.
///
/// ```
/// # use http::HeaderValue;
/// # use std::time::{Duration, SystemTime};
/// use tower_backoff::retry_after::parse;
///
/// let now = SystemTime::now();
/// assert_eq!(parse(&HeaderValue::from_static(" 3 "), now), Some(Duration::from_secs(3)));
/// assert_eq!(parse(&HeaderValue::from_static("1.5"), now), None);
/// ```
pub fn parse(value: &HeaderValue, now: SystemTime) -> Option<Duration> {
    parse_with(value, || now)
}

/// [`parse`], reading the clock `now` only for an HTTP-date.
fn parse_with(value: &HeaderValue, now: impl FnOnce() -> SystemTime) -> Option<Duration> {
    let bytes = trim_ows(value.as_bytes());
    if bytes.is_empty() {
        return None;
    }
    if let Some(delay) = delay_seconds(bytes) {
        return Some(delay);
    }
    let at = http_date(bytes)?;
    Some(at.duration_since(now()).unwrap_or(Duration::ZERO))
}

/// An HTTP-date in any of its three formats, spaces around it trimmed.
fn http_date(bytes: &[u8]) -> Option<SystemTime> {
    // obs-text fails here (not UTF-8) or in httpdate, which accepts ASCII only.
    let text = std::str::from_utf8(trim_ows(bytes)).ok()?;
    httpdate::parse_http_date(text).ok()
}

/// The delay a response's headers ask for: `retry-after-ms`, else the first `Retry-After`
/// value if it is valid, else the reset of the exhausted `RateLimit` quotas, else the older
/// `RateLimit-Reset`.
///
/// `None` when none of them gives a delay. The precedence and the rules for each header are
/// in the [module docs](self).
///
/// ```
/// # use http::{HeaderMap, HeaderValue};
/// # use std::time::{Duration, SystemTime};
/// use tower_backoff::retry_after::from_headers;
///
/// let mut headers = HeaderMap::new();
/// headers.append("retry-after", HeaderValue::from_static("soon"));
/// headers.append("ratelimit", HeaderValue::from_static(r#""default";r=0;t=10"#));
/// // The invalid Retry-After is ignored; the RateLimit reset applies.
/// assert_eq!(from_headers(&headers, SystemTime::now()), Some(Duration::from_secs(10)));
/// ```
pub fn from_headers(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    delay_asked(headers, || now)
}

/// [`from_headers`], reading the clock `now` only for a date or a reset timestamp.
pub(crate) fn delay_asked(headers: &HeaderMap, now: impl Fn() -> SystemTime) -> Option<Duration> {
    let now = server_clock(headers, now);
    let millis = |name| header::digits(trim_ows(headers.get(name)?.as_bytes()));
    [RETRY_AFTER_MS, X_MS_RETRY_AFTER_MS]
        .into_iter()
        .find_map(millis)
        .map(Duration::from_millis)
        .or_else(|| parse_with(headers.get(http::header::RETRY_AFTER)?, &now))
        .or_else(|| exhausted_reset(headers))
        .or_else(|| legacy_reset(headers, &now))
}

/// The largest `t` among the `RateLimit` members with `r=0`: the quotas that explain a
/// refusal (the tightest quota has `r=0` exactly when one is exhausted).
fn exhausted_reset(headers: &HeaderMap) -> Option<Duration> {
    match rate_limit::tightest(headers.get_all(RATE_LIMIT))? {
        (0, reset) => reset,
        _ => None,
    }
}

/// `RateLimit-Reset` of drafts up to 06, ignored when `RateLimit-Remaining` says quota is left.
fn legacy_reset(headers: &HeaderMap, now: impl Fn() -> SystemTime) -> Option<Duration> {
    if let Some(remaining) = headers.get(RATE_LIMIT_REMAINING)
        && delay_seconds(trim_ows(remaining.as_bytes())) != Some(Duration::ZERO)
    {
        return None;
    }
    reset_in(headers.get(RATE_LIMIT_RESET)?, now).map(|(reset, _)| reset)
}

/// A reset field's value: seconds from now, or past [`RESET_TIMESTAMP_THRESHOLD`] a Unix
/// timestamp (then `true`: known only to the second), past [`RESET_MILLIS_THRESHOLD`] one
/// in milliseconds.
fn reset_in(value: &HeaderValue, now: impl FnOnce() -> SystemTime) -> Option<(Duration, bool)> {
    let reset = delay_seconds(trim_ows(value.as_bytes()))?;
    let (at, coarse) = match reset.as_secs() {
        0..=RESET_TIMESTAMP_THRESHOLD => return Some((reset, false)),
        millis @ RESET_MILLIS_THRESHOLD.. => (Duration::from_millis(millis), false),
        _ => (reset, true),
    };
    let left = match UNIX_EPOCH.checked_add(at) {
        Some(at) => at.duration_since(now()).unwrap_or(Duration::ZERO),
        None => at,
    };
    Some((left, coarse))
}

/// The server's clock, as the response's `Date` field sets it (RFC 9110 §6.6.1).
///
/// A server's dates and reset timestamps are on its own clock. As HTTP caches correct ages
/// for clock skew (RFC 9111 §4.2.3), they are read against its `Date`: a server a minute
/// ahead does not hold a client a minute longer. `Date` is in whole seconds, so a local
/// clock up to a second past it is in step, and is kept. Read only with the clock: most
/// responses need neither.
fn server_clock(headers: &HeaderMap, now: impl Fn() -> SystemTime) -> impl Fn() -> SystemTime {
    move || {
        let local = now();
        let date = headers.get(http::header::DATE);
        let Some(date) = date.and_then(|value| http_date(value.as_bytes())) else {
            return local;
        };
        let latest = date.checked_add(Duration::from_secs(1)).unwrap_or(date);
        local.clamp(date, latest)
    }
}

/// What a response says of the quota its sender still grants: how many requests, and
/// when that count resets (if it says).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QuotaLeft {
    pub(crate) remaining: u64,
    pub(crate) reset: Option<Duration>,
    /// The reset is a Unix time in whole seconds, so the count may come back up to a
    /// second sooner: the same instant from every report of a window, whenever asked.
    pub(crate) coarse: bool,
}

/// The quota a response reports, from the first of these that has a remaining count: the
/// `RateLimit` field (drafts 07 and later; its tightest quota), `RateLimit-Remaining` with
/// `RateLimit-Reset` (older drafts), `X-RateLimit-Remaining` with `X-RateLimit-Reset`
/// (GitHub's and many others'). A reset above 10⁹ is a Unix timestamp, as for
/// `RateLimit-Reset`. The clock `now` is read only for such a timestamp: most responses,
/// with no quota field or a reset in seconds, need none.
pub(crate) fn quota(headers: &HeaderMap, now: impl Fn() -> SystemTime) -> Option<QuotaLeft> {
    let now = server_clock(headers, now);
    if let Some((remaining, reset)) = rate_limit::tightest(headers.get_all(RATE_LIMIT)) {
        let coarse = false;
        return Some(QuotaLeft {
            remaining,
            reset,
            coarse,
        });
    }
    [
        (RATE_LIMIT_REMAINING, RATE_LIMIT_RESET),
        (X_RATE_LIMIT_REMAINING, X_RATE_LIMIT_RESET),
    ]
    .into_iter()
    .find_map(|(remaining, reset)| {
        let remaining = header::digits(trim_ows(headers.get(remaining)?.as_bytes()))?;
        let reset = headers.get(reset).and_then(|value| reset_in(value, &now));
        Some(QuotaLeft {
            remaining,
            reset: reset.map(|(reset, _)| reset),
            coarse: reset.is_some_and(|(_, coarse)| coarse),
        })
    })
}

/// `1*DIGIT` as whole seconds, saturating at `u64::MAX` seconds; `None` if not all digits.
fn delay_seconds(bytes: &[u8]) -> Option<Duration> {
    header::digits(bytes).map(Duration::from_secs)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A header map of `fields`, in order (a name may repeat).
    pub(crate) fn headers(fields: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in fields {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn dates_and_timestamps_are_read_on_the_servers_clock() {
        let now = UNIX_EPOCH + Duration::from_millis(2_000_000_000_500);
        let secs = Duration::from_secs;
        let date = |at: u64| httpdate::fmt_http_date(UNIX_EPOCH + secs(at));
        let map = |fields: Vec<(&'static str, String)>| {
            let mut map = HeaderMap::new();
            for (name, text) in fields {
                map.append(name, HeaderValue::from_str(&text).unwrap());
            }
            map
        };
        // A server a minute ahead asks for 30 s by date: 30 s, not 90.
        let ahead = map(vec![
            ("date", date(2_000_000_060)),
            ("retry-after", date(2_000_000_090)),
        ]);
        assert_eq!(delay_asked(&ahead, || now), Some(secs(30)));
        // A server a minute behind resets in 5 s: read at the latest a second past its Date.
        let behind = map(vec![
            ("date", date(1_999_999_940)),
            ("x-ratelimit-remaining", "0".into()),
            ("x-ratelimit-reset", "1999999945".into()),
        ]);
        let reset = quota(&behind, || now).and_then(|left| left.reset);
        assert_eq!(reset, Some(secs(4)));
        // In step, half a second past Date: the local clock, to the millisecond.
        let in_step = map(vec![
            ("date", date(2_000_000_000)),
            ("retry-after", date(2_000_000_005)),
        ]);
        assert_eq!(
            delay_asked(&in_step, || now),
            Some(Duration::from_millis(4500))
        );
    }

    #[test]
    fn quota_from_each_convention_first_one_wins() {
        let now = UNIX_EPOCH + Duration::from_secs(2_000_000_000);
        let secs = Duration::from_secs;
        let at = |remaining, reset, coarse| {
            Some(QuotaLeft {
                remaining,
                reset,
                coarse,
            })
        };
        let left = |remaining, reset| at(remaining, reset, false);
        // express-rate-limit's draft-8 field, on a success.
        let express = headers(&[("ratelimit", r#""50-in-1sec"; r=49; t=1"#)]);
        assert_eq!(quota(&express, || now), left(49, Some(secs(1))));
        // Older drafts, the reset in seconds.
        let drafts = headers(&[("ratelimit-remaining", "0"), ("ratelimit-reset", "30")]);
        assert_eq!(quota(&drafts, || now), left(0, Some(secs(30))));
        // GitHub's: the reset as a Unix timestamp, known to the second.
        let github = headers(&[
            ("x-ratelimit-remaining", " 4999 "),
            ("x-ratelimit-reset", "2000000060"),
        ]);
        assert_eq!(quota(&github, || now), at(4999, Some(secs(60)), true));
        // tower_governor's: a remaining count, no reset.
        let governor = headers(&[("x-ratelimit-remaining", "0")]);
        assert_eq!(quota(&governor, || now), left(0, None));
        // A Unix time in milliseconds, known to the millisecond.
        let millis = headers(&[
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "2000000002500"),
        ]);
        let reset = Some(Duration::from_millis(2500));
        assert_eq!(quota(&millis, || now), left(0, reset));
        // The newest convention wins over the older ones.
        let both = headers(&[
            ("ratelimit", r#"a;r=3;t=2"#),
            ("x-ratelimit-remaining", "0"),
        ]);
        assert_eq!(quota(&both, || now), left(3, Some(secs(2))));
        // Nothing usable: no quota.
        for fields in [
            &[][..],
            &[("x-ratelimit-remaining", "-1")],
            &[
                ("x-ratelimit-remaining", "many"),
                ("x-ratelimit-reset", "1"),
            ],
            &[("x-ratelimit-reset", "1")],
            &[("ratelimit", "a;t=1")],
        ] {
            assert_eq!(quota(&headers(fields), || now), None, "{fields:?}");
        }
    }
}
