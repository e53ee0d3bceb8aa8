//! The shared retry budget against tower's own `TpsBudget` (same semantics: Finagle's
//! retry budget, a ratio of recent requests plus a floor per second over a sliding window).
//!
//! Per operation on one thread, and with two threads hammering one budget (each
//! deposits for every request and withdraws for every fifth), which is what a client
//! shared by many tasks does. Run with:
//!
//! ```text
//! cargo bench -p tower-backoff-lab --bench budget
//! ```

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tower::retry::budget::{Budget, TpsBudget};
use tower_backoff::budget::RetryBudget;

const TTL: Duration = Duration::from_secs(10);

fn ours() -> RetryBudget {
    RetryBudget::new(TTL, 10, 0.2).unwrap()
}

fn towers() -> TpsBudget {
    TpsBudget::new(TTL, 10, 0.2)
}

/// `requests` deposits and a withdrawal every fifth request, on each of `threads` threads
/// sharing one budget.
fn hammer<B: Send + Sync + 'static>(
    budget: Arc<B>,
    threads: usize,
    requests: u64,
    deposit: fn(&B),
    withdraw: fn(&B) -> bool,
) -> Duration {
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let budget = budget.clone();
            std::thread::spawn(move || {
                for n in 0..requests {
                    deposit(&budget);
                    if n % 5 == 0 {
                        black_box(withdraw(&budget));
                    }
                }
            })
        })
        .collect();
    handles.into_iter().for_each(|h| h.join().unwrap());
    start.elapsed()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("budget");
    let (a, b) = (ours(), towers());
    g.bench_function("RetryBudget deposit", |bench| bench.iter(|| a.deposit()));
    g.bench_function("TpsBudget deposit", |bench| bench.iter(|| b.deposit()));
    g.bench_function("RetryBudget withdraw", |bench| {
        bench.iter(|| black_box(a.withdraw()))
    });
    g.bench_function("TpsBudget withdraw", |bench| {
        bench.iter(|| black_box(b.withdraw()))
    });
    for threads in [2, 4] {
        g.bench_function(
            format!("RetryBudget, {threads} threads, per request"),
            |bench| {
                bench.iter_custom(|iters| {
                    hammer(
                        Arc::new(ours()),
                        threads,
                        iters,
                        RetryBudget::deposit,
                        RetryBudget::withdraw,
                    )
                })
            },
        );
        g.bench_function(
            format!("TpsBudget, {threads} threads, per request"),
            |bench| {
                bench.iter_custom(|iters| {
                    hammer(
                        Arc::new(towers()),
                        threads,
                        iters,
                        |b| b.deposit(),
                        |b| b.withdraw(),
                    )
                })
            },
        );
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
