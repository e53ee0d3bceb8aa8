//! Fixed policies: the same delay every time, no delay, or no retry at all.

use super::BackOff;
use crate::error::ConfigError;
use std::time::Duration;

/// The same delay before every retry, forever.
///
/// Useful when the wait is dictated from outside (a polling period, a lease); combine it
/// with [`MaxRetries`](super::MaxRetries) or [`MaxElapsed`](super::MaxElapsed) to stop.
/// The interval must be positive: retrying without waiting is [`ZeroBackOff`].
///
/// ```
/// use std::time::Duration;
/// use tower_backoff::{BackOff, ConstantBackOff};
///
/// let mut backoff = ConstantBackOff::new(Duration::from_secs(2))?;
/// assert_eq!(backoff.next_backoff(), Some(Duration::from_secs(2)));
/// assert_eq!(backoff.next_backoff(), Some(Duration::from_secs(2)));
///
/// assert_eq!(ConstantBackOff::new(Duration::ZERO).unwrap_err().field(), "interval");
/// # Ok::<(), tower_backoff::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConstantBackOff {
    interval: Duration,
}

impl ConstantBackOff {
    /// Always waits `interval`.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `interval` when it is zero.
    pub fn new(interval: Duration) -> Result<Self, ConfigError> {
        if interval.is_zero() {
            return Err(ConfigError::new(
                "interval",
                interval,
                "must be greater than zero (use ZeroBackOff to retry without waiting)",
            ));
        }
        Ok(Self { interval })
    }

    /// The delay returned by every call.
    pub const fn interval(&self) -> Duration {
        self.interval
    }
}

impl BackOff for ConstantBackOff {
    fn next_backoff(&mut self) -> Option<Duration> {
        Some(self.interval)
    }

    fn reset(&mut self) {}
}

/// Retries at once, forever: for tests, or when something else paces the retries.
///
/// ```
/// use std::time::Duration;
/// use tower_backoff::{BackOff, BackOffExt};
/// use tower_backoff::backoff::ZeroBackOff;
///
/// let mut backoff = ZeroBackOff.with_max_retries(2);
/// assert_eq!(backoff.next_backoff(), Some(Duration::ZERO));
/// assert_eq!(backoff.next_backoff(), Some(Duration::ZERO));
/// assert_eq!(backoff.next_backoff(), None);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ZeroBackOff;

impl BackOff for ZeroBackOff {
    fn next_backoff(&mut self) -> Option<Duration> {
        Some(Duration::ZERO)
    }

    fn reset(&mut self) {}
}

/// Never retries: the operation runs exactly once.
///
/// ```
/// use tower_backoff::BackOff;
/// use tower_backoff::backoff::StopBackOff;
///
/// let mut backoff = StopBackOff;
/// assert_eq!(backoff.next_backoff(), None);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StopBackOff;

impl BackOff for StopBackOff {
    fn next_backoff(&mut self) -> Option<Duration> {
        None
    }

    fn reset(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_never_changes_or_stops() {
        let mut b = ConstantBackOff::new(Duration::from_millis(250)).unwrap();
        for _ in 0..1_000 {
            assert_eq!(b.next_backoff(), Some(Duration::from_millis(250)));
        }
        b.reset();
        assert_eq!(b.next_backoff(), Some(Duration::from_millis(250)));
        assert_eq!(b.interval(), Duration::from_millis(250));
    }

    #[test]
    fn zero_interval_is_a_config_error() {
        let err = ConstantBackOff::new(Duration::ZERO).unwrap_err();
        assert_eq!((err.field(), err.value()), ("interval", "0ns"));
        assert!(ConstantBackOff::new(Duration::from_nanos(1)).is_ok());
    }

    #[test]
    fn zero_is_zero_forever() {
        let mut b = ZeroBackOff;
        for _ in 0..1_000 {
            assert_eq!(b.next_backoff(), Some(Duration::ZERO));
        }
    }

    #[test]
    fn stop_always_stops() {
        let mut b = StopBackOff;
        assert_eq!(b.next_backoff(), None);
        b.reset();
        assert_eq!(b.next_backoff(), None);
    }
}
