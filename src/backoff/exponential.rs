//! The randomized exponential backoff of Google's HTTP client, as ported by cenkalti/backoff.

use super::BackOff;
use super::jitter::Jitter;
use crate::error::{ConfigError, check};
use crate::time::{ends_within, mul_f64};
use std::time::Duration;
use tokio::time::Instant;

/// Delays that grow by a multiplier, each randomized around its nominal interval, until a
/// total elapsed time runs out.
///
/// The `n`-th delay is drawn uniformly from `interval × [1 − rf, 1 + rf]`, where the
/// interval starts at the *initial interval*, is multiplied by the *multiplier* after each
/// delay and is capped at the *max interval* (the cap applies before randomization, so a
/// delay may reach `max_interval × (1 + rf)`). The randomization spreads clients that
/// failed together, so they do not retry together.
///
/// It stops (returns `None`) once the time since creation or the last [`reset`] plus the
/// next delay would exceed the *max elapsed time* (a delay ending exactly at it is still
/// handed out; the sum saturates); `None` for that limit never stops. This is the same rule
/// as [`MaxElapsed`](super::MaxElapsed), built in as in cenkalti/backoff; wrapping a
/// built backoff with [`BackOffExt::with_max_elapsed`](super::BackOffExt::with_max_elapsed)
/// adds a second limit, and the tighter one stops it.
///
/// With the defaults (the same as cenkalti/backoff v4), the first ten intervals are:
///
/// | retry | interval (s) | randomized (s)   |
/// |------:|-------------:|------------------|
/// | 1     | 0.5          | [0.25, 0.75]     |
/// | 2     | 0.75         | [0.375, 1.125]   |
/// | 3     | 1.125        | [0.563, 1.688]   |
/// | 4     | 1.688        | [0.844, 2.531]   |
/// | 5     | 2.531        | [1.266, 3.797]   |
/// | 6     | 3.797        | [1.898, 5.695]   |
/// | 7     | 5.695        | [2.848, 8.543]   |
/// | 8     | 8.543        | [4.271, 12.814]  |
/// | 9     | 12.814       | [6.407, 19.222]  |
/// | 10    | 19.222       | [9.611, 28.833]  |
///
/// Clones draw from different random streams (a policy cloned per request must not make
/// every request wait the same "random" delay); use [`with_seed`] for reproducible runs.
///
/// ```
/// use std::time::Duration;
/// use tower_backoff::{BackOff, ExponentialBackOff};
///
/// let mut backoff = ExponentialBackOff::builder()
///     .with_initial_interval(Duration::from_millis(100))
///     .with_multiplier(2.0)
///     .with_max_interval(Duration::from_secs(1))
///     .with_max_elapsed(None)
///     .build()?;
///
/// for nominal in [100, 200, 400, 800, 1000, 1000] {
///     let nominal = Duration::from_millis(nominal);
///     assert_eq!(backoff.current_interval(), nominal);
///     let delay = backoff.next_backoff().unwrap();
///     assert!(delay >= nominal / 2 && delay <= nominal * 3 / 2);
/// }
/// # Ok::<(), tower_backoff::ConfigError>(())
/// ```
///
/// [`reset`]: BackOff::reset
/// [`with_seed`]: ExponentialBackOff::with_seed
#[derive(Debug, Clone)]
pub struct ExponentialBackOff {
    initial_interval: Duration,
    randomization_factor: f64,
    multiplier: f64,
    max_interval: Duration,
    max_elapsed: Option<Duration>,
    current_interval: Duration,
    start: Instant,
    jitter: Jitter,
}

impl ExponentialBackOff {
    /// The first interval: 500 ms, short enough to hide a blip from the user.
    pub const DEFAULT_INITIAL_INTERVAL: Duration = Duration::from_millis(500);
    /// Each delay lies within ±50 % of its interval: enough spread to break up a herd.
    pub const DEFAULT_RANDOMIZATION_FACTOR: f64 = 0.5;
    /// Each interval is 1.5 times the previous one: gentler than doubling, so the waits
    /// stay useful for longer before hitting the cap.
    pub const DEFAULT_MULTIPLIER: f64 = 1.5;
    /// Intervals stop growing at 60 s: a longer silence looks like a hang.
    pub const DEFAULT_MAX_INTERVAL: Duration = Duration::from_secs(60);
    /// Gives up after 15 minutes in total: past that, an operator should look.
    pub const DEFAULT_MAX_ELAPSED: Option<Duration> = Some(Duration::from_secs(15 * 60));

