//! A delay learned from a whole client's recent outcomes: up on failure, down after a
//! streak of successes (the responsive backoff of the AutoSleeper design).

use super::BackOff;
use super::jitter::Jitter;
use super::sample::between;
use crate::error::{ConfigError, check};
use crate::time::mul_f64;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// A delay shared by every task of a client, that each task teaches: failures push it up,
/// long enough streaks of successes bring it down, to zero eventually.
///
/// Made for throttled services (DynamoDB write capacity, rate-limited APIs) hit by many
/// workers at once: instead of each worker rediscovering the right pace from scratch, they
/// all pace themselves on one learned delay, which tracks the server as its capacity
/// grows or shrinks.
///
/// - On failure: the delay goes up — to exactly `initial_interval` from zero (not
///   randomized), otherwise `× up_multiplier`, randomized, capped at `max_interval` — the
///   success streak is reset, and the caller waits the new delay.
/// - On success: nothing when the delay is zero (no wait). Otherwise the streak grows;
///   at `down_threshold` successes in a row it restarts and the delay goes down
///   (`× down_multiplier`, randomized; to zero once below `initial_interval`); the caller
///   waits the (possibly new) delay.
///
/// Randomizing `x` draws uniformly from `x ± min(randomization_factor × x,
/// max_randomization)`, so the workers do not all settle on the same delay; a factor of
/// 0 keeps `x` exactly.
///
/// `Clone` shares the state (an `Arc` around a mutex held only for a few arithmetic
/// operations), so clone it into every task and report outcomes with
/// [`on_failure`](Self::on_failure) and [`on_success`](Self::on_success).
///
/// As a [`BackOff`], each [`next_backoff`](BackOff::next_backoff) is a failure, and
/// [`reset`](BackOff::reset) forgets the lesson: the delay goes back to zero and the
/// success streak restarts, *for every clone*, since they share one state (the
/// [`metrics`](Self::metrics) are lifetime counters and are kept). [`retry`](crate::retry()),
/// the [`Ticker`](crate::retry::Ticker) and the retry layer reset their backoff before each
/// operation, so driven by them a `ResponsiveBackOff` learns within one operation only; to
/// keep the delay learned across operations and tasks, call `on_failure`/`on_success`
/// yourself (or use the pacing layer, which does).
///
/// ```
/// use std::time::Duration;
/// use tower_backoff::backoff::ResponsiveBackOff;
///
/// let ms = Duration::from_millis;
/// let pace = ResponsiveBackOff::builder()
///     .with_initial_interval(ms(100))
///     .with_up_multiplier(2.0)
///     .with_down_multiplier(0.5)
///     .with_down_threshold(2)
///     .with_randomization_factor(0.0)
///     .build()
///     .unwrap();
///
/// assert_eq!(pace.on_failure(), ms(100));
/// assert_eq!(pace.on_failure(), ms(200));
/// assert_eq!(pace.on_success(), ms(200)); // streak 1 of 2
/// assert_eq!(pace.on_success(), ms(100)); // streak complete: halved
/// assert_eq!(pace.on_success(), ms(100));
/// assert_eq!(pace.on_success(), Duration::ZERO); // 50 ms < initial: back to zero
/// assert_eq!(pace.on_success(), Duration::ZERO); // nothing to wait any more
///
/// let m = pace.metrics();
/// assert_eq!((m.invocations, m.went_up, m.went_down, m.slept), (7, 2, 2, 6));
/// assert_eq!(m.total_sleep, ms(700));
/// ```
#[derive(Debug, Clone)]
pub struct ResponsiveBackOff {
    config: Config,
    state: Arc<Mutex<State>>,
}

/// The validated settings, copied into every clone.
#[derive(Debug, Clone, Copy)]
struct Config {
    initial_interval: Duration,
    max_interval: Duration,
    max_randomization: Duration,
    up_multiplier: f64,
    down_multiplier: f64,
    randomization_factor: f64,
    down_threshold: u32,
}

/// What the clones share.
#[derive(Debug)]
struct State {
    current: Duration,
    streak: u32,
    metrics: ResponsiveMetrics,
    jitter: Jitter,
}

