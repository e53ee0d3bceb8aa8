//! gRPC retry classification: which responses a client may retry, and when.
//!
//! These are the pure decisions of gRPC's retry design ([A6]), for a tower layer to act on.
//! gRPC carries its outcome in a `grpc-status` metadata entry, not in the HTTP status: in the
//! trailers after the response messages, or, when the server fails before sending any message,
//! in the headers of a *Trailers-Only* response. Only the second kind can be classified from
//! headers, and only it can be retried: once a server has sent response headers without a
//! status, the call is *committed* (its initial metadata may already have been acted on).
//!
//! # Decision table of [`classify`]
//!
//! The decision is a [`classify::Outcome`](crate::classify::Outcome), as the retry layer's
//! classifiers give for HTTP:
//!
//! | response headers | outcome |
//! | --- | --- |
//! | no `grpc-status` | [`success`](Outcome::success): the status comes in trailers, the call is committed, never retry |
//! | `grpc-status: 0` (OK) | [`success`](Outcome::success) |
//! | code in the retryable set, no pushback | [`retry`](Outcome::retry)`(Grpc(code))`, no server delay: the caller's backoff decides |
//! | code in the retryable set, pushback `n ≥ 0` | [`retry`](Outcome::retry)`(Grpc(code))` with [`ServerDelay::Restart`]`(n ms)` |
//! | code in the retryable set, pushback negative or unparseable | [`stop`](Outcome::stop)`(Grpc(code))`: the server asked not to retry |
//! | `RESOURCE_EXHAUSTED` not in the set, pushback `n ≥ 0` | [`retry`](Outcome::retry)`(Grpc(code))` with [`ServerDelay::Restart`]`(n ms)` |
//! | `RESOURCE_EXHAUSTED` not in the set, no valid pushback | [`failure`](Outcome::failure) |
//! | any other code | [`failure`](Outcome::failure), pushback or not |
//!
//! A committed call and an OK status are both a success (neither is retried);
//! [`status_from_headers`] tells them apart. The outcomes are
//! [`Resend::IfIdempotent`](crate::classify::Resend::IfIdempotent):
//! [`GrpcClassifier`](crate::classify::GrpcClassifier) resends the calls of the methods
//! you declared retryable whatever their HTTP method.
//!
//! The retryable set defaults to [`GrpcCodes::DEFAULT_RETRYABLE`] = {`UNAVAILABLE`}: the code
//! gRPC's status-code guide calls transient, to be retried with a backoff (for a call that is
//! not idempotent, retrying it is still the caller's risk). `RESOURCE_EXHAUSTED` is left out
//! because it is also produced locally (message too large) where a retry cannot help; a server
//! that is merely out of quota says so by sending a pushback delay, which is honoured.
//!
//! A `grpc-status` that is not an integer in `0..=16` counts as `UNKNOWN`, as tonic reads it;
//! `UNKNOWN` is only retried when the caller puts it in the set.
//!
//! # Pushback
//!
//! A server may send `grpc-retry-pushback-ms`: a non-negative integer asks for a retry after
//! exactly that many milliseconds, and the backoff that follows starts over (A6 "Pushback").
//! A negative or unparseable value, or more than one value, asks the client not to retry at
//! all. A value too large for a `u64` saturates to `Duration::from_millis(u64::MAX)` rather
//! than failing (A6 specifies a 32-bit value; a larger one is still a request to wait).
//!
//! ```
//! use http::{HeaderMap, HeaderValue};
//! use std::time::Duration;
//! use tower_backoff::classify::{Outcome, ServerDelay};
//! use tower_backoff::grpc::{self, Code, GrpcCodes};
//! use tower_backoff::RetryReason;
//!
//! // A Trailers-Only response: the server was unavailable and asks for 250 ms.
//! let mut headers = HeaderMap::new();
//! headers.insert("grpc-status", HeaderValue::from_static("14"));
//! headers.insert("grpc-retry-pushback-ms", HeaderValue::from_static("250"));
//! assert_eq!(grpc::status_from_headers(&headers), Some(Code::Unavailable));
//! assert_eq!(
//!     grpc::classify(&headers, GrpcCodes::default()),
//!     Outcome::retry(RetryReason::Grpc(Code::Unavailable))
//!         .with_server_delay(ServerDelay::Restart(Duration::from_millis(250))),
//! );
//!
//! // Response headers without a status: messages follow, the call is committed.
//! let committed = HeaderMap::new();
//! assert!(grpc::classify(&committed, GrpcCodes::default()).is_success());
//!
//! // ABORTED is retried only when the caller asks for it.
//! headers.insert("grpc-status", HeaderValue::from_static("10"));
//! headers.remove("grpc-retry-pushback-ms");
//! assert_eq!(grpc::classify(&headers, GrpcCodes::default()), Outcome::failure());
//! let codes = GrpcCodes::default().with(Code::Aborted);
//! let outcome = grpc::classify(&headers, codes);
//! assert!(outcome.is_retryable() && outcome.server_delay().is_none());
//! ```
//!
//! [A6]: https://github.com/grpc/proposal/blob/master/A6-client-retries.md

