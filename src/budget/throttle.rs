//! gRPC-style retry throttling: retries stop while too many recent attempts fail.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::ConfigError;

/// Tokens are counted in thousandths, so a token ratio with three decimals is exact.
const MILLI: u64 = 1_000;

/// Retry throttling as in gRPC's retry design (proposal A6, "Throttling Retry Attempts
/// and Hedged RPCs"): a token bucket of `max_tokens`, full at first, that every failed
/// attempt drains by one token and every successful attempt refills by `token_ratio`;
/// retries are allowed only while more than half of `max_tokens` remain.
///
/// Every attempt is reported once with [`record`](Self::record), and A6 says precisely
/// which attempts count as what (see [`ThrottleOutcome`]): only failures a retry could fix
/// (a retryable status, or a server pushback saying not to retry) drain the bucket, only
/// successes refill it, and everything else — a failure that is the request's fault, such
/// as `INVALID_ARGUMENT` or a 400, or one that never reached the server — leaves it as it
/// is. So a client sending malformed requests is not throttled for the server's sake.
///
/// Where [`RetryBudget`](super::RetryBudget) bounds retries by a fraction of recent
/// *traffic*, the throttle reacts to recent *outcomes*: when a server goes down entirely,
/// a few failures in a row are enough to stop all retries of the client (an outage gets
/// no extra load at all), and they resume once successes refill the bucket. In a steady
/// state, retries keep flowing while fewer than `ratio / (1 + ratio)` of the requests
/// fail (9 % with the defaults).
///
/// Off by default; add it with
/// [`RetryLayer::with_retry_throttle`](crate::RetryLayer::with_retry_throttle). Clones share one
/// bucket. Lock-free: one atomic read-modify-write per outcome.
///
/// ```
/// use tower_backoff::budget::RetryThrottle;
///
/// use tower_backoff::budget::ThrottleOutcome;
///
/// let throttle = RetryThrottle::new(10, 0.1)?;
/// assert!(throttle.allows_retry());
/// for _ in 0..5 {
///     throttle.record(ThrottleOutcome::RetryableFailure); // 10 → 5 tokens
/// }
/// assert!(!throttle.allows_retry()); // only more than half (5) allows a retry
/// throttle.record(ThrottleOutcome::Other); // a 400: no change
/// assert_eq!(throttle.tokens(), 5.0);
/// for _ in 0..10 {
///     throttle.record(ThrottleOutcome::Success); // +0.1 each
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

    /// Records how one attempt ended: a [`Success`](ThrottleOutcome::Success) adds
    /// `token_ratio` tokens (up to `max_tokens`), a
    /// [`RetryableFailure`](ThrottleOutcome::RetryableFailure) takes one (down to zero),
    /// [`Other`](ThrottleOutcome::Other) changes nothing.
    ///
    /// Call it once per attempt (every retry is an RPC of its own for A6), the last one
    /// included, whether or not a retry follows.
    pub fn record(&self, outcome: ThrottleOutcome) {
        let (max, ratio) = (self.inner.max, self.inner.ratio);
        let update = |t: u64| match outcome {
            ThrottleOutcome::Success => (t < max).then(|| t.saturating_add(ratio).min(max)),
            ThrottleOutcome::RetryableFailure => (t > 0).then(|| t.saturating_sub(MILLI)),
            ThrottleOutcome::Other => None,
        };
        let _ = self
            .inner
            .tokens
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, update);
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

