//! A server that refuses a share of requests with a 429 at random, whatever the rate (a
//! flaky upstream, not a limiter): pacing must cost no more than the retry layer alone,
//! as #29's "never worse than no pacing" asks of row 2 (there with 503s, which pacing
//! ignores).

mod support;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::upstream;
use tokio::time::Instant;
use tower::{ServiceBuilder, ServiceExt};
use tower_backoff::{ExponentialBackOff, PacingLayer, RetryLayer};

/// 1000 GETs, 20 at a time, through hyper-util's client to a real server on loopback that
/// answers a share `p` of them 429 (seeded): how many succeeded, and how long they took.
async fn burst(paced: bool, p: f64) -> (usize, Duration) {
    let rng = Mutex::new(SmallRng::seed_from_u64(7));
    let (addr, _) = upstream::serve(move |_, _| {
        let status = match rng.lock().unwrap().random_bool(p) {
            true => 429,
            false => 200,
        };
        upstream::reply(status, &[], "")
    })
    .await;
    let http = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let retry = ServiceBuilder::new().layer(RetryLayer::new(ExponentialBackOff::default()));
    let client = match paced {
        true => retry.layer(PacingLayer::new()).service(http).boxed_clone(),
        false => retry.service(http).boxed_clone(),
    };
    let url = format!("http://{addr}/");
    let (start, next) = (Instant::now(), Arc::new(AtomicUsize::new(0)));
    let ok = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..20)
        .map(|_| {
            let (client, next, ok, url) = (client.clone(), next.clone(), ok.clone(), url.clone());
            tokio::spawn(async move {
                while next.fetch_add(1, Ordering::SeqCst) < 1000 {
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

/// Not met: each round's random refusal cuts the pace to 70 % of a delivery that the last
/// cut lowered, so the pace collapses. 5 % of 429s: 46.0 s against 1.9 s for the retry
/// layer alone; 20 %: 319 of 1000 succeed, in 85.9 s (waits past the longest fail), against
/// 998 in 7.9 s. One client cannot tell such refusals from a limit shared with others,
/// where slowing down is the fair answer; rules that let a random share pass raised the
/// refusals of a lone client at a token bucket.
#[tokio::test(start_paused = true)]
#[ignore = "not met: random 429s collapse the pace, as a limit shared with others would"]
async fn random_429s_cost_no_more_than_the_retry_layer_alone() {
    for p in [0.05, 0.2] {
        let (alone, alone_took) = burst(false, p).await;
        let (paced, paced_took) = burst(true, p).await;
        assert!(paced >= alone, "{p}: {paced} succeeded, {alone} alone");
        let limit = alone_took.mul_f64(1.1);
        assert!(
            paced_took <= limit,
            "{p}: {paced_took:?}, alone {alone_took:?}"
        );
    }
}