mod timeout;
pub use timeout::{GRPC_TIMEOUT, set_timeout, timeout};

use crate::classify::{Outcome, RetryReason, ServerDelay};
use crate::header::{digits, trim_ows};
use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, StatusCode};
use std::fmt;
use std::time::Duration;

/// The metadata key of a call's status code.
pub const GRPC_STATUS: &str = "grpc-status";

/// The metadata key of a server's retry pushback, in milliseconds.
pub const RETRY_PUSHBACK_MS: &str = "grpc-retry-pushback-ms";

/// The metadata key telling the server how many attempts preceded this one (A6).
pub const PREVIOUS_RPC_ATTEMPTS: &str = "grpc-previous-rpc-attempts";

/// A gRPC status code, `0..=16`.
///
/// ```
/// use tower_backoff::grpc::Code;
///
/// assert_eq!(Code::from_i32(14), Some(Code::Unavailable));
/// assert_eq!(Code::from_i32(17), None);
/// assert_eq!(Code::Unavailable.as_i32(), 14);
/// assert_eq!(Code::Unavailable.to_string(), "UNAVAILABLE");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Code {
    /// 0: not an error.
    Ok = 0,
    /// 1: cancelled, typically by the caller.
    Cancelled = 1,
    /// 2: an unknown error, or a status from an unknown error space.
    Unknown = 2,
    /// 3: the client sent an invalid argument.
    InvalidArgument = 3,
    /// 4: the deadline expired before the operation could complete.
    DeadlineExceeded = 4,
    /// 5: a requested entity was not found.
    NotFound = 5,
    /// 6: the entity the client tried to create already exists.
    AlreadyExists = 6,
    /// 7: the caller lacks permission.
    PermissionDenied = 7,
    /// 8: a resource (a quota, or memory for a message) is exhausted.
    ResourceExhausted = 8,
    /// 9: the system is not in a state required for the operation.
    FailedPrecondition = 9,
    /// 10: the operation was aborted, typically by a concurrency conflict.
    Aborted = 10,
    /// 11: the operation was attempted past the valid range.
    OutOfRange = 11,
    /// 12: the operation is not implemented or supported.
    Unimplemented = 12,
    /// 13: an internal invariant was broken.
    Internal = 13,
    /// 14: the service is currently unavailable, most likely transiently: retry with a backoff.
    Unavailable = 14,
    /// 15: unrecoverable data loss or corruption.
    DataLoss = 15,
    /// 16: the request lacks valid authentication credentials.
    Unauthenticated = 16,
}

impl Code {
    /// All codes, in numeric order.
    const ALL: [Code; 17] = [
        Code::Ok,
        Code::Cancelled,
        Code::Unknown,
        Code::InvalidArgument,
        Code::DeadlineExceeded,
        Code::NotFound,
        Code::AlreadyExists,
        Code::PermissionDenied,
        Code::ResourceExhausted,
        Code::FailedPrecondition,
        Code::Aborted,
        Code::OutOfRange,
        Code::Unimplemented,
        Code::Internal,
        Code::Unavailable,
        Code::DataLoss,
        Code::Unauthenticated,
    ];

