//! A limiter whose window every request restarts, refused ones too (Flask-Limiter's
//! elastic expiry): only a request more than a window after the last one passes. Probes
//! that double past the window find it; probes at a fixed short delay would be refused for
//! good. The lab runs the real Flask-Limiter (`lab/tests/rate_limiters.rs`).

mod support;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::upstream;
use tokio::time::Instant;
use tower::{ServiceBuilder, ServiceExt};
use tower_backoff::{ExponentialBackOff, PacingLayer, RetryLayer};

const QUOTA: usize = 50;
const WINDOW: Duration = Duration::from_secs(1);

/// 300 GETs, 20 at a time, through the quick start's stack to a real server on loopback
/// that lets 50 pass per window, a window each request restarts; a bare 429 past that.
/// How many succeeded, and how long they took.
async fn burst() -> (usize, Duration) {
    let window = Mutex::new((0, None::<Instant>));
    let (addr, _) = upstream::serve(move |_, arrival| {
        let mut window = window.lock().unwrap();
        let (count, last) = &mut *window;
        if last.is_none_or(|last| arrival.at - last >= WINDOW) {
            *count = 0;
        }
        (*count, *last) = (*count + 1, Some(arrival.at));
        let status = if *count <= QUOTA { 200 } else { 429 };
        upstream::reply(status, &[], "")
    })
    .await;
    let http = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let client = ServiceBuilder::new()
        .layer(RetryLayer::new(ExponentialBackOff::default()))
        .layer(PacingLayer::new())
        .service(http);
    let url = format!("http://{addr}/");
    let (start, next, ok) = (
        Instant::now(),
        Arc::new(AtomicUsize::new(0)),
        Arc::default(),
    );
    let workers: Vec<_> = (0..20)
        .map(|_| {
            let (client, url) = (client.clone(), url.clone());
            let (next, ok): (_, Arc<AtomicUsize>) = (next.clone(), Arc::clone(&ok));
            tokio::spawn(async move {
                while next.fetch_add(1, Ordering::SeqCst) < 300 {
                    let request = Request::get(&url).body(Empty::new()).unwrap();
                    let res = client.clone().oneshot(request).await;
                    if res.is_ok_and(|res| res.status() == StatusCode::OK) {
                        ok.fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
    (ok.load(Ordering::SeqCst), start.elapsed())
}

#[tokio::test(start_paused = true)]
async fn probes_outlast_a_window_that_each_refusal_restarts() {
    let (ok, took) = burst().await;
    // 50 a window at most, then a second of silence: 11 s at best.
    assert_eq!(ok, 300, "{ok} of 300 succeeded in {took:?}");
    assert!(took < Duration::from_secs(30), "{took:?}");
}