/// Counters of a [`ResponsiveBackOff`], summed over all its clones.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResponsiveMetrics {
    /// Outcomes reported, failures and successes.
    pub invocations: u64,
    /// Times the delay went up (one per failure).
    pub went_up: u64,
    /// Times the delay went down (one per completed success streak).
    pub went_down: u64,
    /// Waits handed out (every failure, and every success while the delay was non-zero).
    pub slept: u64,
    /// The sum of the waits handed out, saturating.
    pub total_sleep: Duration,
}

impl ResponsiveBackOff {
    /// The first delay after a quiet period: 500 ms.
    pub const DEFAULT_INITIAL_INTERVAL: Duration = Duration::from_millis(500);
    /// The longest delay: 15 min, a throttled batch job's patience rather than a user's.
    pub const DEFAULT_MAX_INTERVAL: Duration = Duration::from_secs(15 * 60);
    /// The largest random deviation: 2 min, so long delays are not shifted by minutes more.
    pub const DEFAULT_MAX_RANDOMIZATION: Duration = Duration::from_secs(2 * 60);
    /// Growth per failure: 1.5, gentler than doubling since many workers push together.
    pub const DEFAULT_UP_MULTIPLIER: f64 = 1.5;
    /// Shrink per completed success streak: 0.9, cautious, to avoid falling back into
    /// throttling.
    pub const DEFAULT_DOWN_MULTIPLIER: f64 = 0.9;
    /// Random spread of each new delay: ±30 %.
    pub const DEFAULT_RANDOMIZATION_FACTOR: f64 = 0.3;
    /// Successes in a row before the delay goes down: 10.
    pub const DEFAULT_DOWN_THRESHOLD: u32 = 10;

    /// A builder starting from the defaults (the `DEFAULT_*` constants).
    pub fn builder() -> ResponsiveBackOffBuilder {
        ResponsiveBackOffBuilder::default()
    }

    /// Reports a failure: the delay goes up; returns how long to wait now.
    pub fn on_failure(&self) -> Duration {
        let config = &self.config;
        let mut state = self.lock();
        state.metrics.invocations = state.metrics.invocations.saturating_add(1);
        state.go_up(config);
        state.streak = 0;
        state.sleep()
    }

    /// Reports a success: the delay may go down; returns how long to wait now (zero when
    /// the delay is zero).
    pub fn on_success(&self) -> Duration {
        let config = &self.config;
        let mut state = self.lock();
        state.metrics.invocations = state.metrics.invocations.saturating_add(1);
        if state.current.is_zero() {
            return Duration::ZERO;
        }
        state.streak += 1;
        if state.streak >= config.down_threshold {
            state.streak = 0;
            state.go_down(config);
        }
        state.sleep()
    }

    /// Reports a failure and waits the returned delay ([`tokio::time::sleep`]).
    pub async fn sleep_on_failure(&self) {
        let delay = self.on_failure();
        tokio::time::sleep(delay).await;
    }

    /// Reports a success and waits the returned delay, if any.
    pub async fn sleep_on_success(&self) {
        let delay = self.on_success();
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
    }

    /// The current learned delay (zero when the client is not being throttled).
    pub fn current(&self) -> Duration {
        self.lock().current
    }

    /// A snapshot of the counters, over all clones.
    pub fn metrics(&self) -> ResponsiveMetrics {
        self.lock().metrics
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing in the critical sections can panic, and even a torn update would leave
        // a usable state (any delay is valid): recover from poisoning rather than panic.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl State {
    fn go_up(&mut self, config: &Config) {
        self.metrics.went_up = self.metrics.went_up.saturating_add(1);
        if self.current.is_zero() {
            self.current = config.initial_interval;
            return;
        }
        let up = mul_f64(self.current, config.up_multiplier);
        self.current = self.randomize(up, config).min(config.max_interval);
    }

    fn go_down(&mut self, config: &Config) {
        self.metrics.went_down = self.metrics.went_down.saturating_add(1);
        let down = mul_f64(self.current, config.down_multiplier);
        let next = self.randomize(down, config);
        self.current = if next < config.initial_interval {
            Duration::ZERO
        } else {
            next.min(config.max_interval)
        };
    }

    /// `x ± min(rf × x, max_randomization)`, uniformly; `x` itself when rf is 0.
    fn randomize(&mut self, x: Duration, config: &Config) -> Duration {
        if config.randomization_factor == 0.0 {
            return x;
        }
        let delta = mul_f64(x, config.randomization_factor).min(config.max_randomization);
        between(
            self.jitter.rng(),
            x.saturating_sub(delta),
            x.saturating_add(delta),
        )
    }

    fn sleep(&mut self) -> Duration {
        self.metrics.slept = self.metrics.slept.saturating_add(1);
        self.metrics.total_sleep = self.metrics.total_sleep.saturating_add(self.current);
        self.current
    }
}

impl Default for ResponsiveBackOff {
    /// The `DEFAULT_*` settings, randomness seeded from the operating system.
    fn default() -> Self {
        ResponsiveBackOffBuilder::default().assemble()
    }
}

impl BackOff for ResponsiveBackOff {
    /// A failure: [`on_failure`](Self::on_failure). Never stops by itself.
    fn next_backoff(&mut self) -> Option<Duration> {
        Some(self.on_failure())
    }

