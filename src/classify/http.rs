//! The default classifier: HTTP statuses, `Retry-After`, and transport errors.

use super::error::{ErrorClass, default_error_class};
use super::outcome::{Outcome, Resend, ServerDelay};
use super::reason::RetryReason;
use super::{Attempt, Classify, ResponseHead, StatusSet};
use crate::retry_after::ServerSaid;
use http::StatusCode;
use std::error::Error;
use std::fmt;
use std::sync::Arc;

pub(crate) type ErrorFn = dyn Fn(&(dyn Error + 'static)) -> ErrorClass + Send + Sync;

/// The default classifier of [`RetryLayer`](crate::RetryLayer): reads HTTP responses by
/// status and errors by [`ErrorClass`].
///
/// | Result of the attempt | Outcome | Resend | Server delay |
/// |---|---|---|---|
/// | 429 Too Many Requests | retry | if idempotent; any method with [`with_429_as_unprocessed`](Self::with_429_as_unprocessed) | `Retry-After`, exactly |
/// | 503 Service Unavailable | retry | if idempotent | `Retry-After`, exactly |
/// | other status of the request's [`StatusSet`](super::StatusSet) (502, 504, 408 by default) | retry | if idempotent | `Retry-After`, at least |
/// | other 4xx and 5xx | failure | — | — |
/// | any other status (1xx–3xx) | success | — | — |
/// | [`ErrorClass::Connect`] error | retry | any method: never reached the server | — |
/// | [`ErrorClass::Unprocessed`] error | retry | any method: refused before processing | — |
/// | [`ErrorClass::Transport`] error | retry | if idempotent | — |
/// | [`ErrorClass::Fatal`] error | failure | — | — |
///
/// `Retry-After` is read in all its forms, and the `t` of an IETF `RateLimit` header
/// without it (see [`retry_after::from_headers`](crate::retry_after::from_headers)); a
/// delay of zero leaves the delay to the backoff (servers that round down say `0` for
/// "under a second"). Errors are classed by [`default_error_class`] unless
/// [`with_error_class`](Self::with_error_class) says otherwise.
///
/// A 429 proves nothing about processing: a proxy or a gateway may answer it after the
/// upstream acted on the request. So a POST answered 429 is not resent, as RFC 9110
/// §9.2.2 and urllib3 do, unless the API promises otherwise and you say so.
///
/// ```
/// use http::{Method, Request, Response, StatusCode};
/// use tower_backoff::classify::{
///     Attempt, Classify, HttpClassifier, RequestHead, Resend, ResponseHead, StatusSet,
/// };
///
/// let req = Request::post("/orders").body(()).unwrap();
/// let attempt = Attempt::new(RequestHead::of(&req), 1, &StatusSet::DEFAULT);
/// let res = Response::builder().status(429).body(()).unwrap();
/// let outcome = HttpClassifier::new().classify_response(&attempt, &ResponseHead::of(&res));
/// assert!(outcome.is_retryable());
/// assert_eq!(outcome.resend(), Resend::IfIdempotent);
///
/// let trusting = HttpClassifier::new().with_429_as_unprocessed();
/// let outcome = trusting.classify_response(&attempt, &ResponseHead::of(&res));
/// assert_eq!(outcome.resend(), Resend::AnyMethod);
/// ```
#[derive(Clone, Default)]
pub struct HttpClassifier {
    errors: Option<Arc<ErrorFn>>,
    unprocessed_429: bool,
}

impl HttpClassifier {
    /// Statuses as the table says, errors by [`default_error_class`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Classes errors with `classify` instead of [`default_error_class`] (which it may
    /// still call for the cases it does not know).
    pub fn with_error_class<F>(mut self, classify: F) -> Self
    where
        F: Fn(&(dyn Error + 'static)) -> ErrorClass + Send + Sync + 'static,
    {
        self.errors = Some(Arc::new(classify));
        self
    }

    /// Trusts this API's 429 to mean "refused before processing": a 429 is then resent
    /// for every method, POST included. Only for an API that documents it (a rate limiter
    /// in front of the server, never behind a proxy that forwards the request first).
    pub fn with_429_as_unprocessed(mut self) -> Self {
        self.unprocessed_429 = true;
        self
    }

    pub(crate) fn error_class(&self, err: &(dyn Error + 'static)) -> ErrorClass {
        match &self.errors {
            Some(classify) => classify(err),
            None => default_error_class(err),
        }
    }
}

/// The outcome of an error of class `class`, for classifiers that read errors alike.
pub(crate) fn error_outcome(class: ErrorClass) -> Outcome {
    let reason = match class {
        ErrorClass::Connect => RetryReason::Connect,
        ErrorClass::Unprocessed => RetryReason::Unprocessed,
        ErrorClass::Transport => RetryReason::Transport,
        // Fatal, and any class added later: never retried.
        _ => return Outcome::failure(),
    };
    let outcome = Outcome::retry(reason);
    if class.never_processed() {
        outcome.with_resend(Resend::AnyMethod)
    } else {
        outcome
    }
}

impl Classify for HttpClassifier {
    // Inline, as far as the status lookup that judges most responses; a retried status
    // goes on out of line.
    #[inline]
    fn classify_response(&self, attempt: &Attempt<'_>, res: &ResponseHead<'_>) -> Outcome {
        self.response_outcome(attempt.statuses(), || *attempt, res)
    }

    fn classify_error(&self, _: &Attempt<'_>, err: &(dyn Error + 'static)) -> Outcome {
        error_outcome(self.error_class(err))
    }
}

impl HttpClassifier {
    /// What a response means: `retried` are the statuses the attempt's settings retry;
    /// `attempt` is only built for one of them (most responses are judged by one lookup).
    #[inline]
    pub(crate) fn response_outcome<'a>(
        &self,
        retried: &StatusSet,
        attempt: impl FnOnce() -> Attempt<'a>,
        res: &ResponseHead<'_>,
    ) -> Outcome {
        let outcome = response_outcome(retried, attempt, res);
        if self.unprocessed_429 && res.status() == StatusCode::TOO_MANY_REQUESTS {
            outcome.with_resend(Resend::AnyMethod)
        } else {
            outcome
        }
    }
}

/// What a response means by the default table (see [`HttpClassifier::response_outcome`]).
#[inline]
fn response_outcome<'a>(
    retried: &StatusSet,
    attempt: impl FnOnce() -> Attempt<'a>,
    res: &ResponseHead<'_>,
) -> Outcome {
    let status = res.status();
    match unretried_status(retried, status) {
        Some(outcome) => outcome,
        None => retried_status(status, res, &attempt()),
    }
}

/// The outcome of a response whose status `retried` does not hold: a success or a
/// failure, by its class. `None`: the status is retried (see [`retried_status`]).
#[inline]
fn unretried_status(retried: &StatusSet, status: StatusCode) -> Option<Outcome> {
    if retried.contains(status) {
        None
    } else if status.is_client_error() || status.is_server_error() {
        Some(Outcome::failure())
    } else {
        Some(Outcome::success())
    }
}

/// The outcome of a response whose status the attempt's settings retry: its
/// `Retry-After`, and whether the server scheduled the retry.
#[inline(never)]
fn retried_status(status: StatusCode, res: &ResponseHead<'_>, attempt: &Attempt<'_>) -> Outcome {
    let mut outcome = Outcome::retry(RetryReason::Status(status));
    // Read once per response: a pacing layer below has read it already, with this clock.
    let asked = ServerSaid::retry_after_of(res.headers(), res.extensions(), attempt.clock());
    // A rate limiter that said when to come back (even "0") scheduled the retry.
    if status == StatusCode::TOO_MANY_REQUESTS && asked.is_some() {
        outcome = outcome.with_scheduled();
    }
    match asked {
        // "0": servers that round down say 0 for "under a second" (tower_governor
        // does), and retrying at once would be refused again: the backoff decides.
        None => outcome,
        Some(after) if after.is_zero() => outcome,
        // The server said when: trust it, for the statuses whose header means that.
        Some(after)
            if matches!(
                status,
                StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
            ) =>
        {
            outcome.with_server_delay(ServerDelay::Exactly(after))
        }
        // Elsewhere a Retry-After is a floor: never sooner than asked.
        Some(after) => outcome.with_server_delay(ServerDelay::AtLeast(after)),
    }
}

impl fmt::Debug for HttpClassifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpClassifier")
            .field("custom_errors", &self.errors.is_some())
            .field("unprocessed_429", &self.unprocessed_429)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::{RequestHead, StatusSet};
    use http::{Request, Response};
    use std::io;
    use std::time::Duration;

    fn judge(method: &str, status: u16, header: Option<(&str, &str)>) -> Outcome {
        let req = Request::builder().method(method).body(()).unwrap();
        let attempt = Attempt::new(RequestHead::of(&req), 1, &StatusSet::DEFAULT);
        let mut res = Response::builder().status(status);
        if let Some((name, value)) = header {
            res = res.header(name, value);
        }
        HttpClassifier::new().classify_response(&attempt, &ResponseHead::of(&res.body(()).unwrap()))
    }

    fn retry(status: u16) -> Outcome {
        Outcome::retry(RetryReason::Status(StatusCode::from_u16(status).unwrap()))
    }

    #[test]
    fn the_rows_of_the_status_table() {
        assert_eq!(judge("GET", 429, None), retry(429));
        assert_eq!(judge("POST", 429, None), retry(429));
        assert_eq!(judge("POST", 503, None), retry(503));
        for status in [502, 504, 408] {
            assert_eq!(judge("GET", status, None), retry(status));
        }
        for status in [500, 404, 400] {
            assert_eq!(judge("GET", status, None), Outcome::failure());
        }
        for status in [200, 201, 301] {
            assert_eq!(judge("GET", status, None), Outcome::success());
        }
    }

    #[test]
    fn retry_after_is_exact_on_429_and_503_and_a_floor_elsewhere() {
        let two = Duration::from_secs(2);
        let after = Some(("retry-after", "2"));
        assert_eq!(
            judge("GET", 503, after).server_delay(),
            Some(ServerDelay::Exactly(two))
        );
        assert_eq!(
            judge("GET", 429, after).server_delay(),
            Some(ServerDelay::Exactly(two))
        );
        assert_eq!(
            judge("GET", 502, after).server_delay(),
            Some(ServerDelay::AtLeast(two))
        );
        assert_eq!(
            judge("GET", 503, Some(("retry-after", "soon"))).server_delay(),
            None
        );
    }

    #[test]
    fn a_rate_limiter_that_says_when_schedules_the_retry() {
        assert!(judge("GET", 429, Some(("retry-after", "1"))).is_scheduled());
        // "Retry-After: 0" is scheduled too (the backoff chooses the delay)...
        let now = judge("GET", 429, Some(("retry-after", "0")));
        assert!(now.is_scheduled());
        assert_eq!(now.server_delay(), None);
        // ...no Retry-After is not, and an outage's 503 with one is not either.
        assert!(!judge("GET", 429, None).is_scheduled());
        assert!(!judge("GET", 503, Some(("retry-after", "1"))).is_scheduled());
    }

    #[test]
    fn errors_follow_their_class() {
        let req = Request::get("/").body(()).unwrap();
        let attempt = Attempt::new(RequestHead::of(&req), 1, &StatusSet::DEFAULT);
        let reset = io::Error::from(io::ErrorKind::ConnectionReset);
        let outcome = HttpClassifier::new().classify_error(&attempt, &reset);
        assert_eq!(outcome, Outcome::retry(RetryReason::Transport));
        let fatal = HttpClassifier::new().with_error_class(|_| ErrorClass::Fatal);
        assert_eq!(fatal.classify_error(&attempt, &reset), Outcome::failure());
        let connect = HttpClassifier::new().with_error_class(|_| ErrorClass::Connect);
        assert_eq!(
            connect.classify_error(&attempt, &reset).resend(),
            Resend::AnyMethod
        );
    }
}
