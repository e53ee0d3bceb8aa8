//! Being told about each retry.

use http::{Method, StatusCode, Uri};
use std::error::Error;
use std::fmt;
use std::time::Duration;

/// Why an attempt is retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RetryReason {
    /// The server answered a retryable status.
    Status(StatusCode),
    /// The connection failed: the request never reached the server.
    Connect,
    /// Another transport error: the request may have reached the server.
    Transport,
    /// A gRPC call failed with a retryable status (see [`RetrySettings::grpc`](crate::RetrySettings::grpc)).
    Grpc(crate::grpc::Code),
}

impl fmt::Display for RetryReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Status(s) => write!(f, "status {}", s.as_u16()),
            Self::Connect => f.write_str("connect error"),
            Self::Transport => f.write_str("transport error"),
            Self::Grpc(code) => write!(f, "grpc-status {code}"),
        }
    }
}

/// One retry about to be made, as seen by an [`OnRetry`] hook.
#[derive(Debug, Clone, Copy)]
pub struct RetryEvent<'a> {
    pub(crate) attempt: u32,
    pub(crate) delay: Duration,
    pub(crate) reason: RetryReason,
    pub(crate) retry_after: Option<Duration>,
    pub(crate) method: &'a Method,
    pub(crate) uri: &'a Uri,
    pub(crate) error: Option<&'a (dyn Error + 'static)>,
}

impl<'a> RetryEvent<'a> {
    /// The number of the attempt that failed, from 1; the retry is attempt `attempt() + 1`.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// How long the policy waits before the retry.
    pub fn delay(&self) -> Duration {
        self.delay
    }

    /// Why the attempt is retried.
    pub fn reason(&self) -> RetryReason {
        self.reason
    }

    /// The status of the failed attempt's response, if it got one.
    pub fn status(&self) -> Option<StatusCode> {
        match self.reason {
            RetryReason::Status(s) => Some(s),
            _ => None,
        }
    }

    /// The delay the server asked for (`Retry-After`), before any cap.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// The request's method.
    pub fn method(&self) -> &'a Method {
        self.method
    }

    /// The request's URI.
    pub fn uri(&self) -> &'a Uri {
        self.uri
    }

    /// The error of the failed attempt, if it failed with one the policy could inspect.
    pub fn error(&self) -> Option<&'a (dyn Error + 'static)> {
        self.error
    }
}

/// A hook called before each retry's wait. Implemented for `()` (does nothing) and for
/// closures `Fn(&RetryEvent<'_>)`.
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::sync::Arc;
/// use tower_backoff::{OnRetry, RetryEvent};
///
/// let retries = Arc::new(AtomicU32::new(0));
/// let counter = retries.clone();
/// let hook = move |_: &RetryEvent<'_>| {
///     counter.fetch_add(1, Ordering::Relaxed);
/// };
/// # fn is_hook(_: &impl OnRetry) {}
/// is_hook(&hook);
/// is_hook(&());
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a retry hook",
    label = "expected a closure `Fn(&RetryEvent<'_>)`",
    note = "a hook is a closure taking the event by reference and returning nothing: `|event: &RetryEvent<'_>| tracing::info!(delay = ?event.delay())`"
)]
pub trait OnRetry {
    /// Called once per retry, before waiting.
    fn on_retry(&self, event: &RetryEvent<'_>);
}

impl OnRetry for () {
    fn on_retry(&self, _: &RetryEvent<'_>) {}
}

// Not recommended so that anything else is reported as "not a retry hook", not as a
// missing `Fn` implementation.
#[diagnostic::do_not_recommend]
impl<F> OnRetry for F
where
    F: Fn(&RetryEvent<'_>),
{
    fn on_retry(&self, event: &RetryEvent<'_>) {
        self(event)
    }
}
