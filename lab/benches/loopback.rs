//! Real loopback throughput: a hyper server and hyper-util's legacy client at a fixed
//! concurrency, with and without `RetryLayer`, against a healthy server (every answer is
//! `200 OK`, so the layer never retries: this is its pure overhead).
//!
//! Six clients are compared: the bare client; two wrappers that isolate what tower's
//! `Retry` does per request (clone the inner service; clone the request and hold the copy
//! until the response); tower's `Retry` with a trivial always-clone policy; `RetryLayer`
//! (defaults); and `RetryLayer` without its retry budget.
//! One iteration sends [`BATCH`] GET requests (ten headers, small body) from
//! [`CONCURRENCY`] tasks, each reusing its keep-alive connection. Server and client share
//! one two-worker tokio runtime, as on a two-core machine they would share the CPU anyway.
//! The throughput (`elem/s`) is requests per second. After criterion's two measurements,
//! an interleaved comparison (see [`interleaved`]) prints the overhead as a median ratio,
//! which background load on a shared machine skews far less.
//!
//! ```text
//! cargo bench -p tower-backoff-lab --bench loopback
//! ```

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group};

#[path = "../../tests/support/success_path.rs"]
mod support;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use std::error::Error;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use support::AlwaysClone;
use tokio::net::TcpListener;
use tower::retry::Retry;
use tower::{Layer, Service, ServiceExt};
use tower_backoff::{ExponentialBackOff, RetryLayer};

/// In-flight requests at any time.
const CONCURRENCY: usize = 16;
/// Requests per measured iteration.
const BATCH: usize = 1_024;

type BoxError = Box<dyn Error + Send + Sync>;

async fn server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            stream.set_nodelay(true).unwrap();
            let service = hyper::service::service_fn(|req: Request<Incoming>| async move {
                // Read the whole request body, as a real handler would.
                let _ = req.into_body().collect().await;
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(
                    b"{\"ok\":true}",
                ))))
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    addr
}

fn request(addr: SocketAddr) -> Request<Full<Bytes>> {
    support::request_to(&format!("http://{addr}/v1/orders/12345"))
}

/// Sends [`BATCH`] requests through clones of `svc` from [`CONCURRENCY`] tasks.
async fn batch<S>(svc: S, addr: SocketAddr) -> Duration
where
    S: Service<Request<Full<Bytes>>, Response = Response<Incoming>, Error = BoxError>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
{
    let start = Instant::now();
    let tasks: Vec<_> = (0..CONCURRENCY)
        .map(|_| {
            let mut svc = svc.clone();
            tokio::spawn(async move {
                for _ in 0..BATCH / CONCURRENCY {
                    let res = svc
                        .ready()
                        .await
                        .unwrap()
                        .call(request(addr))
                        .await
                        .unwrap();
                    assert!(res.status().is_success());
                    res.into_body().collect().await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    start.elapsed()
}

type Req = Request<Full<Bytes>>;
type Res = Response<Incoming>;

type Variant = tower::util::BoxCloneService<Req, Res, BoxError>;

/// Calls a fresh clone of the inner service for every request, as tower's `Retry` does
/// (its response future owns a clone of the whole `Retry`, inner service included, to
/// send retries with): isolates what that clone costs.
#[derive(Clone)]
struct CloneEachCall<S>(S);

impl<S: Service<Req> + Clone> Service<Req> for CloneEachCall<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> S::Future {
        let clone = self.0.clone();
        let fut = self.0.call(req);
        drop(clone);
        fut
    }
}

/// Clones each request and keeps the copy until the response, as every retrying tower
/// policy must (tower's `Retry` holds the copy for a possible retry): isolates what that
/// clone costs.
#[derive(Clone)]
struct CloneReq<S>(S);

impl<S: Service<Req> + Clone> Service<Req> for CloneReq<S>
where
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future =
        std::pin::Pin<Box<dyn std::future::Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let copy = support::clone_request(&req);
        let fut = self.0.call(req);
        Box::pin(async move {
            let r = fut.await;
            drop(copy);
            r
        })
    }
}

/// The runtime, the server's address and the clients compared, by name.
fn setup() -> (
    tokio::runtime::Runtime,
    SocketAddr,
    Vec<(&'static str, Variant)>,
) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let addr = rt.block_on(server());
    let client = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(CONCURRENCY)
        .build_http::<Full<Bytes>>();
    // Box the client's error so that every variant has the same error type.
    let bare = tower::ServiceBuilder::new()
        .map_err(|e| Box::new(e) as BoxError)
        .service(client);
    let variants: Vec<(&'static str, Variant)> = vec![
        ("hyper-util client", Variant::new(bare.clone())),
        (
            "hyper-util client, cloned per request",
            Variant::new(CloneEachCall(bare.clone())),
        ),
        (
            "hyper-util client, request cloned and held",
            Variant::new(CloneReq(bare.clone())),
        ),
        (
            "hyper-util client + tower Retry, always-clone policy",
            Variant::new(Retry::new(AlwaysClone, bare.clone())),
        ),
        (
            "hyper-util client + RetryLayer",
            Variant::new(
                RetryLayer::new(ExponentialBackOff::default())
                    .layer(bare.clone())
                    .map_err(BoxError::from),
            ),
        ),
        (
            "hyper-util client + RetryLayer without retry budget",
            Variant::new(
                RetryLayer::new(ExponentialBackOff::default())
                    .without_retry_budget()
                    .layer(bare)
                    .map_err(BoxError::from),
            ),
        ),
    ];
    // Warm the connection pool.
    for (_, v) in &variants {
        rt.block_on(batch(v.clone(), addr));
    }
    (rt, addr, variants)
}

fn bench(c: &mut Criterion) {
    let (rt, addr, variants) = setup();
    let mut g = c.benchmark_group("loopback");
    g.throughput(Throughput::Elements(BATCH as u64));
    g.sample_size(30);
    g.measurement_time(Duration::from_secs(8));
    for (name, svc) in &variants {
        g.bench_function(*name, |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| rt.block_on(batch(svc.clone(), addr)))
                    .sum()
            })
        });
    }
    g.finish();
}

/// Rounds of the interleaved comparison.
const ROUNDS: usize = 60;

/// Criterion measures one variant after the other, so a change in background load between
/// them shows up as overhead. This comparison runs one batch of every variant per round,
/// rotating which goes first, and reports per variant the median (and quartiles) of its
/// time divided by the bare client's time in the same round.
fn interleaved() {
    let (rt, addr, variants) = setup();
    let n = variants.len();
    let mut ratios = vec![Vec::with_capacity(ROUNDS); n];
    for round in 0..ROUNDS {
        let mut times = vec![Duration::ZERO; n];
        for k in 0..n {
            let i = (round + k) % n;
            times[i] = rt.block_on(batch(variants[i].1.clone(), addr));
        }
        for i in 0..n {
            ratios[i].push(times[i].as_secs_f64() / times[0].as_secs_f64());
        }
    }
    println!(
        "loopback/interleaved: time / bare client's time, {ROUNDS} rounds of {BATCH} requests"
    );
    for ((name, _), mut r) in variants.iter().zip(ratios) {
        r.sort_by(f64::total_cmp);
        let q = |p: f64| r[((r.len() - 1) as f64 * p).round() as usize];
        println!(
            "  {name}: median {:.3} ({:+.1} %), quartiles {:.3} – {:.3}",
            q(0.5),
            (q(0.5) - 1.0) * 100.0,
            q(0.25),
            q(0.75)
        );
    }
}

criterion_group!(benches, bench);

fn main() {
    benches();
    interleaved();
    Criterion::default().configure_from_args().final_summary();
}