    /// Forgets the learned delay (back to zero) and the success streak, for every clone;
    /// keeps the metrics.
    fn reset(&mut self) {
        let mut state = self.lock();
        state.current = Duration::ZERO;
        state.streak = 0;
    }
}

/// Settings of a [`ResponsiveBackOff`]; every one defaults to its `DEFAULT_*` constant.
///
/// ```
/// use std::time::Duration;
/// use tower_backoff::backoff::ResponsiveBackOff;
///
/// let err = ResponsiveBackOff::builder().with_down_multiplier(1.5).build().unwrap_err();
/// assert_eq!(err.field(), "down_multiplier");
/// assert_eq!(err.value(), "1.5");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ResponsiveBackOffBuilder {
    config: Config,
    seed: Option<u64>,
}

impl Default for ResponsiveBackOffBuilder {
    fn default() -> Self {
        Self {
            config: Config {
                initial_interval: ResponsiveBackOff::DEFAULT_INITIAL_INTERVAL,
                max_interval: ResponsiveBackOff::DEFAULT_MAX_INTERVAL,
                max_randomization: ResponsiveBackOff::DEFAULT_MAX_RANDOMIZATION,
                up_multiplier: ResponsiveBackOff::DEFAULT_UP_MULTIPLIER,
                down_multiplier: ResponsiveBackOff::DEFAULT_DOWN_MULTIPLIER,
                randomization_factor: ResponsiveBackOff::DEFAULT_RANDOMIZATION_FACTOR,
                down_threshold: ResponsiveBackOff::DEFAULT_DOWN_THRESHOLD,
            },
            seed: None,
        }
    }
}

impl ResponsiveBackOffBuilder {
    /// The first delay, and the floor under which the delay drops to zero. Must be
    /// non-zero and at most `max_interval`.
    pub const fn with_initial_interval(mut self, interval: Duration) -> Self {
        self.config.initial_interval = interval;
        self
    }

    /// The longest delay.
    pub const fn with_max_interval(mut self, interval: Duration) -> Self {
        self.config.max_interval = interval;
        self
    }

    /// The largest random deviation of a new delay.
    pub const fn with_max_randomization(mut self, max: Duration) -> Self {
        self.config.max_randomization = max;
        self
    }

    /// Growth per failure; at least 1.
    pub const fn with_up_multiplier(mut self, multiplier: f64) -> Self {
        self.config.up_multiplier = multiplier;
        self
    }

    /// Shrink per completed success streak; in `(0, 1]`.
    pub const fn with_down_multiplier(mut self, multiplier: f64) -> Self {
        self.config.down_multiplier = multiplier;
        self
    }

    /// Random spread of each new delay, as a fraction of it; in `[0, 1]`.
    pub const fn with_randomization_factor(mut self, factor: f64) -> Self {
        self.config.randomization_factor = factor;
        self
    }

    /// Successes in a row before the delay goes down; at least 1.
    pub const fn with_down_threshold(mut self, successes: u32) -> Self {
        self.config.down_threshold = successes;
        self
    }

