//! express + express-rate-limit on the machine's Node, from
//! `lab/fixtures/express-limiter` (`npm ci` there first; `.ci/run` does).

use super::{RateLimit, Running, Unavailable};
use std::net::SocketAddr;

pub async fn start(limit: RateLimit) -> Result<(SocketAddr, Running), Unavailable> {
    let args = [
        limit.per_second.to_string(),
        "1000".into(),
        "draft-8".into(),
    ];
    super::node::start("express-limiter", "express-rate-limit", &args).await
}
