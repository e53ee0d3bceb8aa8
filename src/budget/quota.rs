//! The AWS SDKs' standard retry quota: a retry costs tokens, a retry that succeeds gives
//! them back, and a request that succeeds at once earns one.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::error::ConfigError;

/// A token bucket shared by every request of a client, as the AWS SDKs' standard retry
/// mode keeps one: retries spend it only when they fail.
///
/// - A retry costs [`retry_cost`](Self::retry_cost) tokens, or
///   [`timeout_cost`](Self::timeout_cost) after an attempt timeout; without enough
///   tokens it is not made.
/// - A request whose last retry succeeds gets that retry's cost back: it was evidence of
///   a passing failure, not of overload.
/// - A request that succeeds at its first attempt adds
///   [`success_reward`](Self::success_reward) tokens, up to the bucket's size.
///
/// Scattered failures therefore never drain it: at 20 % of 503s, successes earn more
/// than failed retries cost. An outage, whose retries all fail, drains it after
/// `max_tokens / retry_cost` retries, and then no retry is made until successes return.
///
/// # Defaults
///
/// The AWS SDKs' standard mode: 500 tokens, a retry costs 5, one after a timeout 10, a
/// first-attempt success earns 1.
///
/// ```
/// use tower_backoff::budget::RetryQuota;
///
/// let quota = RetryQuota::new(10, 5, 10, 1)?;
/// let first = quota.withdraw(false).expect("10 tokens: a retry costs 5");
/// let second = quota.withdraw(false).expect("5 left");
/// assert_eq!(quota.withdraw(false), None); // spent
/// quota.refund(second); // that retry succeeded
/// assert_eq!(quota.available(), 5);
/// # let _ = first;
/// # Ok::<(), tower_backoff::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct RetryQuota {
    inner: Arc<Inner>,
}

struct Inner {
    tokens: AtomicU32,
    max_tokens: u32,
    retry_cost: u32,
    timeout_cost: u32,
    success_reward: u32,
}

impl RetryQuota {
    /// The bucket's size and initial content: 500 tokens, as the AWS SDKs.
    pub const DEFAULT_MAX_TOKENS: u32 = 500;
    /// What a retry costs: 5 tokens, as the AWS SDKs.
    pub const DEFAULT_RETRY_COST: u32 = 5;
    /// What a retry after an attempt timeout costs: 10 tokens, as the AWS SDKs.
    pub const DEFAULT_TIMEOUT_COST: u32 = 10;
    /// What a first-attempt success earns: 1 token, as the AWS SDKs.
    pub const DEFAULT_SUCCESS_REWARD: u32 = 1;

    /// A full bucket of `max_tokens`, retries costing `retry_cost` (`timeout_cost` after an
    /// attempt timeout), first-attempt successes earning `success_reward`.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] for `max_tokens` when zero, and for `retry_cost` or
    /// `timeout_cost` when zero or above `max_tokens` (a retry free of cost, or one that
    /// can never be paid).
    pub fn new(
        max_tokens: u32,
        retry_cost: u32,
        timeout_cost: u32,
        success_reward: u32,
    ) -> Result<Self, ConfigError> {
        if max_tokens == 0 {
            return Err(ConfigError::new(
                "max_tokens",
                max_tokens,
                "must be at least 1",
            ));
        }
        for (field, cost) in [("retry_cost", retry_cost), ("timeout_cost", timeout_cost)] {
            if cost == 0 || cost > max_tokens {
                return Err(ConfigError::new(
                    field,
                    cost,
                    "must be between 1 and max_tokens",
                ));
            }
        }
        Ok(Self {
            inner: Arc::new(Inner {
                tokens: AtomicU32::new(max_tokens),
                max_tokens,
                retry_cost,
                timeout_cost,
                success_reward,
            }),
        })
    }