/// How an attempt ended, as gRPC's retry throttling (A6) counts it.
///
/// | outcome | gRPC | HTTP equivalent |
/// | --- | --- | --- |
/// | [`Success`](Self::Success) | status `OK` | a response that is not a failure (1xx–3xx) |
/// | [`RetryableFailure`](Self::RetryableFailure) | a status in the retryable codes (for hedging, the non-fatal codes), or a pushback saying not to retry (negative or malformed `grpc-retry-pushback-ms`) | a retryable status (by default 408, 429, 502, 503, 504), or a transport error after the request may have reached the server |
/// | [`Other`](Self::Other) | any other status (`INVALID_ARGUMENT`, `NOT_FOUND`, …); a failure before the request reached the server's application (A6's transparent retries) | any other 4xx/5xx; a fatal error; a connect error (the request never left the client) |
///
/// A6: "The only RPCs that are counted as failures for the throttling policy are RPCs
/// that fail with a status code that qualifies as a retryable or non-fatal status code, or
/// that receive a pushback response indicating not to retry", so that server failures are
/// not conflated with malformed requests; transparent retries "do not count as failures".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ThrottleOutcome {
    /// The attempt succeeded: `token_ratio` tokens more.
    Success,
    /// The attempt failed in a way a retry could fix, or the server pushed back saying
    /// not to retry: one token less.
    RetryableFailure,
    /// Any other outcome: the request's own fault, or a failure that never reached the
    /// server's application. The bucket is unchanged.
    Other,
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
    use ThrottleOutcome::{Other, RetryableFailure, Success};

    #[test]
    fn a_fresh_bucket_allows_retries_until_half_is_spent() {
        let t = RetryThrottle::new(4, 0.5).unwrap();
        assert!(t.allows_retry());
        t.record(RetryableFailure);
        assert!(t.allows_retry()); // 3 > 2
        t.record(RetryableFailure);
        assert!(!t.allows_retry()); // 2 is not more than half
        t.record(Success);
        assert!(t.allows_retry()); // 2.5
    }

    #[test]
    fn retryable_failures_drain_one_token_each_down_to_zero() {
        // The A6 example: 10 tokens, ratio 0.1. Five failures in a row reach the
        // threshold (5 is not more than 10 / 2).
        let t = RetryThrottle::new(10, 0.1).unwrap();
        for left in (5..10).rev() {
            assert!(t.allows_retry());
            t.record(RetryableFailure);
            assert_eq!(t.tokens(), f64::from(left));
        }
        assert!(!t.allows_retry());
        for _ in 0..20 {
            t.record(RetryableFailure);
        }
        assert_eq!(t.tokens(), 0.0, "never below zero");
    }

    #[test]
    fn successes_refill_by_the_ratio_up_to_max() {
        let t = RetryThrottle::new(10, 0.1).unwrap();
        for _ in 0..10 {
            t.record(RetryableFailure);
        }
        assert_eq!(t.tokens(), 0.0);
        // 51 successes: 5.1 tokens, just over the threshold.
        for _ in 0..50 {
            t.record(Success);
        }
        assert!((t.tokens() - 5.0).abs() < 1e-9);
        assert!(!t.allows_retry(), "exactly half does not allow a retry");
        t.record(Success);
        assert!((t.tokens() - 5.1).abs() < 1e-9);
        assert!(t.allows_retry());
        for _ in 0..1_000 {
            t.record(Success);
        }
        assert_eq!(t.tokens(), 10.0, "never above max_tokens");
    }

    #[test]
    fn other_outcomes_leave_the_bucket_alone() {
        let t = RetryThrottle::new(10, 0.1).unwrap();
        for _ in 0..100 {
            t.record(Other);
        }
        assert_eq!(t.tokens(), 10.0, "malformed requests do not drain it");
        for _ in 0..6 {
            t.record(RetryableFailure);
        }
        for _ in 0..100 {
            t.record(Other);
        }
        assert_eq!(t.tokens(), 4.0, "nor refill it");
        assert!(!t.allows_retry());
    }

    #[test]
    fn ratio_counts_in_thousandths() {
        let t = RetryThrottle::new(10, 0.001).unwrap();
        t.record(RetryableFailure);
        t.record(Success);
        assert!((t.tokens() - 9.001).abs() < 1e-9);
    }

    #[test]
    fn clones_share_the_bucket() {
        let t = RetryThrottle::new(2, 1.0).unwrap();
        let c = t.clone();
        c.record(RetryableFailure);
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
                        t.record(if i % 2 == 0 {
                            RetryableFailure
                        } else {
                            Success
                        });
                    }
                });
            }
        });
        assert!((0.0..=100.0).contains(&t.tokens()));
    }
}
