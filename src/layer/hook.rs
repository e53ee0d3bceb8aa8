//! Being told about each retry, and about each request given up on.

use super::stats::GiveUp;
use crate::classify::RetryReason;
use http::uri::{Authority, Uri};
use http::{Method, StatusCode};
use std::borrow::Cow;
use std::error::Error;
use std::time::Duration;

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

    /// The request's URI, without any credentials (`user:password@`) it carried.
    pub fn uri(&self) -> Cow<'a, Uri> {
        without_userinfo(self.uri)
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

/// A request given up on: its last response or error is returned to the caller.
#[derive(Debug, Clone, Copy)]
pub struct GiveUpEvent<'a> {
    pub(crate) attempts: u32,
    pub(crate) reason: RetryReason,
    pub(crate) why: GiveUp,
    pub(crate) method: &'a Method,
    pub(crate) uri: &'a Uri,
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

    /// The request's URI, without any credentials (`user:password@`) it carried.
    pub fn uri(&self) -> Cow<'a, Uri> {
        without_userinfo(self.uri)
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

/// `uri` as it may be shown: credentials in its authority are dropped (a copy is made only
/// when there are some).
pub(crate) fn without_userinfo(uri: &Uri) -> Cow<'_, Uri> {
    let Some(authority) = uri.authority() else {
        return Cow::Borrowed(uri);
    };
    let Some((_, host)) = authority.as_str().rsplit_once('@') else {
        return Cow::Borrowed(uri);
    };
    let mut parts = uri.clone().into_parts();
    parts.authority = Authority::try_from(host).ok();
    Cow::Owned(Uri::from_parts(parts).unwrap_or_default())
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
    fn credentials_never_leave_a_uri() {
        let uri: Uri = "http://user:secret@api.example:8080/path?q=1"
            .parse()
            .unwrap();
        let shown = without_userinfo(&uri);
        assert_eq!(shown.to_string(), "http://api.example:8080/path?q=1");
        assert!(matches!(shown, Cow::Owned(_)));
        assert_eq!(server_address(&uri), "api.example:8080");
        let plain: Uri = "http://api.example/x".parse().unwrap();
        assert!(matches!(without_userinfo(&plain), Cow::Borrowed(_)));
        let relative: Uri = "/x".parse().unwrap();
        assert_eq!(server_address(&relative), "");
    }
}
