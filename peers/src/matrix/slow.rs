//! Row 6: a slow healthy server (answers after 1 to 2 s) and long-polls to it. One client
//! sends 100 GETs 20 at a time, and 10 long-polls of 10 s at once beside them.

use super::{CONCURRENCY, Figures, Sizes, Unavailable, measure, unavailable};
use crate::attempts::AttemptLog;
use crate::clients::{Failure, Lib};
use crate::load::fixed_load;
use crate::servers;
use http::Method;
use std::time::{Duration, Instant};

/// How long the slow path takes to answer.
const SLOW: std::ops::Range<Duration> = Duration::from_secs(1)..Duration::from_secs(2);

pub const COLUMNS: &[(&str, usize)] = &[("failed", 0), ("PacingErrors", 0), ("slow p99 s", 2)];

pub fn title(sizes: &Sizes) -> String {
    format!(
        "Row 6, slow healthy server: {} GETs answered after 1–2 s, {CONCURRENCY} at a time, and {} long-polls \
         answered after {} s, all at once; failed: no 200 (PacingErrors among them)",
        sizes.slow_requests,
        sizes.long_polls,
        sizes.long_poll.as_secs_f64()
    )
}

pub async fn run(lib: Lib, sizes: &Sizes, run: u64) -> Result<Figures, Unavailable> {
    let (server, _) = servers::slow(SLOW, sizes.long_poll, run)
        .await
        .map_err(|e| unavailable("slow server", e))?;
    let origin = Instant::now();
    let log = AttemptLog::new(origin);
    let client = lib.logged(log.clone());
    let slow_url = format!("http://{}/slow", server.addr);
    let poll_url = format!("http://{}/poll", server.addr);
    let (slow, polls) = tokio::join!(
        fixed_load(
            &client,
            Method::GET,
            &slow_url,
            (sizes.slow_requests, CONCURRENCY),
            origin
        ),
        fixed_load(
            &client,
            Method::GET,
            &poll_url,
            (sizes.long_polls, sizes.long_polls),
            origin
        ),
    );
    let latencies: Vec<f64> = slow.iter().map(|d| d.latency().as_secs_f64()).collect();
    let done: Vec<_> = slow.into_iter().chain(polls).collect();
    let mut figures = measure::common(&done, &log.snapshot());
    figures.specific = vec![
        done.iter().filter(|d| !d.ok()).count() as f64,
        done.iter()
            .filter(|d| d.result == Err(Failure::Pacing))
            .count() as f64,
        measure::percentile(&latencies, 0.99),
    ];
    Ok(figures)
}
