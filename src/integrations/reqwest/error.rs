//! [`Error`]: why a request sent through a [`RetryClient`](super::RetryClient) failed.

use super::upstream;
use std::error::Error as StdError;
use std::fmt;

use crate::error::BoxError;

/// The error of a request sent through a [`RetryClient`](super::RetryClient): the last
/// attempt's `reqwest::Error`, or an error of a layer of the stack (the retry layer's own,
/// a timeout layer's, …).
///
/// It displays as the error it wraps and has that error's source, so logging it shows the
/// same chain reqwest would. [`reqwest`](Self::reqwest) finds the `reqwest::Error` in the
/// chain, for its `is_connect`, `is_timeout`, `status`, `url`, ….
pub struct Error {
    inner: BoxError,
}

impl Error {
    pub(crate) fn new(inner: impl Into<BoxError>) -> Self {
        Self {
            inner: inner.into(),
        }
    }

    /// The `reqwest::Error` that ended the request, if a `reqwest::Error` is in the chain.
    pub fn reqwest(&self) -> Option<&upstream::Error> {
        let mut next: Option<&(dyn StdError + 'static)> = Some(&*self.inner);
        while let Some(error) = next {
            if let Some(found) = error.downcast_ref::<upstream::Error>() {
                return Some(found);
            }
            next = crate::classify::error::next_in_chain(error);
        }
        None
    }

    /// Whether the last attempt could not connect (see `reqwest::Error::is_connect`).
    ///
    /// After a redirect it may be the target's connect that failed; the error then has no
    /// `url()` (see [`ReqwestService`](super::ReqwestService)).
    pub fn is_connect(&self) -> bool {
        self.reqwest().is_some_and(upstream::Error::is_connect)
    }

    /// Whether the last attempt timed out (see `reqwest::Error::is_timeout`).
    pub fn is_timeout(&self) -> bool {
        self.reqwest().is_some_and(upstream::Error::is_timeout)
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
