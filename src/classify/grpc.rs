//! The gRPC classifier: `grpc-status` of Trailers-Only responses and the server's pushback.

use super::http::{HttpClassifier, error_outcome};
use super::outcome::{Outcome, Resend, ServerDelay};
use super::reason::RetryReason;
use super::{Attempt, Classify, ResponseHead};
use crate::grpc::{self, DoNotRetryReason, GrpcCodes, GrpcDecision};
use http::HeaderMap;
use std::error::Error;

/// Reads gRPC calls as gRPC's retry design (A6) does; installed by
/// [`RetryLayer::grpc`](crate::RetryLayer::grpc).
///
/// - A Trailers-Only response (its `grpc-status` in the headers) whose code is in the
///   retryable set ([`GrpcCodes::DEFAULT_RETRYABLE`]: `UNAVAILABLE`) is retried, whatever
///   the method: every gRPC call is a POST, and A6 leaves idempotency to the choice of codes.
///   `RESOURCE_EXHAUSTED` is retried too when the server sends a pushback delay.
/// - A server's `grpc-retry-pushback-ms` replaces the backoff's delay and starts the backoff
///   over; a negative or malformed one stops the retries ([`GiveUp::Pushback`](crate::GiveUp::Pushback)).
/// - A response without a status has started streaming: the call is committed and never
///   retried.
/// - Errors are classed as for HTTP ([`HttpClassifier`]): a connect failure is retried, a
///   call that may have reached the server is not (gRPC calls are not idempotent).
///
/// Retries carry `grpc-previous-rpc-attempts`.
///
/// ```
/// use http::{Request, Response};
/// use tower_backoff::classify::{Attempt, Classify, GrpcClassifier, RequestHead, ResponseHead, StatusSet};
/// use tower_backoff::grpc::Code;
/// use tower_backoff::RetryReason;
///
/// let call = Request::post("/pkg.Service/Method").body(()).unwrap();
/// let attempt = Attempt::new(RequestHead::of(&call), 1, &StatusSet::DEFAULT);
/// let unavailable = Response::builder().header("grpc-status", "14").body(()).unwrap();
/// let outcome = GrpcClassifier::new().classify_response(&attempt, &ResponseHead::of(&unavailable));
/// assert_eq!(outcome.reason(), Some(RetryReason::Grpc(Code::Unavailable)));
/// ```
#[derive(Debug, Clone, Default)]
pub struct GrpcClassifier {
    codes: GrpcCodes,
    errors: HttpClassifier,
}

impl GrpcClassifier {
    /// Retries [`GrpcCodes::DEFAULT_RETRYABLE`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Retries the codes in `codes` instead.
    pub fn with_codes(mut self, codes: GrpcCodes) -> Self {
        self.codes = codes;
        self
    }

    /// The retried codes.
    pub fn codes(&self) -> GrpcCodes {
        self.codes
    }

    /// Classes transport errors with `errors` (see [`HttpClassifier::with_error_class`]).
    pub fn with_errors(mut self, errors: HttpClassifier) -> Self {
        self.errors = errors;
        self
    }
}

impl Classify for GrpcClassifier {
    fn classify_response(&self, _: &Attempt<'_>, res: &ResponseHead<'_>) -> Outcome {
        match grpc::classify_head(res.status(), res.headers(), self.codes) {
            GrpcDecision::Success | GrpcDecision::Committed => Outcome::success(),
            GrpcDecision::Retry {
                code,
                after,
                reset_backoff,
            } => {
                let outcome =
                    Outcome::retry(RetryReason::Grpc(code)).with_resend(Resend::AnyMethod);
                match after {
                    Some(after) if reset_backoff => {
                        outcome.with_server_delay(ServerDelay::Restart(after))
                    }
                    Some(after) => outcome.with_server_delay(ServerDelay::Exactly(after)),
                    None => outcome,
                }
            }
            GrpcDecision::DoNotRetry(DoNotRetryReason::Pushback(code)) => {
                Outcome::stop(RetryReason::Grpc(code))
            }
            GrpcDecision::DoNotRetry(DoNotRetryReason::NotRetryable(_)) => Outcome::failure(),
        }
    }

    fn classify_error(&self, _: &Attempt<'_>, err: &(dyn Error + 'static)) -> Outcome {
        error_outcome(self.errors.error_class(err))
    }

    fn prepare_resend(&self, headers: &mut HeaderMap, previous: u32) {
        grpc::set_previous_attempts(headers, previous);
    }
}
