//! Success-path cost per request: `RetryLayer` vs tower's `Retry` with a trivial
//! always-clone policy vs the bare service, side by side.
//!
//! The request is an `http::Request<Full<Bytes>>` with ten headers; the inner service
//! answers `200 OK` at once, so every measured future completes on its first poll. The
//! futures are polled by hand with a no-op waker: no executor cost hides the difference.
//! After criterion's measurements, an interleaved comparison (see [`interleaved`]) prints
//! each variant's median cost relative to tower's trivial policy, which background load
//! on a shared machine skews far less.
//!
//! ```text
//! cargo bench -p tower-backoff-lab --bench success_path
//! ```

use criterion::{BatchSize, Criterion, criterion_group};
use std::hint::black_box;
use std::time::Duration;
use tower::retry::Retry;
use tower::{Layer, Service};
use tower_backoff::{ConstantBackOff, ExponentialBackOff, RetryLayer};

#[path = "../../tests/support/success_path.rs"]
mod support;
use support::{AlwaysClone, Ok200, Req, Res, SharedState, clone_request, request, send};

/// A service under test, type-erased so that every variant runs through the same code
/// (the indirect call costs all of them alike).
type Variant = (&'static str, Box<dyn FnMut(Req) -> Res>);

fn variants() -> Vec<Variant> {
    fn boxed<S>(mut svc: S) -> Box<dyn FnMut(Req) -> Res>
    where
        S: Service<Req, Response = Res> + 'static,
        S::Error: std::fmt::Debug,
    {
        Box::new(move |req| send(&mut svc, req))
    }
    let exp = ExponentialBackOff::default;
    vec![
        ("bare service", boxed(Ok200)),
        (
            "tower Retry, always-clone policy",
            boxed(Retry::new(AlwaysClone, Ok200)),
        ),
        (
            // What any policy with shared state pays: tower clones the policy into every
            // response future, so its `Arc` is counted up and down once per request.
            "tower Retry, policy holding an Arc",
            boxed(Retry::new(SharedState::new(false), Ok200)),
        ),
        (
            // ... and what a retry budget adds at the least: one shared count per request.
            "tower Retry, policy holding an Arc, counting each request",
            boxed(Retry::new(SharedState::new(true), Ok200)),
        ),
        (
            "RetryLayer (default, retry budget on)",
            boxed(RetryLayer::new(exp()).layer(Ok200)),
        ),
        (
            "RetryLayer without retry budget",
            boxed(RetryLayer::new(exp()).without_retry_budget().layer(Ok200)),
        ),
        (
            "RetryLayer without stats",
            boxed(RetryLayer::new(exp()).without_stats().layer(Ok200)),
        ),
        (
            "RetryLayer without stats, without retry budget",
            boxed(
                RetryLayer::new(exp())
                    .without_stats()
                    .without_retry_budget()
                    .layer(Ok200),
            ),
        ),
        (
            // A backoff without a jitter stream to re-seed when tower clones the policy.
            "RetryLayer(ConstantBackOff) without stats, without retry budget",
            boxed(
                RetryLayer::new(ConstantBackOff::new(Duration::from_millis(100)).unwrap())
                    .without_stats()
                    .without_retry_budget()
                    .layer(Ok200),
            ),
        ),
    ]
}

// No runtime is entered: the success path creates no timer, and tokio's `Instant::now`
// outside a runtime is `std`'s. (With the `test-util` feature that dev-dependencies
// enable, inside a runtime it would also lock the runtime's mock clock: a cost that
// production builds, without `test-util`, never pay.)
fn bench(c: &mut Criterion) {
    let template = request();
    let fresh = || clone_request(&template);
    let mut g = c.benchmark_group("success_path");
    for (name, mut svc) in variants() {
        g.bench_function(name, |b| {
            b.iter_batched(fresh, &mut svc, BatchSize::SmallInput)
        });
    }
    g.finish();
}

/// Requests per block of the interleaved comparison, and rounds.
const BLOCK: usize = 2_000;
const ROUNDS: usize = 64;

/// Criterion runs the variants one after the other, so background load that comes and
/// goes skews their ratios on a shared machine. Here every round times one block of
/// requests per variant (rotating which goes first; requests built and responses dropped
/// outside the timing, as with `iter_batched`) and each variant's time is divided by
/// tower's trivial policy's in the same round; the medians are printed.
///
/// Each round also runs at another depth of the stack ([`deeper`]). Where the stack
/// lies decides, in one process, a ratio anywhere from 0.98× to 1.13× (measured by
/// padding the environment, which moves the stack, with address randomization off: the
/// same padding gave the same ratio to ±0.005); with randomization on, every process got
/// another one. Over 64 depths, the median is the cost, not the luck of one layout.
fn interleaved() {
    let template = request();
    let mut variants = variants();
    let n = variants.len();
    let mut per_request = vec![Vec::with_capacity(ROUNDS); n];
    let mut ratios = vec![Vec::with_capacity(ROUNDS); n];
    for round in 0..ROUNDS {
        let mut times = vec![0.0; n];
        for k in 0..n {
            let i = (round + k) % n;
            let mut reqs: Vec<Req> = (0..BLOCK).map(|_| clone_request(&template)).collect();
            let mut out = Vec::with_capacity(BLOCK);
            let svc = &mut variants[i].1;
            times[i] = deeper(round, &mut || {
                let start = std::time::Instant::now();
                for req in reqs.drain(..) {
                    out.push(svc(req));
                }
                start.elapsed().as_secs_f64()
            });
            drop(black_box(out));
        }
        for i in 0..n {
            per_request[i].push(times[i] / BLOCK as f64 * 1e9);
            ratios[i].push(times[i] / times[1]);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "success_path/interleaved: {ROUNDS} rounds of {BLOCK} requests; median ns per request, \
         median time ÷ tower's trivial policy's"
    );
    for i in 0..n {
        println!(
            "  {}: {:.0} ns, {:.3}×",
            variants[i].0,
            median(&mut per_request[i]),
            median(&mut ratios[i])
        );
    }
}

/// Runs `f` `depth` stack frames deeper, each holding 64 bytes that must stay.
#[inline(never)]
fn deeper(depth: usize, f: &mut dyn FnMut() -> f64) -> f64 {
    if depth == 0 {
        return f();
    }
    let pad = black_box([0u8; 64]);
    let time = deeper(depth - 1, f);
    black_box(&pad);
    time
}

criterion_group!(benches, bench);

fn main() {
    benches();
    interleaved();
    Criterion::default().configure_from_args().final_summary();
}
