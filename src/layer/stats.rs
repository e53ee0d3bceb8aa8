//! What the retries cost, attached to the final response.

use crate::limits::LimitReached;
use std::fmt;
use std::time::Duration;

/// Inserted into the extensions of the final response: how many attempts were made and
/// how long the policy waited between them in total.
///
/// Present on every response of a request that was eligible for retry, the one-attempt
/// success included. Absent when the request could never be retried (its settings allow
/// one attempt, or its body could not be replayed), since such a request bypasses the policy.
///
/// ```
/// use tower_backoff::RetryStats;
///
/// fn log(res: &http::Response<()>) {
///     if let Some(stats) = res.extensions().get::<RetryStats>() {
///         println!("{} attempts, {:?} waited", stats.attempts, stats.waited);
///         if let Some(why) = stats.gave_up {
///             println!("not retried: {why}");
///         }
///     }
/// }
/// # log(&http::Response::new(()));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RetryStats {
    /// Attempts made, the first one included.
    pub attempts: u32,
    /// Total time waited between attempts (time inside attempts excluded).
    pub waited: Duration,
    /// Why the last response was returned although its status is retryable; `None` when
    /// it is a success or a status that is never retried.
    pub gave_up: Option<GiveUp>,
}

/// Why the policy returned a response whose status it would otherwise have retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GiveUp {
    /// The method is not idempotent and the request carries no `Idempotency-Key`: the
    /// server may have acted on it, so it is not sent twice.
    NotIdempotent,
    /// The request body went past its replay buffer and cannot be sent again.
    BodyNotReplayable,
    /// The backoff returned `None`.
    BackOff,
    /// The server asked for a longer wait (this one) than the settings' cap.
    RetryAfterTooLong(Duration),
    /// The request's own limits: attempts made, or a wait that would end past its deadline.
    Budget(LimitReached),
    /// The client's shared [`RetryBudget`](crate::budget::RetryBudget) is spent.
    RetryBudget,
    /// The client's [`RetryThrottle`](crate::budget::RetryThrottle) has stopped retries:
    /// too many recent attempts failed.
    Throttled,
    /// A gRPC server's pushback (a negative or malformed `grpc-retry-pushback-ms`) asked
    /// the client not to retry.
    Pushback,
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
            Self::Budget(why) => write!(f, "{why}"),
            Self::RetryBudget => f.write_str("the client's shared retry budget is spent"),
            Self::Throttled => f.write_str("retries are throttled: too many recent failures"),
            Self::Pushback => f.write_str("the server's gRPC pushback asked not to retry"),
        }
    }
}
