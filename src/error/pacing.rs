//! The error of a request that pacing turned away without sending it: here, below both
//! pacing (which returns it) and the error classifier (which reads it).

use std::error::Error;
use std::fmt;
use std::time::Duration;

/// A request was not sent: pacing could not let it go in time, or had no room to hold it.
///
/// Returned (boxed, as the service's `Box<dyn Error + Send + Sync>`) without calling the
/// inner service: failing fast lets the caller shed the work or answer its own client
/// while the destination is cooling down, instead of holding a task and a connection
/// slot for a request that could not finish in time. Downcast the boxed error to tell it
/// from the inner service's errors:
///
/// ```
/// use tower_backoff::PacingError;
///
/// # fn inner_error(err: &(dyn std::error::Error + 'static)) {
/// match err.downcast_ref() {
///     Some(PacingError::WaitTooLong { wait, max_wait, .. }) => {
///         println!("throttled: would wait {wait:?}, may wait {max_wait:?}")
///     }
///     Some(PacingError::QueueFull { max_queue, .. }) => {
///         println!("throttled: {max_queue} requests already wait for this destination")
///     }
///     Some(PacingError::DeadlinePassed) => println!("out of time before it could go"),
///     _ => {}
/// }
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PacingError {
    /// Waiting for the destination's pace or cool-down would take `wait`, more than the
    /// request's `max_wait`: the smaller of [`with_max_wait`](crate::pacing::PacingBuilder::with_max_wait)
    /// and the time left until its [`PacingDeadline`](crate::pacing::PacingDeadline).
    #[non_exhaustive]
    WaitTooLong {
        /// How long the request would have had to wait, in all.
        wait: Duration,
        /// How long it was allowed to wait.
        max_wait: Duration,
    },
    /// The destination's queue already holds
    /// [`with_max_queue`](crate::pacing::PacingBuilder::with_max_queue) waiting requests.
    #[non_exhaustive]
    QueueFull {
        /// The bound of the destination's queue.
        max_queue: usize,
    },
    /// The request's [`PacingDeadline`](crate::pacing::PacingDeadline) (the retry layer's deadline
    /// for the whole request) came before it could go: it arrived past it, or reached it
    /// while it waited for its turn.
    DeadlinePassed,
}

impl PacingError {
    /// How long the request would have had to wait, for [`WaitTooLong`](Self::WaitTooLong).
    pub fn wait(&self) -> Option<Duration> {
        match *self {
            Self::WaitTooLong { wait, .. } => Some(wait),
            Self::QueueFull { .. } | Self::DeadlinePassed => None,
        }
    }

    /// How long the request was allowed to wait, for [`WaitTooLong`](Self::WaitTooLong).
    pub fn max_wait(&self) -> Option<Duration> {
        match *self {
            Self::WaitTooLong { max_wait, .. } => Some(max_wait),
            Self::QueueFull { .. } | Self::DeadlinePassed => None,
        }
    }
}

impl fmt::Display for PacingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::WaitTooLong { wait, max_wait } => write!(
                f,
                "request not sent: pacing would make it wait {wait:?}, more than its max wait of {max_wait:?}"
            ),
            Self::QueueFull { max_queue } => write!(
                f,
                "request not sent: {max_queue} requests already wait for its destination"
            ),
            Self::DeadlinePassed => {
                f.write_str("request not sent: its deadline passed before it could go")
            }
        }
    }
}

impl Error for PacingError {}