    /// The code numbered `n`, or `None` outside `0..=16`.
    pub const fn from_i32(n: i32) -> Option<Code> {
        if n >= 0 && n < Self::ALL.len() as i32 {
            Some(Self::ALL[n as usize])
        } else {
            None
        }
    }

    /// The code in a `grpc-status` value; anything but ASCII digits naming `0..=16` is
    /// [`Code::Unknown`], as tonic reads it. Spaces and tabs around the digits are ignored.
    ///
    /// ```
    /// # use http::HeaderValue;
    /// # use tower_backoff::grpc::Code;
    /// assert_eq!(Code::from_header_value(&HeaderValue::from_static("8")), Code::ResourceExhausted);
    /// assert_eq!(Code::from_header_value(&HeaderValue::from_static("99")), Code::Unknown);
    /// assert_eq!(Code::from_header_value(&HeaderValue::from_static("-1")), Code::Unknown);
    /// ```
    pub fn from_header_value(value: &HeaderValue) -> Code {
        digits(trim_ows(value.as_bytes()))
            .and_then(|n| i32::try_from(n).ok())
            .and_then(Code::from_i32)
            .unwrap_or(Code::Unknown)
    }

    /// The code's number.
    pub const fn as_i32(self) -> i32 {
        self as i32
    }

