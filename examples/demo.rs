//! The crate's main job, on a local flaky server: `cargo run --example demo`.
//!
//! Starts an HTTP server on 127.0.0.1 that answers 503 and 429 with `Retry-After` (in
//! seconds and as an HTTP-date), drops a connection and answers slowly, then sends a few
//! requests through hyper-util's client wrapped in a [`RetryLayer`] with its defaults.
//! Prints one line per attempt, with the reason for each decision, and a summary. Touches
//! nothing beyond loopback; finishes in a few seconds.

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::net::TcpListener;
use tower::{ServiceBuilder, ServiceExt};
use tower_backoff::{ExponentialBackOff, RetryEvent, RetryLayer, RetryStats};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    // `cargo run --example demo --features metrics` also prints what a metrics recorder
    // received.
    #[cfg(feature = "metrics")]
    let metrics = {
        let recorder = metrics_util::debugging::DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder.install()?;
        snapshotter
    };
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(serve(listener));

    let start = Instant::now();
    // The defaults: 4 attempts and 30 s per request, cenkalti-style exponential backoff
    // (500 ms, x1.5, +-50 %), a server's Retry-After honoured up to 10 s.
    let layer =
        RetryLayer::new(ExponentialBackOff::default()).on_retry(move |e: &RetryEvent<'_>| {
            let outcome = match e.status() {
                Some(status) => status.to_string(),
                None => e.reason().to_string(),
            };
            let asked = match e.retry_after() {
                Some(d) => format!(" (server asked {:.3}s)", d.as_secs_f64()),
                None => String::new(),
            };
            println!(
                "{:>6.3}s  {:<30} {:>7}  {:<26} {:<8} {:>7.3}s  {}{asked}",
                start.elapsed().as_secs_f64(),
                format!("{} {}", e.method(), e.uri().path()),
                e.attempt(),
                outcome,
                "retry",
                e.delay().as_secs_f64(),
                e.reason(),
            );
        });
    // With the crate's `hyper` feature the layer reads hyper-util's errors and tells
    // connect failures apart; without it they are "maybe sent" errors (retried for
    // idempotent requests only).
    let client = ServiceBuilder::new()
        .layer(layer)
        .service(Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>());

    println!("RetryLayer::new(ExponentialBackOff::default()): 4 attempts, 30 s a request,");
    println!("Retry-After honoured up to 10 s, a POST resent only with an Idempotency-Key.\n");
    println!(
        "{:>7}  {:<30} {:>7}  {:<26} {:<8} {:>8}  reason",
        "time", "request", "attempt", "outcome", "decision", "delay"
    );
    let requests = [
        (Method::GET, "/flaky", None),
        (Method::GET, "/dropped", None),
        (Method::POST, "/orders", None),
        (Method::POST, "/payments", Some("order-42")),
        (Method::GET, "/overloaded", None),
    ];
    let (mut attempts, mut successes, mut waited) = (0, 0, Duration::ZERO);
    for (method, path, key) in &requests {
        let mut request = Request::builder()
            .method(method.clone())
            .uri(format!("http://{addr}{path}"));
        if let Some(key) = key {
            request = request.header("idempotency-key", *key);
        }
        let request = request.body(Full::new(Bytes::from_static(b"{}")))?;
        let label = match key {
            Some(key) => format!("{method} {path} (key {key})"),
            None => format!("{method} {path}"),
        };
        match client.clone().oneshot(request).await {
            Ok(res) => {
                let stats = RetryStats::of(&res);
                let (decision, why) = match stats.gave_up {
                    Some(why) => ("give up", why.to_string()),
                    None if res.status().is_success() => ("done", String::new()),
                    None => ("return", "status is not retried".into()),
                };
                println!(
                    "{:>6.3}s  {:<30} {:>7}  {:<26} {:<8} {:>8}  {why}",
                    start.elapsed().as_secs_f64(),
                    label,
                    stats.attempts,
                    res.status().to_string(),
                    decision,
                    "-",
                );
                attempts += stats.attempts;
                waited += stats.waited;
                successes += u32::from(res.status().is_success());
            }
            Err(err) => println!(
                "{:>6.3}s  {label:<30} failed: {err}",
                start.elapsed().as_secs_f64()
            ),
        }
    }
    println!(
        "\nsummary: {} requests, {attempts} attempts, {successes} succeeded, {:.3}s waited between attempts, {:.3}s in all",
        requests.len(),
        waited.as_secs_f64(),
        start.elapsed().as_secs_f64(),
    );
    #[cfg(feature = "metrics")]
    {
        println!("\nmetrics:");
        let mut lines: Vec<String> = metrics
            .snapshot()
            .into_vec()
            .into_iter()
            .map(|(key, _, _, value)| {
                let key = key.key();
                let labels: Vec<String> = key
                    .labels()
                    .map(|l| format!("{}={}", l.key(), l.value()))
                    .collect();
                format!("  {}{{{}}} {value:?}", key.name(), labels.join(","))
            })
            .collect();
        lines.sort();
        lines.iter().for_each(|line| println!("{line}"));
    }
    Ok(())
}

// ---- the flaky server ----

/// What the flaky server does with the n-th request to a path.
#[derive(Clone, Copy)]
enum Act {
    Status(u16, Option<RetryAfter>),
    Drop,
    Slow(Duration, u16),
}

#[derive(Clone, Copy)]
enum RetryAfter {
    Seconds(u64),
    DateIn(u64),
}

fn script(path: &str, n: usize) -> Act {
    use Act::*;
    match (path, n) {
        ("/flaky", 0) => Status(503, Some(RetryAfter::Seconds(1))),
        ("/flaky", 1) => Status(429, Some(RetryAfter::DateIn(2))),
        ("/flaky", _) => Slow(Duration::from_millis(300), 200),
        ("/dropped", 0) => Drop,
        ("/dropped", _) => Status(200, None),
        ("/orders", _) => Status(503, None),
        ("/payments", 0) => Status(503, Some(RetryAfter::Seconds(1))),
        ("/payments", _) => Status(201, None),
        ("/overloaded", _) => Status(503, Some(RetryAfter::Seconds(86_400))),
        _ => Status(404, None),
    }
}

async fn serve(listener: TcpListener) {
    let counts: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        let counts = counts.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let counts = counts.clone();
                async move {
                    let path = req.uri().path().to_owned();
                    let n = {
                        let mut counts = counts.lock().unwrap();
                        let n = counts.entry(path.clone()).or_default();
                        *n += 1;
                        *n - 1
                    };
                    match script(&path, n) {
                        Act::Drop => Err("drop"),
                        Act::Slow(d, code) => {
                            tokio::time::sleep(d).await;
                            Ok(respond(code, None))
                        }
                        Act::Status(code, after) => Ok(respond(code, after)),
                    }
                }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn respond(code: u16, after: Option<RetryAfter>) -> Response<Full<Bytes>> {
    let mut res = Response::builder().status(code);
    match after {
        Some(RetryAfter::Seconds(s)) => res = res.header("retry-after", s.to_string()),
        Some(RetryAfter::DateIn(s)) => {
            let when = SystemTime::now() + Duration::from_secs(s);
            res = res.header("retry-after", httpdate::fmt_http_date(when));
        }
        None => {}
    }
    res.body(Full::new(Bytes::new())).expect("valid response")
}
