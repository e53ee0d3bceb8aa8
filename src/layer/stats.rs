//! What the retries cost, attached to the final response.

use crate::limits::LimitReached;
use std::fmt;
use std::time::Duration;

/// How many attempts a request took, how long it waited between them, and why it was not
/// retried further.
///
/// [`RetryLayer`](crate::RetryLayer) inserts it into the extensions of a final response
/// that was retried or given up on, and a failed request's [`RetryError`](crate::RetryError)
/// carries it too. A response that succeeded at the first attempt carries none: there is
/// nothing to say, and saying it would cost allocations on every request.
///
/// ```
/// use tower_backoff::RetryStats;
///
/// fn log(res: &http::Response<()>) {
///     // One attempt and no wait when the response carries none.
///     let stats = RetryStats::of(res);
///     println!("{} attempts, {:?} waited", stats.attempts, stats.waited);
///     if let Some(why) = stats.gave_up {
///         println!("not retried: {why}");
///     }
/// }
/// # log(&http::Response::new(()));
/// assert_eq!(RetryStats::of(&http::Response::new(())).attempts, 1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RetryStats {
    /// Attempts made, the first one included.
    pub attempts: u32,
    /// Total time waited between attempts (time inside attempts excluded).
    pub waited: Duration,
    /// Why the last response was returned although its status is retryable; `None` when
    /// it is a success or a status that is never retried.
    pub gave_up: Option<GiveUp>,
}

impl RetryStats {
    /// The stats of `res`: those it carries, or those of a first-attempt success (one
    /// attempt, nothing waited), which carries none.
    pub fn of<B>(res: &http::Response<B>) -> Self {
        res.extensions().get::<Self>().copied().unwrap_or_default()
    }
}

/// The stats of a request that succeeded at its first attempt: one attempt, no wait.
impl Default for RetryStats {
    fn default() -> Self {
        Self {
            attempts: 1,
            waited: Duration::ZERO,
            gave_up: None,
        }
    }
}

/// Why the policy returned a response whose status it would otherwise have retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GiveUp {
    /// The method is not idempotent and the request carries no non-blank `Idempotency-Key`:
    /// the server may have acted on it, so it is not sent twice.
    NotIdempotent,
    /// The request body went past its replay buffer and cannot be sent again.
    BodyNotReplayable,
    /// The backoff returned `None`.
    BackOff,
    /// The server asked for a longer wait (this one) than the settings' cap.
    RetryAfterTooLong(Duration),
    /// The request's own limits: attempts made, or a wait that would end past its deadline.
    Limit(LimitReached),
    /// The client's shared [`RetryBudget`](crate::budget::RetryBudget) is spent.
    RetryBudget,
    /// The client's [`RetryThrottle`](crate::budget::RetryThrottle) has stopped retries:
    /// too many recent attempts failed.
    Throttled,
    /// The server asked the client not to retry (a negative or malformed gRPC
    /// `grpc-retry-pushback-ms`).
    Pushback,
    /// No tokio runtime is running on this thread, so the retry could not wait.
    NoRuntime,
    /// The inner service failed as it was readied for the retry (a `Buffer` whose worker
    /// died, a closed pool): the last response or error is returned.
    ServiceNotReady,
    /// The request was dropped while its retry waited: a timeout or a `select!` above the
    /// retry layer gave up on it. The retry was never sent. For a limit on each attempt,
    /// use [`RetrySettings::with_attempt_timeout`](crate::RetrySettings::with_attempt_timeout);
    /// for the whole request, [`Limits`](crate::limits::Limits)' `max_elapsed`.
    Cancelled,
}

impl GiveUp {
    /// The reason as a fixed word, for metrics labels (`retry_budget`, `limits`, …).
    pub(crate) const fn label(self) -> &'static str {
        match self {
            Self::NotIdempotent => "not_idempotent",
            Self::BodyNotReplayable => "body_not_replayable",
            Self::BackOff => "backoff",
            Self::RetryAfterTooLong(_) => "retry_after_too_long",
            Self::Limit(_) => "limits",
            Self::RetryBudget => "retry_budget",
            Self::Throttled => "throttled",
            Self::Pushback => "pushback",
            Self::NoRuntime => "no_runtime",
            Self::ServiceNotReady => "service_not_ready",
            Self::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for GiveUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotIdempotent => f.write_str("method is not idempotent"),
            Self::BodyNotReplayable => f.write_str("request body cannot be replayed"),
            Self::BackOff => f.write_str("backoff gave up"),
            Self::RetryAfterTooLong(asked) => {
                write!(f, "server asked for {asked:?}, past the cap")
            }
            Self::Limit(why) => write!(f, "{why}"),
            Self::RetryBudget => f.write_str("the client's shared retry budget is spent"),
            Self::Throttled => f.write_str("retries are throttled: too many recent failures"),
            Self::Pushback => f.write_str("the server's gRPC pushback asked not to retry"),
            Self::NoRuntime => f.write_str("no tokio runtime to wait in"),
            Self::ServiceNotReady => f.write_str("the inner service failed to get ready"),
            Self::Cancelled => f.write_str("the request was dropped while its retry waited"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn give_up_labels_are_fixed_words() {
        assert_eq!(GiveUp::Limit(LimitReached::MaxElapsed).label(), "limits");
        assert_eq!(GiveUp::RetryBudget.label(), "retry_budget");
    }
}