    /// Seeds the random generator, for reproducible sequences (tests, simulations).
    pub const fn with_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Validates the settings.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first invalid setting: `initial_interval` zero or
    /// above `max_interval`, `up_multiplier` below 1, `down_multiplier` outside `(0, 1]`,
    /// `randomization_factor` outside `[0, 1]` (any float NaN or infinite), or
    /// `down_threshold` zero.
    pub fn build(self) -> Result<ResponsiveBackOff, ConfigError> {
        let c = &self.config;
        if c.initial_interval.is_zero() {
            return Err(ConfigError::new(
                "initial_interval",
                c.initial_interval,
                "must be greater than zero (a zero delay can never grow)",
            ));
        }
        check::not_above(
            "initial_interval",
            c.initial_interval,
            c.max_interval,
            "must not exceed `max_interval`",
        )?;
        check::float_in(
            "up_multiplier",
            c.up_multiplier,
            1.0,
            f64::MAX,
            "must be a finite number of at least 1.0",
        )?;
        if !(c.down_multiplier > 0.0 && c.down_multiplier <= 1.0) {
            return Err(ConfigError::new(
                "down_multiplier",
                c.down_multiplier,
                "must be in (0, 1]",
            ));
        }
        check::float_in(
            "randomization_factor",
            c.randomization_factor,
            0.0,
            1.0,
            "must be in [0, 1]",
        )?;
        if c.down_threshold == 0 {
            return Err(ConfigError::new(
                "down_threshold",
                c.down_threshold,
                "must be at least 1",
            ));
        }
        Ok(self.assemble())
    }

