//! Success-path cost per request: `RetryLayer` vs tower's `Retry` with a trivial
//! always-clone policy vs the bare service, side by side.
//!
//! The request is an `http::Request<Full<Bytes>>` with ten headers; the inner service
//! answers `200 OK` at once, so every measured future completes on its first poll. The
//! futures are polled by hand with a no-op waker: no executor cost hides the difference.
//!
//! ```text
//! cargo bench --bench success_path
//! ```

use bytes::Bytes;
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use http::{Request, Response};
use http_body_util::Full;
use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tower::retry::{Policy, Retry};
use tower::{Layer, Service};
use tower_backoff::{ConstantBackOff, ExponentialBackOff, RetryLayer};

type Req = Request<Full<Bytes>>;
type Res = Response<Full<Bytes>>;

/// The inner service: always ready, answers `200 OK` with an empty body.
#[derive(Clone, Copy)]
struct Ok200;

impl Service<Req> for Ok200 {
    type Response = Res;
    type Error = Infallible;
    type Future = Ready<Result<Res, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Req) -> Self::Future {
        black_box(&req);
        ready(Ok(Response::new(Full::new(Bytes::new()))))
    }
}

/// The cheapest useful tower policy: clones every request (as any retrying policy must),
/// never retries.
#[derive(Clone, Copy)]
struct AlwaysClone;

impl Policy<Req, Res, Infallible> for AlwaysClone {
    type Future = Ready<()>;

    fn retry(&mut self, _: &mut Req, _: &mut Result<Res, Infallible>) -> Option<Self::Future> {
        None
    }

    fn clone_request(&mut self, req: &Req) -> Option<Req> {
        let mut copy = Request::new(req.body().clone());
        *copy.method_mut() = req.method().clone();
        *copy.uri_mut() = req.uri().clone();
        *copy.version_mut() = req.version();
        *copy.headers_mut() = req.headers().clone();
        *copy.extensions_mut() = req.extensions().clone();
        Some(copy)
    }
}

/// A GET with ten typical client headers and a small body.
fn request() -> Req {
    Request::get("http://api.example.com/v1/orders/12345?expand=items")
        .header("host", "api.example.com")
        .header("user-agent", "tower-backoff-bench/0.1")
        .header("accept", "application/json")
        .header("accept-encoding", "gzip, br")
        .header("authorization", "Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc")
        .header("x-request-id", "6f1c2f8e-8a55-4c1b-9d0e-2b7f1a3c9d44")
        .header(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )
        .header("cache-control", "no-cache")
        .header("x-client-version", "1.2.3")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(b"{\"query\":\"orders\"}")))
        .unwrap()
}

/// Sends `req` through `svc`, which must be ready and answer on the first poll.
fn send<S: Service<Req, Response = Res>>(svc: &mut S, req: Req) -> Res
where
    S::Error: std::fmt::Debug,
{
    let mut cx = Context::from_waker(Waker::noop());
    let Poll::Ready(Ok(())) = svc.poll_ready(&mut cx) else {
        panic!("service not ready")
    };
    let fut = pin!(svc.call(req));
    match fut.poll(&mut cx) {
        Poll::Ready(res) => res.unwrap(),
        Poll::Pending => panic!("the success path must complete on the first poll"),
    }
}

fn bench(c: &mut Criterion) {
    // No runtime is entered: the success path creates no timer, and tokio's `Instant::now`
    // outside a runtime is `std`'s. (With the `test-util` feature that dev-dependencies
    // enable, inside a runtime it would also lock the runtime's mock clock: a cost that
    // production builds, without `test-util`, never pay.)
    let template = request();
    let fresh = || AlwaysClone.clone_request(&template).unwrap();

    let mut g = c.benchmark_group("success_path");
    let mut bare = Ok200;
    g.bench_function("bare service", |b| {
        b.iter_batched(fresh, |req| send(&mut bare, req), BatchSize::SmallInput)
    });
    let mut trivial = Retry::new(AlwaysClone, Ok200);
    g.bench_function("tower Retry, always-clone policy", |b| {
        b.iter_batched(fresh, |req| send(&mut trivial, req), BatchSize::SmallInput)
    });
    let mut ours = RetryLayer::new(ExponentialBackOff::default()).layer(Ok200);
    g.bench_function("RetryLayer (default, retry budget on)", |b| {
        b.iter_batched(fresh, |req| send(&mut ours, req), BatchSize::SmallInput)
    });
    let mut ours_nb = RetryLayer::new(ExponentialBackOff::default())
        .without_retry_budget()
        .layer(Ok200);
    g.bench_function("RetryLayer without retry budget", |b| {
        b.iter_batched(fresh, |req| send(&mut ours_nb, req), BatchSize::SmallInput)
    });
    let mut ours_ns = RetryLayer::new(ExponentialBackOff::default())
        .without_stats()
        .layer(Ok200);
    g.bench_function("RetryLayer without stats", |b| {
        b.iter_batched(fresh, |req| send(&mut ours_ns, req), BatchSize::SmallInput)
    });
    let mut ours_lean = RetryLayer::new(ExponentialBackOff::default())
        .without_stats()
        .without_retry_budget()
        .layer(Ok200);
    g.bench_function("RetryLayer without stats, without retry budget", |b| {
        b.iter_batched(
            fresh,
            |req| send(&mut ours_lean, req),
            BatchSize::SmallInput,
        )
    });
    // A backoff whose reset reads no clock (`ExponentialBackOff::reset` reads one).
    let mut ours_const = RetryLayer::new(ConstantBackOff::new(Duration::from_millis(100)))
        .without_retry_budget()
        .layer(Ok200);
    g.bench_function("RetryLayer(ConstantBackOff) without retry budget", |b| {
        b.iter_batched(
            fresh,
            |req| send(&mut ours_const, req),
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
