//! How much retrying one logical request may do: attempts and elapsed time.
//!
//! A backoff says how long to wait; a budget says when to stop. [`Limits`] bounds each
//! logical request (the first attempt and all its retries) by a number of attempts and by
//! the time elapsed since the first attempt started — time spent inside attempts counts,
//! so a slow server cannot stretch the total beyond the deadline.
//!
//! A retry whose wait would end past the deadline is not started at all: the caller gets
//! the last response or error at once instead of sleeping only to give up.
//!
//! ```
//! use std::time::Duration;
//! use tower_backoff::budget::{Exhausted, Limits};
//!
//! let limits = Limits::new(3, Duration::from_secs(10))?;
//! // After 1 attempt and 2 s, a 5 s wait still ends before the deadline.
//! assert_eq!(limits.check(1, Duration::from_secs(2), Duration::from_secs(5)), Ok(()));
//! // A 9 s wait would end at 11 s: not started.
//! assert_eq!(
//!     limits.check(1, Duration::from_secs(2), Duration::from_secs(9)),
//!     Err(Exhausted::Deadline)
//! );
//! // Three attempts made: no fourth.
//! assert_eq!(limits.check(3, Duration::ZERO, Duration::ZERO), Err(Exhausted::Attempts));
//! # Ok::<(), tower_backoff::ConfigError>(())
//! ```

use crate::error::ConfigError;
use std::fmt;
use std::time::Duration;

/// Default attempts per logical request, the first included: one try and two retries,
/// as the AWS SDKs' standard mode — more retries mostly add load to a failing server.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;

/// Default time budget per logical request: rides out a few seconds of overload while
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
    pub fn new(max_attempts: u32, max_elapsed: Duration) -> Result<Self, ConfigError> {
        Self::DEFAULT
            .with_max_attempts(max_attempts)?
            .with_max_elapsed(max_elapsed)
    }

    /// These limits with `max_attempts` attempts (at least 1).
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

    /// These limits with a time budget of `max_elapsed` (more than zero).
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

    /// The time budget, counted from the start of the first attempt.
    pub fn max_elapsed(&self) -> Duration {
        self.max_elapsed
    }

    /// Whether another attempt may start after waiting `wait`, given the `attempts`
    /// already made and the time `elapsed` since the first one started.
    pub fn check(&self, attempts: u32, elapsed: Duration, wait: Duration) -> Result<(), Exhausted> {
        if attempts >= self.max_attempts {
            Err(Exhausted::Attempts)
        } else if elapsed.saturating_add(wait) > self.max_elapsed {
            Err(Exhausted::Deadline)
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

/// Which limit stopped the retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Exhausted {
    /// The maximum number of attempts was made.
    Attempts,
    /// The next attempt would start after the deadline.
    Deadline,
}

impl fmt::Display for Exhausted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Attempts => "maximum attempts reached",
            Self::Deadline => "next attempt would start past the deadline",
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
    fn a_wait_ending_exactly_at_the_deadline_is_allowed() {
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
            Err(Exhausted::Deadline)
        );
    }

    #[test]
    fn huge_waits_saturate_instead_of_overflowing() {
        let l = Limits::new(u32::MAX, Duration::MAX).unwrap();
        assert_eq!(l.check(1, Duration::MAX, Duration::MAX), Ok(()));
        let l = Limits::DEFAULT;
        assert_eq!(
            l.check(1, Duration::MAX, Duration::MAX),
            Err(Exhausted::Deadline)
        );
    }
}

mod shared;
mod throttle;
pub use shared::RetryBudget;
pub use throttle::RetryThrottle;
