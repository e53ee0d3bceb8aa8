//! express + express-rate-limit on the machine's Node, from
//! `lab/fixtures/express-limiter` (`npm ci` there first; `.ci/run` does). Its IETF draft-8
//! headers, or those `LIMITERS_EXPRESS_HEADERS` names: `draft-6`, `draft-7`, or `legacy`
//! (`X-RateLimit-*` only, the reset in Unix seconds, rounded up).

use super::{RateLimit, Running, Unavailable};
use std::net::SocketAddr;

pub async fn start(limit: RateLimit) -> Result<(SocketAddr, Running), Unavailable> {
    let headers = std::env::var("LIMITERS_EXPRESS_HEADERS").unwrap_or_else(|_| "draft-8".into());
    let args = [limit.per_second.to_string(), "1000".into(), headers];
    super::node::start("express-limiter", "express-rate-limit", &args).await
}
