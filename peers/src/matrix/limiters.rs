//! Row 1: real rate limiters of four algorithms at 50 r/s, 300 GETs 20 at a time: the
//! lab's (tower_governor, express-rate-limit on Node, HAProxy, its own leaky bucket with a
//! burst of 10), nginx's `limit_req` (a leaky bucket nothing here was tuned on), and
//! rate-limiter-flexible, a fixed window reporting its reset in whole Unix seconds.

use super::{CONCURRENCY, Figures, Sizes, Unavailable, measure};
use crate::attempts::AttemptLog;
use crate::clients::Lib;
use crate::load::fixed_load;
use http::Method;
use std::time::Instant;
use tower_backoff_lab::limiters::{Kind, Limiter, RateLimit};

/// The limit of every limiter: 50 r/s (bursts of 10 where the algorithm has them).
pub const LIMIT: RateLimit = RateLimit::TARGET;

pub const COLUMNS: &[(&str, usize)] = &[("× ideal", 2)];

/// A limiter's algorithm, and which server implements it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Algorithm {
    Gcra,
    FixedWindow,
    SlidingWindow,
    LeakyBucket,
    Nginx,
    Flexible,
}

impl Algorithm {
    pub const ALL: [Algorithm; 6] = [
        Algorithm::Gcra,
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow,
        Algorithm::LeakyBucket,
        Algorithm::Nginx,
        Algorithm::Flexible,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Gcra => {
                "token bucket / GCRA: tower_governor, burst 10, Retry-After rounded down"
            }
            Algorithm::FixedWindow => {
                "fixed 1 s window: express-rate-limit (Node), Retry-After rounded up"
            }
            Algorithm::SlidingWindow => {
                "sliding 1 s window counting refusals: HAProxy, Retry-After: 1"
            }
            Algorithm::LeakyBucket => "leaky bucket, burst 10: the lab's server, Retry-After: 1",
            Algorithm::Nginx => "leaky bucket, burst 10: nginx limit_req (nodelay), Retry-After: 1",
            Algorithm::Flexible => {
                "fixed 1 s window from the first hit: rate-limiter-flexible (Node), X-RateLimit-Reset in Unix seconds"
            }
        }
    }

    /// Starts the limiter: its URL, and what keeps it running until dropped.
    async fn start(self) -> Result<(String, Box<dyn Send>), Unavailable> {
        let kind = match self {
            Algorithm::Gcra => Kind::Governor,
            Algorithm::FixedWindow => Kind::Express,
            Algorithm::SlidingWindow => Kind::Haproxy,
            Algorithm::LeakyBucket => Kind::LeakyBucket,
            Algorithm::Nginx => Kind::Nginx,
            Algorithm::Flexible => Kind::Flexible,
        };
        let limiter = Limiter::start(kind, LIMIT).await?;
        Ok((limiter.url("/"), Box::new(limiter)))
    }
}

pub fn title(algorithm: Algorithm, sizes: &Sizes) -> String {
    format!(
        "Row 1, {}: {} GETs, {CONCURRENCY} at a time, limit {} r/s (ideal {:.1} s)",
        algorithm.name(),
        sizes.limiter_requests,
        LIMIT.per_second,
        ideal(sizes)
    )
}

/// The time the limit allows the load: requests / rate.
fn ideal(sizes: &Sizes) -> f64 {
    sizes.limiter_requests as f64 / f64::from(LIMIT.per_second)
}

/// `lib` against a fresh limiter of `algorithm`.
pub async fn run(algorithm: Algorithm, lib: Lib, sizes: &Sizes) -> Result<Figures, Unavailable> {
    let (url, _running) = algorithm.start().await?;
    let origin = Instant::now();
    let log = AttemptLog::new(origin);
    let client = lib.logged(log.clone());
    let load = (sizes.limiter_requests, CONCURRENCY);
    let done = fixed_load(&client, Method::GET, &url, load, origin).await;
    let mut figures = measure::common(&done, &log.snapshot());
    figures.specific = vec![figures.time / ideal(sizes)];
    Ok(figures)
}
