//! Per-request limits of the retry layer: how many attempts one logical request may make,
//! and for how long.
//!
//! [`Limits`] bounds each logical request (the first attempt and all its retries) by a
//! number of attempts and by the time elapsed since the first attempt started — time spent
//! inside attempts counts, so a slow server cannot stretch the total beyond the limit. A
//! retry whose wait would end past `max_elapsed` is not started at all: the caller gets the
//! last response or error at once instead of sleeping only to give up.
//!
//! # Which limit to use when
//!
//! The crate has three ways to stop on attempts or time; they follow the same rules (the
//! time counts from the start of the operation, a wait ending exactly at `max_elapsed` is
//! allowed, the arithmetic saturates) and differ only in where they sit:
//!
//! | limit | counts | use it with |
//! | --- | --- | --- |
//! | [`Limits`] (`max_attempts`, `max_elapsed`) | attempts, the first one included; time since the first attempt started | the tower [`RetryLayer`](crate::RetryLayer), through [`RetrySettings`](crate::RetrySettings) |
//! | [`BackOffExt::with_max_retries`](crate::backoff::BackOffExt::with_max_retries), [`with_max_elapsed`](crate::backoff::BackOffExt::with_max_elapsed) | retries (attempts − 1); time since the backoff's last reset | [`retry()`](crate::retry()) and the [`Ticker`](crate::retry::Ticker), which reset the backoff before the first attempt |
//! | [`ExponentialBackOff`](crate::backoff::ExponentialBackOff)'s `max_elapsed` (15 min by default) | time since the backoff's last reset | the same, built in as in Go's cenkalti/backoff |
//!
//! The layer gives each request a fresh copy of its backoff at the request's first retry
//! (so a request that succeeds at once never pays for one), so a backoff-level time limit
//! also applies there but counts from the first failure, not the first attempt.
//! [`Limits`] is the one the layer reports in [`RetryStats`](crate::RetryStats) and
//! checks before asking the backoff.
//!
//! ```
//! use std::time::Duration;
//! use tower_backoff::limits::{LimitReached, Limits};
//!
//! let limits = Limits::new(3, Duration::from_secs(10))?;
//! // After 1 attempt and 2 s, a 5 s wait still ends within the limit.
//! assert_eq!(limits.check(1, Duration::from_secs(2), Duration::from_secs(5)), Ok(()));
//! // A 9 s wait would end at 11 s: not started.
//! assert_eq!(
//!     limits.check(1, Duration::from_secs(2), Duration::from_secs(9)),
//!     Err(LimitReached::MaxElapsed)
//! );
//! // Three attempts made: no fourth.
//! assert_eq!(
//!     limits.check(3, Duration::ZERO, Duration::ZERO),
//!     Err(LimitReached::MaxAttempts)
//! );
//! # Ok::<(), tower_backoff::ConfigError>(())
//! ```

use crate::error::ConfigError;
use crate::time::ends_within;
use std::fmt;
use std::time::Duration;

/// Default attempts per logical request, the first included: one try and three retries.
/// At 20 % of scattered failures, 3 attempts lose 0.8 % of requests and 4 lose 0.16 %.
/// The load a failing server gets is bounded by the shared retry quota, not by this.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 4;

/// Default time limit per logical request: rides out a few seconds of overload while
/// staying under the 30–60 s timeouts of common gateways and of the callers behind them.
pub const DEFAULT_MAX_ELAPSED: Duration = Duration::from_secs(30);

/// Per-request limits: attempts (the first one included) and elapsed time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Limits {
    max_attempts: u32,
    max_elapsed: Duration,
}

impl Limits {
    /// [`DEFAULT_MAX_ATTEMPTS`] attempts within [`DEFAULT_MAX_ELAPSED`].
    pub const DEFAULT: Self = Self {
        max_attempts: DEFAULT_MAX_ATTEMPTS,
        max_elapsed: DEFAULT_MAX_ELAPSED,
    };

