//! What a transport error says about the request: never sent, maybe sent, or hopeless.

use std::error::Error;
use std::io;

/// What an error of the inner service means for a retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// The request provably never reached the server (connection refused, connect
    /// failure): safe to retry whatever the method.
    Connect,
    /// The request may have reached the server (reset, timeout, incomplete response):
    /// retried only when sending it twice is harmless (idempotent requests).
    Transport,
    /// Retrying cannot help (the request itself is broken): never retried.
    Fatal,
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

/// The default error classifier: walks `err` and its `source()` chain.
///
/// - [`ErrorClass::Connect`] as soon as one error of the chain proves the connection was
///   never made: an `io::Error` of kind `ConnectionRefused`, `AddrNotAvailable`,
///   `HostUnreachable` or `NetworkUnreachable`, or (feature `hyper`) a hyper-util legacy
///   client error with `is_connect()`.
/// - [`ErrorClass::Fatal`] for (feature `hyper`) a `hyper::Error` with `is_user()`: the
///   request or its body is broken, and sending it again fails the same way.
/// - [`ErrorClass::Transport`] for everything else: the request may have been seen.
///
/// ```
/// use std::io;
/// use tower_backoff::classify::{ErrorClass, default_error_class};
///
/// let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
/// assert_eq!(default_error_class(&refused), ErrorClass::Connect);
/// let reset = io::Error::from(io::ErrorKind::ConnectionReset);
/// assert_eq!(default_error_class(&reset), ErrorClass::Transport);
/// ```
pub fn default_error_class(err: &(dyn Error + 'static)) -> ErrorClass {
    let mut current = Some(err);
    while let Some(e) = current {
        #[cfg(feature = "hyper")]
        {
            if let Some(e) = e.downcast_ref::<hyper_util::client::legacy::Error>()
                && e.is_connect()
            {
                return ErrorClass::Connect;
            }
            if let Some(e) = e.downcast_ref::<hyper::Error>()
                && e.is_user()
            {
                return ErrorClass::Fatal;
            }
        }
        // The pacing layer refused to wait that long: an immediate retry would be refused
        // again, and a later one is the caller's call.
        if e.is::<crate::pacing::PacingError>() {
            return ErrorClass::Fatal;
        }
        if let Some(e) = e.downcast_ref::<io::Error>()
            && matches!(
                e.kind(),
                io::ErrorKind::ConnectionRefused
                    | io::ErrorKind::AddrNotAvailable
                    | io::ErrorKind::HostUnreachable
                    | io::ErrorKind::NetworkUnreachable
            )
        {
            return ErrorClass::Connect;
        }
        current = e.source();
    }
    ErrorClass::Transport
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt;

    #[derive(Debug)]
    struct Wrapper(io::Error);

    impl fmt::Display for Wrapper {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("connect failed")
        }
    }

    impl Error for Wrapper {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn connection_refused_deep_in_the_chain_is_a_connect_failure() {
        let err: Box<dyn Error + Send + Sync> =
            Box::new(Wrapper(io::ErrorKind::ConnectionRefused.into()));
        let err = err.as_error().unwrap();
        assert_eq!(default_error_class(err), ErrorClass::Connect);
    }

    #[test]
    fn other_io_errors_are_transport_errors() {
        for kind in [
            io::ErrorKind::ConnectionReset,
            io::ErrorKind::TimedOut,
            io::ErrorKind::UnexpectedEof,
            io::ErrorKind::BrokenPipe,
        ] {
            let err = Wrapper(kind.into());
            assert_eq!(default_error_class(&err), ErrorClass::Transport, "{kind:?}");
        }
    }
}
