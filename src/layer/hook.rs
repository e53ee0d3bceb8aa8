//! Being told about each retry, and about each request given up on.

use super::stats::GiveUp;
use crate::classify::RetryReason;
use crate::redact::RedactedParams;
use http::uri::Uri;
use http::{Method, StatusCode};
use std::borrow::Cow;
use std::error::Error;
use std::fmt;
use std::time::Duration;

/// One retry about to be made, as seen by an [`OnRetry`] hook.
///
/// Its `Debug` output shows the [redacted URI](Self::uri), never the raw one.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use std::time::Duration;
/// use tower::{Layer, ServiceExt};
/// use tower_backoff::{ConstantBackOff, RetryEvent, RetryLayer};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let log = seen.clone();
/// let layer = RetryLayer::new(ConstantBackOff::new(Duration::from_millis(10)).unwrap())
///     .on_retry(move |e: &RetryEvent<'_>| log.lock().unwrap().push(e.uri().to_string()));
/// // A server that answers 503 once.
/// let mut calls = 0;
/// let server = tower::service_fn(move |_: http::Request<String>| {
///     calls += 1;
///     let res = http::Response::builder().status(if calls == 1 { 503 } else { 200 });
///     async move { Ok::<_, std::io::Error>(res.body(String::new()).unwrap()) }
/// });
/// let uri = "https://user:pw@host/file?sig=abc&page=2";
/// let req = http::Request::get(uri).body(String::new()).unwrap();
/// layer.layer(server).oneshot(req).await.unwrap();
/// let shown = "https://REDACTED:REDACTED@host/file?sig=REDACTED&page=2";
/// assert_eq!(*seen.lock().unwrap(), [shown]);
/// # }
/// ```
#[derive(Clone, Copy)]
pub struct RetryEvent<'a> {
    pub(crate) attempt: u32,
    pub(crate) delay: Duration,
    pub(crate) reason: RetryReason,
    pub(crate) retry_after: Option<Duration>,
    pub(crate) method: &'a Method,
    pub(crate) uri: &'a Uri,
    pub(crate) error: Option<&'a (dyn Error + 'static)>,
    pub(crate) redacted: &'a RedactedParams,
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

    /// The request's URI as it may be logged: credentials (`user:password@`) become
    /// `REDACTED:REDACTED@`, and the values of the layer's
    /// [redacted query parameters](crate::RetryLayer::with_redacted_query_params) become
    /// `REDACTED`. Borrowed when there is nothing to redact.
    pub fn uri(&self) -> Cow<'a, Uri> {
        self.redacted.uri(self.uri).to_uri()
    }

    /// The request's URI **as sent, unredacted**: it may carry credentials and signed
    /// query values. Keep it out of logs, traces and error reports; [`uri`](Self::uri) is
    /// the form to show.
    pub fn raw_uri(&self) -> &'a Uri {
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

impl fmt::Debug for RetryEvent<'_> {
    // The URI redacted: `{:?}` of an event often ends up in a log.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryEvent")
            .field("attempt", &self.attempt)
            .field("delay", &self.delay)
            .field("reason", &self.reason)
            .field("retry_after", &self.retry_after)
            .field("method", self.method)
            .field("uri", &self.redacted.uri(self.uri))
            .field("error", &self.error)
            .finish()
    }
}

/// A request given up on: its last response or error is returned to the caller.
///
/// Its `Debug` output shows the [redacted URI](Self::uri), never the raw one.
#[derive(Clone, Copy)]
pub struct GiveUpEvent<'a> {
    pub(crate) attempts: u32,
    pub(crate) reason: RetryReason,
    pub(crate) why: GiveUp,
    pub(crate) method: &'a Method,
    pub(crate) uri: &'a Uri,
    pub(crate) redacted: &'a RedactedParams,
}

impl<'a> GiveUpEvent<'a> {
    /// The attempts made, the first one included.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Why the last attempt failed.
    pub fn reason(&self) -> RetryReason {
        self.reason
    }

    /// Why it is not retried.
    pub fn why(&self) -> GiveUp {
        self.why
    }

    /// The request's method.
    pub fn method(&self) -> &'a Method {
        self.method
    }

    /// The request's URI as it may be logged, redacted as [`RetryEvent::uri`] is.
    pub fn uri(&self) -> Cow<'a, Uri> {
        self.redacted.uri(self.uri).to_uri()
    }

    /// The request's URI **as sent, unredacted**: it may carry credentials and signed
    /// query values. Keep it out of logs, traces and error reports; [`uri`](Self::uri) is
    /// the form to show.
    pub fn raw_uri(&self) -> &'a Uri {
        self.uri
    }
}

impl fmt::Debug for GiveUpEvent<'_> {
    // The URI redacted, as for `RetryEvent`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GiveUpEvent")
            .field("attempts", &self.attempts)
            .field("reason", &self.reason)
            .field("why", &self.why)
            .field("method", self.method)
            .field("uri", &self.redacted.uri(self.uri))
            .finish()
    }
}

/// A hook called when a request whose last attempt failed in a retryable way is not
/// retried (see [`GiveUp`]). Implemented for `()` and for closures `Fn(&GiveUpEvent<'_>)`.
///
/// ```
/// use tower_backoff::{ConstantBackOff, GiveUpEvent, RetryLayer};
///
/// let layer = RetryLayer::new(ConstantBackOff::new(std::time::Duration::from_millis(10)).unwrap())
///     .on_give_up(|e: &GiveUpEvent<'_>| {
///         eprintln!("{} {} given up after {} attempts: {}", e.method(), e.uri(), e.attempts(), e.why())
///     });
/// # drop(layer);
/// ```
pub trait OnGiveUp {
    /// Called once, when the request is given up on.
    fn on_give_up(&self, event: &GiveUpEvent<'_>);
}

impl OnGiveUp for () {
    fn on_give_up(&self, _: &GiveUpEvent<'_>) {}
}

impl<F> OnGiveUp for F
where
    F: Fn(&GiveUpEvent<'_>),
{
    fn on_give_up(&self, event: &GiveUpEvent<'_>) {
        self(event)
    }
}

/// The host (and port) of `uri`, without credentials: what logs and metrics may name.
pub(crate) fn server_address(uri: &Uri) -> &str {
    uri.authority()
        .map(|a| {
            a.as_str()
                .rsplit_once('@')
                .map_or(a.as_str(), |(_, host)| host)
        })
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_address_has_no_credentials() {
        let uri: Uri = "http://user:secret@api.example:8080/path?q=1"
            .parse()
            .unwrap();
        assert_eq!(server_address(&uri), "api.example:8080");
        let relative: Uri = "/x".parse().unwrap();
        assert_eq!(server_address(&relative), "");
    }
}
