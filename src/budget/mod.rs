//! Retry budgets shared by every request of a client: they bound the *extra load* retries
//! put on a server, where the per-request [`limits`](crate::limits) bound how long one
//! caller waits.
//!
//! - [`RetryQuota`]: the AWS SDKs' standard retry quota. A retry costs tokens, a retry
//!   that succeeds gives them back, a first-attempt success earns one. On by default in
//!   the retry layer.
//! - [`RetryBudget`]: retries may add only a fraction of the recent traffic, plus a small
//!   floor (Finagle's retry budget); a retry that succeeds is refunded.
//! - [`RetryThrottle`]: retries stop while too many recent attempts fail (gRPC's retry
//!   throttling). Opt-in.

mod quota;
mod shared;
mod throttle;
pub use quota::RetryQuota;
pub use shared::RetryBudget;
pub use throttle::{RetryThrottle, ThrottleOutcome};

use tokio::time::Instant;

/// The budget a retry layer shares between its requests: one of the two kinds.
#[derive(Clone, Debug)]
pub(crate) enum LayerBudget {
    Window(RetryBudget),
    Quota(RetryQuota),
}

impl LayerBudget {
    /// A request starts, at `now`: it funds a window budget.
    pub(crate) fn start_at(&self, now: Instant) {
        if let Self::Window(budget) = self {
            budget.deposit_at(now);
        }
    }

    /// A request starts and ends at once, without a clock reading.
    #[inline]
    pub(crate) fn start_unclocked(&self) {
        if let Self::Window(budget) = self {
            budget.deposit_recent();
        }
    }

    /// Pays for one retry (`timed_out`: after an attempt timeout): what it cost, or `None`
    /// when the budget refuses it.
    pub(crate) fn withdraw(&self, timed_out: bool) -> Option<u32> {
        match self {
            Self::Window(budget) => budget.withdraw().then_some(1),
            Self::Quota(quota) => quota.withdraw(timed_out),
        }
    }

    /// A request ends in a success: its last retry's cost `paid` (0 if none) comes back;
    /// a first-attempt success (`retried` false) rewards a quota.
    #[inline]
    pub(crate) fn settle(&self, paid: u32, retried: bool) {
        match self {
            Self::Window(budget) if paid > 0 => budget.refund(),
            Self::Quota(quota) if paid > 0 => quota.refund(paid),
            Self::Quota(quota) if !retried => quota.reward(),
            _ => {}
        }
    }
}
