//! Delays that grow by addition: linear (`interval × n`) and Fibonacci (`base × fib(n)`).

use super::Schedule;
use crate::error::ConfigError;
use crate::time::mul_u64;
use rand::RngCore;
use std::time::Duration;

/// Rejects a zero step and a cap below it; `step_field` names the step in errors.
fn validate(step_field: &'static str, step: Duration, max: Duration) -> Result<(), ConfigError> {
    if step.is_zero() {
        return Err(ConfigError::new(
            step_field,
            step,
            "must be greater than zero (a zero step never backs off)",
        ));
    }
    if max < step {
        return Err(ConfigError::new(
            "max",
            max,
            "must be at least the first delay",
        ));
    }
    Ok(())
}

/// Adds `interval` per failure, up to `max`: 1 s, 2 s, 3 s, … for a 1 s interval.
///
/// Gentler than exponential growth: suited to rate-limited services where each extra
/// failure should cost the client a little more, not twice as much. Retry `n` waits
/// `min(max, interval × n)`; retry 0 is treated like retry 1. No randomness.
///
/// ```
/// use std::time::Duration;
/// use tower_backoff::BackOff;
/// use tower_backoff::backoff::{Linear, Schedule};
///
/// let secs = Duration::from_secs;
/// let mut b = Linear::new(secs(1), secs(3)).unwrap().into_backoff();
/// let delays: Vec<_> = (0..5).map(|_| b.next_backoff().unwrap()).collect();
/// assert_eq!(delays, [secs(1), secs(2), secs(3), secs(3), secs(3)]);
///
/// // The cap must not be below the interval.
/// assert_eq!(Linear::new(secs(2), secs(1)).unwrap_err().field(), "max");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Linear {
    interval: Duration,
    max: Duration,
}

impl Linear {
    /// Waits `interval` more after each failure, never more than `max`.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `interval` when it is zero, or `max` when it is below
    /// `interval`.
    pub fn new(interval: Duration, max: Duration) -> Result<Self, ConfigError> {
        validate("interval", interval, max)?;
        Ok(Self { interval, max })
    }

    /// The amount added per failure.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// The longest delay.
    pub fn max(&self) -> Duration {
        self.max
    }
}

impl Schedule for Linear {
    fn delay(&self, retry: u32, _rng: &mut dyn RngCore) -> Duration {
        self.interval.saturating_mul(retry.max(1)).min(self.max)
    }
}

/// Waits `base × fib(n)` before retry `n`, up to `max`: fib = 1, 1, 2, 3, 5, 8, …
///
/// Grows faster than [`Linear`] but slower than doubling (by the golden ratio, ≈ 1.618 per
/// retry), a middle ground popular for reconnect loops. Retry 0 is treated like retry 1;
/// any retry number is fine (the sequence saturates at `max`). No randomness.
///
/// ```
/// use std::time::Duration;
/// use tower_backoff::BackOff;
/// use tower_backoff::backoff::{Fibonacci, Schedule};
///
/// let ms = Duration::from_millis;
/// let mut b = Fibonacci::new(ms(100), ms(1_000)).unwrap().into_backoff();
/// let delays: Vec<_> = (0..8).map(|_| b.next_backoff().unwrap()).collect();
/// assert_eq!(
///     delays,
///     [ms(100), ms(100), ms(200), ms(300), ms(500), ms(800), ms(1_000), ms(1_000)]
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fibonacci {
    base: Duration,
    max: Duration,
}

impl Fibonacci {
    /// Waits `base × fib(n)` before retry `n`, never more than `max`.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `base` when it is zero, or `max` when it is below `base`.
    pub fn new(base: Duration, max: Duration) -> Result<Self, ConfigError> {
        validate("base", base, max)?;
        Ok(Self { base, max })
    }

    /// The first (and second) delay.
    pub fn base(&self) -> Duration {
        self.base
    }

    /// The longest delay.
    pub fn max(&self) -> Duration {
        self.max
    }
}

