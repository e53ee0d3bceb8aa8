//! fastify + @fastify/rate-limit on the machine's Node, from `lab/fixtures/fastify-limiter`
//! (`npm ci` there first; `.ci/run` does): a window opened by its first hit, the reset in
//! whole seconds to its end, rounded up.

use super::{RateLimit, Running, Unavailable};
use std::net::SocketAddr;

pub async fn start(limit: RateLimit) -> Result<(SocketAddr, Running), Unavailable> {
    let window = super::Window::of(limit)?;
    let args = [window.quota.to_string(), window.millis().to_string()];
    super::node::start("fastify-limiter", "@fastify/rate-limit", &args).await
}
