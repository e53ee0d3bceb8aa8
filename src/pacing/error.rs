//! The error of a request that pacing turned away without sending it.

use std::error::Error;
use std::fmt;
use std::time::Duration;

/// A request was not sent: the wait pacing imposed on it was longer than it may wait.
///
/// Returned (boxed, as the service's `Box<dyn Error + Send + Sync>`) at once, without
/// calling the inner service and without waiting: failing fast lets the caller shed the
/// work or answer its own client while the destination is cooling down, instead of
/// holding a task and a connection slot for a request that could not finish in time.
/// Downcast the boxed error to tell it from the inner service's errors:
///
/// ```
/// use std::time::Duration;
/// use tower_backoff::PacingError;
///
/// # fn inner_error(err: &(dyn std::error::Error + 'static)) {
/// if let Some(PacingError::WouldExceedBudget { wait, budget, .. }) = err.downcast_ref() {
///     println!("throttled: would wait {wait:?}, may wait {budget:?}");
/// }
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PacingError {
    /// Waiting for the client's pace or the destination's cool-down would take `wait`,
    /// more than the request's `budget`: the smaller of
    /// [`max_wait`](crate::PacingBuilder::max_wait) and the time left until its
    /// [`PacingDeadline`](crate::PacingDeadline).
    #[non_exhaustive]
    WouldExceedBudget {
        /// How long the request would have had to wait.
        wait: Duration,
        /// How long it was allowed to wait.
        budget: Duration,
    },
}

impl PacingError {
    /// How long the request would have had to wait.
    pub fn wait(&self) -> Duration {
        match *self {
            Self::WouldExceedBudget { wait, .. } => wait,
        }
    }

    /// How long the request was allowed to wait.
    pub fn budget(&self) -> Duration {
        match *self {
            Self::WouldExceedBudget { budget, .. } => budget,
        }
    }
}

impl fmt::Display for PacingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::WouldExceedBudget { wait, budget } => write!(
                f,
                "request not sent: pacing would make it wait {wait:?}, more than its budget of {budget:?}"
            ),
        }
    }
}

impl Error for PacingError {}