    /// A builder starting from the defaults.
    pub const fn builder() -> ExponentialBackOffBuilder {
        ExponentialBackOffBuilder::new()
    }

    /// Uses a generator seeded with `seed`, for reproducible sequences (tests, simulations).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.jitter = Jitter::seeded(seed);
        self
    }

    /// The nominal interval of the next delay, before randomization.
    pub fn current_interval(&self) -> Duration {
        self.current_interval
    }

    /// The time since creation or the last [`reset`](BackOff::reset).
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// The first interval.
    pub fn initial_interval(&self) -> Duration {
        self.initial_interval
    }

    /// The spread of each delay around its interval, in `[0, 1]`.
    pub fn randomization_factor(&self) -> f64 {
        self.randomization_factor
    }

    /// The growth of the interval after each delay.
    pub fn multiplier(&self) -> f64 {
        self.multiplier
    }

    /// The cap of the interval (before randomization).
    pub fn max_interval(&self) -> Duration {
        self.max_interval
    }

    /// The total time after which it stops, counted from creation or the last reset;
    /// `None` never stops on time.
    pub fn max_elapsed(&self) -> Option<Duration> {
        self.max_elapsed
    }

    /// `current × U[1 − rf, 1 + rf]`.
    fn randomized(&mut self) -> Duration {
        let rf = self.randomization_factor;
        if rf == 0.0 {
            return self.current_interval;
        }
        let factor = self.jitter.uniform(1.0 - rf, 1.0 + rf);
        mul_f64(self.current_interval, factor)
    }

    fn increment(&mut self) {
        let current = self.current_interval.as_secs_f64();
        // Comparing against max / multiplier first keeps current × multiplier from
        // overflowing; it also lands exactly on the cap.
        if current >= self.max_interval.as_secs_f64() / self.multiplier {
            self.current_interval = self.max_interval;
        } else {
            self.current_interval =
                mul_f64(self.current_interval, self.multiplier).min(self.max_interval);
        }
    }
}

impl Default for ExponentialBackOff {
    fn default() -> Self {
        ExponentialBackOffBuilder::new().build_unchecked()
    }
}

impl BackOff for ExponentialBackOff {
    fn next_backoff(&mut self) -> Option<Duration> {
        // The clock is read only when a time limit needs it (before randomizing, as
        // cenkalti/backoff does).
        let elapsed = self.max_elapsed.map(|max| (max, self.elapsed()));
        let next = self.randomized();
        self.increment();
        match elapsed {
            Some((max, elapsed)) if !ends_within(elapsed, next, max) => None,
            _ => Some(next),
        }
    }

    fn reset(&mut self) {
        self.current_interval = self.initial_interval;
        self.start = Instant::now();
    }

    /// The max elapsed time minus the time elapsed; `None` without a max elapsed time.
    fn remaining(&self) -> Option<Duration> {
        self.max_elapsed
            .map(|max| max.saturating_sub(self.elapsed()))
    }
}

/// Configures an [`ExponentialBackOff`]; every setting defaults to the matching
/// `ExponentialBackOff::DEFAULT_*` constant.
///
/// [`build`](Self::build) validates the whole configuration and names the first
/// offending field:
///
/// ```
/// use tower_backoff::ExponentialBackOff;
///
/// let err = ExponentialBackOff::builder().with_multiplier(0.5).build().unwrap_err();
/// assert_eq!(err.field(), "multiplier");
/// ```
#[derive(Debug, Clone)]
pub struct ExponentialBackOffBuilder {
    initial_interval: Duration,
    randomization_factor: f64,
    multiplier: f64,
    max_interval: Duration,
    max_elapsed: Option<Duration>,
    seed: Option<u64>,
}

impl ExponentialBackOffBuilder {
    /// The defaults of [`ExponentialBackOff`].
    pub const fn new() -> Self {
        Self {
            initial_interval: ExponentialBackOff::DEFAULT_INITIAL_INTERVAL,
            randomization_factor: ExponentialBackOff::DEFAULT_RANDOMIZATION_FACTOR,
            multiplier: ExponentialBackOff::DEFAULT_MULTIPLIER,
            max_interval: ExponentialBackOff::DEFAULT_MAX_INTERVAL,
            max_elapsed: ExponentialBackOff::DEFAULT_MAX_ELAPSED,
            seed: None,
        }
    }

    /// The first interval; must be positive and at most the max interval.
    ///
    /// Default: [`ExponentialBackOff::DEFAULT_INITIAL_INTERVAL`] (500 ms).
    pub const fn with_initial_interval(mut self, interval: Duration) -> Self {
        self.initial_interval = interval;
        self
    }

