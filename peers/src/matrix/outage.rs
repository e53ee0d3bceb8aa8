//! Row 3: 503 (no `Retry-After`) to everything for 5 s, then 200; 20 workers send GETs
//! back to back for 10 s. `MATRIX_OUTAGE_ANSWER` answers the outage otherwise: `429`, or
//! `503:S` and `429:S` with `Retry-After: S` (seconds), signals pacing reads.
//!
//! Recovery: from the end of the outage until the first 100 ms in which the requests
//! completed reach 90 % of the steady rate. The steady rate is the mean per 100 ms over
//! the second half of the time after the outage.

use super::{CONCURRENCY, Figures, Sizes, Unavailable, measure, unavailable};
use crate::attempts::AttemptLog;
use crate::clients::Lib;
use crate::load::{Done, timed_load};
use crate::servers;
use http::StatusCode;
use std::time::{Duration, Instant};
use tower_backoff_lab::matrix;

pub const COLUMNS: &[(&str, usize)] = &[("recovery s", 2), ("steady completed/s", 0)];

pub fn title(sizes: &Sizes) -> String {
    let answer = match answer() {
        Ok((status, Some(seconds))) => format!("{} (Retry-After: {seconds})", status.as_u16()),
        Ok((status, None)) => format!("{} (no Retry-After)", status.as_u16()),
        Err(error) => error.0,
    };
    format!(
        "Row 3, outage: {answer} for {} s, then 200; {CONCURRENCY} workers, GETs back to back for {} s. \
         Recovery: from the outage's end until completions per 100 ms first reach 90 % of the steady rate \
         (mean per 100 ms over the second half after the outage)",
        sizes.outage.as_secs_f64(),
        sizes.outage_window.as_secs_f64()
    )
}

pub async fn run(lib: Lib, sizes: &Sizes) -> Result<Figures, Unavailable> {
    let origin = Instant::now();
    let (server, _) = servers::outage(origin, sizes.outage, answer()?)
        .await
        .map_err(|e| unavailable("outage", e))?;
    let url = format!("http://{}/", server.addr);
    let log = AttemptLog::new(origin);
    let client = lib.logged(log.clone());
    let done = timed_load(&client, &url, (sizes.outage_window, CONCURRENCY), origin).await;
    let mut figures = measure::common(&done, &log.snapshot());
    let (recovery, steady) = recovery(&done, sizes);
    figures.specific = vec![recovery, steady];
    Ok(figures)
}

/// The outage's answer: `MATRIX_OUTAGE_ANSWER`, 503 without `Retry-After` by default.
fn answer() -> Result<(StatusCode, Option<u64>), Unavailable> {
    let Ok(text) = std::env::var("MATRIX_OUTAGE_ANSWER") else {
        return Ok(servers::BARE_503);
    };
    let invalid = || {
        let expected = "429, 503, 429:S or 503:S (S: Retry-After seconds)";
        Unavailable(format!(
            "MATRIX_OUTAGE_ANSWER={text:?}: expected {expected}"
        ))
    };
    let (status, seconds) = match text.split_once(':') {
        Some((status, seconds)) => (status, Some(seconds.parse().map_err(|_| invalid())?)),
        None => (text.as_str(), None),
    };
    match status {
        "429" => Ok((StatusCode::TOO_MANY_REQUESTS, seconds)),
        "503" => Ok((StatusCode::SERVICE_UNAVAILABLE, seconds)),
        _ => Err(invalid()),
    }
}

/// Seconds from the outage's end until the rate was recovered (infinite: never), and the
/// steady rate per second.
fn recovery(done: &[Done], sizes: &Sizes) -> (f64, f64) {
    let ok_ends: Vec<Duration> = done.iter().filter(|d| d.ok()).map(|d| d.end).collect();
    matrix::recovery(&ok_ends, sizes)
}
