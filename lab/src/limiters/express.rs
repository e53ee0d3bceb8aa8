//! express + express-rate-limit on the machine's Node, from
//! `lab/fixtures/express-limiter` (`npm ci` there first; `.ci/run` does), with the headers
//! of the IETF draft 8 or [others](Headers).

use super::{RateLimit, Running, Unavailable};
use std::net::SocketAddr;

/// The headers express-rate-limit writes, other than its default (draft 8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Headers {
    /// `RateLimit-Remaining` and `RateLimit-Reset` apart.
    Draft6,
    /// One `RateLimit` Dictionary: `limit=50, remaining=49, reset=1`.
    Draft7,
    /// `X-RateLimit-*` only, the reset in Unix seconds, rounded up.
    Legacy,
}

impl Headers {
    /// Its name in express-rate-limit's options.
    fn option(self) -> &'static str {
        match self {
            Headers::Draft6 => "draft-6",
            Headers::Draft7 => "draft-7",
            Headers::Legacy => "legacy",
        }
    }
}

pub async fn start(
    limit: RateLimit,
    headers: Option<Headers>,
) -> Result<(SocketAddr, Running), Unavailable> {
    let headers = headers.map_or("draft-8", Headers::option);
    let window = super::Window::of(limit)?;
    let args = [
        window.quota.to_string(),
        window.millis().to_string(),
        headers.into(),
    ];
    super::node::start("express-limiter", "express-rate-limit", &args).await
}
