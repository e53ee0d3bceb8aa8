//! Workloads: requests sent by a number of workers, each timed and recorded.

use crate::clients::{Client, Failure};
use http::{Method, StatusCode};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Longest any one request may take before it is counted as failed.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// One request as the client saw it: its start and end (from the scenario's origin). Also
/// its final status, or why it has none.
pub struct Done {
    pub id: u64,
    pub start: Duration,
    pub end: Duration,
    pub result: Result<StatusCode, Failure>,
}

impl Done {
    pub fn ok(&self) -> bool {
        self.result == Ok(StatusCode::OK)
    }

    /// The final status (`None`: an error or a timeout).
    pub fn status(&self) -> Option<StatusCode> {
        self.result.ok()
    }

    /// How long the request took, retries and waits included.
    pub fn latency(&self) -> Duration {
        self.end.saturating_sub(self.start)
    }
}

/// Sends one request, bounded by `REQUEST_TIMEOUT`, and records it.
pub async fn timed(client: Client, method: Method, url: String, id: u64, origin: Instant) -> Done {
    let start = origin.elapsed();
    let result = tokio::time::timeout(REQUEST_TIMEOUT, client.outcome(method, url, id))
        .await
        .unwrap_or(Err(Failure::Other));
    Done {
        id,
        start,
        end: origin.elapsed(),
        result,
    }
}

/// `n` requests, `concurrency` at a time, ids `0..n`.
pub async fn fixed_load(
    client: &Client,
    method: Method,
    url: &str,
    (n, concurrency): (u64, u64),
    origin: Instant,
) -> Vec<Done> {
    let next = Arc::new(AtomicU64::new(0));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (client, method, url, next) =
            (client.clone(), method.clone(), url.to_owned(), next.clone());
        workers.spawn(async move {
            let mut done = Vec::new();
            loop {
                let id = next.fetch_add(1, Ordering::Relaxed);
                if id >= n {
                    return done;
                }
                done.push(timed(client.clone(), method.clone(), url.clone(), id, origin).await);
            }
        });
    }
    workers.join_all().await.into_iter().flatten().collect()
}

/// `concurrency` workers sending GETs back to back until `window` has passed since
/// `origin`; requests in flight then are awaited (each bounded by `REQUEST_TIMEOUT`).
pub async fn timed_load(
    client: &Client,
    url: &str,
    (window, concurrency): (Duration, u64),
    origin: Instant,
) -> Vec<Done> {
    let next = Arc::new(AtomicU64::new(0));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (client, url, next) = (client.clone(), url.to_owned(), next.clone());
        workers.spawn(async move {
            let mut done = Vec::new();
            while origin.elapsed() < window {
                let id = next.fetch_add(1, Ordering::Relaxed);
                done.push(timed(client.clone(), Method::GET, url.clone(), id, origin).await);
            }
            done
        });
    }
    workers.join_all().await.into_iter().flatten().collect()
}

/// `concurrency` workers each sending one GET every `period` (not sooner than the last
/// one's end) until `window` has passed since `origin`.
pub async fn paced_load(
    client: &Client,
    url: &str,
    (window, concurrency, period): (Duration, u64, Duration),
    origin: Instant,
) -> Vec<Done> {
    let next = Arc::new(AtomicU64::new(0));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (client, url, next) = (client.clone(), url.to_owned(), next.clone());
        workers.spawn(async move {
            let mut done = Vec::new();
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            while origin.elapsed() < window {
                tick.tick().await;
                let id = next.fetch_add(1, Ordering::Relaxed);
                done.push(timed(client.clone(), Method::GET, url.clone(), id, origin).await);
            }
            done
        });
    }
    workers.join_all().await.into_iter().flatten().collect()
}
