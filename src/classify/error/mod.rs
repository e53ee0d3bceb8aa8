//! What a transport error says about the request: never sent, maybe sent, or hopeless.

use std::error::Error;
use std::io;

/// What an error of the inner service means for a retry.
///
/// New classes may be added: match with a wildcard arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorClass {
    /// The request provably never reached the server: the client failed to connect.
    /// Safe to retry whatever the method.
    Connect,
    /// The server refused the request before processing any of it (an HTTP/2 stream reset
    /// with `REFUSED_STREAM`, or a `GOAWAY` whose last stream id is below the request's):
    /// safe to retry whatever the method (RFC 9113 §8.7).
    Unprocessed,
    /// The request may have reached the server (reset, timeout, incomplete response, a
    /// route lost after the request was written): retried only when sending it twice is
    /// harmless (idempotent requests).
    Transport,
    /// Retrying cannot help (the request itself is broken): never retried.
    Fatal,
}

impl ErrorClass {
    /// Whether the server provably did not process the request, so that it may be sent
    /// again even when it is not idempotent.
    ///
    /// ```
    /// use tower_backoff::classify::ErrorClass;
    ///
    /// assert!(ErrorClass::Connect.never_processed());
    /// assert!(ErrorClass::Unprocessed.never_processed());
    /// assert!(!ErrorClass::Transport.never_processed());
    /// ```
    pub fn never_processed(self) -> bool {
        matches!(self, Self::Connect | Self::Unprocessed)
    }
}

