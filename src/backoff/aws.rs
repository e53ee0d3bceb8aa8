//! The AWS backoff family: exponential growth with full, equal or decorrelated jitter.
//!
//! These are the strategies compared in the AWS Architecture Blog's "Exponential Backoff
//! And Jitter": when many clients fail at once, plain exponential backoff makes them retry
//! in synchronized waves; drawing each delay at random spreads them out. In short:
//!
//! | strategy | delay before retry `n` | jitter | lower bound |
//! |---|---|---|---|
//! | [`Fixed`] | `delay` | no | yes |
//! | [`Exponential`] | `min(cap, base × step^n)` | no | yes |
//! | [`ExponentialJitter`] | `U[0, min(cap, base × step^n)]` | yes | no |
//! | [`FullJitter`] | `U[0, min(cap, base × 2^n)]` | yes | no |
//! | [`EqualJitter`] | `t/2 + U[0, t/2]`, `t = min(cap, base × 2^n)` | yes | `t/2` |
//! | [`DecorrelatedJitter`] | `min(cap, U[base, 3 × previous])` | yes | `base` |
//!
//! `n` is the retry number, from 1: with a base of 1 s the first retry of [`Exponential`]
//! waits 2 s, then 4 s, 8 s. No strategy ever returns more than its cap, and the
//! arithmetic saturates for any `n` up to `u32::MAX`.
//!
//! All but [`DecorrelatedJitter`] are stateless [`Schedule`]s (drive them with
//! [`Schedule::into_backoff`]); `DecorrelatedJitter` depends on its previous delay, so it is
//! a [`BackOff`]. Every type has a `Default` built from [`DEFAULT_BASE`], [`DEFAULT_CAP`]
//! and [`DEFAULT_STEP`].
//!
//! Unlike the Go package these defaults come from, which silently replaces a base `<= 0`
//! by 1 s, the constructors here refuse a zero base (and a cap below the base, and a step
//! below 1 or not finite) with a [`ConfigError`]: a misconfiguration is reported, not
//! patched over.
//!
//! ```
//! use std::time::Duration;
//! use tower_backoff::backoff::aws::Exponential;
//! use tower_backoff::BackOff;
//! use tower_backoff::backoff::{FullJitter, Schedule};
//!
//! let secs = Duration::from_secs;
//! let mut exp = Exponential::new(secs(1), secs(20)).unwrap().into_backoff();
//! assert_eq!(exp.next_backoff(), Some(secs(2)));
//! assert_eq!(exp.next_backoff(), Some(secs(4)));
//! assert_eq!(exp.next_backoff(), Some(secs(8)));
//!
//! let mut full = FullJitter::default().into_backoff().with_seed(1);
//! assert!(full.next_backoff().unwrap() <= secs(2));
//! ```

use super::jitter::Jitter;
use super::sample::between;
use super::{BackOff, Schedule};
use crate::error::{ConfigError, check};
use crate::time::{mul_pow, mul_u64};
use rand::RngCore;
use std::time::Duration;

/// The default base delay: 1 s. Exponential strategies wait twice that at the first retry.
pub const DEFAULT_BASE: Duration = Duration::from_secs(1);

/// The default cap: 20 s. Long enough to ride out a short outage, short enough that a
/// client notices recovery quickly; no strategy ever returns more than its cap.
pub const DEFAULT_CAP: Duration = Duration::from_secs(20);

/// The default growth factor: 2.0, the classic doubling.
pub const DEFAULT_STEP: f64 = 2.0;

/// Rejects a zero base: a strategy that never waits is [`ZeroBackOff`](super::ZeroBackOff).
fn check_base(field: &'static str, base: Duration) -> Result<Duration, ConfigError> {
    if base.is_zero() {
        Err(ConfigError::new(
            field,
            base,
            "must be greater than zero (a zero base never backs off)",
        ))
    } else {
        Ok(base)
    }
}

/// Rejects a zero base and a cap below it.
fn check_base_cap(base: Duration, cap: Duration) -> Result<(), ConfigError> {
    check_base("base", base)?;
    if cap < base {
        return Err(ConfigError::new("cap", cap, "must be at least `base`"));
    }
    Ok(())
}

