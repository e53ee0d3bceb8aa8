//! A `reqwest::Client` behind the retry layer, against a flaky server on loopback.
//!
//! `ReqwestService` (feature `reqwest`) is the one line of glue: it turns the client into a
//! tower service of `http::Request`s. The server answers 503 with `Retry-After: 1` once,
//! then 200. A streaming upload is made replayable (`replay_bodies`): buffered as it is
//! sent, so the retry can send it again.
//!
//! `cargo run --example reqwest_client --features reqwest` (about two seconds, loopback only).

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;
use tower::{ServiceBuilder, ServiceExt};
use tower_backoff::body::DEFAULT_MAX_BYTES;
use tower_backoff::integrations::reqwest::ReqwestService;
use tower_backoff::{ExponentialBackOff, RetryEvent, RetryLayer, RetryStats};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let addr = flaky_server().await?;
    let client = reqwest::Client::builder().no_proxy().build()?;

    let layer = RetryLayer::new(ExponentialBackOff::default()).on_retry(|e: &RetryEvent<'_>| {
        println!(
            "  {} {}: {}, retrying in {:?}",
            e.method(),
            e.uri(),
            e.reason(),
            e.delay()
        );
    });
    let service = ServiceBuilder::new()
        .layer(layer.replay_bodies(DEFAULT_MAX_BYTES))
        .service(ReqwestService::new(client));

    let start = Instant::now();
    let req = Request::get(format!("http://{addr}/status")).body(Full::<Bytes>::default())?;
    let res = service.clone().oneshot(req).await?;
    report(res, start).await?;

    // A streaming body (no length known up front): buffered as it goes, replayed on retry.
    let start = Instant::now();
    let chunks =
        (0..4).map(|i| Ok::<_, Infallible>(Frame::data(Bytes::from(format!("part {i};")))));
    let upload = reqwest::Body::wrap(StreamBody::new(tokio_stream::iter(chunks)));
    let req = Request::put(format!("http://{addr}/upload")).body(upload)?;
    let res = service.oneshot(req).await?;
    report(res, start).await
}

async fn report(
    res: http::Response<reqwest::Body>,
    start: Instant,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let stats = res
        .extensions()
        .get::<RetryStats>()
        .copied()
        .unwrap_or_default();
    let status = res.status();
    let body = res.into_body().collect().await?.to_bytes();
    println!(
        "-> {status} {:?}: {} attempts in {:?}",
        String::from_utf8_lossy(&body),
        stats.attempts,
        start.elapsed()
    );
    Ok(())
}

/// Every odd call answers 503 with `Retry-After: 1`; the others echo what they received.
async fn flaky_server() -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let calls = Arc::new(AtomicUsize::new(0));
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let calls = calls.clone();
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let n = calls.fetch_add(1, Ordering::SeqCst);
                async move {
                    let path = req.uri().path().to_owned();
                    let body = req.into_body().collect().await?.to_bytes();
                    let res = if n.is_multiple_of(2) {
                        Response::builder()
                            .status(StatusCode::SERVICE_UNAVAILABLE)
                            .header("retry-after", "1")
                            .body(Full::new(Bytes::from("busy")))
                    } else {
                        let text = format!("{path} got {:?}", String::from_utf8_lossy(&body));
                        Response::builder().body(Full::new(Bytes::from(text)))
                    };
                    Ok::<_, hyper::Error>(res.expect("a valid response"))
                }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    Ok(addr)
}