    /// At most `max_attempts` attempts (at least 1; 1 disables retries), all started
    /// within `max_elapsed` (more than zero) of the first one.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `max_attempts` when it is zero, or `max_elapsed` when it
    /// is zero.
    pub fn new(max_attempts: u32, max_elapsed: Duration) -> Result<Self, ConfigError> {
        Self::DEFAULT
            .with_max_attempts(max_attempts)?
            .with_max_elapsed(max_elapsed)
    }

    /// These limits with `max_attempts` attempts (at least 1).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `max_attempts` when it is zero.
    pub fn with_max_attempts(mut self, max_attempts: u32) -> Result<Self, ConfigError> {
        if max_attempts == 0 {
            return Err(ConfigError::new(
                "max_attempts",
                max_attempts,
                "must be at least 1 (the first attempt counts)",
            ));
        }
        self.max_attempts = max_attempts;
        Ok(self)
    }

    /// These limits with a time limit of `max_elapsed` (more than zero).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `max_elapsed` when it is zero.
    pub fn with_max_elapsed(mut self, max_elapsed: Duration) -> Result<Self, ConfigError> {
        if max_elapsed.is_zero() {
            return Err(ConfigError::new(
                "max_elapsed",
                max_elapsed,
                "must be more than zero",
            ));
        }
        self.max_elapsed = max_elapsed;
        Ok(self)
    }

    /// The maximum number of attempts, the first one included.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The time limit, counted from the start of the first attempt.
    pub fn max_elapsed(&self) -> Duration {
        self.max_elapsed
    }

    /// Whether another attempt may start after waiting `wait`, given the `attempts`
    /// already made and the time `elapsed` since the first one started.
    ///
    /// # Errors
    ///
    /// The [`LimitReached`] that forbids the attempt.
    pub fn check(
        &self,
        attempts: u32,
        elapsed: Duration,
        wait: Duration,
    ) -> Result<(), LimitReached> {
        if attempts >= self.max_attempts {
            Err(LimitReached::MaxAttempts)
        } else if !ends_within(elapsed, wait, self.max_elapsed) {
            Err(LimitReached::MaxElapsed)
        } else {
            Ok(())
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Which per-request limit stopped the retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LimitReached {
    /// The maximum number of attempts was made.
    MaxAttempts,
    /// The next attempt would start after `max_elapsed`.
    MaxElapsed,
}

impl fmt::Display for LimitReached {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::MaxAttempts => "maximum attempts reached",
            Self::MaxElapsed => "next attempt would start past the maximum elapsed time",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_values_are_config_errors() {
        let err = Limits::new(0, Duration::from_secs(1)).unwrap_err();
        assert_eq!((err.field(), err.value()), ("max_attempts", "0"));
        let err = Limits::new(1, Duration::ZERO).unwrap_err();
        assert_eq!((err.field(), err.value()), ("max_elapsed", "0ns"));
    }

    #[test]
    fn a_wait_ending_exactly_at_max_elapsed_is_allowed() {
        let l = Limits::new(5, Duration::from_secs(10)).unwrap();
        assert_eq!(
            l.check(1, Duration::from_secs(4), Duration::from_secs(6)),
            Ok(())
        );
        assert_eq!(
            l.check(
                1,
                Duration::from_secs(4),
                Duration::from_nanos(6_000_000_001)
            ),
            Err(LimitReached::MaxElapsed)
        );
    }

    #[test]
    fn attempts_are_checked_first() {
        let l = Limits::new(2, Duration::from_secs(1)).unwrap();
        assert_eq!(
            l.check(2, Duration::MAX, Duration::MAX),
            Err(LimitReached::MaxAttempts)
        );
    }

    #[test]
    fn huge_waits_saturate_instead_of_overflowing() {
        let l = Limits::new(u32::MAX, Duration::MAX).unwrap();
        assert_eq!(l.check(1, Duration::MAX, Duration::MAX), Ok(()));
        let l = Limits::DEFAULT;
        assert_eq!(
            l.check(1, Duration::MAX, Duration::MAX),
            Err(LimitReached::MaxElapsed)
        );
    }
}