/// Rejects a step below 1 (delays would shrink), NaN or infinite.
fn check_step(step: f64) -> Result<f64, ConfigError> {
    check::float_in(
        "step",
        step,
        1.0,
        f64::MAX,
        "must be a finite number of at least 1.0",
    )
}

/// `min(cap, base × step^n)`, saturating.
///
/// Exact for whole steps (2.0, 3.0, …) while `step^n` fits a `u64`; in floating point
/// otherwise, where the result is kept at least `base` (as `step >= 1` guarantees), so
/// rounding never yields a delay below the base.
fn ceiling(base: Duration, cap: Duration, step: f64, retry: u32) -> Duration {
    // 2^64: the first float whose `as u64` saturates.
    const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;
    let whole = step as u64;
    let power = (step < TWO_POW_64 && whole as f64 == step)
        .then(|| whole.checked_pow(retry))
        .flatten();
    match power {
        Some(power) => mul_u64(base, power),
        None => mul_pow(base, step, retry).max(base),
    }
    .min(cap)
}

/// Always the same delay, whatever the retry number: for simple polling.
///
/// ```
/// use std::time::Duration;
/// use tower_backoff::backoff::aws::Fixed;
/// use tower_backoff::BackOff;
/// use tower_backoff::backoff::Schedule;
///
/// let mut b = Fixed::new(Duration::from_secs(2)).unwrap().into_backoff();
/// for _ in 0..3 {
///     assert_eq!(b.next_backoff(), Some(Duration::from_secs(2)));
/// }
/// assert_eq!(Fixed::default().interval(), Duration::from_secs(1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fixed {
    delay: Duration,
}

impl Fixed {
    /// Always waits `delay`.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `delay` when it is zero.
    pub fn new(delay: Duration) -> Result<Self, ConfigError> {
        Ok(Self {
            delay: check_base("delay", delay)?,
        })
    }

    /// The delay returned for every retry.
    pub fn interval(&self) -> Duration {
        self.delay
    }
}

impl Default for Fixed {
    /// Waits [`DEFAULT_BASE`] (1 s).
    fn default() -> Self {
        Self {
            delay: DEFAULT_BASE,
        }
    }
}

impl Schedule for Fixed {
    fn delay(&self, _retry: u32, _rng: &mut dyn RngCore) -> Duration {
        self.delay
    }
}

/// `min(cap, base × step^n)` before retry `n`, without jitter.
///
/// Predictable, but clients that failed together retry together: prefer a jittered
/// strategy when many clients share a server.
///
/// ```
/// use std::time::Duration;
/// use tower_backoff::backoff::aws::Exponential;
/// use tower_backoff::BackOff;
/// use tower_backoff::backoff::Schedule;
///
/// let secs = Duration::from_secs;
/// let mut b = Exponential::new(secs(1), secs(20))?.with_step(3.0)?.into_backoff();
/// let delays: Vec<_> = (0..4).map(|_| b.next_backoff().unwrap()).collect();
/// assert_eq!(delays, [secs(3), secs(9), secs(20), secs(20)]);
/// # Ok::<(), tower_backoff::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Exponential {
    base: Duration,
    cap: Duration,
    step: f64,
}