/// Lets the policy look at an error of the inner service as a [`std::error::Error`].
///
/// The retry policy accepts any error type implementing this trait. It is needed because
/// tower's `BoxError` (`Box<dyn Error + Send + Sync>`) is not itself an `Error`. Implemented
/// for `std::io::Error`, boxed errors, `Infallible`, and — with the `hyper` feature — for
/// `hyper::Error` and `hyper_util::client::legacy::Error`. For an error type of yours it
/// is one line:
///
/// ```
/// use tower_backoff::classify::AsError;
///
/// #[derive(Debug)]
/// struct MyError;
/// # impl std::fmt::Display for MyError {
/// #     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("my error") }
/// # }
/// impl std::error::Error for MyError {}
///
/// impl AsError for MyError {
///     fn as_error(&self) -> Option<&(dyn std::error::Error + 'static)> { Some(self) }
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "the retry layer cannot classify errors of type `{Self}`: it does not implement `AsError`",
    label = "the inner service's error type must implement `tower_backoff::classify::AsError`",
    note = "for hyper or hyper-util's legacy client (`hyper::Error`, `hyper_util::client::legacy::Error`), enable the `hyper` feature of tower-backoff",
    note = "for an error type of yours it is one line: `impl AsError for MyError {{ fn as_error(&self) -> Option<&(dyn std::error::Error + 'static)> {{ Some(self) }} }}`",
    note = "or map the error to `Box<dyn std::error::Error + Send + Sync>` (`tower::ServiceExt::map_err(Into::into)`), which implements it"
)]
pub trait AsError {
    /// This error as a `dyn Error`, or `None` when it carries nothing to inspect.
    fn as_error(&self) -> Option<&(dyn Error + 'static)>;
}

impl AsError for io::Error {
    fn as_error(&self) -> Option<&(dyn Error + 'static)> {
        Some(self)
    }
}

impl AsError for std::convert::Infallible {
    fn as_error(&self) -> Option<&(dyn Error + 'static)> {
        match *self {}
    }
}

impl AsError for Box<dyn Error + Send + Sync> {
    fn as_error(&self) -> Option<&(dyn Error + 'static)> {
        Some(&**self)
    }
}

impl AsError for Box<dyn Error + Send> {
    fn as_error(&self) -> Option<&(dyn Error + 'static)> {
        Some(&**self)
    }
}

impl AsError for Box<dyn Error> {
    fn as_error(&self) -> Option<&(dyn Error + 'static)> {
        Some(&**self)
    }
}

#[cfg(feature = "hyper")]
impl AsError for hyper::Error {
    fn as_error(&self) -> Option<&(dyn Error + 'static)> {
        Some(self)
    }
}

#[cfg(feature = "hyper")]
impl AsError for hyper_util::client::legacy::Error {
    fn as_error(&self) -> Option<&(dyn Error + 'static)> {
        Some(self)
    }
}

/// The default error classifier: only proof that the request was not processed makes an
/// error safe to resend for every method.
///
/// The chain is `err`, then each error's `source()` (through an `io::Error`, the error it
/// wraps). Client libraries know which phase failed, so their verdict decides, and the
/// lowest one in the chain wins (it is the most precise: a stream refused by HTTP/2 under
/// a "send request" error). An `io::ErrorKind` alone proves little: Linux reports
/// `HostUnreachable` or `NetworkUnreachable` on an *established* connection when a route
/// is lost after the request was written.
///
/// | error in the chain | class |
/// | --- | --- |
/// | [`PacingError`](crate::pacing::PacingError), anywhere | [`Fatal`](ErrorClass::Fatal) |
/// | `hyper::Error` with `is_user()` (feature `hyper`) | [`Fatal`](ErrorClass::Fatal) |
/// | `reqwest::Error` with `is_builder()`, `is_redirect()` or `is_decode()` (feature `reqwest`) | [`Fatal`](ErrorClass::Fatal) |
/// | hyper-util legacy client error with `is_connect()` (feature `hyper`) | [`Connect`](ErrorClass::Connect) |
/// | `reqwest::Error` with `is_connect()` and a `url()` (feature `reqwest`) | [`Connect`](ErrorClass::Connect) |
/// | `tonic::ConnectError` (feature `tonic`) | [`Connect`](ErrorClass::Connect) |
/// | `h2::Error` of a stream reset by the server with `REFUSED_STREAM`, or refused by the server's `GOAWAY` (features `hyper`, `tonic`) | [`Unprocessed`](ErrorClass::Unprocessed) |
/// | any other hyper-util legacy client error or `reqwest::Error` | [`Transport`](ErrorClass::Transport) |
/// | no verdict, and `err` itself is an `io::Error` of kind `ConnectionRefused` | [`Connect`](ErrorClass::Connect) |
/// | anything else: other `io::Error` kinds (`HostUnreachable`, `NetworkUnreachable`, `AddrNotAvailable`, …) at any depth, `ConnectionRefused` under another error | [`Transport`](ErrorClass::Transport) |
///
/// A `Fatal` verdict anywhere wins over the others. A `reqwest::Error` without a `url()` in
/// the chain makes a `Connect` or `Unprocessed` verdict `Transport`: reqwest names the first
/// URL even after a redirect, so `integrations::reqwest::ReqwestService` removes it when the
/// request reached the server, and the failure was then elsewhere. hyper-util's error
/// names no URL: a layer that follows redirects (tower-http's `FollowRedirect`) goes above
/// the retry layer, where each hop is its own request.
/// `ConnectionRefused` can only be
/// reported by `connect` (a peer aborting an established connection gives
/// `ConnectionReset`), so a service returning that bare `io::Error` failed to connect;
/// wrapped in an error this classifier does not know, it proves nothing about what the
/// wrapper did before.
///
/// ```
/// use std::io;
/// use tower_backoff::classify::{ErrorClass, default_error_class};
///
/// let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
/// assert_eq!(default_error_class(&refused), ErrorClass::Connect);
/// // A route lost after the request was written: it may have been processed.
/// let unreachable = io::Error::from(io::ErrorKind::HostUnreachable);
/// assert_eq!(default_error_class(&unreachable), ErrorClass::Transport);
/// let reset = io::Error::from(io::ErrorKind::ConnectionReset);
/// assert_eq!(default_error_class(&reset), ErrorClass::Transport);
/// ```
pub fn default_error_class(err: &(dyn Error + 'static)) -> ErrorClass {
    let mut class = match err.downcast_ref::<io::Error>() {
        Some(io) if io.kind() == io::ErrorKind::ConnectionRefused => ErrorClass::Connect,
        _ => ErrorClass::Transport,
    };
    let mut elsewhere = false;
    let mut current = Some(err);
    while let Some(e) = current {
        match verdict(e) {
            Some(ErrorClass::Fatal) => return ErrorClass::Fatal,
            Some(lower) => class = lower,
            None => {}
        }
        elsewhere |= unlocated(e);
        current = next_in_chain(e);
    }
    if elsewhere && class.never_processed() {
        return ErrorClass::Transport;
    }
    class
}

/// Whether `e` is a `reqwest::Error` without a URL: the request it failed may not be the
/// one sent (a redirect's, see `integrations::reqwest::ReqwestService`), so it proves
/// nothing unsent.
fn unlocated(e: &(dyn Error + 'static)) -> bool {
    #[cfg(feature = "reqwest")]
    if let Some(e) = e.downcast_ref::<reqwest::Error>() {
        return e.url().is_none();
    }
    #[cfg(feature = "reqwest-0_12")]
    if let Some(e) = e.downcast_ref::<reqwest012::Error>() {
        return e.url().is_none();
    }
    #[cfg(not(any(feature = "reqwest", feature = "reqwest-0_12")))]
    let _ = e;
    false
}

/// The next error of the chain. `io::Error::source` skips the error an `io::Error` wraps
/// (it returns that error's own source), so the wrapped error is visited instead.
pub(crate) fn next_in_chain<'a>(e: &'a (dyn Error + 'static)) -> Option<&'a (dyn Error + 'static)> {
    if let Some(io) = e.downcast_ref::<io::Error>()
        && let Some(inner) = io.get_ref()
    {
        return Some(inner);
    }
    e.source()
}

/// reqwest's verdict, the same for each supported version: a builder error (no host, a bad
/// URL), a redirect loop and an undecodable response fail the same way every time;
/// `is_connect()` is reqwest's own proof that nothing was sent, unless the URL was removed
/// (see [`unlocated`]).
#[cfg(any(feature = "reqwest", feature = "reqwest-0_12"))]
macro_rules! reqwest_verdict {
    ($e:expr) => {{
        let e = $e;
        if e.is_builder() || e.is_redirect() || e.is_decode() {
            ErrorClass::Fatal
        } else if e.is_connect() {
            ErrorClass::Connect
        } else {
            ErrorClass::Transport
        }
    }};
}

/// What `e` itself (not its sources) says, when it is an error of a known library.
fn verdict(e: &(dyn Error + 'static)) -> Option<ErrorClass> {
    // The pacing layer turned the request away (a wait too long, a full queue): an immediate retry would be refused
    // again, and a later one is the caller's call.
    if e.is::<crate::error::pacing::PacingError>() {
        return Some(ErrorClass::Fatal);
    }
    #[cfg(feature = "hyper")]
    {
        if let Some(e) = e.downcast_ref::<hyper_util::client::legacy::Error>() {
            return Some(if e.is_connect() {
                ErrorClass::Connect
            } else {
                ErrorClass::Transport
            });
        }
        // A user error: the request or its body is broken, and sending it again fails the
        // same way. Other hyper errors leave the verdict to the client above them (hyper
        // alone does not tell a handshake from a request).
        if let Some(e) = e.downcast_ref::<hyper::Error>()
            && e.is_user()
        {
            return Some(ErrorClass::Fatal);
        }
    }
    #[cfg(any(feature = "hyper", feature = "tonic"))]
    if let Some(e) = e.downcast_ref::<h2::Error>() {
        return h2_verdict(e);
    }
    #[cfg(feature = "reqwest")]
    if let Some(e) = e.downcast_ref::<reqwest::Error>() {
        return Some(reqwest_verdict!(e));
    }
    #[cfg(feature = "reqwest-0_12")]
    if let Some(e) = e.downcast_ref::<reqwest012::Error>() {
        return Some(reqwest_verdict!(e));
    }
    #[cfg(feature = "tonic")]
    if e.is::<tonic::ConnectError>() {
        return Some(ErrorClass::Connect);
    }
    None
}

/// h2 fails a stream with a remote `GOAWAY` error only when the stream id is above the
/// `GOAWAY`'s last stream id (or the stream was opened after it): streams at or below it
/// run on, and fail with an I/O error if the connection then closes. A stream the server
/// resets with `REFUSED_STREAM` was closed "prior to any processing" (RFC 9113 §8.7).
#[cfg(any(feature = "hyper", feature = "tonic"))]
fn h2_verdict(e: &h2::Error) -> Option<ErrorClass> {
    let refused = e.is_reset() && e.reason() == Some(h2::Reason::REFUSED_STREAM);
    if e.is_remote() && (e.is_go_away() || refused) {
        Some(ErrorClass::Unprocessed)
    } else {
        None
    }
}

#[cfg(test)]
mod tests;
