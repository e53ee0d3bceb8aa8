//! fastify + @fastify/rate-limit on the machine's Node, from `lab/fixtures/fastify-limiter`
//! (`npm ci` there first; `.ci/run` does): a window opened by its first hit, the reset in
//! whole seconds to its end, rounded up.

use super::{RateLimit, Running, Unavailable};
use std::net::SocketAddr;

pub async fn start(limit: RateLimit) -> Result<(SocketAddr, Running), Unavailable> {
    let window = super::window_seconds()?;
    let quota = limit.per_second.saturating_mul(window);
    let args = [quota.to_string(), (window * 1000).to_string()];
    super::node::start("fastify-limiter", "@fastify/rate-limit", &args).await
}
