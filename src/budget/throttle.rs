//! gRPC-style retry throttling: retries stop while most recent requests fail.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::ConfigError;

/// Tokens are counted in thousandths, so a token ratio with three decimals is exact.
const MILLI: u64 = 1_000;

/// Retry throttling as in gRPC's retry design (A6): a token bucket that every failed
/// attempt drains by one token and every success refills by `token_ratio`; retries are
/// allowed only while more than half of `max_tokens` remain.
///
/// Where [`RetryBudget`](super::RetryBudget) bounds retries by a fraction of recent
/// *traffic*, the throttle reacts to recent *outcomes*: when a server goes down entirely,
/// a few failures in a row are enough to stop all retries of the client (an outage gets
/// no extra load at all), and they resume once successes refill the bucket. In a steady
/// state, retries keep flowing while fewer than `ratio / (1 + ratio)` of the requests
/// fail (9 % with the defaults).
///
/// Off by default; add it with
/// [`RetryLayer::retry_throttle`](crate::RetryLayer::retry_throttle). Clones share one
/// bucket. Lock-free: one atomic read-modify-write per outcome.
///
/// ```
/// use tower_backoff::budget::RetryThrottle;
///
/// let throttle = RetryThrottle::new(10, 0.1)?;
/// assert!(throttle.allows_retry());
/// for _ in 0..5 {
///     throttle.on_failure(); // 10 → 5 tokens
/// }
/// assert!(!throttle.allows_retry()); // only more than half (5) allows a retry
/// for _ in 0..10 {
///     throttle.on_success(); // +0.1 each
/// }
/// assert!(throttle.allows_retry());
/// # Ok::<(), tower_backoff::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct RetryThrottle {
    inner: Arc<Inner>,
}

struct Inner {
    /// Tokens left, in thousandths.
    tokens: AtomicU64,
    /// `max_tokens` in thousandths.
    max: u64,
    /// `token_ratio` in thousandths.
    ratio: u64,
}

impl RetryThrottle {
    /// The bucket size of the example in gRPC's retry design: five failures in a row
    /// stop the retries of a fresh client.
    pub const DEFAULT_MAX_TOKENS: u32 = 10;
    /// The refill of the example in gRPC's retry design: ten successes earn one failure.
    pub const DEFAULT_TOKEN_RATIO: f64 = 0.1;
    /// The largest bucket gRPC's service config accepts.
    pub const MAX_TOKENS: u32 = 1000;

    /// A full bucket of `max_tokens` (1 to 1000), refilled by `token_ratio` (0.001 to
    /// `max_tokens`, at most three decimals count) per success.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `max_tokens` or `token_ratio` when out of range.
    pub fn new(max_tokens: u32, token_ratio: f64) -> Result<Self, ConfigError> {
        if !(1..=Self::MAX_TOKENS).contains(&max_tokens) {
            return Err(ConfigError::new(
                "max_tokens",
                max_tokens,
                "must be between 1 and 1000",
            ));
        }
        if !(token_ratio.is_finite()
            && token_ratio >= 0.001
            && token_ratio <= f64::from(max_tokens))
        {
            return Err(ConfigError::new(
                "token_ratio",
                token_ratio,
                "must be a finite number from 0.001 to max_tokens",
            ));
        }
        let max = u64::from(max_tokens) * MILLI;
        Ok(Self {
            inner: Arc::new(Inner {
                tokens: AtomicU64::new(max),
                max,
                // Within [1, 1_000_000] by the checks above.
                ratio: (token_ratio * MILLI as f64).round() as u64,
            }),
        })
    }

    /// Records a failed attempt (a retryable status or transport error): one token less.
    pub fn on_failure(&self) {
        let _ = self
            .inner
            .tokens
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                Some(t.saturating_sub(MILLI))
            });
    }

    /// Records a successful attempt: `token_ratio` tokens more, up to `max_tokens`.
    pub fn on_success(&self) {
        let (max, ratio) = (self.inner.max, self.inner.ratio);
        let _ = self
            .inner
            .tokens
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                (t < max).then(|| t.saturating_add(ratio).min(max))
            });
    }

    /// Whether a retry may be made now: more than half of the bucket is left.
    pub fn allows_retry(&self) -> bool {
        self.inner.tokens.load(Ordering::Relaxed) * 2 > self.inner.max
    }

    /// Tokens left, for metrics.
    pub fn tokens(&self) -> f64 {
        self.inner.tokens.load(Ordering::Relaxed) as f64 / MILLI as f64
    }
}

impl Default for RetryThrottle {
    /// [`DEFAULT_MAX_TOKENS`](Self::DEFAULT_MAX_TOKENS) and
    /// [`DEFAULT_TOKEN_RATIO`](Self::DEFAULT_TOKEN_RATIO).
    fn default() -> Self {
        Self::new(Self::DEFAULT_MAX_TOKENS, Self::DEFAULT_TOKEN_RATIO)
            .expect("the defaults are valid")
    }
}

impl fmt::Debug for RetryThrottle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryThrottle")
            .field("tokens", &self.tokens())
            .field("max_tokens", &(self.inner.max / MILLI))
            .field("token_ratio", &(self.inner.ratio as f64 / MILLI as f64))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_bucket_allows_retries_until_half_is_spent() {
        let t = RetryThrottle::new(4, 0.5).unwrap();
        assert!(t.allows_retry());
        t.on_failure();
        assert!(t.allows_retry()); // 3 > 2
        t.on_failure();
        assert!(!t.allows_retry()); // 2 is not more than half
        t.on_success();
        assert!(t.allows_retry()); // 2.5
    }

    #[test]
    fn tokens_stay_within_zero_and_max() {
        let t = RetryThrottle::new(2, 1.0).unwrap();
        for _ in 0..10 {
            t.on_failure();
        }
        assert_eq!(t.tokens(), 0.0);
        for _ in 0..10 {
            t.on_success();
        }
        assert_eq!(t.tokens(), 2.0);
    }

    #[test]
    fn ratio_counts_in_thousandths() {
        let t = RetryThrottle::new(10, 0.1).unwrap();
        for _ in 0..10 {
            t.on_failure();
        }
        for _ in 0..51 {
            t.on_success();
        }
        assert!((t.tokens() - 5.1).abs() < 1e-9);
        assert!(t.allows_retry());
    }

    #[test]
    fn clones_share_the_bucket() {
        let t = RetryThrottle::new(2, 1.0).unwrap();
        let c = t.clone();
        c.on_failure();
        assert_eq!(t.tokens(), 1.0);
    }

    #[test]
    fn invalid_values_are_config_errors() {
        for (max, ratio, field) in [
            (0, 0.1, "max_tokens"),
            (1001, 0.1, "max_tokens"),
            (10, 0.0, "token_ratio"),
            (10, f64::NAN, "token_ratio"),
            (10, 11.0, "token_ratio"),
            (10, -1.0, "token_ratio"),
        ] {
            assert_eq!(RetryThrottle::new(max, ratio).unwrap_err().field(), field);
        }
        assert_eq!(RetryThrottle::default().tokens(), 10.0);
    }

    #[test]
    fn concurrent_outcomes_never_escape_the_bounds() {
        let t = RetryThrottle::new(100, 0.5).unwrap();
        std::thread::scope(|s| {
            for i in 0..4 {
                let t = t.clone();
                s.spawn(move || {
                    for _ in 0..10_000 {
                        if i % 2 == 0 {
                            t.on_failure()
                        } else {
                            t.on_success()
                        }
                    }
                });
            }
        });
        assert!((0.0..=100.0).contains(&t.tokens()));
    }
}