/// Constructors, accessors and `Default` of the strategies that grow by a configurable
/// `step` under a cap (the same validation and defaults for both).
macro_rules! stepped {
    ($name:ident, $growth:literal) => {
        impl $name {
            #[doc = concat!($growth, " doubling from `base`, up to `cap`.")]
            ///
            /// # Errors
            ///
            /// A [`ConfigError`] naming `base` when it is zero, or `cap` when it is below `base`.
            pub fn new(base: Duration, cap: Duration) -> Result<Self, ConfigError> {
                check_base_cap(base, cap)?;
                Ok(Self {
                    base,
                    cap,
                    step: DEFAULT_STEP,
                })
            }

            /// The same strategy growing by `step` per retry instead of doubling.
            ///
            /// # Errors
            ///
            /// A [`ConfigError`] naming `step` when it is below 1, NaN or infinite.
            pub fn with_step(self, step: f64) -> Result<Self, ConfigError> {
                Ok(Self {
                    step: check_step(step)?,
                    ..self
                })
            }

            /// The base delay.
            pub fn base(&self) -> Duration {
                self.base
            }

            /// The longest delay.
            pub fn cap(&self) -> Duration {
                self.cap
            }

            /// The growth factor per retry.
            pub fn step(&self) -> f64 {
                self.step
            }
        }

        impl Default for $name {
            /// [`DEFAULT_BASE`], [`DEFAULT_CAP`], [`DEFAULT_STEP`].
            fn default() -> Self {
                Self {
                    base: DEFAULT_BASE,
                    cap: DEFAULT_CAP,
                    step: DEFAULT_STEP,
                }
            }
        }
    };
}

stepped!(Exponential, "A delay");

impl Schedule for Exponential {
    fn delay(&self, retry: u32, _rng: &mut dyn RngCore) -> Duration {
        ceiling(self.base, self.cap, self.step, retry)
    }
}

/// A delay drawn uniformly from `[0, min(cap, base × step^n)]` before retry `n`.
///
/// [`FullJitter`] with a configurable growth factor: a flexible default for most retry
/// loops.
///
/// ```
/// use std::time::Duration;
/// use tower_backoff::backoff::{ExponentialJitter, Schedule};
/// use rand::SeedableRng;
///
/// let secs = Duration::from_secs;
/// let s = ExponentialJitter::new(secs(1), secs(20))?.with_step(1.5)?;
/// let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
/// assert!(s.delay(1, &mut rng) <= Duration::from_millis(1_500));
/// assert!(s.delay(100, &mut rng) <= secs(20));
/// # Ok::<(), tower_backoff::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExponentialJitter {
    base: Duration,
    cap: Duration,
    step: f64,
}

stepped!(ExponentialJitter, "Full jitter under a ceiling");

impl Schedule for ExponentialJitter {
    fn delay(&self, retry: u32, rng: &mut dyn RngCore) -> Duration {
        between(
            rng,
            Duration::ZERO,
            ceiling(self.base, self.cap, self.step, retry),
        )
    }
}

/// Constructors, accessors and `Default` of the strategies whose ceiling doubles (step 2).
macro_rules! doubling {
    ($name:ident, $jitter:literal) => {
        impl $name {
            #[doc = concat!($jitter, " under a ceiling doubling from `base`, up to `cap`.")]
            ///
            /// # Errors
            ///
            /// A [`ConfigError`] naming `base` when it is zero, or `cap` when it is below `base`.
            pub fn new(base: Duration, cap: Duration) -> Result<Self, ConfigError> {
                check_base_cap(base, cap)?;
                Ok(Self { base, cap })
            }

            /// The base delay.
            pub fn base(&self) -> Duration {
                self.base
            }

            /// The longest delay.
            pub fn cap(&self) -> Duration {
                self.cap
            }
        }

        impl Default for $name {
            /// [`DEFAULT_BASE`] and [`DEFAULT_CAP`].
            fn default() -> Self {
                Self {
                    base: DEFAULT_BASE,
                    cap: DEFAULT_CAP,
                }
            }
        }
    };
}

/// A delay drawn uniformly from `[0, min(cap, base × 2^n)]` before retry `n`.
///
/// The best spread of all: clients that failed together end up anywhere in the window.
///
/// ```
/// use std::time::Duration;
/// use tower_backoff::BackOff;
/// use tower_backoff::backoff::{FullJitter, Schedule};
///
/// let secs = Duration::from_secs;
/// let mut b = FullJitter::new(secs(1), secs(20)).unwrap().into_backoff().with_seed(3);
/// for limit in [2, 4, 8, 16, 20, 20] {
///     assert!(b.next_backoff().unwrap() <= secs(limit));
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FullJitter {
    base: Duration,
    cap: Duration,
}

doubling!(FullJitter, "Full jitter");

