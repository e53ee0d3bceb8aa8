//! Property tests of the core strategies: the bounds hold for every valid configuration.

mod support;

use proptest::prelude::*;
use std::time::Duration;
use support::backoffs::Replay;
use tower_backoff::{BackOff, BackOffExt, ExponentialBackOff};

/// `d × factor` computed the way the crate does (saturating, through `f64` seconds), so the
/// bounds below are exact: the product and the conversion are both monotonic.
fn mul(d: Duration, factor: f64) -> Duration {
    let secs = d.as_secs_f64() * factor;
    if secs.is_nan() || secs <= 0.0 {
        Duration::ZERO
    } else {
        Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
    }
}

fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        (1u64..10_000_000_000).prop_map(Duration::from_nanos),
        (1u64..100_000).prop_map(Duration::from_secs),
        Just(Duration::from_nanos(1)),
        Just(Duration::MAX),
    ]
}

fn multiplier() -> impl Strategy<Value = f64> {
    prop_oneof![1.0..4.0f64, Just(1.0), 1.0..1e300f64]
}

#[derive(Debug, Clone)]
struct Config {
    initial: Duration,
    max: Duration,
    rf: f64,
    multiplier: f64,
    seed: u64,
}

fn config() -> impl Strategy<Value = Config> {
    (
        duration(),
        duration(),
        prop_oneof![0.0..=1.0f64, Just(0.0), Just(1.0)],
        multiplier(),
        any::<u64>(),
    )
        .prop_map(|(a, b, rf, multiplier, seed)| Config {
            initial: a.min(b),
            max: a.max(b),
            rf,
            multiplier,
            seed,
        })
}

fn build(c: &Config) -> ExponentialBackOff {
    ExponentialBackOff::builder()
        .with_initial_interval(c.initial)
        .with_max_interval(c.max)
        .with_randomization_factor(c.rf)
        .with_multiplier(c.multiplier)
        .with_max_elapsed(None)
        .with_seed(c.seed)
        .build()
        .expect("valid configuration")
}

proptest! {
    #[test]
    fn exponential_delays_stay_within_their_randomization_band(c in config()) {
        let mut b = build(&c);
        let ceiling = mul(c.max, 1.0 + c.rf);
        let mut previous = Duration::ZERO;
        for _ in 0..200 {
            let current = b.current_interval();
            prop_assert!(current >= previous, "interval shrank: {previous:?} -> {current:?}");
            prop_assert!(current <= c.max);
            prop_assert!(current >= c.initial);
            previous = current;

            let d = b.next_backoff().expect("no max elapsed time: never stops");
            prop_assert!(d >= mul(current, 1.0 - c.rf), "{d:?} below band of {current:?}");
            prop_assert!(d <= mul(current, 1.0 + c.rf), "{d:?} above band of {current:?}");
            prop_assert!(d <= ceiling, "{d:?} above max_interval × (1 + rf)");
        }
    }

    #[test]
    fn exponential_reset_restarts_at_initial(c in config(), n in 0usize..50) {
        let mut b = build(&c);
        for _ in 0..n {
            b.next_backoff();
        }
        b.reset();
        prop_assert_eq!(b.current_interval(), c.initial);
    }

    #[test]
    fn max_retries_gives_exactly_n_delays_each_run(c in config(), n in 0u32..40) {
        let mut b = build(&c).with_max_retries(n);
        for _ in 0..2 {
            for _ in 0..n {
                prop_assert!(b.next_backoff().is_some());
            }
            prop_assert_eq!(b.next_backoff(), None);
            prop_assert_eq!(b.next_backoff(), None);
            b.reset();
        }
    }

    #[test]
    fn max_delay_is_the_inner_delay_capped(c in config(), cap in duration()) {
        let mut capped = build(&c).with_max_delay(cap);
        let mut plain = build(&c);
        for _ in 0..100 {
            let want = plain.next_backoff().map(|d| d.min(cap));
            prop_assert_eq!(capped.next_backoff(), want);
        }
    }

    #[test]
    fn max_elapsed_never_plans_past_its_limit(
        delays in prop::collection::vec(0u64..5_000, 1..30),
        work in prop::collection::vec(0u64..2_000, 30),
        limit in 0u64..40_000,
    ) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let limit = Duration::from_millis(limit);
            let inner = Replay(delays.iter().map(|&ms| Duration::from_millis(ms)).collect(), 0);
            let start = tokio::time::Instant::now();
            let mut b = inner.with_max_elapsed(limit);
            for (i, &ms) in work.iter().enumerate() {
                // The operation takes some time, then the policy is asked for a delay.
                tokio::time::advance(Duration::from_millis(ms)).await;
                let elapsed = start.elapsed();
                match b.next_backoff() {
                    Some(d) => {
                        prop_assert!(elapsed + d <= limit, "{elapsed:?} + {d:?} > {limit:?}");
                        tokio::time::advance(d).await;
                    }
                    None => {
                        // Either the inner policy ran out, or its delay would overrun.
                        if let Some(&next) = delays.get(i) {
                            prop_assert!(elapsed + Duration::from_millis(next) > limit);
                        }
                        break;
                    }
                }
            }
            Ok(())
        })?;
    }
}

/// One rule for zero: every strategy refuses a zero base, interval or step, naming it
/// (`ZeroBackOff` is the strategy that never waits), and accepts the smallest positive one.
#[test]
fn every_strategy_refuses_a_zero_base_and_accepts_one_nanosecond() {
    use tower_backoff::ConstantBackOff;
    use tower_backoff::backoff::aws::{Exponential, Fixed};
    use tower_backoff::backoff::{
        DecorrelatedJitter, EqualJitter, ExponentialJitter, Fibonacci, FullJitter, Linear,
        ResponsiveBackOff,
    };
    let cap = Duration::from_secs(1);
    let field = |r: Result<(), tower_backoff::ConfigError>| r.unwrap_err().field();
    let built = |base: Duration| -> Vec<(&'static str, Result<(), tower_backoff::ConfigError>)> {
        vec![
            ("interval", ConstantBackOff::new(base).map(drop)),
            ("delay", Fixed::new(base).map(drop)),
            ("base", Exponential::new(base, cap).map(drop)),
            ("base", ExponentialJitter::new(base, cap).map(drop)),
            ("base", FullJitter::new(base, cap).map(drop)),
            ("base", EqualJitter::new(base, cap).map(drop)),
            ("base", DecorrelatedJitter::new(base, cap).map(drop)),
            ("interval", Linear::new(base, cap).map(drop)),
            ("base", Fibonacci::new(base, cap).map(drop)),
            (
                "initial_interval",
                ExponentialBackOff::builder()
                    .with_initial_interval(base)
                    .build()
                    .map(drop),
            ),
            (
                "initial_interval",
                ResponsiveBackOff::builder()
                    .with_initial_interval(base)
                    .build()
                    .map(drop),
            ),
        ]
    };
    for (i, (name, result)) in built(Duration::ZERO).into_iter().enumerate() {
        assert_eq!(field(result), name, "strategy {i}");
    }
    for (i, (_, result)) in built(Duration::from_nanos(1)).into_iter().enumerate() {
        assert!(result.is_ok(), "strategy {i}: {result:?}");
    }
}