    /// The code's canonical name, e.g. `"UNAVAILABLE"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Code::Ok => "OK",
            Code::Cancelled => "CANCELLED",
            Code::Unknown => "UNKNOWN",
            Code::InvalidArgument => "INVALID_ARGUMENT",
            Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
            Code::NotFound => "NOT_FOUND",
            Code::AlreadyExists => "ALREADY_EXISTS",
            Code::PermissionDenied => "PERMISSION_DENIED",
            Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
            Code::FailedPrecondition => "FAILED_PRECONDITION",
            Code::Aborted => "ABORTED",
            Code::OutOfRange => "OUT_OF_RANGE",
            Code::Unimplemented => "UNIMPLEMENTED",
            Code::Internal => "INTERNAL",
            Code::Unavailable => "UNAVAILABLE",
            Code::DataLoss => "DATA_LOSS",
            Code::Unauthenticated => "UNAUTHENTICATED",
        }
    }

    /// The code gRPC assigns to an HTTP response that carries no `grpc-status`, typically from
    /// a proxy ([http-grpc-status-mapping]); `None` for `200 OK`, which is a gRPC response.
    ///
    /// 429, 502, 503 and 504 map to `UNAVAILABLE`, so they are retried by default.
    ///
    /// ```
    /// # use http::StatusCode;
    /// # use tower_backoff::grpc::Code;
    /// assert_eq!(Code::from_http_status(StatusCode::SERVICE_UNAVAILABLE), Some(Code::Unavailable));
    /// assert_eq!(Code::from_http_status(StatusCode::OK), None);
    /// ```
    ///
    /// [http-grpc-status-mapping]: https://github.com/grpc/grpc/blob/master/doc/http-grpc-status-mapping.md
    pub fn from_http_status(status: StatusCode) -> Option<Code> {
        Some(match status.as_u16() {
            200 => return None,
            400 => Code::Internal,
            401 => Code::Unauthenticated,
            403 => Code::PermissionDenied,
            404 => Code::Unimplemented,
            429 | 502 | 503 | 504 => Code::Unavailable,
            _ => Code::Unknown,
        })
    }

    const fn bit(self) -> u32 {
        1 << (self as u32)
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of gRPC status codes, kept as bit flags; `Copy` and `const`-buildable.
///
/// ```
/// use tower_backoff::grpc::{Code, GrpcCodes};
///
/// const RETRYABLE: GrpcCodes = GrpcCodes::empty().with(Code::Unavailable).with(Code::Aborted);
/// assert!(RETRYABLE.contains(Code::Aborted));
/// assert!(!RETRYABLE.contains(Code::Internal));
/// assert_eq!(GrpcCodes::default(), GrpcCodes::DEFAULT_RETRYABLE);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct GrpcCodes(u32);

impl GrpcCodes {
    /// The default retryable set: `UNAVAILABLE` only, the transient code that gRPC's retry
    /// examples use; see the [module docs](self) for why not more.
    pub const DEFAULT_RETRYABLE: GrpcCodes = GrpcCodes::empty().with(Code::Unavailable);

    /// The empty set.
    pub const fn empty() -> Self {
        GrpcCodes(0)
    }

    /// This set plus `code`.
    #[must_use]
    pub const fn with(self, code: Code) -> Self {
        GrpcCodes(self.0 | code.bit())
    }

    /// This set minus `code`.
    #[must_use]
    pub const fn without(self, code: Code) -> Self {
        GrpcCodes(self.0 & !code.bit())
    }

    /// Whether `code` is in the set.
    pub const fn contains(self, code: Code) -> bool {
        self.0 & code.bit() != 0
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The codes in the set, in numeric order.
    pub fn iter(self) -> impl Iterator<Item = Code> {
        Code::ALL
            .into_iter()
            .filter(move |code| self.contains(*code))
    }
}

impl Default for GrpcCodes {
    /// [`GrpcCodes::DEFAULT_RETRYABLE`].
    fn default() -> Self {
        Self::DEFAULT_RETRYABLE
    }
}

impl FromIterator<Code> for GrpcCodes {
    fn from_iter<I: IntoIterator<Item = Code>>(codes: I) -> Self {
        codes.into_iter().fold(GrpcCodes::empty(), GrpcCodes::with)
    }
}

impl fmt::Debug for GrpcCodes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

/// The status of a Trailers-Only response: the `grpc-status` in the response headers.
///
/// `None` when the headers carry no `grpc-status` (the status will come in the trailers). An
/// invalid value is [`Code::Unknown`]; only the first value counts.
pub fn status_from_headers(headers: &HeaderMap) -> Option<Code> {
    headers.get(GRPC_STATUS).map(Code::from_header_value)
}

/// What a server's `grpc-retry-pushback-ms` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pushback {
    /// Retry after exactly this delay, and start the backoff over afterwards.
    RetryAfter(Duration),
    /// Do not retry this call at all.
    DoNotRetry,
}

/// The server's pushback, or `None` when it sent none.
///
/// A single non-negative integer is a delay in milliseconds (saturating at
/// `Duration::from_millis(u64::MAX)`); anything else — negative, not a number, empty, or more
/// than one value — is [`Pushback::DoNotRetry`], as A6 and grpc-go read it.
///
/// ```
/// # use http::{HeaderMap, HeaderValue};
/// # use std::time::Duration;
/// use tower_backoff::grpc::{pushback, Pushback};
///
/// let mut headers = HeaderMap::new();
/// assert_eq!(pushback(&headers), None);
/// headers.insert("grpc-retry-pushback-ms", HeaderValue::from_static("1500"));
/// assert_eq!(pushback(&headers), Some(Pushback::RetryAfter(Duration::from_millis(1500))));
/// headers.insert("grpc-retry-pushback-ms", HeaderValue::from_static("-1"));
/// assert_eq!(pushback(&headers), Some(Pushback::DoNotRetry));
/// ```
pub fn pushback(headers: &HeaderMap) -> Option<Pushback> {
    let mut values = headers.get_all(RETRY_PUSHBACK_MS).iter();
    let first = values.next()?;
    if values.next().is_some() {
        return Some(Pushback::DoNotRetry);
    }
    // Too many digits for a u64 saturates: an absurdly long pushback, not a refusal.
    Some(match digits(trim_ows(first.as_bytes())) {
        Some(ms) => Pushback::RetryAfter(Duration::from_millis(ms)),
        None => Pushback::DoNotRetry,
    })
}

/// Classifies a gRPC response from its headers; see the [module docs](self) for the table.
///
/// `retryable` is the set of codes to retry ([`GrpcCodes::default`] is {`UNAVAILABLE`}).
///
/// ```
/// # use http::{HeaderMap, HeaderValue};
/// use tower_backoff::classify::Outcome;
/// use tower_backoff::grpc::{classify, GrpcCodes};
///
/// let mut headers = HeaderMap::new();
/// headers.insert("grpc-status", HeaderValue::from_static("0"));
/// assert_eq!(classify(&headers, GrpcCodes::default()), Outcome::success());
/// ```
pub fn classify(headers: &HeaderMap, retryable: GrpcCodes) -> Outcome {
    match status_from_headers(headers) {
        None => Outcome::success(),
        Some(code) => decide(code, headers, retryable),
    }
}

/// Classifies a whole response head: like [`classify`], except that a non-`200` HTTP status
/// without a `grpc-status` (a proxy's error page, say) is not committed but failed with the
/// code of [`Code::from_http_status`].
///
/// ```
/// # use http::{Response, StatusCode};
/// use tower_backoff::classify::Outcome;
/// use tower_backoff::grpc::{classify_response, Code, GrpcCodes};
/// use tower_backoff::RetryReason;
///
/// let response = Response::builder().status(StatusCode::BAD_GATEWAY).body(()).unwrap();
/// assert_eq!(
///     classify_response(&response, GrpcCodes::default()),
///     Outcome::retry(RetryReason::Grpc(Code::Unavailable)),
/// );
/// ```
pub fn classify_response<B>(response: &http::Response<B>, retryable: GrpcCodes) -> Outcome {
    classify_head(response.status(), response.headers(), retryable)
}

/// [`classify_response`] from the parts of a response head.
pub(crate) fn classify_head(
    status: StatusCode,
    headers: &HeaderMap,
    retryable: GrpcCodes,
) -> Outcome {
    match status_from_headers(headers).or_else(|| Code::from_http_status(status)) {
        None => Outcome::success(),
        Some(code) => decide(code, headers, retryable),
    }
}

/// The outcome of a call that failed with `code` (or succeeded, for `OK`).
fn decide(code: Code, headers: &HeaderMap, retryable: GrpcCodes) -> Outcome {
    if code == Code::Ok {
        return Outcome::success();
    }
    let reason = RetryReason::Grpc(code);
    // A pushback delay replaces the backoff's and starts it over (A6).
    let pushed = |after| Outcome::retry(reason).with_server_delay(ServerDelay::Restart(after));
    match pushback(headers) {
        _ if !retryable.contains(code) && code != Code::ResourceExhausted => Outcome::failure(),
        Some(Pushback::RetryAfter(after)) => pushed(after),
        Some(Pushback::DoNotRetry) if retryable.contains(code) => Outcome::stop(reason),
        None if retryable.contains(code) => Outcome::retry(reason),
        // RESOURCE_EXHAUSTED outside the set, without a valid pushback.
        _ => Outcome::failure(),
    }
}

/// Sets `grpc-previous-rpc-attempts` to `n`, the number of attempts before this one.
///
/// A6 leaves the key off the first attempt, so `n == 0` removes it.
///
/// ```
/// # use http::HeaderMap;
/// use tower_backoff::grpc::{set_previous_attempts, PREVIOUS_RPC_ATTEMPTS};
///
/// let mut headers = HeaderMap::new();
/// set_previous_attempts(&mut headers, 2);
/// assert_eq!(headers[PREVIOUS_RPC_ATTEMPTS], "2");
/// set_previous_attempts(&mut headers, 0);
/// assert!(headers.get(PREVIOUS_RPC_ATTEMPTS).is_none());
/// ```
pub fn set_previous_attempts(headers: &mut HeaderMap, n: u32) {
    let name = HeaderName::from_static(PREVIOUS_RPC_ATTEMPTS);
    if n == 0 {
        headers.remove(name);
    } else {
        headers.insert(name, HeaderValue::from(n));
    }
}
