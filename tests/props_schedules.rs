//! Property tests: for any valid parameters and any retry number, every strategy (the
//! AWS family, linear, Fibonacci, the table, the responsive backoff) stays within its
//! documented bounds, never exceeds its cap and never panics.

use proptest::prelude::*;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use std::time::Duration;
use tower_backoff::BackOff;
use tower_backoff::backoff::aws::{Exponential, Fixed};
use tower_backoff::backoff::{
    DecorrelatedJitter, EqualJitter, ExponentialJitter, Fibonacci, FullJitter, Linear,
    ResponsiveBackOff, Schedule, Table,
};

/// Any duration, biased towards the interesting ones: tiny, ordinary, and near the limit.
fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        (1u64..1_000).prop_map(Duration::from_nanos),
        (1u64..100_000).prop_map(Duration::from_millis),
        (1u64..=u64::MAX, 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
        Just(Duration::MAX),
    ]
}

/// A non-zero `(base, cap)` with `base <= cap`.
fn base_cap() -> impl Strategy<Value = (Duration, Duration)> {
    (duration(), duration()).prop_map(|(a, b)| if a <= b { (a, b) } else { (b, a) })
}

/// Any retry number, including the huge ones.
fn retry() -> impl Strategy<Value = u32> {
    prop_oneof![0u32..200, any::<u32>(), Just(u32::MAX)]
}

/// Any valid growth factor.
fn step() -> impl Strategy<Value = f64> {
    prop_oneof![Just(1.0), 1.0f64..4.0, 1.0f64..1e300, Just(f64::MAX)]
}

/// `min(cap, base × step^n)` in exact-enough arithmetic, to check the ceilings against.
fn ceiling(base: Duration, cap: Duration, step: f64, n: u32) -> Duration {
    let secs = base.as_secs_f64() * step.powi(i32::try_from(n).unwrap_or(i32::MAX));
    Duration::try_from_secs_f64(secs)
        .unwrap_or(Duration::MAX)
        .min(cap)
}