    /// Takes the cost of one retry (the timeout cost when `timed_out`): the tokens taken,
    /// or `None` when too few are left and the retry must not be made.
    pub fn withdraw(&self, timed_out: bool) -> Option<u32> {
        let cost = if timed_out {
            self.inner.timeout_cost
        } else {
            self.inner.retry_cost
        };
        self.inner
            .tokens
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| t.checked_sub(cost))
            .ok()
            .map(|_| cost)
    }

    /// Gives back `tokens` a retry took: it succeeded.
    pub fn refund(&self, tokens: u32) {
        self.add(tokens);
    }

    /// Records a request that succeeded at its first attempt.
    #[inline]
    pub fn reward(&self) {
        if self.inner.success_reward > 0 {
            self.add(self.inner.success_reward);
        }
    }

    /// The tokens left.
    pub fn available(&self) -> u32 {
        self.inner.tokens.load(Ordering::Acquire)
    }

    /// The bucket's size.
    pub fn max_tokens(&self) -> u32 {
        self.inner.max_tokens
    }

    /// What a retry costs.
    pub fn retry_cost(&self) -> u32 {
        self.inner.retry_cost
    }

    /// What a retry after an attempt timeout costs.
    pub fn timeout_cost(&self) -> u32 {
        self.inner.timeout_cost
    }

    /// What a first-attempt success earns.
    pub fn success_reward(&self) -> u32 {
        self.inner.success_reward
    }

    #[inline]
    fn add(&self, tokens: u32) {
        let max = self.inner.max_tokens;
        // A full bucket is the common case: no write at all then.
        if self.inner.tokens.load(Ordering::Relaxed) >= max {
            return;
        }
        self.add_slow(tokens, max);
    }

    #[inline(never)]
    fn add_slow(&self, tokens: u32, max: u32) {
        let _ = self
            .inner
            .tokens
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                (t < max).then(|| t.saturating_add(tokens).min(max))
            });
    }
}

impl Default for RetryQuota {
    /// The AWS SDKs' standard mode: 500 tokens, costs 5 and 10, reward 1.
    fn default() -> Self {
        Self::new(
            Self::DEFAULT_MAX_TOKENS,
            Self::DEFAULT_RETRY_COST,
            Self::DEFAULT_TIMEOUT_COST,
            Self::DEFAULT_SUCCESS_REWARD,
        )
        .expect("the default quota is valid")
    }
}

impl fmt::Debug for RetryQuota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryQuota")
            .field("available", &self.available())
            .field("max_tokens", &self.inner.max_tokens)
            .field("retry_cost", &self.inner.retry_cost)
            .field("timeout_cost", &self.inner.timeout_cost)
            .field("success_reward", &self.inner.success_reward)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_drains_it_and_successes_refill_it() {
        let quota = RetryQuota::default();
        let mut retries = 0;
        while quota.withdraw(false).is_some() {
            retries += 1;
        }
        assert_eq!(retries, 100);
        assert_eq!(quota.withdraw(true), None);
        for _ in 0..5 {
            quota.reward();
        }
        assert_eq!(quota.withdraw(false), Some(5));
    }

    #[test]
    fn refunds_and_rewards_never_pass_the_size() {
        let quota = RetryQuota::new(10, 5, 10, 3).unwrap();
        quota.refund(100);
        quota.reward();
        assert_eq!(quota.available(), 10);
        assert_eq!(quota.withdraw(true), Some(10));
        assert_eq!(quota.withdraw(false), None);
    }

    #[test]
    fn costs_outside_the_bucket_are_config_errors() {
        assert_eq!(
            RetryQuota::new(0, 1, 1, 1).unwrap_err().field(),
            "max_tokens"
        );
        assert_eq!(
            RetryQuota::new(10, 0, 1, 1).unwrap_err().field(),
            "retry_cost"
        );
        assert_eq!(
            RetryQuota::new(10, 5, 11, 1).unwrap_err().field(),
            "timeout_cost"
        );
    }
}
