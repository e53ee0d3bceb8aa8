//! An outage that pacing reads as refusals (429, or 503 with `Retry-After`): while it
//! lasts, only probes reach the server; once it answers again, the client is back to its
//! full rate within 1 s, as #29 asks.

mod support;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::upstream;
use tokio::time::Instant;
use tower::{ServiceBuilder, ServiceExt};
use tower_backoff::{ExponentialBackOff, PacingLayer, RetryLayer};

const OUTAGE: Duration = Duration::from_secs(5);
const RUN: Duration = Duration::from_secs(8);
const BUCKET: Duration = Duration::from_millis(100);
/// Each worker's pause between requests: the full rate is 2,000 r/s.
const THINK: Duration = Duration::from_millis(10);

/// 20 workers send GETs, 10 ms apart, for 8 s through the quick start's stack to a real
/// server on loopback answering `status` (and `retry_after`) for 5 s, then 200: the
/// attempts during the outage, and the successes per 100 ms after it.
async fn outage(
    status: u16,
    retry_after: Option<(&'static str, &'static str)>,
) -> (usize, Vec<usize>) {
    let start = Instant::now();
    let (addr, arrivals) = upstream::serve(move |_, _| match start.elapsed() < OUTAGE {
        true => upstream::reply(status, retry_after.as_slice(), ""),
        false => upstream::reply(200, &[], ""),
    })
    .await;
    let http = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let client = ServiceBuilder::new()
        .layer(RetryLayer::new(ExponentialBackOff::default()))
        .layer(PacingLayer::new())
        .service(http);
    let url = format!("http://{addr}/");
    let (stop, done) = (Arc::new(AtomicBool::new(false)), Arc::default());
    let workers: Vec<_> = (0..20)
        .map(|_| {
            let (client, url) = (client.clone(), url.clone());
            let (stop, done): (_, Arc<Mutex<Vec<Duration>>>) = (stop.clone(), Arc::clone(&done));
            tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    let request = Request::get(&url).body(Empty::new()).unwrap();
                    let res = client.clone().oneshot(request).await;
                    if res.is_ok_and(|res| res.status() == StatusCode::OK) {
                        done.lock().unwrap().push(start.elapsed());
                    }
                    tokio::time::sleep(THINK).await;
                }
            })
        })
        .collect();
    tokio::time::sleep(RUN).await;
    stop.store(true, Ordering::SeqCst);
    for worker in workers {
        worker.abort();
    }
    let arrivals = arrivals.lock().unwrap();
    let during = arrivals
        .iter()
        .filter(|arrival| arrival.at - start < OUTAGE);
    let during = during.count();
    let mut buckets = vec![0; ((RUN - OUTAGE).as_millis() / BUCKET.as_millis()) as usize];
    for at in done.lock().unwrap().iter().filter(|at| **at >= OUTAGE) {
        let bucket = ((*at - OUTAGE).as_millis() / BUCKET.as_millis()) as usize;
        if let Some(count) = buckets.get_mut(bucket) {
            *count += 1;
        }
    }
    (during, buckets)
}

#[tokio::test(start_paused = true)]
async fn after_an_outage_of_refusals_the_full_rate_is_back_within_a_second() {
    let asked = Some(("retry-after", "1"));
    for (status, retry_after) in [(429, asked), (429, None), (503, asked)] {
        let (during, buckets) = outage(status, retry_after).await;
        let case = format!("{status}, Retry-After {retry_after:?}");
        // Probes only: the slow start's first window, then two a second at most.
        assert!(
            during <= 5 + 2 * 5,
            "{case}: {during} attempts during the outage"
        );
        // The last second's mean is the full rate; 90 % of it within 1 s of the end.
        let full = buckets[buckets.len() - 10..].iter().sum::<usize>() / 10;
        let back = buckets.iter().position(|&n| n * 10 >= full * 9).unwrap();
        assert!(full > 0 && back < 10, "{case}: {buckets:?}");
    }
}
