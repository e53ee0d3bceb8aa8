//! What one attempt's result means: the answer of a [`Classify`](super::Classify).

use super::reason::RetryReason;
use std::time::Duration;

/// What the result of one attempt means for its request, as a classifier judged it.
///
/// An outcome only *describes*: whether the attempt succeeded, failed for good, or failed in
/// a way another attempt may fix; how long the server asked to wait; and whether the
/// request may be sent again whatever its method. The retry policy then decides whether a
/// retry is allowed (idempotency, replayable body, limits, throttle, shared budget), so a
/// classifier of yours cannot make a POST go out twice by mistake: an outcome is
/// [`Resend::IfIdempotent`] unless the classifier says the server did not act on the
/// request.
///
/// ```
/// use std::time::Duration;
/// use http::StatusCode;
/// use tower_backoff::classify::{Outcome, Resend, ServerDelay};
/// use tower_backoff::RetryReason;
///
/// let o = Outcome::retry(RetryReason::Status(StatusCode::TOO_MANY_REQUESTS))
///     .with_resend(Resend::AnyMethod)
///     .with_server_delay(ServerDelay::Exactly(Duration::from_secs(2)));
/// assert!(o.is_retryable());
/// assert_eq!(o.resend(), Resend::AnyMethod);
/// assert!(Outcome::success().is_success());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    kind: Kind,
    resend: Resend,
    server_delay: Option<ServerDelay>,
    scheduled: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Success,
    Failure,
    Retry(RetryReason),
    Stop(RetryReason),
}

/// Whether a retry may send the request again whatever its method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Resend {
    /// The server may have acted on the request: only an idempotent request (or one the
    /// settings allow, see
    /// [`RetrySettings::with_retry_non_idempotent`](crate::RetrySettings::with_retry_non_idempotent))
    /// is sent again.
    #[default]
    IfIdempotent,
    /// Sending it again is safe for every method: the server provably did not act on it (a
    /// connect failure, an HTTP/2 `REFUSED_STREAM`), or the user declared it safe (a gRPC
    /// method declared retryable, an API whose 429 means "not processed").
    AnyMethod,
}

/// A delay the server asked for, and how it combines with the backoff's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ServerDelay {
    /// Wait this long instead of the backoff's delay (`Retry-After` on 429 and 503).
    Exactly(Duration),
    /// Wait at least this long: the longer of this and the backoff's delay (`Retry-After`
    /// on other statuses).
    AtLeast(Duration),
    /// Wait this long instead of the backoff's delay, then start the backoff over (gRPC's
    /// `grpc-retry-pushback-ms`).
    Restart(Duration),
}

impl ServerDelay {
    /// The requested delay.
    pub fn duration(self) -> Duration {
        match self {
            Self::Exactly(d) | Self::AtLeast(d) | Self::Restart(d) => d,
        }
    }
}

impl Outcome {
    /// The attempt succeeded: done. A retry throttle counts it as a success.
    pub const fn success() -> Self {
        Self::of(Kind::Success)
    }

    /// The attempt failed in a way no retry can fix (a 404, a 500 not in the retried set,
    /// a malformed request): its result is returned as it is. A retry throttle counts it
    /// neither as a failure nor as a success, as gRPC does for non-retryable codes.
    pub const fn failure() -> Self {
        Self::of(Kind::Failure)
    }

    /// The attempt failed in a way another attempt may fix, for `reason`.
    pub const fn retry(reason: RetryReason) -> Self {
        Self::of(Kind::Retry(reason))
    }

    /// The attempt failed for `reason`, which is retryable in kind, but the server asked
    /// not to retry it (a gRPC pushback): the policy gives up with
    /// [`GiveUp::Pushback`](crate::GiveUp::Pushback).
    pub const fn stop(reason: RetryReason) -> Self {
        Self::of(Kind::Stop(reason))
    }

    const fn of(kind: Kind) -> Self {
        Self {
            kind,
            resend: Resend::IfIdempotent,
            server_delay: None,
            scheduled: false,
        }
    }

    /// This outcome with `resend` as the rule for sending the request again.
    pub const fn with_resend(mut self, resend: Resend) -> Self {
        self.resend = resend;
        self
    }