impl Schedule for FullJitter {
    fn delay(&self, retry: u32, rng: &mut dyn RngCore) -> Duration {
        between(
            rng,
            Duration::ZERO,
            ceiling(self.base, self.cap, 2.0, retry),
        )
    }
}

/// Half the exponential ceiling, plus a random half: `t/2 + U[0, t/2]` with
/// `t = min(cap, base × 2^n)` before retry `n`.
///
/// Never shorter than half the ceiling: more predictable than [`FullJitter`] while still
/// spreading clients out.
///
/// ```
/// use std::time::Duration;
/// use tower_backoff::backoff::{EqualJitter, Schedule};
/// use rand::SeedableRng;
///
/// let secs = Duration::from_secs;
/// let s = EqualJitter::new(secs(1), secs(20)).unwrap();
/// let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
/// let d = s.delay(2, &mut rng);
/// assert!(secs(2) <= d && d <= secs(4));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EqualJitter {
    base: Duration,
    cap: Duration,
}

doubling!(EqualJitter, "Equal jitter");

impl Schedule for EqualJitter {
    fn delay(&self, retry: u32, rng: &mut dyn RngCore) -> Duration {
        let t = ceiling(self.base, self.cap, 2.0, retry);
        // [t/2, t] exactly, also when t has an odd number of nanoseconds.
        between(rng, t / 2, t)
    }
}

/// Each delay drawn from `[base, 3 × previous]`, capped: a random walk that keeps clients
/// apart even when they started together.
///
/// `sleep = min(cap, U[base, previous × 3])`, the previous delay starting at `base` (so
/// the first delay is within `[base, 3 × base]`). Because it depends on its own history
/// this is a [`BackOff`], not a [`Schedule`]; [`reset`](BackOff::reset) starts the walk
/// again from `base`. The pure step is [`next_after`](Self::next_after), for callers that
/// keep the previous delay themselves.
///
/// Clones draw from different random streams (see [`with_seed`](Self::with_seed)).
///
/// ```
/// use std::time::Duration;
/// use tower_backoff::BackOff;
/// use tower_backoff::backoff::DecorrelatedJitter;
///
/// let secs = Duration::from_secs;
/// let mut b = DecorrelatedJitter::new(secs(1), secs(20)).unwrap().with_seed(9);
/// let first = b.next_backoff().unwrap();
/// assert!(secs(1) <= first && first <= secs(3));
/// for _ in 0..50 {
///     let d = b.next_backoff().unwrap();
///     assert!(secs(1) <= d && d <= secs(20));
/// }
/// ```
#[derive(Debug, Clone)]
pub struct DecorrelatedJitter {
    base: Duration,
    cap: Duration,
    prev: Duration,
    jitter: Jitter,
}

impl DecorrelatedJitter {
    /// A walk between `base` and `cap`, seeded from the operating system.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `base` when it is zero, or `cap` when it is below `base`.
    pub fn new(base: Duration, cap: Duration) -> Result<Self, ConfigError> {
        check_base_cap(base, cap)?;
        Ok(Self {
            base,
            cap,
            prev: base,
            jitter: Jitter::from_entropy(),
        })
    }

    /// Uses a generator seeded with `seed`, for reproducible sequences (tests, simulations).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.jitter = Jitter::seeded(seed);
        self
    }

    /// The delay following `prev`: `min(cap, U[base, 3 × prev])`.
    ///
    /// A zero `prev` (the Go package's "first call") counts as `base`. When `3 × prev` is
    /// below `base` the result is `base`: never shorter than `base`, never above `cap`.
    pub fn next_after(&self, prev: Duration, rng: &mut dyn RngCore) -> Duration {
        let prev = if prev.is_zero() { self.base } else { prev };
        decorrelated(self.base, self.cap, prev, rng)
    }

    /// The previous delay (`base` before the first one).
    pub fn previous(&self) -> Duration {
        self.prev
    }

    /// The shortest delay.
    pub fn base(&self) -> Duration {
        self.base
    }

    /// The longest delay.
    pub fn cap(&self) -> Duration {
        self.cap
    }
}

