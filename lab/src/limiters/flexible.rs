//! rate-limiter-flexible's `RateLimiterMemory` behind `node:http`, from
//! `lab/fixtures/flexible-limiter` (`npm ci` there first; `.ci/run` does). It sends the
//! headers its README suggests; `LIMITERS_FLEXIBLE_HEADERS=none` leaves out the quota ones.

use super::{RateLimit, Running, Unavailable};
use std::net::SocketAddr;

pub async fn start(limit: RateLimit) -> Result<(SocketAddr, Running), Unavailable> {
    let headers = std::env::var("LIMITERS_FLEXIBLE_HEADERS").unwrap_or_else(|_| "readme".into());
    if !["readme", "none"].contains(&headers.as_str()) {
        return Err(Unavailable(format!(
            "LIMITERS_FLEXIBLE_HEADERS={headers}: not `readme` or `none`"
        )));
    }
    let window = super::Window::of(limit)?;
    let args = [
        window.quota.to_string(),
        window.seconds.to_string(),
        headers,
    ];
    super::node::start("flexible-limiter", "rate-limiter-flexible", &args).await
}
