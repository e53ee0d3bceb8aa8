//! Delay computation per `next_backoff`: this crate's exponential backoff vs the
//! `backoff` crate, backon's exponential builder and tower's backoff maker, side by side.
//!
//! Every strategy is configured alike: 100 ms initial delay, factor 2, cap 10 s, jitter
//! on. One iteration = start a fresh sequence (reset / build / make) and draw ten delays,
//! so the growing phase and the cap are both exercised; the reported throughput is in
//! delays per second (`elem/s`) and `time / 10` is the cost of one delay.
//!
//! Tower's `Backoff::next_backoff` returns a `tokio::time::Sleep` rather than a duration,
//! so its figure includes creating (not polling) that `Sleep`: that is the cost of its API.
//!
//! ```text
//! cargo bench -p tower-backoff-lab --bench delay
//! ```

use backon::BackoffBuilder;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::time::Duration;
use tower::retry::backoff::{Backoff as _, ExponentialBackoffMaker, MakeBackoff};
use tower::util::rng::HasherRng;
use tower_backoff::backoff::{DecorrelatedJitter, FullJitter, Schedule, aws};
use tower_backoff::{BackOff, ExponentialBackOff};

const INITIAL: Duration = Duration::from_millis(100);
const CAP: Duration = Duration::from_secs(10);
const DRAWS: u64 = 10;

fn ours_bench<B: BackOff>(b: &mut criterion::Bencher<'_>, mut backoff: B) {
    b.iter(|| {
        backoff.reset();
        for _ in 0..DRAWS {
            black_box(backoff.next_backoff());
        }
    })
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("next_backoff");
    g.throughput(Throughput::Elements(DRAWS));

    let ours = ExponentialBackOff::builder()
        .with_initial_interval(INITIAL)
        .with_multiplier(2.0)
        .with_max_interval(CAP)
        .with_randomization_factor(0.5)
        .with_seed(1)
        .build()
        .unwrap();
    g.bench_function("tower-backoff ExponentialBackOff", |b| {
        ours_bench(b, ours.clone())
    });
    let ours_no_clock = ExponentialBackOff::builder()
        .with_initial_interval(INITIAL)
        .with_multiplier(2.0)
        .with_max_interval(CAP)
        .with_randomization_factor(0.5)
        .with_max_elapsed(None)
        .with_seed(1)
        .build()
        .unwrap();
    g.bench_function("tower-backoff ExponentialBackOff, no max_elapsed", |b| {
        ours_bench(b, ours_no_clock.clone())
    });
    g.bench_function("tower-backoff FullJitter", |b| {
        ours_bench(
            b,
            FullJitter::new(INITIAL, CAP)
                .unwrap()
                .into_backoff()
                .with_seed(1),
        )
    });
    g.bench_function("tower-backoff aws::Exponential (no jitter)", |b| {
        ours_bench(
            b,
            aws::Exponential::new(INITIAL, CAP).unwrap().into_backoff(),
        )
    });
    g.bench_function("tower-backoff DecorrelatedJitter", |b| {
        ours_bench(
            b,
            DecorrelatedJitter::new(INITIAL, CAP).unwrap().with_seed(1),
        )
    });

    let mut peer = backoff::ExponentialBackoffBuilder::new()
        .with_initial_interval(INITIAL)
        .with_multiplier(2.0)
        .with_max_interval(CAP)
        .with_randomization_factor(0.5)
        .build();
    g.bench_function("backoff 0.4 ExponentialBackoff", |b| {
        use backoff::backoff::Backoff;
        b.iter(|| {
            peer.reset();
            for _ in 0..DRAWS {
                black_box(peer.next_backoff());
            }
        })
    });

    let builder = backon::ExponentialBuilder::new()
        .with_min_delay(INITIAL)
        .with_factor(2.0)
        .with_max_delay(CAP)
        .with_jitter()
        .with_jitter_seed(1)
        .without_max_times();
    g.bench_function("backon 1 ExponentialBuilder", |b| {
        b.iter(|| {
            let mut backoff = black_box(builder).build();
            for _ in 0..DRAWS {
                black_box(backoff.next());
            }
        })
    });

    // Tower's `next_backoff` creates a `tokio::time::Sleep`, which needs a runtime. Ours run
    // outside one: with the `test-util` feature (enabled by the dev-dependencies) tokio's
    // `Instant::now` inside a runtime locks the mock clock, a cost production never pays.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let mut maker = ExponentialBackoffMaker::new(INITIAL, CAP, 0.5, HasherRng::default()).unwrap();
    g.bench_function("tower 0.5 ExponentialBackoffMaker", |b| {
        b.iter(|| {
            let mut backoff = maker.make_backoff();
            for _ in 0..DRAWS {
                drop(black_box(backoff.next_backoff()));
            }
        })
    });
    g.finish();

    // What one clock read costs here: `ExponentialBackOff` (like the `backoff` crate) reads
    // the clock on every draw to enforce its max elapsed time.
    let mut g = c.benchmark_group("reference");
    g.throughput(Throughput::Elements(DRAWS));
    g.bench_function("std::time::Instant::now", |b| {
        b.iter(|| {
            for _ in 0..DRAWS {
                black_box(std::time::Instant::now());
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
