//! A per-request limit on how long pacing may hold a request.

use tokio::time::Instant;

/// A request extension: the instant after which this request is no longer worth sending.
///
/// Pacing never makes such a request wait past its deadline: when the client's pace or
/// its destination's cool-down would hold it longer, it fails at once with
/// [`PacingError::WouldExceedBudget`](crate::PacingError::WouldExceedBudget). The limit
/// applies on top of [`max_wait`](crate::PacingBuilder::max_wait): the shorter of the two
/// wins. A deadline already past does not fail a request that need not wait: pacing
/// limits waits, it is not a timeout.
///
/// ```
/// use std::time::Duration;
/// use tokio::time::Instant;
/// use tower_backoff::PacingDeadline;
///
/// let mut request = http::Request::new(());
/// // This request may wait at most 2 s for the pace or a cool-down.
/// request
///     .extensions_mut()
///     .insert(PacingDeadline(Instant::now() + Duration::from_secs(2)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PacingDeadline(pub Instant);
