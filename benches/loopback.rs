//! Real loopback throughput: a hyper server and hyper-util's legacy client at a fixed
//! concurrency, with and without `RetryLayer`, against a healthy server (every answer is
//! `200 OK`, so the layer never retries: this is its pure overhead).
//!
//! One iteration sends [`BATCH`] GET requests (ten headers, small body) from
//! [`CONCURRENCY`] tasks, each reusing its keep-alive connection. Server and client share
//! one two-worker tokio runtime, as on a two-core machine they would share the CPU anyway.
//! The throughput (`elem/s`) is requests per second.
//!
//! ```text
//! cargo bench --bench loopback
//! ```

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use std::error::Error;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
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
    Request::get(format!("http://{addr}/v1/orders/12345"))
        .header("user-agent", "tower-backoff-bench/0.1")
        .header("accept", "application/json")
        .header("accept-encoding", "identity")
        .header("authorization", "Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc")
        .header("x-request-id", "6f1c2f8e-8a55-4c1b-9d0e-2b7f1a3c9d44")
        .header(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )
        .header("cache-control", "no-cache")
        .header("x-client-version", "1.2.3")
        .header("content-type", "application/json")
        .header("x-tenant", "bench")
        .body(Full::new(Bytes::from_static(b"{\"query\":\"orders\"}")))
        .unwrap()
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

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let addr = rt.block_on(server());
    let client = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(CONCURRENCY)
        .build_http::<Full<Bytes>>();
    // Box the client's error so that both variants have the same error type.
    let bare = tower::ServiceBuilder::new()
        .map_err(|e| Box::new(e) as BoxError)
        .service(client);
    let layered = RetryLayer::new(ExponentialBackOff::default()).layer(bare.clone());
    // Warm the connection pool for both.
    rt.block_on(batch(bare.clone(), addr));
    rt.block_on(batch(layered.clone(), addr));

    let mut g = c.benchmark_group("loopback");
    g.throughput(Throughput::Elements(BATCH as u64));
    g.sample_size(30);
    g.measurement_time(Duration::from_secs(10));
    g.bench_function("hyper-util client", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| rt.block_on(batch(bare.clone(), addr)))
                .sum()
        })
    });
    g.bench_function("hyper-util client + RetryLayer", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| rt.block_on(batch(layered.clone(), addr)))
                .sum()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