    /// This outcome with the delay the server asked for.
    pub const fn with_server_delay(mut self, delay: ServerDelay) -> Self {
        self.server_delay = Some(delay);
        self
    }

    /// This outcome as a retry the server scheduled: a rate limiter that refused the
    /// request and said when to come back (a 429 with `Retry-After`). Such a retry is not
    /// the blind extra load on a failing server that the shared
    /// [`RetryBudget`](crate::budget::RetryBudget) guards against, so it does not spend it.
    pub const fn with_scheduled(mut self) -> Self {
        self.scheduled = true;
        self
    }

    /// Whether the server scheduled the retry (see [`with_scheduled`](Self::with_scheduled)).
    pub const fn is_scheduled(&self) -> bool {
        self.scheduled
    }

    /// Whether the attempt succeeded.
    pub const fn is_success(&self) -> bool {
        matches!(self.kind, Kind::Success)
    }

    /// Whether another attempt may fix it (before the policy's own checks).
    pub const fn is_retryable(&self) -> bool {
        matches!(self.kind, Kind::Retry(_))
    }

    /// Why the attempt failed, when it failed in a retryable way (retried or stopped).
    pub const fn reason(&self) -> Option<RetryReason> {
        match self.kind {
            Kind::Retry(reason) | Kind::Stop(reason) => Some(reason),
            Kind::Success | Kind::Failure => None,
        }
    }

    /// Whether the server asked not to retry this retryable failure.
    pub const fn is_stopped(&self) -> bool {
        matches!(self.kind, Kind::Stop(_))
    }

    /// The rule for sending the request again.
    pub const fn resend(&self) -> Resend {
        self.resend
    }

    /// The delay the server asked for, if any.
    pub const fn server_delay(&self) -> Option<ServerDelay> {
        self.server_delay
    }

    /// Whether a retry throttle should count this attempt as a failure (a retryable
    /// failure, retried or not), a success, or neither (`None`: a final answer that says
    /// nothing about the server's health, such as a 404, or a request that never reached
    /// it: a connect error, a stream refused before processing).
    pub(crate) const fn health(&self) -> Option<bool> {
        match self.kind {
            Kind::Success => Some(true),
            Kind::Retry(RetryReason::Connect | RetryReason::Unprocessed)
            | Kind::Stop(RetryReason::Connect | RetryReason::Unprocessed) => None,
            Kind::Retry(_) | Kind::Stop(_) => Some(false),
            Kind::Failure => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::StatusCode;

    #[test]
    fn only_what_the_server_answered_tells_its_health() {
        assert_eq!(Outcome::success().health(), Some(true));
        assert_eq!(Outcome::retry(RetryReason::Transport).health(), Some(false));
        assert_eq!(Outcome::stop(RetryReason::Transport).health(), Some(false));
        // Never reached the server (or it refused the stream before processing it).
        assert_eq!(Outcome::retry(RetryReason::Connect).health(), None);
        assert_eq!(Outcome::retry(RetryReason::Unprocessed).health(), None);
        assert_eq!(Outcome::stop(RetryReason::Connect).health(), None);
        assert_eq!(Outcome::failure().health(), None);
    }

    #[test]
    fn outcomes_describe_themselves() {
        let reason = RetryReason::Status(StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(Outcome::success().health(), Some(true));
        assert_eq!(Outcome::failure().health(), None);
        assert_eq!(Outcome::failure().reason(), None);
        let retry = Outcome::retry(reason);
        assert_eq!(
            (retry.reason(), retry.health()),
            (Some(reason), Some(false))
        );
        assert_eq!(retry.resend(), Resend::IfIdempotent);
        let stop = Outcome::stop(reason);
        assert!(!stop.is_retryable());
        assert!(stop.is_stopped());
        assert_eq!(stop.health(), Some(false));
    }

    #[test]
    fn server_delay_reports_its_duration() {
        let d = Duration::from_millis(1500);
        for delay in [
            ServerDelay::Exactly(d),
            ServerDelay::AtLeast(d),
            ServerDelay::Restart(d),
        ] {
            assert_eq!(delay.duration(), d);
        }
    }
}
