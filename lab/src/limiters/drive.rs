//! Workloads (a closed-loop burst, an open-loop stream) and their figures.

use super::client::{HttpClient, Req};
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::time::Instant;
use tower::ServiceExt;

/// How one request ended, as its caller saw it.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The final status, or `None` for an error (transport, or turned away by pacing).
    pub status: Option<StatusCode>,
    /// The error's text, if any.
    pub error: Option<String>,
    /// From the call to the end of the response body.
    pub latency: Duration,
    /// When the request ended, from the start of the workload.
    pub ended: Duration,
}

impl Outcome {
    pub fn ok(&self) -> bool {
        self.status == Some(StatusCode::OK)
    }
}

fn get(url: &str) -> Req {
    Request::get(url)
        .body(Full::<Bytes>::default())
        .expect("a valid URL")
}

/// Sends one GET and reads its body.
pub async fn call(client: HttpClient, url: &str, start: Instant) -> Outcome {
    let began = Instant::now();
    let (status, error) = match client.oneshot(get(url)).await {
        Ok(res) => {
            let status = res.status();
            match res.into_body().collect().await {
                Ok(_) => (Some(status), None),
                Err(e) => (None, Some(format!("body: {e}"))),
            }
        }
        Err(e) => (None, Some(e.to_string())),
    };
    Outcome {
        status,
        error,
        latency: began.elapsed(),
        ended: start.elapsed(),
    }
}

/// `n` GETs of `url`, at most `concurrency` at a time (each worker sends its next request
/// when the previous one has ended), each bounded by `timeout`.
pub async fn burst(
    client: HttpClient,
    url: &str,
    n: usize,
    concurrency: usize,
    timeout: Duration,
) -> Vec<Outcome> {
    let start = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (client, url, next) = (client.clone(), url.to_owned(), next.clone());
            tokio::spawn(async move {
                let mut outcomes = Vec::new();
                while next.fetch_add(1, Ordering::Relaxed) < n {
                    outcomes.push(bounded(client.clone(), &url, start, timeout).await);
                }
                outcomes
            })
        })
        .collect();
    let mut all = Vec::with_capacity(n);
    for w in workers {
        all.extend(w.await.expect("worker"));
    }
    all
}

/// GETs of `url` sent every `every` (open loop: a slow answer does not delay the next
/// request) until `n` are sent, each bounded by `timeout`.
pub async fn stream(
    client: HttpClient,
    url: &str,
    n: usize,
    every: Duration,
    timeout: Duration,
) -> Vec<Outcome> {
    let start = Instant::now();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut tasks = Vec::with_capacity(n);
    for _ in 0..n {
        tick.tick().await;
        let (client, url) = (client.clone(), url.to_owned());
        tasks.push(tokio::spawn(async move {
            bounded(client, &url, start, timeout).await
        }));
    }
    let mut all = Vec::with_capacity(n);
    for t in tasks {
        all.push(t.await.expect("request task"));
    }
    all
}

/// Closed-loop workers sending GETs of `url` back to back until `duration` has passed
/// (a request under way then is still waited for).
pub async fn saturate(
    client: HttpClient,
    url: &str,
    concurrency: usize,
    duration: Duration,
    timeout: Duration,
) -> Vec<Outcome> {
    let start = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (client, url) = (client.clone(), url.to_owned());
            tokio::spawn(async move {
                let mut outcomes = Vec::new();
                while start.elapsed() < duration {
                    outcomes.push(bounded(client.clone(), &url, start, timeout).await);
                }
                outcomes
            })
        })
        .collect();
    let mut all = Vec::new();
    for w in workers {
        all.extend(w.await.expect("worker"));
    }
    all
}

/// [`saturate`] from `phase` on, for what is left of `time` then (a fleet's client that
/// waits a phase of its pace first); also returns that time.
pub async fn saturate_after(
    phase: Duration,
    client: HttpClient,
    url: &str,
    concurrency: usize,
    time: Duration,
    timeout: Duration,
) -> (Vec<Outcome>, Duration) {
    tokio::time::sleep(phase).await;
    let time = time.saturating_sub(phase);
    (
        saturate(client, url, concurrency, time, timeout).await,
        time,
    )
}

/// How many of `outcomes` succeeded within `time` of the start. A request still under way
/// at the end may succeed later (a paced client's queue drains after it): only what
/// succeeded within the time counts against a limiter's capacity in that time.
pub fn succeeded_within(outcomes: &[Outcome], time: Duration) -> usize {
    outcomes
        .iter()
        .filter(|o| o.ok() && o.ended <= time)
        .count()
}

async fn bounded(client: HttpClient, url: &str, start: Instant, timeout: Duration) -> Outcome {
    let began = Instant::now();
    match tokio::time::timeout(timeout, call(client, url, start)).await {
        Ok(outcome) => outcome,
        Err(_) => Outcome {
            status: None,
            error: Some(format!("timed out after {timeout:?}")),
            latency: began.elapsed(),
            ended: start.elapsed(),
        },
    }
}

/// The figures of a set of outcomes.
#[derive(Clone, Debug)]
pub struct Summary {
    pub requests: usize,
    pub ok: usize,
    /// When the last request ended.
    pub elapsed: Duration,
    pub p50: Duration,
    pub p99: Duration,
    /// The distinct failures and how often each happened.
    pub failures: Vec<(String, usize)>,
}

impl Summary {
    pub fn of(outcomes: &[Outcome]) -> Summary {
        let mut latencies: Vec<Duration> = outcomes.iter().map(|o| o.latency).collect();
        latencies.sort();
        let mut failures: Vec<(String, usize)> = Vec::new();
        for o in outcomes.iter().filter(|o| !o.ok()) {
            let what = match (&o.status, &o.error) {
                (Some(s), _) => s.to_string(),
                (None, Some(e)) => e.clone(),
                (None, None) => "?".into(),
            };
            match failures.iter_mut().find(|(w, _)| *w == what) {
                Some((_, n)) => *n += 1,
                None => failures.push((what, 1)),
            }
        }
        Summary {
            requests: outcomes.len(),
            ok: outcomes.iter().filter(|o| o.ok()).count(),
            elapsed: outcomes.iter().map(|o| o.ended).max().unwrap_or_default(),
            p50: percentile(&latencies, 50.0),
            p99: percentile(&latencies, 99.0),
            failures,
        }
    }
}

/// The `p`-th percentile of sorted values (nearest rank).
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub use super::fairness::jain;
