//! A per-request limit on how long pacing may hold a request.

use tokio::time::Instant;

/// A request extension: the instant after which this request is no longer worth sending.
///
/// Pacing never sends such a request at or after its deadline: when its destination's pace or
/// cool-down would hold it longer, it fails at once with
/// [`PacingError::WaitTooLong`](crate::PacingError::WaitTooLong); a request that arrives
/// at or after its deadline, or reaches it while waiting for its turn, fails with
/// [`PacingError::DeadlinePassed`](crate::PacingError::DeadlinePassed). The limit applies on top of
/// [`with_max_wait`](crate::pacing::PacingBuilder::with_max_wait): the shorter of the two wins. A retry
/// layer puts the request's deadline into every attempt.
///
/// ```
/// use std::time::Duration;
/// use tokio::time::Instant;
/// use tower_backoff::pacing::PacingDeadline;
///
/// let mut request = http::Request::new(());
/// // This request may wait at most 2 s for the pace or a cool-down.
/// request
///     .extensions_mut()
///     .insert(PacingDeadline(Instant::now() + Duration::from_secs(2)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PacingDeadline(pub Instant);
