//! What the retries cost, attached to the final response.

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
}