    fn assemble(self) -> ResponsiveBackOff {
        let jitter = self.seed.map_or_else(Jitter::from_entropy, Jitter::seeded);
        ResponsiveBackOff {
            config: self.config,
            state: Arc::new(Mutex::new(State {
                current: Duration::ZERO,
                streak: 0,
                metrics: ResponsiveMetrics::default(),
                jitter,
            })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// The configuration of the AutoSleeper graph: 1 ms, ×1.5 up, ×0.6 down after 5 successes.
    fn graph() -> ResponsiveBackOff {
        ResponsiveBackOff::builder()
            .with_initial_interval(ms(1))
            .with_max_interval(Duration::from_secs(15 * 60))
            .with_max_randomization(Duration::from_secs(120))
            .with_up_multiplier(1.5)
            .with_down_multiplier(0.6)
            .with_randomization_factor(0.0)
            .with_down_threshold(5)
            .build()
            .unwrap()
    }

    /// Equal within 20 ns: each step rounds to whole nanoseconds.
    fn assert_close(actual: Duration, expected_secs: f64) {
        let diff = (actual.as_secs_f64() - expected_secs).abs();
        assert!(diff <= 20e-9, "{actual:?} != {expected_secs}s");
    }

    #[test]
    fn defaults_are_the_documented_constants() {
        assert_eq!(ResponsiveBackOff::DEFAULT_INITIAL_INTERVAL, ms(500));
        assert_eq!(
            ResponsiveBackOff::DEFAULT_MAX_INTERVAL,
            Duration::from_secs(900)
        );
        assert_eq!(
            ResponsiveBackOff::DEFAULT_MAX_RANDOMIZATION,
            Duration::from_secs(120)
        );
        assert_eq!(ResponsiveBackOff::DEFAULT_UP_MULTIPLIER, 1.5);
        assert_eq!(ResponsiveBackOff::DEFAULT_DOWN_MULTIPLIER, 0.9);
        assert_eq!(ResponsiveBackOff::DEFAULT_RANDOMIZATION_FACTOR, 0.3);
        assert_eq!(ResponsiveBackOff::DEFAULT_DOWN_THRESHOLD, 10);
        let b = ResponsiveBackOff::default();
        assert_eq!(b.current(), Duration::ZERO);
        // First failure: exactly the initial interval, no randomization.
        assert_eq!(b.on_failure(), ms(500));
        let second = b.on_failure();
        assert!(ms(525) <= second && second <= ms(975), "{second:?}");
    }

    #[test]
    fn failures_grow_from_initial_by_the_up_multiplier() {
        let b = graph();
        for k in 0..15 {
            let d = b.on_failure();
            assert_close(d, 1e-3 * 1.5f64.powi(k));
            assert_eq!(b.current(), d);
        }
        // As in the AutoSleeper graph: failures until the delay reached 291.9 ms.
        assert_eq!(b.current().as_micros(), 291_929);
        let m = b.metrics();
        assert_eq!(
            (m.invocations, m.went_up, m.went_down, m.slept),
            (15, 15, 0, 15)
        );
        let total: f64 = (0..15).map(|k| 1e-3 * 1.5f64.powi(k)).sum();
        assert_close(m.total_sleep, total);
    }

    #[test]
    fn five_successes_bring_it_down_by_the_down_multiplier() {
        let b = graph();
        for _ in 0..15 {
            b.on_failure();
        }
        let top = b.current();
        for _ in 0..4 {
            assert_eq!(b.on_success(), top, "no change before the threshold");
        }
        let down = b.on_success();
        assert_close(down, top.as_secs_f64() * 0.6);
        // The streak restarted: four more successes keep it, the fifth lowers it again.
        for _ in 0..4 {
            assert_eq!(b.on_success(), down);
        }
        assert_close(b.on_success(), top.as_secs_f64() * 0.36);
        let m = b.metrics();
        assert_eq!(
            (m.invocations, m.went_up, m.went_down, m.slept),
            (25, 15, 2, 25)
        );
    }

    #[test]
    fn a_failure_resets_the_success_streak() {
        let b = graph();
        for _ in 0..4 {
            b.on_failure();
        }
        for _ in 0..4 {
            b.on_success();
        }
        let up = b.on_failure();
        for _ in 0..4 {
            assert_eq!(b.on_success(), up, "streak restarted at the failure");
        }
        assert!(b.on_success() < up);
    }

    #[test]
    fn falls_to_zero_under_initial_and_stops_sleeping() {
        let b = graph();
        assert_eq!(b.on_failure(), ms(1));
        for _ in 0..4 {
            assert_eq!(b.on_success(), ms(1));
        }
        // 0.6 ms < initial 1 ms: back to zero, still counted as a sleep (of 0).
        assert_eq!(b.on_success(), Duration::ZERO);
        assert_eq!(b.current(), Duration::ZERO);
        let after_drop = b.metrics();
        assert_eq!(after_drop.slept, 6);
        for _ in 0..10 {
            assert_eq!(b.on_success(), Duration::ZERO);
        }
        let m = b.metrics();
        assert_eq!(m.slept, 6, "no sleep while the delay is zero");
        assert_eq!(m.invocations, 16);
        assert_eq!(m.went_down, 1);
        assert_eq!(m.total_sleep, ms(5));
        // And the next failure starts again from the initial interval.
        assert_eq!(b.on_failure(), ms(1));
    }

    #[test]
    fn capped_at_max_interval() {
        let b = ResponsiveBackOff::builder()
            .with_initial_interval(ms(100))
            .with_max_interval(ms(300))
            .with_up_multiplier(2.0)
            .with_randomization_factor(0.0)
            .build()
            .unwrap();
        let got: Vec<_> = (0..5).map(|_| b.on_failure()).collect();
        assert_eq!(got, [ms(100), ms(200), ms(300), ms(300), ms(300)]);
    }

    #[test]
    fn randomization_stays_within_factor_and_max_randomization() {
        // ±20 % of 200 ms = ±40 ms.
        let b = ResponsiveBackOff::builder()
            .with_initial_interval(ms(100))
            .with_up_multiplier(2.0)
            .with_randomization_factor(0.2)
            .with_seed(1)
            .build()
            .unwrap();
        let (mut lo, mut hi) = (Duration::MAX, Duration::ZERO);
        for _ in 0..500 {
            b.lock().current = ms(100);
            let d = b.on_failure();
            assert!(ms(160) <= d && d <= ms(240), "{d:?}");
            lo = lo.min(d);
            hi = hi.max(d);
        }
        assert!(
            lo < ms(165) && hi > ms(235),
            "really spread: {lo:?}..{hi:?}"
        );

        // ±30 % of 100 s would be ±30 s, but max_randomization limits it to ±1 s.
        let b = ResponsiveBackOff::builder()
            .with_initial_interval(ms(100))
            .with_up_multiplier(2.0)
            .with_randomization_factor(0.3)
            .with_max_randomization(Duration::from_secs(1))
            .with_seed(2)
            .build()
            .unwrap();
        for _ in 0..500 {
            b.lock().current = Duration::from_secs(50);
            let d = b.on_failure();
            assert!(
                Duration::from_secs(99) <= d && d <= Duration::from_secs(101),
                "{d:?}"
            );
        }
    }

    #[test]
    fn randomized_down_stays_within_bounds() {
        let b = ResponsiveBackOff::builder()
            .with_initial_interval(ms(10))
            .with_down_multiplier(0.5)
            .with_down_threshold(1)
            .with_randomization_factor(0.1)
            .with_seed(3)
            .build()
            .unwrap();
        for _ in 0..500 {
            b.lock().current = ms(1000);
            let d = b.on_success();
            assert!(ms(450) <= d && d <= ms(550), "{d:?}");
        }
    }

    #[test]
    fn seeded_instances_are_reproducible() {
        let make = || ResponsiveBackOff::builder().with_seed(9).build().unwrap();
        let run = |b: ResponsiveBackOff| -> Vec<_> { (0..10).map(|_| b.on_failure()).collect() };
        assert_eq!(run(make()), run(make()));
    }

    #[test]
    fn clones_share_the_learned_delay() {
        let a = graph();
        let b = a.clone();
        a.on_failure();
        a.on_failure();
        assert_eq!(b.current(), Duration::from_micros(1500));
        b.on_failure();
        assert_eq!(a.metrics().invocations, 3);
    }

    #[test]
    fn as_a_backoff_every_delay_is_a_failure_and_reset_starts_over() {
        let mut b = graph();
        let other_task = b.clone();
        assert_eq!(b.next_backoff(), Some(ms(1)));
        assert_eq!(b.next_backoff(), Some(Duration::from_micros(1500)));
        for _ in 0..4 {
            b.on_success(); // a streak of 4, one short of going down
        }
        b.reset();
        // Back to the initial state, for every clone: zero delay, then initial_interval.
        assert_eq!(b.current(), Duration::ZERO);
        assert_eq!(other_task.current(), Duration::ZERO);
        assert_eq!(b.on_success(), Duration::ZERO);
        assert_eq!(b.next_backoff(), Some(ms(1)));
        // The streak restarted too: four successes do not bring the delay down.
        for _ in 0..4 {
            assert_eq!(b.on_success(), ms(1));
        }
        // The metrics are lifetime counters: kept across the reset.
        let m = other_task.metrics();
        assert_eq!((m.invocations, m.went_up), (12, 3));
    }

    #[test]
    fn survives_a_poisoned_lock() {
        let b = graph();
        b.on_failure();
        let b2 = b.clone();
        let _ = std::thread::spawn(move || {
            let _guard = b2.state.lock().unwrap();
            panic!("poison the lock");
        })
        .join();
        assert!(b.state.is_poisoned());
        assert_eq!(b.on_failure(), Duration::from_micros(1500));
        assert_eq!(b.metrics().invocations, 2);
    }

    #[test]
    fn is_send_sync_and_static() {
        fn assert_send_sync<T: Send + Sync + 'static>() {}
        assert_send_sync::<ResponsiveBackOff>();
    }

    #[tokio::test(start_paused = true)]
    async fn sleeps_actually_wait_the_delay() {
        let b = ResponsiveBackOff::builder()
            .with_initial_interval(ms(100))
            .with_up_multiplier(2.0)
            .with_down_multiplier(0.5)
            .with_down_threshold(3)
            .with_randomization_factor(0.0)
            .build()
            .unwrap();
        let start = tokio::time::Instant::now();
        b.sleep_on_failure().await;
        b.sleep_on_failure().await;
        assert_eq!(start.elapsed(), ms(300));
        for _ in 0..3 {
            b.sleep_on_success().await;
        }
        // 200 ms twice, then halved to 100 ms.
        assert_eq!(start.elapsed(), ms(800));
        for _ in 0..3 {
            b.sleep_on_success().await;
        }
        // 100 ms twice, then 50 ms < initial: zero.
        assert_eq!(start.elapsed(), ms(1000));
        b.sleep_on_success().await;
        assert_eq!(start.elapsed(), ms(1000));
        assert_eq!(b.metrics().slept, 8);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_tasks_share_one_instance_without_losing_updates() {
        const TASKS: u64 = 16;
        const ROUNDS: u64 = 200;
        let b = ResponsiveBackOff::builder()
            .with_initial_interval(ms(1))
            .with_max_interval(ms(50))
            .with_seed(4)
            .build()
            .unwrap();
        let handles: Vec<_> = (0..TASKS)
            .map(|task| {
                let b = b.clone();
                tokio::spawn(async move {
                    let mut waited = Duration::ZERO;
                    let mut failures = 0u64;
                    for round in 0..ROUNDS {
                        // Each task fails on a different pattern of rounds.
                        if (round + task) % 3 == 0 {
                            failures += 1;
                            waited += b.on_failure();
                        } else {
                            waited += b.on_success();
                        }
                        tokio::task::yield_now().await;
                    }
                    (waited, failures)
                })
            })
            .collect();
        let (mut waited, mut failures) = (Duration::ZERO, 0);
        for h in handles {
            let (w, f) = h.await.unwrap();
            waited += w;
            failures += f;
        }
        let m = b.metrics();
        assert_eq!(m.invocations, TASKS * ROUNDS);
        assert_eq!(m.went_up, failures);
        assert!(m.slept >= failures && m.slept <= TASKS * ROUNDS);
        assert_eq!(
            m.total_sleep, waited,
            "every wait handed out was recorded once"
        );
        assert!(b.current() <= ms(50));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_failures_count_exactly() {
        const TASKS: u64 = 8;
        const ROUNDS: u64 = 500;
        let b = graph();
        let handles: Vec<_> = (0..TASKS)
            .map(|_| {
                let b = b.clone();
                tokio::spawn(async move {
                    let mut waited = Duration::ZERO;
                    for _ in 0..ROUNDS {
                        waited += b.on_failure();
                        tokio::task::yield_now().await;
                    }
                    waited
                })
            })
            .collect();
        let mut waited = Duration::ZERO;
        for h in handles {
            waited += h.await.unwrap();
        }
        let m = b.metrics();
        assert_eq!(m.invocations, TASKS * ROUNDS);
        assert_eq!(
            (m.went_up, m.slept, m.went_down),
            (TASKS * ROUNDS, TASKS * ROUNDS, 0)
        );
        assert_eq!(m.total_sleep, waited);
        assert_eq!(
            b.current(),
            Duration::from_secs(15 * 60),
            "4000 failures hit the cap"
        );
    }

    #[test]
    fn config_errors_name_field_and_value() {
        let b = ResponsiveBackOff::builder;
        let cases = [
            (
                b().with_initial_interval(Duration::ZERO),
                "initial_interval",
                "0ns",
            ),
            (
                b().with_initial_interval(ms(2)).with_max_interval(ms(1)),
                "initial_interval",
                "2ms",
            ),
            (b().with_up_multiplier(0.99), "up_multiplier", "0.99"),
            (b().with_up_multiplier(f64::NAN), "up_multiplier", "NaN"),
            (
                b().with_up_multiplier(f64::INFINITY),
                "up_multiplier",
                "inf",
            ),
            (b().with_down_multiplier(0.0), "down_multiplier", "0.0"),
            (b().with_down_multiplier(-0.5), "down_multiplier", "-0.5"),
            (b().with_down_multiplier(1.01), "down_multiplier", "1.01"),
            (b().with_down_multiplier(f64::NAN), "down_multiplier", "NaN"),
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
                b().with_randomization_factor(f64::NAN),
                "randomization_factor",
                "NaN",
            ),
            (b().with_down_threshold(0), "down_threshold", "0"),
        ];
        for (builder, field, value) in cases {
            let err = builder.build().unwrap_err();
            assert_eq!((err.field(), err.value()), (field, value));
        }
        // Boundaries are accepted.
        assert!(
            b().with_up_multiplier(1.0)
                .with_down_multiplier(1.0)
                .with_randomization_factor(1.0)
                .with_down_threshold(1)
                .with_initial_interval(ms(5))
                .with_max_interval(ms(5))
                .build()
                .is_ok()
        );
        assert!(b().with_randomization_factor(0.0).build().is_ok());
    }
}