    /// The spread of each delay around its interval, in `[0, 1]`; `0` disables jitter.
    ///
    /// Default: [`ExponentialBackOff::DEFAULT_RANDOMIZATION_FACTOR`] (0.5).
    pub const fn with_randomization_factor(mut self, factor: f64) -> Self {
        self.randomization_factor = factor;
        self
    }

    /// The growth of the interval after each delay; at least `1` (`1` keeps it constant).
    ///
    /// Default: [`ExponentialBackOff::DEFAULT_MULTIPLIER`] (1.5).
    pub const fn with_multiplier(mut self, multiplier: f64) -> Self {
        self.multiplier = multiplier;
        self
    }

    /// The cap of the interval, applied before randomization.
    ///
    /// Default: [`ExponentialBackOff::DEFAULT_MAX_INTERVAL`] (60 s).
    pub const fn with_max_interval(mut self, interval: Duration) -> Self {
        self.max_interval = interval;
        self
    }

    /// The total time after which it stops, counted from creation or the last reset;
    /// `None` never stops on time.
    ///
    /// `Some(Duration::ZERO)` is rejected: in cenkalti/backoff a zero limit means "never
    /// stop", here it would mean "never retry", so the intent is ambiguous. Use `None` or
    /// [`StopBackOff`](super::StopBackOff).
    ///
    /// Default: [`ExponentialBackOff::DEFAULT_MAX_ELAPSED`] (15 min).
    pub const fn with_max_elapsed(mut self, max_elapsed: Option<Duration>) -> Self {
        self.max_elapsed = max_elapsed;
        self
    }

    /// Seeds the random generator, for reproducible sequences (tests, simulations).
    ///
    /// Default: seeded from the operating system.
    pub const fn with_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Validates the configuration; the elapsed time starts now.
    pub fn build(self) -> Result<ExponentialBackOff, ConfigError> {
        check::float_in(
            "randomization_factor",
            self.randomization_factor,
            0.0,
            1.0,
            "must be a finite number within [0, 1]",
        )?;
        check::float_in(
            "multiplier",
            self.multiplier,
            1.0,
            f64::MAX,
            "must be a finite number of at least 1.0",
        )?;
        if self.initial_interval.is_zero() {
            return Err(ConfigError::new(
                "initial_interval",
                self.initial_interval,
                "must be positive (use ZeroBackOff to retry without waiting)",
            ));
        }
        check::not_above(
            "initial_interval",
            self.initial_interval,
            self.max_interval,
            "must not exceed max_interval",
        )?;
        if self.max_elapsed == Some(Duration::ZERO) {
            return Err(ConfigError::new(
                "max_elapsed",
                self.max_elapsed,
                "must be positive (use None to never stop on time, StopBackOff to never retry)",
            ));
        }
        Ok(self.build_unchecked())
    }

    fn build_unchecked(self) -> ExponentialBackOff {
        ExponentialBackOff {
            initial_interval: self.initial_interval,
            randomization_factor: self.randomization_factor,
            multiplier: self.multiplier,
            max_interval: self.max_interval,
            max_elapsed: self.max_elapsed,
            current_interval: self.initial_interval,
            start: Instant::now(),
            jitter: match self.seed {
                Some(seed) => Jitter::seeded(seed),
                None => Jitter::from_entropy(),
            },
        }
    }
}

impl Default for ExponentialBackOffBuilder {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn defaults_match_cenkalti() {
        let b = ExponentialBackOff::default();
        assert_eq!(b.initial_interval(), Duration::from_millis(500));
        assert_eq!(b.randomization_factor(), 0.5);
        assert_eq!(b.multiplier(), 1.5);
        assert_eq!(b.max_interval(), Duration::from_secs(60));
        assert_eq!(b.max_elapsed(), Some(Duration::from_secs(900)));
        assert_eq!(b.current_interval(), Duration::from_millis(500));
    }

    /// The 10-row table of cenkalti/backoff's documentation.
    #[test]
    fn reproduces_cenkalti_table() {
        let mut b = ExponentialBackOff::default().with_seed(0);
        let nominal = [
            0.5,
            0.75,
            1.125,
            1.6875,
            2.53125,
            3.796875,
            5.6953125,
            8.54296875,
            12.814453125,
        ];
        for (i, &n) in nominal.iter().enumerate() {
            assert_eq!(b.current_interval(), secs(n), "interval of retry {}", i + 1);
            let d = b.next_backoff().expect("within 15 minutes");
            assert!(
                d >= secs(n * 0.5) && d <= secs(n * 1.5),
                "retry {}: {d:?} outside [{}, {}]",
                i + 1,
                n * 0.5,
                n * 1.5
            );
        }
        // Row 10 of the table: 19.21 s (nanosecond precision from here on).
        let tenth = b.current_interval().as_secs_f64();
        assert!((tenth - 19.2216796875).abs() < 1e-9, "{tenth}");
    }

