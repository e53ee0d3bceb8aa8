//! Retry budgets shared by every request of a client: they bound the *extra load* retries
//! put on a server, where the per-request [`limits`](crate::limits) bound how long one
//! caller waits.
//!
//! - [`RetryBudget`]: retries may add only a fraction of the recent traffic, plus a small
//!   floor (Finagle's retry budget). On by default in the retry layer.
//! - [`RetryThrottle`]: retries stop while too many recent attempts fail (gRPC's retry
//!   throttling). Opt-in.

mod shared;
mod throttle;
pub use shared::RetryBudget;
pub use throttle::{RetryThrottle, ThrottleOutcome};
