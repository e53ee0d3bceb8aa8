//! Row 4: a limit that changes, 100 r/s, then 25, then 100 again. The limiter is the lab's
//! leaky bucket with a burst of 10, answering 429 with `Retry-After: 1`. 20 workers send
//! GETs back to back.
//!
//! The send rate counts attempts in the trailing 500 ms, sampled every 100 ms. It follows
//! a change once it is ≤ 1.2× a lower limit, or ≥ 0.8× a higher one. The figure is the
//! time from the change until the first such sample.

use super::{CONCURRENCY, Figures, Sizes, Unavailable, measure, unavailable};
use crate::attempts::AttemptLog;
use crate::clients::Lib;
use crate::load::timed_load;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tower_backoff_lab::limiters::leaky;
use tower_backoff_lab::matrix::{self, BURST, RATES};

pub const COLUMNS: &[(&str, usize)] = &[
    ("follows 100→25 s", 2),
    ("follows 25→100 s", 2),
    ("sent r/s, 2nd half of phase 1", 0),
    ("phase 2", 0),
    ("phase 3", 0),
];

pub fn title(sizes: &Sizes) -> String {
    format!(
        "Row 4, a limit that changes: {} r/s, then {}, then {}, {} s each (leaky bucket, burst {BURST}, 429 + Retry-After: 1); \
         {CONCURRENCY} workers, GETs back to back. Follows: from the change until the send rate \
         (attempts in the trailing 500 ms, every 100 ms) is ≤ 1.2× a lower limit or ≥ 0.8× a higher one",
        RATES[0],
        RATES[1],
        RATES[2],
        sizes.phase.as_secs_f64()
    )
}

pub async fn run(lib: Lib, sizes: &Sizes) -> Result<Figures, Unavailable> {
    let origin = Instant::now();
    let phase = sizes.phase;
    let rate: leaky::Rate = Arc::new(move |t: Duration| matrix::rate_at(t, phase));
    let limiter = leaky::serve(origin, rate, BURST)
        .await
        .map_err(|e| unavailable("changing limit", e))?;
    let url = format!("http://{}/", limiter.addr);
    let log = AttemptLog::new(origin);
    let client = lib.logged(log.clone());
    let done = timed_load(&client, &url, (phase * 3, CONCURRENCY), origin).await;
    let attempts = log.snapshot();
    let mut figures = measure::common(&done, &attempts);
    let sends: Vec<Duration> = attempts.iter().map(|a| a.at).collect();
    figures.specific = vec![
        matrix::follows(&sends, (phase, phase), RATES[0], RATES[1]),
        matrix::follows(&sends, (phase * 2, phase), RATES[1], RATES[2]),
    ];
    for k in 0..RATES.len() as u32 {
        let start = phase * k;
        let rate = matrix::send_rate(&sends, start + phase / 2, start + phase);
        figures.specific.push(rate);
    }
    Ok(figures)
}
