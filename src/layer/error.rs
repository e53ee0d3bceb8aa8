//! The error of a request that failed for good, with what its retries cost.

use super::stats::RetryStats;
use std::error::Error;
use std::fmt;

use crate::error::BoxError;

/// The error [`RetryLayer`](crate::RetryLayer)'s service fails with: the last attempt's
/// error, and the [`RetryStats`] of the request (attempts made, time waited, why it was not
/// retried further).
///
/// Its [`source`](Error::source) is the inner service's error, so error reporters print the
/// whole chain; [`into_inner`](Self::into_inner) gives it back to downcast it.
///
/// ```
/// use std::time::Duration;
/// use tower::{ServiceBuilder, ServiceExt};
/// use tower_backoff::{ConstantBackOff, GiveUp, RetryError, RetryLayer};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let refused = tower::service_fn(|_: http::Request<String>| async {
///     Err::<http::Response<String>, _>(std::io::Error::from(std::io::ErrorKind::ConnectionRefused))
/// });
/// let client = ServiceBuilder::new()
///     .layer(RetryLayer::new(ConstantBackOff::new(Duration::from_millis(10)).unwrap()))
///     .service(refused);
/// let err: RetryError = client.oneshot(http::Request::new(String::new())).await.unwrap_err();
/// assert_eq!(err.stats().attempts, 4);
/// assert!(matches!(err.stats().gave_up, Some(GiveUp::Limit(_))));
/// assert!(err.inner().is::<std::io::Error>());
/// # }
/// ```
#[derive(Debug)]
pub struct RetryError {
    inner: BoxError,
    stats: RetryStats,
}

impl RetryError {
    pub(crate) fn new(inner: BoxError, stats: RetryStats) -> Self {
        Self { inner, stats }
    }

    /// What the retries cost, and why the request was not retried further.
    pub fn stats(&self) -> RetryStats {
        self.stats
    }

    /// The last attempt's error.
    pub fn inner(&self) -> &(dyn Error + Send + Sync + 'static) {
        &*self.inner
    }

    /// The last attempt's error, to downcast it.
    pub fn into_inner(self) -> BoxError {
        self.inner
    }
}

impl fmt::Display for RetryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "request failed after {} attempt", self.stats.attempts)?;
        if self.stats.attempts != 1 {
            f.write_str("s")?;
        }
        if let Some(why) = self.stats.gave_up {
            write!(f, " (not retried: {why})")?;
        }
        Ok(())
    }
}

impl Error for RetryError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&*self.inner)
    }
}

/// The last response of a request whose retry could not start after its wait: its body
/// was dropped when the retry was scheduled, its head is kept.
///
/// A retry drops the body of the response it retries at once: an unread body holds its
/// connection (an HTTP/2 receive window shared with other requests, an HTTP/1 connection)
/// for the whole wait. When the retry then cannot start (its request body outgrew its
/// buffer, the deadline came while the inner service was not ready, or it failed to get
/// ready), the request fails with a [`RetryError`] around this: the status and headers of
/// what the server last said, and the [`RetryStats`] saying why.
///
/// ```
/// use tower_backoff::RetryError;
/// use tower_backoff::layer::LastResponse;
///
/// fn report(err: &RetryError) {
///     if let Some(last) = err.inner().downcast_ref::<LastResponse>() {
///         println!("gave up ({:?}) after {}", err.stats().gave_up, last.status());
///     }
/// }
/// ```
#[derive(Debug, Clone)]
pub struct LastResponse {
    status: http::StatusCode,
    version: http::Version,
    headers: http::HeaderMap,
}

impl LastResponse {
    /// The head of `res`; its body is dropped.
    pub(crate) fn of<B>(res: http::Response<B>) -> Self {
        let (parts, _) = res.into_parts();
        Self {
            status: parts.status,
            version: parts.version,
            headers: parts.headers,
        }
    }

    /// The status of the last response.
    pub fn status(&self) -> http::StatusCode {
        self.status
    }

    /// Its HTTP version.
    pub fn version(&self) -> http::Version {
        self.version
    }

    /// Its headers (`Retry-After`, a gRPC status, …).
    pub fn headers(&self) -> &http::HeaderMap {
        &self.headers
    }
}

impl fmt::Display for LastResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the retry could not start; the last response was {}",
            self.status
        )
    }
}

impl Error for LastResponse {}

/// The error of an attempt that did not answer within its
/// [attempt timeout](crate::RetrySettings::with_attempt_timeout).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AttemptTimedOut(());

impl AttemptTimedOut {
    pub(crate) fn new() -> Self {
        Self(())
    }
}

impl fmt::Display for AttemptTimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the attempt timed out")
    }
}

impl Error for AttemptTimedOut {}

impl crate::classify::AsError for RetryError {
    fn as_error(&self) -> Option<&(dyn Error + 'static)> {
        Some(self)
    }
}
