//! A `reqwest::Client` behind the retry layer, against a flaky server on loopback.
//!
//! `with_retry` (feature `reqwest`) puts the layer in front of the client and keeps
//! reqwest's own types: the same builder, a `reqwest::Response` with its URL and `.text()`.
//! The server answers 503 with `Retry-After: 1` to every other call. A streaming upload is
//! buffered as it is sent, so the retry can send it again; no setup is needed for that.
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
use tower_backoff::integrations::reqwest::ClientExt;
use tower_backoff::{ExponentialBackOff, RetryEvent, RetryLayer, RetryStats};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let addr = flaky_server().await?;
    let layer = RetryLayer::new(ExponentialBackOff::default()).on_retry(|e: &RetryEvent<'_>| {
        println!(
            "  {} {}: {}, retrying in {:?}",
            e.method(),
            e.uri(),
            e.reason(),
            e.delay()
        );
    });
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()?
        .with_retry(layer);

    let start = Instant::now();
    let res = client.get(format!("http://{addr}/status")).send().await?;
    report(res, start).await?;

    // A streaming body (no length known up front): buffered as it goes, replayed on retry.
    let start = Instant::now();
    let chunks =
        (0..4).map(|i| Ok::<_, Infallible>(Frame::data(Bytes::from(format!("part {i};")))));
    let upload = reqwest::Body::wrap(StreamBody::new(tokio_stream::iter(chunks)));
    let res = client
        .put(format!("http://{addr}/upload"))
        .body(upload)
        .send()
        .await?;
    report(res, start).await
}

async fn report(
    res: reqwest::Response,
    start: Instant,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let stats = res
        .extensions()
        .get::<RetryStats>()
        .copied()
        .unwrap_or_default();
    let status = res.status();
    let url = res.url().clone();
    let text = res.text().await?;
    println!(
        "-> {status} from {url} {text:?}: {} attempts in {:?}",
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
