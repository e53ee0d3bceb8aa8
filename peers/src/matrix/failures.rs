//! Row 2: 20 % of answers 503 without `Retry-After`, 1000 GETs 20 at a time.

use super::{CONCURRENCY, Figures, Sizes, Unavailable, measure, unavailable};
use crate::attempts::AttemptLog;
use crate::clients::Lib;
use crate::load::fixed_load;
use crate::servers;
use http::Method;
use std::time::Instant;
use tower_backoff_lab::matrix::FAILURE_SHARE;

pub fn title(sizes: &Sizes) -> String {
    format!(
        "Row 2, random failures: {:.0} % of attempts 503 (seeded per run, no Retry-After); {} GETs, {CONCURRENCY} at a time",
        FAILURE_SHARE * 100.0,
        sizes.failure_requests
    )
}

pub async fn run(lib: Lib, sizes: &Sizes, run: u64) -> Result<Figures, Unavailable> {
    let (server, _) = servers::random_failures(FAILURE_SHARE, run)
        .await
        .map_err(|e| unavailable("random failures", e))?;
    let url = format!("http://{}/", server.addr);
    let origin = Instant::now();
    let log = AttemptLog::new(origin);
    let client = lib.logged(log.clone());
    let load = (sizes.failure_requests, CONCURRENCY);
    let done = fixed_load(&client, Method::GET, &url, load, origin).await;
    Ok(measure::common(&done, &log.snapshot()))
}
