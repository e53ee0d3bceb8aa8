//! Pacing's CPU cost: a request to a destination that refused nothing, and the cost per
//! waiter when `n` requests queue for one paced destination — flat in `n` if the queue
//! is not quadratic.
//!
//! ```text
//! cargo bench -p tower-backoff-lab --bench pacing
//! ```

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use http::{Request, Response};
use std::convert::Infallible;
use std::hint::black_box;
use tower::{Layer, ServiceExt};
use tower_backoff::PacingLayer;

#[path = "../../tests/support/success_path.rs"]
mod support;
use support::{Ok200, request, send};

fn open_destination(c: &mut Criterion) {
    let mut group = c.benchmark_group("pacing/open destination");
    let mut bare = Ok200;
    group.bench_function("bare service", |b| {
        b.iter(|| black_box(send(&mut bare, request())))
    });
    let mut paced = PacingLayer::builder()
        .with_initial_window(0)
        .build()
        .unwrap()
        .layer(Ok200);
    group.bench_function("PacingLayer, no slow start", |b| {
        b.iter(|| black_box(send(&mut paced, request())))
    });
    group.finish();
}

/// `n` requests queued behind a refusal at one destination, all served.
fn drain(n: usize) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async {
        let pacing = PacingLayer::builder().with_max_queue(n).build().unwrap();
        let server = tower::service_fn(|request: Request<()>| async move {
            let status = if request.uri().path() == "/503" {
                503
            } else {
                200
            };
            Ok::<_, Infallible>(Response::builder().status(status).body(()).unwrap())
        });
        let client = pacing.layer(server);
        let get = |uri: &str| Request::get(uri).body(()).unwrap();
        client.clone().oneshot(get("http://a/503")).await.unwrap();
        let tasks: Vec<_> = (0..n)
            .map(|_| tokio::spawn(client.clone().oneshot(get("http://a/200"))))
            .collect();
        for task in tasks {
            assert_eq!(task.await.unwrap().unwrap().status(), 200);
        }
    });
}

fn waiters(c: &mut Criterion) {
    let mut group = c.benchmark_group("pacing/queued waiters");
    group.sample_size(10);
    for n in [1_000, 10_000, 40_000] {
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            b.iter(|| drain(n))
        });
    }
    group.finish();
}

criterion_group!(benches, open_destination, waiters);
criterion_main!(benches);
