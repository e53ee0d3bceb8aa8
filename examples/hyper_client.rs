//! hyper-util's legacy client behind the retry layer, against a flaky server on loopback.
//!
//! The server answers `503 Retry-After: 1` to the first request, 429 to the second, then
//! 200; the client waits a second as told, then backs off, then gets its answer. A POST
//! without an `Idempotency-Key` gets the 503 back at once.
//!
//! `cargo run --example hyper_client --features hyper` (about a second, loopback only).

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tower::{ServiceBuilder, ServiceExt};
use tower_backoff::{ExponentialBackOff, RetryEvent, RetryLayer, RetryStats};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let addr = flaky_server().await?;

    // The one line: any hyper-util client (or other tower HTTP service) gets the layer.
    let backoff = ExponentialBackOff::builder()
        .with_initial_interval(Duration::from_millis(100))
        .build()?;
    let client = ServiceBuilder::new()
        .layer(RetryLayer::new(backoff).on_retry(|e: &RetryEvent<'_>| {
            println!(
                "  attempt {} failed ({}), retrying in {:?}",
                e.attempt(),
                e.reason(),
                e.delay()
            );
        }))
        .service(Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>());

    let start = Instant::now();
    println!("GET /report");
    let req = Request::get(format!("http://{addr}/report")).body(Full::default())?;
    let res = client.clone().oneshot(req).await?;
    let stats = res
        .extensions()
        .get::<RetryStats>()
        .copied()
        .unwrap_or_default();
    let status = res.status();
    let body = res.into_body().collect().await?.to_bytes();
    println!(
        "  -> {status} {:?} after {} attempts, {:?} waiting, {:?} in all",
        String::from_utf8_lossy(&body),
        stats.attempts,
        stats.waited,
        start.elapsed()
    );

    println!("POST /orders (no Idempotency-Key)");
    let req = Request::post(format!("http://{addr}/orders")).body(Full::new(Bytes::from("{}")))?;
    let res = client.oneshot(req).await?;
    println!("  -> {} (a POST is not repeated after a 503)", res.status());
    Ok(())
}

/// Answers 503 with `Retry-After: 1`, then 429, then 200, then 503 again, over and over.
async fn flaky_server() -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let calls = Arc::new(AtomicUsize::new(0));
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let calls = calls.clone();
            let service = hyper::service::service_fn(move |_req: Request<Incoming>| {
                let n = calls.fetch_add(1, Ordering::SeqCst);
                let res = match n % 4 {
                    0 | 3 => Response::builder()
                        .status(StatusCode::SERVICE_UNAVAILABLE)
                        .header("retry-after", "1")
                        .body(Full::new(Bytes::from("warming up"))),
                    1 => Response::builder()
                        .status(StatusCode::TOO_MANY_REQUESTS)
                        .body(Full::new(Bytes::from("slow down"))),
                    _ => Response::builder().body(Full::new(Bytes::from("the report"))),
                };
                std::future::ready(Ok::<_, Infallible>(res.expect("a valid response")))
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    Ok(addr)
}
