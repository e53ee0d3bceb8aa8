//! The gRPC classifier: `grpc-status` of Trailers-Only responses and the server's pushback.

use super::http::{HttpClassifier, error_outcome};
use super::outcome::{Outcome, Resend};
use super::{Attempt, Classify, ResponseHead};
use crate::error::ConfigError;
use crate::grpc::{self, GrpcCodes};
use http::HeaderMap;
use std::error::Error;

/// Reads gRPC calls as gRPC's retry design (A6) does; installed by
/// [`RetryLayer::grpc`](crate::RetryLayer::grpc).
///
/// - A Trailers-Only response (its `grpc-status` in the headers) whose code is in the
///   retryable set ([`GrpcCodes::DEFAULT_RETRYABLE`]: `UNAVAILABLE`) is retried, but only
///   for a method you declared retryable, as A6's `methodConfig` does
///   ([`with_retryable_service`](Self::with_retryable_service),
///   [`with_retryable_method`](Self::with_retryable_method)). A proxy such as Envoy answers
///   `UNAVAILABLE` (or HTTP 503) when the upstream died *after* it got the call: only
///   you know whether a method may run twice. `RESOURCE_EXHAUSTED` is retried too when
///   the server sends a pushback delay, under the same rule. Calls of other methods are
///   given up on with [`GiveUp::NotIdempotent`](crate::GiveUp::NotIdempotent).
/// - A server's `grpc-retry-pushback-ms` replaces the backoff's delay and starts the backoff
///   over; a negative or malformed one stops the retries ([`GiveUp::Pushback`](crate::GiveUp::Pushback)).
/// - A response without a status has started streaming: the call is committed and never
///   retried.
/// - Errors are classed as for HTTP ([`HttpClassifier`]): a call that provably never
///   reached the server (a connect failure, `REFUSED_STREAM`, a `GOAWAY` above its stream)
///   is retried transparently for every method; a call that may have reached it only for
///   a declared method.
///
/// Retries carry `grpc-previous-rpc-attempts`.
///
/// ```
/// use http::{Request, Response};
/// use tower_backoff::classify::{Attempt, Classify, GrpcClassifier, RequestHead, ResponseHead, StatusSet};
/// use tower_backoff::grpc::Code;
/// use tower_backoff::RetryReason;
///
/// use tower_backoff::classify::Resend;
///
/// let call = Request::post("/pkg.Service/Method").body(()).unwrap();
/// let attempt = Attempt::new(RequestHead::of(&call), 1, &StatusSet::DEFAULT);
/// let unavailable = Response::builder().header("grpc-status", "14").body(()).unwrap();
/// let head = ResponseHead::of(&unavailable);
///
/// let undeclared = GrpcClassifier::new().classify_response(&attempt, &head);
/// assert_eq!(undeclared.reason(), Some(RetryReason::Grpc(Code::Unavailable)));
/// assert_eq!(undeclared.resend(), Resend::IfIdempotent); // so a call is not resent
///
/// let declared = GrpcClassifier::new().with_retryable_service("pkg.Service")?;
/// assert_eq!(declared.classify_response(&attempt, &head).resend(), Resend::AnyMethod);
/// # Ok::<(), tower_backoff::ConfigError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct GrpcClassifier {
    codes: GrpcCodes,
    errors: HttpClassifier,
    retryable: RetryableMethods,
}

/// The methods whose calls may be resent on a retryable status: path prefixes
/// (`/pkg.Service/`) and whole paths (`/pkg.Service/Method`).
#[derive(Debug, Clone, Default)]
struct RetryableMethods {
    all: bool,
    paths: Vec<String>,
}

impl RetryableMethods {
    fn contains(&self, path: &str) -> bool {
        self.all
            || self.paths.iter().any(|p| {
                if p.ends_with('/') {
                    path.starts_with(p.as_str())
                } else {
                    path == p
                }
            })
    }
}

/// A gRPC name part: not empty, no `/`.
fn name_part(field: &'static str, name: &str) -> Result<(), ConfigError> {
    if name.is_empty() || name.contains('/') {
        return Err(ConfigError::new(
            field,
            name,
            "must be a non-empty name without '/' (such as \"pkg.Service\")",
        ));
    }
    Ok(())
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

    /// Declares every method of `service` (its full name, `pkg.Service`) safe to call
    /// again after a retryable status. A name that is empty or holds `/` is a
    /// [`ConfigError`] for `retryable_service`.
    pub fn with_retryable_service(mut self, service: &str) -> Result<Self, ConfigError> {
        name_part("retryable_service", service)?;
        self.retryable.paths.push(format!("/{service}/"));
        Ok(self)
    }

    /// Declares the method `method` of `service` safe to call again after a retryable
    /// status. A name that is empty or holds `/` is a [`ConfigError`] for
    /// `retryable_method`.
    pub fn with_retryable_method(
        mut self,
        service: &str,
        method: &str,
    ) -> Result<Self, ConfigError> {
        name_part("retryable_method", service)?;
        name_part("retryable_method", method)?;
        self.retryable.paths.push(format!("/{service}/{method}"));
        Ok(self)
    }

    /// Declares every method safe to call again after a retryable status (A6's default
    /// `methodConfig`): for a client whose every call is idempotent.
    pub fn with_every_method_retryable(mut self) -> Self {
        self.retryable.all = true;
        self
    }

    /// Classes transport errors with `errors` (see [`HttpClassifier::with_error_class`]).
    pub fn with_errors(mut self, errors: HttpClassifier) -> Self {
        self.errors = errors;
        self
    }
}

impl Classify for GrpcClassifier {
    fn classify_response(&self, attempt: &Attempt<'_>, res: &ResponseHead<'_>) -> Outcome {
        let outcome = grpc::classify_head(res.status(), res.headers(), self.codes);
        if outcome.is_retryable() && self.retryable.contains(attempt.request().uri().path()) {
            outcome.with_resend(Resend::AnyMethod)
        } else {
            outcome
        }
    }

    fn classify_error(&self, _: &Attempt<'_>, err: &(dyn Error + 'static)) -> Outcome {
        error_outcome(self.errors.error_class(err))
    }

    fn prepare_resend(&self, headers: &mut HeaderMap, previous: u32) {
        grpc::set_previous_attempts(headers, previous);
    }
}