impl Schedule for Fibonacci {
    fn delay(&self, retry: u32, _rng: &mut dyn RngCore) -> Duration {
        // fib(1) = fib(2) = 1. Stop as soon as the delay reaches `max` or the u64 saturates,
        // which bounds the loop to about a hundred steps whatever `retry` is.
        let (mut current, mut next) = (1u64, 1u64);
        for _ in 1..retry {
            if current == u64::MAX || mul_u64(self.base, current) >= self.max {
                break;
            }
            (current, next) = (next, current.saturating_add(next));
        }
        mul_u64(self.base, current).min(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    fn delays<S: Schedule>(s: &S, retries: impl IntoIterator<Item = u32>) -> Vec<Duration> {
        let mut rng = SmallRng::seed_from_u64(0);
        retries.into_iter().map(|n| s.delay(n, &mut rng)).collect()
    }

    #[test]
    fn linear_adds_one_interval_per_failure() {
        let secs = Duration::from_secs;
        let l = Linear::new(secs(1), secs(5)).unwrap();
        assert_eq!(
            delays(&l, 1..=7),
            [
                secs(1),
                secs(2),
                secs(3),
                secs(4),
                secs(5),
                secs(5),
                secs(5)
            ]
        );
        assert_eq!(delays(&l, [0]), [secs(1)]);
    }

    #[test]
    fn linear_saturates_for_huge_retries() {
        let l = Linear::new(Duration::MAX / 2, Duration::MAX).unwrap();
        assert_eq!(delays(&l, [u32::MAX]), [Duration::MAX]);
        let l = Linear::new(Duration::from_secs(1), Duration::from_secs(60)).unwrap();
        assert_eq!(delays(&l, [u32::MAX]), [Duration::from_secs(60)]);
    }

    #[test]
    fn fibonacci_follows_the_sequence() {
        let b = Duration::from_millis(10);
        let f = Fibonacci::new(b, Duration::from_secs(3600)).unwrap();
        let fib = [1u32, 1, 2, 3, 5, 8, 13, 21, 34, 55];
        assert_eq!(delays(&f, 1..=10), fib.map(|k| b * k));
        assert_eq!(delays(&f, [0]), [b]);
    }

    #[test]
    fn fibonacci_is_capped() {
        let secs = Duration::from_secs;
        let f = Fibonacci::new(secs(1), secs(10)).unwrap();
        assert_eq!(
            delays(&f, 4..=8),
            [secs(3), secs(5), secs(8), secs(10), secs(10)]
        );
        assert_eq!(delays(&f, [u32::MAX]), [secs(10)]);
    }

    #[test]
    fn fibonacci_saturates_for_huge_retries() {
        let f = Fibonacci::new(Duration::from_nanos(1), Duration::MAX).unwrap();
        // fib(93) is the last one that fits a u64; beyond, the sequence saturates.
        assert_eq!(
            delays(&f, [93]),
            [Duration::from_nanos(12_200_160_415_121_876_738)]
        );
        let huge = delays(&f, [94, 1_000, u32::MAX]);
        assert!(huge.iter().all(|&d| d == Duration::from_nanos(u64::MAX)));
    }

    #[test]
    fn config_errors_name_field_and_value() {
        let secs = Duration::from_secs;
        let err = Linear::new(secs(2), secs(1)).unwrap_err();
        assert_eq!((err.field(), err.value()), ("max", "1s"));
        let err = Linear::new(Duration::ZERO, secs(1)).unwrap_err();
        assert_eq!((err.field(), err.value()), ("interval", "0ns"));
        let err = Fibonacci::new(secs(2), secs(1)).unwrap_err();
        assert_eq!((err.field(), err.value()), ("max", "1s"));
        let err = Fibonacci::new(Duration::ZERO, secs(1)).unwrap_err();
        assert_eq!((err.field(), err.value()), ("base", "0ns"));
        // Equal is fine: a constant delay.
        assert!(Linear::new(secs(1), secs(1)).is_ok());
        assert!(Fibonacci::new(secs(1), secs(1)).is_ok());
    }
}