/// `a` and `b` within one part in 10^12 (float rounding), or equal.
fn close(a: Duration, b: Duration) -> bool {
    let (a, b) = (a.as_secs_f64(), b.as_secs_f64());
    (a - b).abs() <= a.max(b) * 1e-12 + 1e-9
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn fixed_is_always_its_delay(delay in duration(), n in retry(), seed: u64) {
        let mut rng = SmallRng::seed_from_u64(seed);
        prop_assert_eq!(Fixed::new(delay).unwrap().delay(n, &mut rng), delay);
    }

    #[test]
    fn exponential_is_the_capped_power(
        (base, cap) in base_cap(), step in step(), n in retry(), seed: u64,
    ) {
        let s = Exponential::new(base, cap).unwrap().with_step(step).unwrap();
        let d = s.delay(n, &mut SmallRng::seed_from_u64(seed));
        prop_assert!(d <= cap);
        prop_assert!(d >= base.min(cap));
        prop_assert!(close(d, ceiling(base, cap, step, n)), "{:?} vs {:?}", d, ceiling(base, cap, step, n));
    }

    #[test]
    fn exponential_jitter_is_under_the_ceiling(
        (base, cap) in base_cap(), step in step(), n in retry(), seed: u64,
    ) {
        let s = ExponentialJitter::new(base, cap).unwrap().with_step(step).unwrap();
        let mut rng = SmallRng::seed_from_u64(seed);
        let limit = ceiling(base, cap, step, n);
        for _ in 0..8 {
            let d = s.delay(n, &mut rng);
            prop_assert!(d <= cap);
            prop_assert!(d <= limit || close(d, limit));
        }
    }

    #[test]
    fn full_jitter_is_under_the_doubling_ceiling(
        (base, cap) in base_cap(), n in retry(), seed: u64,
    ) {
        let s = FullJitter::new(base, cap).unwrap();
        let mut rng = SmallRng::seed_from_u64(seed);
        let limit = ceiling(base, cap, 2.0, n);
        for _ in 0..8 {
            let d = s.delay(n, &mut rng);
            prop_assert!(d <= cap);
            prop_assert!(d <= limit || close(d, limit));
        }
    }

    #[test]
    fn equal_jitter_is_between_half_and_the_ceiling(
        (base, cap) in base_cap(), n in retry(), seed: u64,
    ) {
        let s = EqualJitter::new(base, cap).unwrap();
        let mut rng = SmallRng::seed_from_u64(seed);
        let limit = ceiling(base, cap, 2.0, n);
        for _ in 0..8 {
            let d = s.delay(n, &mut rng);
            prop_assert!(d <= cap);
            prop_assert!(d <= limit || close(d, limit));
            prop_assert!(d >= limit / 2 || close(d, limit / 2));
        }
    }

    #[test]
    fn decorrelated_jitter_walks_within_base_and_cap(
        (base, cap) in base_cap(), seed: u64, steps in 1usize..64,
    ) {
        let mut b = DecorrelatedJitter::new(base, cap).unwrap().with_seed(seed);
        let mut prev = base;
        for _ in 0..steps {
            let d = b.next_backoff().unwrap();
            prop_assert!(base <= d && d <= cap);
            prop_assert!(d <= prev.saturating_mul(3));
            prev = d;
        }
        b.reset();
        let first = b.next_backoff().unwrap();
        prop_assert!(base <= first && first <= base.saturating_mul(3).min(cap));
    }

    #[test]
    fn decorrelated_step_is_bounded_for_any_previous(
        (base, cap) in base_cap(), prev in prop_oneof![Just(Duration::ZERO), duration()], seed: u64,
    ) {
        let b = DecorrelatedJitter::new(base, cap).unwrap();
        let d = b.next_after(prev, &mut SmallRng::seed_from_u64(seed));
        prop_assert!(base <= d && d <= cap);
        let effective = if prev.is_zero() { base } else { prev };
        prop_assert!(d <= effective.saturating_mul(3).max(base));
    }

    #[test]
    fn table_jitters_the_saturated_entry(
        millis in prop::collection::vec(0u64..10_000_000, 1..20), n in retry(), seed: u64,
    ) {
        let t = Table::from_millis(&millis).unwrap();
        let index = (n.max(1) as usize - 1).min(millis.len() - 1);
        let nominal = Duration::from_millis(millis[index]);
        let d = t.delay(n, &mut SmallRng::seed_from_u64(seed));
        prop_assert!(nominal / 2 <= d && d <= nominal + nominal / 2, "{:?} for {:?}", d, nominal);
        if nominal.is_zero() {
            prop_assert_eq!(d, Duration::ZERO);
        }
    }

    #[test]
    fn table_never_panics_on_huge_entries(
        delays in prop::collection::vec(duration(), 1..8), n in retry(), seed: u64,
    ) {
        let t = Table::new(delays).unwrap();
        let _ = t.delay(n, &mut SmallRng::seed_from_u64(seed));
    }

    #[test]
    fn linear_is_the_capped_multiple((interval, max) in base_cap(), n in retry(), seed: u64) {
        let l = Linear::new(interval, max).unwrap();
        let d = l.delay(n, &mut SmallRng::seed_from_u64(seed));
        prop_assert_eq!(d, interval.saturating_mul(n.max(1)).min(max));
    }

    #[test]
    fn fibonacci_is_between_base_and_cap_and_grows((base, max) in base_cap(), n in retry()) {
        let f = Fibonacci::new(base, max).unwrap();
        let mut rng = SmallRng::seed_from_u64(0);
        let d = f.delay(n, &mut rng);
        prop_assert!(base <= d && d <= max);
        let next = f.delay(n.saturating_add(1), &mut rng);
        prop_assert!(next >= d, "non-decreasing: {:?} then {:?}", d, next);
    }

    #[test]
    fn responsive_stays_under_max_and_counts_every_outcome(
        (initial, max) in base_cap(),
        up in 1.0f64..10.0,
        down in 0.01f64..=1.0,
        rf in 0.0f64..=1.0,
        max_randomization in duration(),
        threshold in 1u32..20,
        seed: u64,
        outcomes in prop::collection::vec(any::<bool>(), 0..200),
    ) {
        let b = ResponsiveBackOff::builder()
            .with_initial_interval(initial)
            .with_max_interval(max)
            .with_up_multiplier(up)
            .with_down_multiplier(down)
            .with_randomization_factor(rf)
            .with_max_randomization(max_randomization)
            .with_down_threshold(threshold)
            .with_seed(seed)
            .build()
            .unwrap();
        let mut total = Duration::ZERO;
        let mut failures = 0;
        for &failed in &outcomes {
            let d = if failed {
                failures += 1;
                b.on_failure()
            } else {
                b.on_success()
            };
            prop_assert!(d <= max);
            prop_assert_eq!(d, b.current());
            total = total.saturating_add(d);
        }
        let m = b.metrics();
        prop_assert_eq!(m.invocations, outcomes.len() as u64);
        prop_assert_eq!(m.went_up, failures);
        prop_assert_eq!(m.total_sleep, total);
        prop_assert!(m.slept <= m.invocations);
    }
}
