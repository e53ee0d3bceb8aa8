//! [`Error`]: why a request sent through a [`RetryClient`](super::RetryClient) failed.

use super::upstream;
use std::error::Error as StdError;
use std::fmt;

use crate::error::BoxError;
use crate::layer::{AttemptTimedOut, LastResponse};
use crate::{RetryError, RetryStats};

/// The error of a request sent through a [`RetryClient`](super::RetryClient): the last
/// attempt's `reqwest::Error`, or an error of a layer of the stack (the retry layer's own,
/// a timeout layer's, …).
///
/// It answers `reqwest::Error`'s questions (`is_connect`, `is_timeout`, `status`, `url`, …)
/// so that code inspecting reqwest's errors compiles unchanged. [`stats`](Self::stats)
/// tells what the retries cost. It is `Send + Sync + 'static`, so `?` turns it into a
/// `Box<dyn Error + Send + Sync>` or an `anyhow::Error`.
///
/// It displays as the error it wraps and has that error's source, so logging it shows the
/// same chain reqwest would. [`reqwest`](Self::reqwest) finds the `reqwest::Error` itself.
///
/// ```no_run
#[doc = concat!("# extern crate ", doc_crate!(), " as reqwest;")]
#[doc = concat!("use tower_backoff::integrations::", doc_module!(), "::{ClientExt, Error};")]
/// use tower_backoff::{ExponentialBackOff, RetryLayer};
///
/// # async fn run() {
/// let client = reqwest::Client::new().with_retry(RetryLayer::new(ExponentialBackOff::default()));
/// let err: Error = client.get("http://127.0.0.1:9/").send().await.unwrap_err();
/// if err.is_connect() {
///     let url = err.url().map(|url| url.as_str());
///     println!("cannot reach {url:?}");
/// }
/// if let Some(stats) = err.stats() {
///     println!("gave up after {} attempts ({:?})", stats.attempts, stats.gave_up);
/// }
/// # }
/// ```
pub struct Error {
    inner: BoxError,
}

impl Error {
    pub(crate) fn new(inner: impl Into<BoxError>) -> Self {
        Self {
            inner: inner.into(),
        }
    }

    /// The first error of type `T` in the chain, this error's own first.
    fn find<T: StdError + 'static>(&self) -> Option<&T> {
        let mut next: Option<&(dyn StdError + 'static)> = Some(&*self.inner);
        while let Some(error) = next {
            if let Some(found) = error.downcast_ref::<T>() {
                return Some(found);
            }
            next = crate::classify::error::next_in_chain(error);
        }
        None
    }

    /// The `reqwest::Error` that ended the request, if a `reqwest::Error` is in the chain.
    pub fn reqwest(&self) -> Option<&upstream::Error> {
        self.find::<upstream::Error>()
    }

    /// What the retries cost and why they stopped; `None` without a
    /// [`RetryLayer`](crate::RetryLayer) or when the request could not be built.
    pub fn stats(&self) -> Option<RetryStats> {
        self.find::<RetryError>().map(RetryError::stats)
    }

    /// Whether the last attempt could not connect (see `reqwest::Error::is_connect`).
    ///
    /// After a redirect it may be the target's connect that failed; the error then has no
    /// `url()` (see [`ReqwestService`](super::ReqwestService)).
    pub fn is_connect(&self) -> bool {
        self.reqwest().is_some_and(upstream::Error::is_connect)
    }

    /// Whether the last attempt timed out: reqwest's timeout (see
    /// `reqwest::Error::is_timeout`) or the retry layer's attempt timeout.
    pub fn is_timeout(&self) -> bool {
        self.reqwest().is_some_and(upstream::Error::is_timeout)
            || self.find::<AttemptTimedOut>().is_some()
    }

    /// Whether the request could not be built: a bad URL, a header or body that failed
    /// (see `reqwest::Error::is_builder`).
    pub fn is_builder(&self) -> bool {
        self.reqwest().is_some_and(upstream::Error::is_builder)
    }

    /// Whether sending the request failed (see `reqwest::Error::is_request`).
    pub fn is_request(&self) -> bool {
        self.reqwest().is_some_and(upstream::Error::is_request)
    }

    /// Whether reqwest's redirect policy failed (see `reqwest::Error::is_redirect`).
    pub fn is_redirect(&self) -> bool {
        self.reqwest().is_some_and(upstream::Error::is_redirect)
    }

    /// Whether the error came from a response status (see `reqwest::Error::is_status`).
    pub fn is_status(&self) -> bool {
        self.reqwest().is_some_and(upstream::Error::is_status)
    }

    /// Whether a request or response body failed (see `reqwest::Error::is_body`).
    pub fn is_body(&self) -> bool {
        self.reqwest().is_some_and(upstream::Error::is_body)
    }

    /// The status of the response the error came from (see `reqwest::Error::status`).
    ///
    /// It is also the last response's status when the retry layer dropped that response
    /// and then could not retry (a [`LastResponse`]).
    pub fn status(&self) -> Option<http::StatusCode> {
        self.reqwest()
            .and_then(upstream::Error::status)
            .or_else(|| self.find::<LastResponse>().map(LastResponse::status))
    }

    /// The URL of the failed request, if reqwest kept it (see `reqwest::Error::url`).
    pub fn url(&self) -> Option<&upstream::Url> {
        self.reqwest().and_then(upstream::Error::url)
    }

    /// The wrapped error, for downcasting to a layer's own error type.
    pub fn get_ref(&self) -> &(dyn StdError + Send + Sync + 'static) {
        &*self.inner
    }

    /// The wrapped error, giving up this one.
    pub fn into_inner(self) -> BoxError {
        self.inner
    }
}

impl From<upstream::Error> for Error {
    fn from(error: upstream::Error) -> Self {
        Self::new(error)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.inner, f)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.inner, f)
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.inner.source()
    }
}