/// `min(cap, U[base, max(base, 3 × prev)])`, saturating.
fn decorrelated(base: Duration, cap: Duration, prev: Duration, rng: &mut dyn RngCore) -> Duration {
    between(rng, base, prev.saturating_mul(3).max(base)).min(cap)
}

impl Default for DecorrelatedJitter {
    /// [`DEFAULT_BASE`] and [`DEFAULT_CAP`], seeded from the operating system.
    fn default() -> Self {
        Self {
            base: DEFAULT_BASE,
            cap: DEFAULT_CAP,
            prev: DEFAULT_BASE,
            jitter: Jitter::from_entropy(),
        }
    }
}

impl BackOff for DecorrelatedJitter {
    fn next_backoff(&mut self) -> Option<Duration> {
        let next = decorrelated(self.base, self.cap, self.prev, self.jitter.rng());
        self.prev = next;
        Some(next)
    }

    fn reset(&mut self) {
        self.prev = self.base;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    fn rng() -> SmallRng {
        SmallRng::seed_from_u64(2024)
    }

    /// Min and max over many draws of `s.delay(retry)`.
    fn spread<S: Schedule>(s: &S, retry: u32) -> (Duration, Duration) {
        let mut rng = rng();
        (0..4000)
            .map(|_| s.delay(retry, &mut rng))
            .fold((Duration::MAX, Duration::ZERO), |(lo, hi), d| {
                (lo.min(d), hi.max(d))
            })
    }

    /// The draws of `s.delay(retry)` fill `[lo, hi]`: within it, and close to both ends.
    fn assert_fills<S: Schedule>(s: &S, retry: u32, lo: Duration, hi: Duration) {
        let (min, max) = spread(s, retry);
        let slack = (hi - lo) / 50;
        assert!(lo <= min && min <= lo + slack, "retry {retry}: min {min:?}");
        assert!(hi - slack <= max && max <= hi, "retry {retry}: max {max:?}");
    }

    #[test]
    fn defaults_are_the_documented_constants() {
        assert_eq!(DEFAULT_BASE, secs(1));
        assert_eq!(DEFAULT_CAP, secs(20));
        assert_eq!(DEFAULT_STEP, 2.0);
        assert_eq!(
            Exponential::default(),
            Exponential::new(secs(1), secs(20)).unwrap()
        );
        assert_eq!(
            FullJitter::default(),
            FullJitter::new(secs(1), secs(20)).unwrap()
        );
        assert_eq!(
            EqualJitter::default(),
            EqualJitter::new(secs(1), secs(20)).unwrap()
        );
        assert_eq!(
            ExponentialJitter::default(),
            ExponentialJitter::new(secs(1), secs(20)).unwrap()
        );
        assert_eq!(Fixed::default(), Fixed::new(secs(1)).unwrap());
        let d = DecorrelatedJitter::default();
        assert_eq!(
            (d.base(), d.cap(), d.previous()),
            (secs(1), secs(20), secs(1))
        );
    }

    #[test]
    fn fixed_ignores_the_retry_number() {
        let f = Fixed::new(secs(2)).unwrap();
        let mut rng = rng();
        for n in [0, 1, 2, 3, u32::MAX] {
            assert_eq!(f.delay(n, &mut rng), secs(2));
        }
    }

    #[test]
    fn exponential_doubles_from_twice_the_base() {
        let e = Exponential::default();
        let mut rng = rng();
        let got: Vec<_> = (1..=6).map(|n| e.delay(n, &mut rng)).collect();
        assert_eq!(
            got,
            [secs(2), secs(4), secs(8), secs(16), secs(20), secs(20)]
        );
        assert_eq!(e.delay(u32::MAX, &mut rng), secs(20));
        let e3 = Exponential::new(secs(1), secs(100))
            .unwrap()
            .with_step(3.0)
            .unwrap();
        assert_eq!(e3.delay(2, &mut rng), secs(9));
    }

    #[test]
    fn full_and_exponential_jitter_span_zero_to_the_ceiling() {
        for (n, hi) in [(1, 2), (2, 4), (3, 8), (5, 20), (1000, 20)] {
            assert_fills(&FullJitter::default(), n, Duration::ZERO, secs(hi));
            assert_fills(&ExponentialJitter::default(), n, Duration::ZERO, secs(hi));
        }
        let slow = ExponentialJitter::new(secs(1), secs(20))
            .unwrap()
            .with_step(1.5)
            .unwrap();
        assert_fills(&slow, 2, Duration::ZERO, Duration::from_millis(2250));
    }

    #[test]
    fn equal_jitter_spans_half_to_the_ceiling() {
        for (n, lo, hi) in [
            (1, 1, 2),
            (2, 2, 4),
            (3, 4, 8),
            (5, 10, 20),
            (u32::MAX, 10, 20),
        ] {
            assert_fills(&EqualJitter::default(), n, secs(lo), secs(hi));
        }
    }

    #[test]
    fn ceilings_are_exact_for_whole_steps_and_never_below_base() {
        // Not representable exactly as f64 seconds: float math would lose the nanosecond.
        let base = Duration::new(4_503_599_627_370_496, 1);
        let mut rng = rng();
        let e = Exponential::new(base, Duration::MAX)
            .unwrap()
            .with_step(1.0)
            .unwrap();
        assert_eq!(e.delay(0, &mut rng), base);
        assert_eq!(e.delay(u32::MAX, &mut rng), base);
        let e = Exponential::new(base, Duration::MAX).unwrap();
        assert_eq!(e.delay(1, &mut rng), base * 2);
        let e = Exponential::new(base, Duration::MAX)
            .unwrap()
            .with_step(1.5)
            .unwrap();
        assert!(e.delay(0, &mut rng) >= base);
        let ns = Duration::from_nanos;
        let e = Exponential::new(ns(3), Duration::MAX)
            .unwrap()
            .with_step(3.0)
            .unwrap();
        assert_eq!(e.delay(30, &mut rng), ns(3u64.pow(31)));
    }

    #[test]
    fn nothing_exceeds_the_cap_even_for_huge_bases() {
        let cap = Duration::MAX;
        let base = Duration::MAX / 2;
        let mut rng = rng();
        let e = Exponential::new(base, cap).unwrap();
        assert_eq!(e.delay(u32::MAX, &mut rng), cap);
        assert!(FullJitter::new(base, cap).unwrap().delay(40, &mut rng) <= cap);
        let d = EqualJitter::new(base, cap)
            .unwrap()
            .delay(u32::MAX, &mut rng);
        assert!(d >= cap / 2);
        let mut dj = DecorrelatedJitter::new(base, cap).unwrap().with_seed(1);
        for _ in 0..10 {
            assert!(dj.next_backoff().unwrap() >= base);
        }
    }

    #[test]
    fn decorrelated_jitter_walks_between_base_and_three_times_previous() {
        let mut b = DecorrelatedJitter::new(secs(1), secs(20))
            .unwrap()
            .with_seed(5);
        let mut prev = secs(1);
        let mut reached_cap = false;
        for _ in 0..200 {
            let d = b.next_backoff().unwrap();
            assert!(
                secs(1) <= d && d <= (prev * 3).min(secs(20)),
                "{d:?} after {prev:?}"
            );
            assert_eq!(b.previous(), d);
            reached_cap |= d == secs(20);
            prev = d;
        }
        assert!(
            reached_cap,
            "a 200-step walk with cap 20 × base reaches the cap"
        );
        b.reset();
        assert_eq!(b.previous(), secs(1));
        let first = b.next_backoff().unwrap();
        assert!(secs(1) <= first && first <= secs(3));
    }

    #[test]
    fn decorrelated_first_draws_fill_base_to_three_base() {
        let mut lo = Duration::MAX;
        let mut hi = Duration::ZERO;
        let mut b = DecorrelatedJitter::default().with_seed(11);
        for _ in 0..2000 {
            b.reset();
            let d = b.next_backoff().unwrap();
            lo = lo.min(d);
            hi = hi.max(d);
        }
        assert!(secs(1) <= lo && lo < Duration::from_millis(1050), "{lo:?}");
        assert!(Duration::from_millis(2950) < hi && hi <= secs(3), "{hi:?}");
    }

    #[test]
    fn decorrelated_next_after_is_the_pure_step() {
        let b = DecorrelatedJitter::new(secs(1), secs(20)).unwrap();
        let mut rng = rng();
        for _ in 0..500 {
            // The Go package's first call passes 0: treated as base.
            let d = b.next_after(Duration::ZERO, &mut rng);
            assert!(secs(1) <= d && d <= secs(3));
            let d = b.next_after(secs(5), &mut rng);
            assert!(secs(1) <= d && d <= secs(15));
            let d = b.next_after(secs(100), &mut rng);
            assert!(secs(1) <= d && d <= secs(20));
        }
        // 3 × prev below base: base.
        assert_eq!(b.next_after(Duration::from_millis(1), &mut rng), secs(1));
        assert!(b.next_after(Duration::MAX, &mut rng) <= secs(20));
    }

    #[test]
    fn decorrelated_is_reproducible_with_a_seed_and_clones_differ() {
        let walk = |mut b: DecorrelatedJitter| -> Vec<_> {
            (0..5).map(|_| b.next_backoff().unwrap()).collect()
        };
        let seeded = || DecorrelatedJitter::default().with_seed(3);
        assert_eq!(walk(seeded()), walk(seeded()));
        // Per-request clones must not all walk the same "random" path.
        let parent = seeded();
        assert_ne!(walk(parent.clone()), walk(parent.clone()));
    }

    #[test]
    fn config_errors_name_field_and_value() {
        let zero = Duration::ZERO;
        let step = |step| {
            Exponential::new(secs(1), secs(2))
                .and_then(|s| s.with_step(step))
                .map(drop)
        };
        let jitter_step = |step| {
            ExponentialJitter::new(secs(1), secs(2))
                .and_then(|s| s.with_step(step))
                .map(drop)
        };
        let cases: Vec<(Result<(), ConfigError>, &str, &str)> = vec![
            (Fixed::new(zero).map(drop), "delay", "0ns"),
            (Exponential::new(zero, secs(1)).map(drop), "base", "0ns"),
            (Exponential::new(secs(2), secs(1)).map(drop), "cap", "1s"),
            (step(0.5), "step", "0.5"),
            (step(f64::NAN), "step", "NaN"),
            (step(f64::INFINITY), "step", "inf"),
            (
                ExponentialJitter::new(zero, secs(1)).map(drop),
                "base",
                "0ns",
            ),
            (
                ExponentialJitter::new(secs(2), secs(1)).map(drop),
                "cap",
                "1s",
            ),
            (jitter_step(0.99), "step", "0.99"),
            (jitter_step(f64::NAN), "step", "NaN"),
            (jitter_step(f64::NEG_INFINITY), "step", "-inf"),
            (FullJitter::new(zero, secs(1)).map(drop), "base", "0ns"),
            (FullJitter::new(secs(2), secs(1)).map(drop), "cap", "1s"),
            (EqualJitter::new(zero, secs(1)).map(drop), "base", "0ns"),
            (EqualJitter::new(secs(2), secs(1)).map(drop), "cap", "1s"),
            (
                DecorrelatedJitter::new(zero, secs(1)).map(drop),
                "base",
                "0ns",
            ),
            (
                DecorrelatedJitter::new(secs(2), secs(1)).map(drop),
                "cap",
                "1s",
            ),
        ];
        for (i, (result, field, value)) in cases.into_iter().enumerate() {
            let err = result.expect_err(&format!("case {i} should fail"));
            assert_eq!((err.field(), err.value()), (field, value), "case {i}");
        }
        // Boundaries are accepted: cap == base, step == 1.
        assert!(
            Exponential::new(secs(1), secs(1))
                .and_then(|s| s.with_step(1.0))
                .is_ok()
        );
        assert!(
            ExponentialJitter::new(secs(1), secs(1))
                .and_then(|s| s.with_step(1.0))
                .is_ok()
        );
    }
}
