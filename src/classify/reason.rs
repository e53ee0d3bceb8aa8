//! Why an attempt failed in a retryable way.

use http::StatusCode;
use std::fmt;

/// Why an attempt failed in a way another attempt may fix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RetryReason {
    /// The server answered a retryable status.
    Status(StatusCode),
    /// The connection could not be made: the request never left.
    Connect,
    /// The server refused the request before processing it (an HTTP/2 `REFUSED_STREAM`,
    /// or a `GOAWAY` that did not cover it).
    Unprocessed,
    /// Another transport error: the request may have reached the server.
    Transport,
    /// The attempt took longer than its timeout
    /// ([`RetrySettings::with_attempt_timeout`](crate::RetrySettings::with_attempt_timeout)):
    /// the request may have reached the server.
    Timeout,
    /// A gRPC call failed with a retryable status (see
    /// [`GrpcClassifier`](crate::classify::GrpcClassifier)).
    Grpc(crate::grpc::Code),
}

impl fmt::Display for RetryReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Status(s) => write!(f, "status {}", s.as_u16()),
            Self::Connect => f.write_str("connect error"),
            Self::Unprocessed => f.write_str("refused unprocessed"),
            Self::Transport => f.write_str("transport error"),
            Self::Timeout => f.write_str("attempt timed out"),
            Self::Grpc(code) => write!(f, "grpc-status {code}"),
        }
    }
}
