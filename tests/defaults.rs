//! The layer's defaults (`RetryLayer::new(ExponentialBackOff::default())`) on the
//! scenarios users meet first, on virtual time with a seeded server: scattered failures
//! are retried through, an outage is not multiplied, and recovery is immediate.

use http::{Request, Response};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tower::{Layer, ServiceExt};
use tower_backoff::{ExponentialBackOff, RetryLayer};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A server that answers in 1 ms, as on loopback, 503 when `fails` says so.
fn server(
    fails: impl Fn(Instant) -> bool + Clone + Send + 'static,
    log: Arc<Mutex<Vec<Instant>>>,
) -> impl tower::Service<Request<String>, Response = Response<String>, Error = BoxError, Future: Send>
+ Clone
+ Send
+ 'static {
    tower::service_fn(move |_: Request<String>| {
        let (fails, log) = (fails.clone(), log.clone());
        async move {
            tokio::time::sleep(Duration::from_millis(1)).await;
            let now = Instant::now();
            log.lock().unwrap().push(now);
            let status = if fails(now) { 503 } else { 200 };
            Ok::<_, BoxError>(Response::builder().status(status).body(String::new())?)
        }
    })
}

/// Sends requests from 20 workers, one after the other each, until `total` were sent or
/// `until` passed; each request's start and whether it succeeded.
async fn workers<S>(client: S, total: usize, until: Duration) -> Vec<(Instant, bool)>
where
    S: tower::Service<Request<String>, Response = Response<String>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Send,
{
    let start = Instant::now();
    let sent = Arc::new(Mutex::new(0));
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let (client, sent) = (client.clone(), sent.clone());
            tokio::spawn(async move {
                let mut outcomes = Vec::new();
                loop {
                    {
                        let mut sent = sent.lock().unwrap();
                        if *sent >= total || start.elapsed() >= until {
                            return outcomes;
                        }
                        *sent += 1;
                    }
                    let at = Instant::now();
                    let request = Request::get("http://api.test/")
                        .body(String::new())
                        .unwrap();
                    let ok =
                        matches!(client.clone().oneshot(request).await, Ok(r) if r.status() == 200);
                    outcomes.push((at, ok));
                }
            })
        })
        .collect();
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    all
}

/// 20 % of answers are 503 at random: at least 99.5 % of 1000 requests succeed (with 3
/// attempts, 0.8 % would fail all three; the default is 4).
#[tokio::test(start_paused = true)]
async fn scattered_503s_are_retried_through() {
    let rng = Arc::new(Mutex::new(StdRng::seed_from_u64(7)));
    let fails = move |_| rng.lock().unwrap().random_bool(0.2);
    let log = Arc::default();
    let client = RetryLayer::new(ExponentialBackOff::default()).layer(server(fails, log));
    let outcomes = workers(client, 1000, Duration::from_secs(3600)).await;
    let succeeded = outcomes.iter().filter(|(_, ok)| *ok).count();
    println!("scattered 503s: {succeeded} of 1000 succeeded");
    assert!(succeeded >= 995, "{succeeded} of 1000 succeeded");
}

/// A 5 s outage (503 to everything, then 200) under 20 workers for 10 s: the requests
/// started during it cost at most 1.15 attempts each, and the first request after it
/// succeeds within 0.7 s of its end.
#[tokio::test(start_paused = true)]
async fn an_outage_is_not_multiplied_and_recovery_is_at_once() {
    let start = Instant::now();
    let (from, to) = (
        start + Duration::from_secs(2),
        start + Duration::from_secs(7),
    );
    let fails = move |now: Instant| now >= from && now < to;
    let log: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let client = RetryLayer::new(ExponentialBackOff::default()).layer(server(fails, log.clone()));
    let outcomes = workers(client, usize::MAX, Duration::from_secs(10)).await;
    let during = outcomes
        .iter()
        .filter(|(at, _)| *at >= from && *at < to)
        .count();
    let attempts = log
        .lock()
        .unwrap()
        .iter()
        .filter(|at| **at >= from && **at < to)
        .count();
    let amplification = attempts as f64 / during as f64;
    let recovered = outcomes
        .iter()
        .filter(|(at, ok)| *ok && *at >= to - Duration::from_millis(1))
        .map(|(at, _)| *at)
        .min()
        .unwrap();
    let recovery = recovered.saturating_duration_since(to);
    println!(
        "outage: {during} requests, {attempts} attempts ({amplification:.3}x), recovery {recovery:?}"
    );
    assert!(
        amplification <= 1.15,
        "{amplification:.3} attempts per request"
    );
    assert!(recovery <= Duration::from_millis(700), "{recovery:?}");
}
