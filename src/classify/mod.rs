//! Deciding what an attempt's result means, separately from acting on it.
//!
//! A [`Classify`] turns the response or error of one attempt into an [`Outcome`]: success,
//! final failure, or a retryable failure with its [`RetryReason`], the delay the server
//! asked for ([`ServerDelay`]) and whether the request may be sent again whatever its
//! method ([`Resend`]). The retry policy then *admits* the retry or not (idempotency,
//! replayable body, per-request limits, throttle, shared budget) and *acts* (waits, tells
//! the hooks, resends). Two classifiers come with the crate:
//!
//! - [`HttpClassifier`] (the default): retryable statuses from a [`StatusSet`] (408, 429,
//!   502, 503, 504 by default), `Retry-After`, and errors by [`ErrorClass`].
//! - [`GrpcClassifier`] ([`RetryLayer::grpc`](crate::RetryLayer::grpc)): the `grpc-status`
//!   of Trailers-Only responses and the server's pushback, as gRPC's retry design (A6) says.
//!
//! A classifier of your own plugs in with
//! [`RetryLayer::with_classifier`](crate::RetryLayer::with_classifier); it may delegate to the
//! built-in ones:
//!
//! ```
//! use std::error::Error;
//! use http::StatusCode;
//! use tower_backoff::classify::{Attempt, Classify, HttpClassifier, Outcome, ResponseHead};
//! use tower_backoff::{ConstantBackOff, RetryLayer, RetryReason};
//!
//! /// Also retries a 500 whose body the server marks as transient.
//! struct Transient500(HttpClassifier);
//!
//! impl Classify for Transient500 {
//!     fn classify_response(&self, attempt: &Attempt<'_>, res: &ResponseHead<'_>) -> Outcome {
//!         if res.status() == StatusCode::INTERNAL_SERVER_ERROR
//!             && res.headers().contains_key("x-transient")
//!         {
//!             return Outcome::retry(RetryReason::Status(res.status()));
//!         }
//!         self.0.classify_response(attempt, res)
//!     }
//!
//!     fn classify_error(&self, attempt: &Attempt<'_>, err: &(dyn Error + 'static)) -> Outcome {
//!         self.0.classify_error(attempt, err)
//!     }
//! }
//!
//! let layer = RetryLayer::new(ConstantBackOff::new(std::time::Duration::from_millis(10)).unwrap())
//!     .with_classifier(Transient500(HttpClassifier::new()));
//! # drop(layer);
//! ```
//!
//! The pieces they are built from are public too: [`is_idempotent`], [`StatusSet`],
//! [`default_error_class`] and [`AsError`].

pub(crate) mod error;
mod grpc;
pub(crate) mod http;
mod idempotent;
mod outcome;
mod reason;
mod request;
mod status;

pub use error::{AsError, ErrorClass, default_error_class};
pub use grpc::GrpcClassifier;
pub use http::HttpClassifier;
pub use idempotent::{IDEMPOTENCY_KEY, is_idempotent};
pub use outcome::{Outcome, Resend, ServerDelay};
pub use reason::RetryReason;
pub use request::RequestHead;
pub use status::StatusSet;

use crate::time::{ClockFn, wall_now};
use ::http::{Extensions, HeaderMap, Response, StatusCode, Version};
use std::error::Error;
use std::fmt;
use std::time::SystemTime;

/// Turns the result of one attempt into an [`Outcome`].
///
/// Implementations only describe; they never sleep, count or resend. They are shared by
/// every request of a layer (hence `Send + Sync`).
pub trait Classify: Send + Sync + 'static {
    /// What a response means.
    fn classify_response(&self, attempt: &Attempt<'_>, res: &ResponseHead<'_>) -> Outcome;

    /// What an error of the inner service means.
    fn classify_error(&self, attempt: &Attempt<'_>, err: &(dyn Error + 'static)) -> Outcome;

    /// Marks a request about to be sent again, after `previous` attempts: gRPC's
    /// `grpc-previous-rpc-attempts`, say. Does nothing by default.
    fn prepare_resend(&self, headers: &mut HeaderMap, previous: u32) {
        let _ = (headers, previous);
    }
}

/// What a classifier knows about the attempt it judges: the request, its number, the
/// statuses its settings retry, and the wall clock (for `Retry-After` dates).
#[derive(Clone, Copy)]
pub struct Attempt<'a> {
    request: RequestHead<'a>,
    number: u32,
    statuses: &'a StatusSet,
    clock: Option<&'a ClockFn>,
}

impl<'a> Attempt<'a> {
    /// The view of attempt `number` (from 1) of `request`, whose settings retry `statuses`.
    ///
    /// The statuses are borrowed: a [`StatusSet`] is 128 bytes, and every response of
    /// every request is classified.
    pub fn new(request: RequestHead<'a>, number: u32, statuses: &'a StatusSet) -> Self {
        Self {
            request,
            number,
            statuses,
            clock: None,
        }
    }

    pub(crate) fn with_clock(mut self, clock: Option<&'a ClockFn>) -> Self {
        self.clock = clock;
        self
    }

    /// The request.
    pub fn request(&self) -> &RequestHead<'a> {
        &self.request
    }

    /// The attempt's number, from 1.
    pub fn number(&self) -> u32 {
        self.number
    }

    /// The statuses the request's settings retry.
    pub fn statuses(&self) -> &'a StatusSet {
        self.statuses
    }

    /// The wall-clock time now (the layer's clock in tests and simulations).
    pub fn wall_clock(&self) -> SystemTime {
        wall_now(self.clock)
    }

    /// The layer's wall clock, `None` for the system's.
    pub(crate) fn clock(&self) -> Option<&'a ClockFn> {
        self.clock
    }
}

impl fmt::Debug for Attempt<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Attempt")
            .field("method", self.request.method())
            .field("number", &self.number)
            .field("statuses", &self.statuses)
            .finish_non_exhaustive()
    }
}

/// A borrowed view of a response's head, given to classifiers.
#[derive(Debug, Clone, Copy)]
pub struct ResponseHead<'a> {
    status: StatusCode,
    version: Version,
    headers: &'a HeaderMap,
    extensions: &'a Extensions,
}

impl<'a> ResponseHead<'a> {
    /// The view of `res`'s head.
    pub fn of<B>(res: &'a Response<B>) -> Self {
        Self {
            status: res.status(),
            version: res.version(),
            headers: res.headers(),
            extensions: res.extensions(),
        }
    }

    /// The status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The HTTP version.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The headers.
    pub fn headers(&self) -> &'a HeaderMap {
        self.headers
    }

    /// The extensions.
    pub fn extensions(&self) -> &'a Extensions {
        self.extensions
    }
}