    #[test]
    fn same_seed_same_delays_different_seed_differs() {
        let run = |seed| {
            let mut b = ExponentialBackOff::default().with_seed(seed);
            (0..8)
                .map(|_| b.next_backoff().unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(run(42), run(42));
        assert_ne!(run(42), run(43));
    }

    #[test]
    fn delays_are_actually_randomized() {
        let mut b = ExponentialBackOff::builder()
            .with_multiplier(1.0)
            .with_seed(9)
            .build()
            .unwrap();
        let delays: Vec<_> = (0..20).map(|_| b.next_backoff().unwrap()).collect();
        assert!(delays.iter().any(|&d| d != delays[0]), "{delays:?}");
        assert!(delays.iter().any(|&d| d < Duration::from_millis(400)));
        assert!(delays.iter().any(|&d| d > Duration::from_millis(600)));
    }

    #[test]
    fn zero_randomization_is_exact() {
        let mut b = ExponentialBackOff::builder()
            .with_randomization_factor(0.0)
            .with_multiplier(2.0)
            .with_initial_interval(Duration::from_secs(1))
            .with_max_interval(Duration::from_secs(5))
            .build()
            .unwrap();
        let got: Vec<_> = (0..5).map(|_| b.next_backoff().unwrap()).collect();
        let want = [1, 2, 4, 5, 5].map(Duration::from_secs);
        assert_eq!(got, want);
    }

    #[test]
    fn overflow_guard_lands_exactly_on_max() {
        let max = Duration::from_millis(1_000);
        let mut b = ExponentialBackOff::builder()
            .with_initial_interval(Duration::from_millis(700))
            .with_multiplier(1.5)
            .with_max_interval(max)
            .with_seed(1)
            .build()
            .unwrap();
        b.next_backoff();
        // 700 ms >= 1000 / 1.5 ms: the next interval is the cap itself, not 1050 ms.
        assert_eq!(b.current_interval(), max);
        b.next_backoff();
        assert_eq!(b.current_interval(), max);
    }

    #[test]
    fn max_interval_caps_before_randomization() {
        let mut b = ExponentialBackOff::builder()
            .with_initial_interval(Duration::from_secs(1))
            .with_max_interval(Duration::from_secs(1))
            .with_randomization_factor(1.0)
            .with_seed(3)
            .build()
            .unwrap();
        let delays: Vec<_> = (0..50).map(|_| b.next_backoff().unwrap()).collect();
        assert!(delays.iter().all(|&d| d <= Duration::from_secs(2)));
        assert!(
            delays.iter().any(|&d| d > Duration::from_secs(1)),
            "{delays:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn stops_when_elapsed_plus_next_exceeds_max() {
        let mut b = ExponentialBackOff::builder()
            .with_initial_interval(Duration::from_secs(1))
            .with_randomization_factor(0.0)
            .with_multiplier(1.0)
            .with_max_interval(Duration::from_secs(1))
            .with_max_elapsed(Some(Duration::from_secs(10)))
            .build()
            .unwrap();
        tokio::time::advance(Duration::from_secs(9)).await;
        // 9 s + 1 s is not more than 10 s.
        assert_eq!(b.next_backoff(), Some(Duration::from_secs(1)));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(b.elapsed(), Duration::from_millis(9_001));
        assert_eq!(b.next_backoff(), None);
        // reset restarts the elapsed time and the interval.
        b.reset();
        assert_eq!(b.elapsed(), Duration::ZERO);
        assert_eq!(b.next_backoff(), Some(Duration::from_secs(1)));
    }

    #[tokio::test(start_paused = true)]
    async fn reset_restores_initial_interval_and_restarts_clock() {
        let mut b = ExponentialBackOff::default().with_seed(5);
        for _ in 0..5 {
            b.next_backoff();
        }
        assert!(b.current_interval() > b.initial_interval());
        tokio::time::advance(Duration::from_secs(16 * 60)).await;
        assert_eq!(b.next_backoff(), None);
        b.reset();
        assert_eq!(b.current_interval(), Duration::from_millis(500));
        assert_eq!(b.elapsed(), Duration::ZERO);
        assert!(b.next_backoff().is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn remaining_is_the_max_elapsed_time_left() {
        let mut b = ExponentialBackOff::builder()
            .with_max_elapsed(Some(Duration::from_secs(60)))
            .build()
            .unwrap();
        tokio::time::advance(Duration::from_secs(20)).await;
        assert_eq!(b.remaining(), Some(Duration::from_secs(40)));
        tokio::time::advance(Duration::from_secs(50)).await;
        assert_eq!(b.remaining(), Some(Duration::ZERO));
        b.reset();
        assert_eq!(b.remaining(), Some(Duration::from_secs(60)));
        let unbounded = ExponentialBackOff::builder()
            .with_max_elapsed(None)
            .build()
            .unwrap();
        assert_eq!(unbounded.remaining(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn no_max_elapsed_never_stops() {
        let mut b = ExponentialBackOff::builder()
            .with_max_elapsed(None)
            .with_seed(1)
            .build()
            .unwrap();
        tokio::time::advance(Duration::from_secs(365 * 86_400)).await;
        for _ in 0..1_000 {
            assert!(b.next_backoff().is_some());
        }
        assert_eq!(b.current_interval(), Duration::from_secs(60));
    }

    #[test]
    fn saturates_with_huge_values() {
        let mut b = ExponentialBackOff::builder()
            .with_initial_interval(Duration::MAX)
            .with_max_interval(Duration::MAX)
            .with_multiplier(1e300)
            .with_randomization_factor(1.0)
            .with_max_elapsed(None)
            .with_seed(2)
            .build()
            .unwrap();
        for _ in 0..10_000 {
            assert!(b.next_backoff().is_some());
        }
        assert_eq!(b.current_interval(), Duration::MAX);

        let mut b = ExponentialBackOff::builder()
            .with_initial_interval(Duration::from_nanos(1))
            .with_max_interval(Duration::MAX)
            .with_multiplier(1e300)
            .with_max_elapsed(Some(Duration::MAX))
            .with_seed(2)
            .build()
            .unwrap();
        for _ in 0..10_000 {
            b.next_backoff();
        }
        assert_eq!(b.current_interval(), Duration::MAX);
    }

    #[test]
    fn clones_jitter_differently() {
        let base = ExponentialBackOff::builder()
            .with_multiplier(1.0)
            .with_seed(11)
            .build()
            .unwrap();
        let (mut a, mut b) = (base.clone(), base.clone());
        let xs: Vec<_> = (0..5).map(|_| a.next_backoff().unwrap()).collect();
        let ys: Vec<_> = (0..5).map(|_| b.next_backoff().unwrap()).collect();
        assert_ne!(xs, ys);
    }

    #[test]
    fn config_errors_name_field_and_value() {
        let b = ExponentialBackOff::builder;
        let cases: Vec<(ExponentialBackOffBuilder, &str, &str)> = vec![
            (
                b().with_randomization_factor(f64::NAN),
                "randomization_factor",
                "NaN",
            ),
            (
                b().with_randomization_factor(-0.1),
                "randomization_factor",
                "-0.1",
            ),
            (
                b().with_randomization_factor(1.5),
                "randomization_factor",
                "1.5",
            ),
            (
                b().with_randomization_factor(f64::INFINITY),
                "randomization_factor",
                "inf",
            ),
            (b().with_multiplier(0.99), "multiplier", "0.99"),
            (b().with_multiplier(f64::NAN), "multiplier", "NaN"),
            (b().with_multiplier(f64::INFINITY), "multiplier", "inf"),
            (b().with_multiplier(-2.0), "multiplier", "-2.0"),
            (
                b().with_initial_interval(Duration::ZERO),
                "initial_interval",
                "0ns",
            ),
            (
                b().with_initial_interval(Duration::from_secs(61)),
                "initial_interval",
                "61s",
            ),
            (
                b().with_max_interval(Duration::from_millis(100)),
                "initial_interval",
                "500ms",
            ),
            (
                b().with_max_elapsed(Some(Duration::ZERO)),
                "max_elapsed",
                "Some(0ns)",
            ),
        ];
        for (builder, field, value) in cases {
            let err = builder.build().unwrap_err();
            assert_eq!((err.field(), err.value()), (field, value), "{err}");
        }
    }

    #[test]
    fn edge_values_are_valid() {
        let b = ExponentialBackOff::builder()
            .with_randomization_factor(1.0)
            .with_multiplier(1.0)
            .with_initial_interval(Duration::from_secs(60))
            .build();
        assert!(b.is_ok());
        assert!(
            ExponentialBackOff::builder()
                .with_randomization_factor(0.0)
                .build()
                .is_ok()
        );
    }
}
