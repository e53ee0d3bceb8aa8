//! Row 5: two destinations through one client, one healthy, the other limited or down.
//!
//! The healthy load: 10 workers, one GET every 50 ms each (200 r/s). Alone, then with 20
//! workers sending GETs back to back to the other destination (cut at the window's end).
//! The figure is the growth of the healthy requests' p99 latency.

use super::{CONCURRENCY, Figures, Sizes, Unavailable, measure, unavailable};
use crate::attempts::AttemptLog;
use crate::clients::Lib;
use crate::load::{Done, paced_load, timed_load};
use crate::servers::{self, Server};
use std::time::{Duration, Instant};
use tower_backoff_lab::limiters::leaky;

/// The healthy load's workers and their period.
const HEALTHY_WORKERS: u64 = 10;
const PERIOD: Duration = Duration::from_millis(50);
/// The limited destination's rate and burst.
const RATE: f64 = 50.0;
const BURST: f64 = 10.0;

pub const COLUMNS: &[(&str, usize)] = &[
    ("healthy p99 alone ms", 2),
    ("healthy p99 with the other ms", 2),
    ("p99 growth ms", 2),
    ("healthy failed", 0),
];

/// The other destination's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Other {
    /// The lab's leaky bucket of 50 r/s, burst 10, 429 with `Retry-After: 1`.
    Limited,
    /// 503 without `Retry-After` to everything.
    Down,
}

impl Other {
    pub const ALL: [Other; 2] = [Other::Limited, Other::Down];

    fn describe(self) -> String {
        match self {
            Other::Limited => {
                format!("limited ({RATE} r/s leaky bucket, burst {BURST}, 429 + Retry-After: 1)")
            }
            Other::Down => "down (503 to everything, no Retry-After)".into(),
        }
    }

    async fn start(self) -> Result<Server, Unavailable> {
        let started = match self {
            Other::Limited => leaky::serve(Instant::now(), leaky::steady(RATE), BURST)
                .await
                .map(Server::from),
            Other::Down => servers::outage(Instant::now(), Duration::MAX, servers::BARE_503)
                .await
                .map(|(server, _)| server),
        };
        started.map_err(|e| unavailable("other destination", e))
    }
}

pub fn title(other: Other, sizes: &Sizes) -> String {
    format!(
        "Row 5, two destinations, the other {}: healthy load {HEALTHY_WORKERS} workers × 1 GET / {} ms for {} s, \
         alone then with {CONCURRENCY} workers back to back to the other (one client for both). \
         Completed: 200s at both; time: the healthy load's",
        other.describe(),
        PERIOD.as_millis(),
        sizes.destination_window.as_secs_f64()
    )
}

pub async fn run(other: Other, lib: Lib, sizes: &Sizes) -> Result<Figures, Unavailable> {
    let window = sizes.destination_window;
    let alone = healthy_load(lib, None, window).await?;
    let other_server = other.start().await?;
    let with = healthy_load(lib, Some(&other_server), window).await?;
    let (p99_alone, p99_with) = (p99_ms(&alone.0), p99_ms(&with.0));
    let mut figures = with.1;
    figures.specific = vec![
        p99_alone,
        p99_with,
        p99_with - p99_alone,
        with.0.iter().filter(|d| !d.ok()).count() as f64,
    ];
    Ok(figures)
}

/// The healthy load through a fresh client of `lib`, with the other load if `other`.
/// Returns the healthy requests, and the figures of both (requests: 0, not known).
async fn healthy_load(
    lib: Lib,
    other: Option<&Server>,
    window: Duration,
) -> Result<(Vec<Done>, Figures), Unavailable> {
    let (healthy, _) = servers::healthy()
        .await
        .map_err(|e| unavailable("healthy destination", e))?;
    let url = format!("http://{}/", healthy.addr);
    let origin = Instant::now();
    let log = AttemptLog::new(origin);
    let client = lib.logged(log.clone());
    let healthy_done = paced_load(&client, &url, (window, HEALTHY_WORKERS, PERIOD), origin);
    let done = match other {
        None => healthy_done.await,
        Some(server) => {
            let other_url = format!("http://{}/", server.addr);
            let other_done = timed_load(&client, &other_url, (window, CONCURRENCY), origin);
            // Cut at the window's end: dropping the load aborts its workers.
            let other_cut = tokio::time::timeout(window, other_done);
            tokio::join!(healthy_done, other_cut).0
        }
    };
    let attempts = log.snapshot();
    let mut figures = measure::common(&done, &attempts);
    let port = other.map(|s| s.addr.port());
    let other_completed = attempts
        .iter()
        .filter(|a| Some(a.port) == port && a.status == 200)
        .count();
    figures.completed += other_completed as u64;
    figures.requests = 0;
    Ok((done, figures))
}

fn p99_ms(done: &[Done]) -> f64 {
    let latencies: Vec<f64> = done
        .iter()
        .map(|d| d.latency().as_secs_f64() * 1e3)
        .collect();
    measure::percentile(&latencies, 0.99)
}
