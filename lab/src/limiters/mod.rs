//! Real rate limiters, started on 127.0.0.1 for the harness of
//! `lab/tests/rate_limiters.rs`, `lab/src/bin/limiters.rs` and the peers' matrix, and the
//! clients and workloads that drive them through the crate's public API only. All but the
//! leaky bucket are servers nobody here wrote.
//!
//! | limiter | what it is | refusal |
//! |---|---|---|
//! | [`Kind::Governor`]: tower_governor (axum, in process) | GCRA, i.e. a token bucket: one token per `1/rate`, at most `burst` saved | 429, `Retry-After` and `x-ratelimit-after` in whole seconds *rounded down* (so `0` below a second) |
//! | [`Kind::Express`]: express + express-rate-limit (Node) | a fixed window: the first hit opens a window of one second in which `rate` hits pass | 429, `Retry-After` in seconds to the window's end, rounded up (`1`), IETF `RateLimit`/`RateLimit-Policy` (draft 8) |
//! | [`Kind::Haproxy`]: HAProxy stick table | a sliding one-second window (`http_req_rate(1s)`) counting *every* request, refused ones too | 429 with `Retry-After: 1` |
//! | [`Kind::LeakyBucket`]: a leaky bucket with a burst (hyper, in process, [`leaky`]) | requests drain out at `rate`, at most `burst` held; a refused request takes no place (as in GCRA) | 429 with `Retry-After: 1` (though room comes back within `1/rate`), nothing of its count |
//! | [`Kind::HaproxyRateLimit`] (an experiment, no target's): the same HAProxy | the same | the same, and every answer carries `RateLimit: "50-in-1sec"; r=<50 − its count>; t=1`, as a naive configuration writes it |
//! | [`Kind::Nginx`] (no target's; nothing was tuned on it): nginx `limit_req` | a leaky bucket drained per millisecond, `burst` more at once, `nodelay`; refusals not counted | 429 with `Retry-After: 1` |
//! | [`Kind::ExpressWith`] (no target's; nothing was tuned on them): the same express | the same | the same, with draft 6's, draft 7's or the legacy `X-RateLimit-*` headers (the reset in Unix seconds) |
//! | [`Kind::Fastify`] (no target's; nothing was tuned on it): fastify + @fastify/rate-limit (Node) | a window of one second, opened by the first hit after the last window | 429 with `Retry-After`, and on every answer `x-ratelimit-remaining` and `x-ratelimit-reset`, whole seconds to the window's end, rounded up |
//! | [`Kind::Flask`] (no target's; nothing was tuned on it): Flask-Limiter (Python) | a log of the last window's passed requests, or a window that every request extends, refused ones too | a bare 429 (`LIMITERS_FLASK_HEADERS=on`: `X-RateLimit-*`, `Retry-After` rounded down) |
//! | [`Kind::Flexible`] (no target's; its Unix-time reset led to the bisection of such resets): rate-limiter-flexible (Node) | a fixed window of one second, opened by the first hit after the last window | 429 with `Retry-After` in fractions of a second (invalid), `X-RateLimit-Remaining` and `X-RateLimit-Reset` (Unix seconds, rounded up) on every answer |
//!
//! Every limiter has one key for all clients (all come from 127.0.0.1 anyway): a fleet of
//! clients shares one limit, as the clients of one API key do. A fleet's stacks may share
//! their pacing in a real `redis-server` ([`redis_server`], issue #31).

#![allow(dead_code)]

pub mod backend;
pub mod client;
pub mod drive;
pub mod express;
#[path = "../../../tests/support/fairness.rs"]
pub mod fairness;
pub mod fastify;
pub mod flask;
pub mod flexible;
pub mod governor;
pub mod haproxy;
pub mod leaky;
pub mod nginx;
pub mod node;
pub mod process;
pub mod redis_server;
pub mod told;

use std::fmt;
use std::net::SocketAddr;

/// A limit: `per_second` requests per second, `burst` of them at once (the token bucket's
/// size; the window limiters have no separate burst and let `per_second` pass at once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit {
    pub per_second: u32,
    pub burst: u32,
}

impl RateLimit {
    /// The limit of the harness's targets: 50 r/s, bursts of 10.
    pub const TARGET: Self = Self::new(50, 10);

    pub const fn new(per_second: u32, burst: u32) -> Self {
        Self { per_second, burst }
    }
}

/// The window of the window limiters (express, fastify, HAProxy, rate-limiter-flexible):
/// `LIMITERS_WINDOW` seconds if set, else 1. Each lets `per_second` times it pass in one
/// window: the same average rate, in longer bursts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// The requests one window lets pass.
    pub quota: u32,
    /// Its length.
    pub seconds: u32,
}

impl Window {
    /// `limit` over `LIMITERS_WINDOW` seconds, or over one.
    pub fn of(limit: RateLimit) -> Result<Self, Unavailable> {
        let seconds = match std::env::var("LIMITERS_WINDOW") {
            Err(_) => 1,
            Ok(text) => text.parse().ok().filter(|&s| s >= 1).ok_or_else(|| {
                Unavailable(format!(
                    "LIMITERS_WINDOW={text}: not a whole number of seconds ≥ 1"
                ))
            })?,
        };
        let quota = limit.per_second.saturating_mul(seconds);
        Ok(Self { quota, seconds })
    }

    /// Its length in milliseconds.
    pub fn millis(self) -> u64 {
        u64::from(self.seconds) * 1000
    }
}

/// Which real limiter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Governor,
    Express,
    Haproxy,
    LeakyBucket,
    /// HAProxy sending a naive `RateLimit` field: `t=1` says the quota comes back whole in
    /// a second, which a sliding window's does not.
    HaproxyRateLimit,
    /// nginx's `limit_req`: a leaky bucket nothing here was tuned on.
    Nginx,
    /// rate-limiter-flexible with its README's headers; its Unix-time reset led to their bisection.
    Flexible,
    /// express-rate-limit writing other headers than draft 8's.
    ExpressWith(express::Headers),
    /// @fastify/rate-limit: a window opened by its first hit; nothing was tuned on it.
    Fastify,
    /// Flask-Limiter (Python): nothing was tuned on it.
    Flask(flask::Strategy),
}

impl Kind {
    /// The limiters of the targets, each with a model in the simulation: what `limiters
    /// --record` writes of them, `simulate --compare` sets beside a model. The leaky bucket
    /// has none, so it is not among them.
    pub const ALL: [Kind; 3] = [Kind::Governor, Kind::Express, Kind::Haproxy];
    /// One limiter of each algorithm issue #31 names: the fleets sharing their pacing in
    /// Redis run on each (`limiters -- redis-fleet`).
    pub const ALGORITHMS: [Kind; 4] = [
        Kind::Governor,
        Kind::Express,
        Kind::Haproxy,
        Kind::LeakyBucket,
    ];
    /// Limiters run only when named.
    pub const EXPERIMENTS: [Kind; 9] = [
        Kind::Fastify,
        Kind::Flask(flask::Strategy::MovingWindow),
        Kind::Flask(flask::Strategy::ElasticExpiry),
        Kind::HaproxyRateLimit,
        Kind::Nginx,
        Kind::Flexible,
        Kind::ExpressWith(express::Headers::Draft6),
        Kind::ExpressWith(express::Headers::Draft7),
        Kind::ExpressWith(express::Headers::Legacy),
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Governor => "tower_governor",
            Kind::Express => "express-rate-limit",
            Kind::Haproxy => "haproxy",
            Kind::LeakyBucket => "leaky-bucket",
            Kind::HaproxyRateLimit => "haproxy-ratelimit",
            Kind::Nginx => "nginx",
            Kind::Flexible => "rate-limiter-flexible",
            Kind::ExpressWith(express::Headers::Draft6) => "express-draft-6",
            Kind::ExpressWith(express::Headers::Draft7) => "express-draft-7",
            Kind::ExpressWith(express::Headers::Legacy) => "express-legacy",
            Kind::Fastify => "fastify",
            Kind::Flask(flask::Strategy::MovingWindow) => "flask-moving-window",
            Kind::Flask(flask::Strategy::ElasticExpiry) => "flask-elastic-expiry",
        }
    }

    /// What the limiter's algorithm is, in a few words.
    pub fn model(self) -> &'static str {
        match self {
            Kind::Governor => "GCRA token bucket (burst 10), Retry-After rounded down",
            Kind::Express => "fixed 1 s window, Retry-After rounded up",
            Kind::Haproxy => "sliding 1 s window counting refusals too, Retry-After: 1",
            Kind::LeakyBucket => "leaky bucket (burst 10), refusals not counted, Retry-After: 1",
            Kind::HaproxyRateLimit => {
                "sliding 1 s window counting refusals too, Retry-After: 1, and `RateLimit: r=<50 − its count>; t=1` (a naive configuration)"
            }
            Kind::Nginx => {
                "nginx limit_req: leaky bucket (burst 10, or LIMITERS_NGINX_BURST; nodelay, or LIMITERS_NGINX_MODE), Retry-After: 1"
            }
            Kind::Flexible => {
                "fixed 1 s window from the first hit, X-RateLimit-Reset in Unix seconds (or none: LIMITERS_FLEXIBLE_HEADERS=none), Retry-After in fractions"
            }
            Kind::ExpressWith(express::Headers::Draft6) => {
                "fixed 1 s window, Retry-After rounded up, RateLimit-Remaining and RateLimit-Reset (draft 6)"
            }
            Kind::ExpressWith(express::Headers::Draft7) => {
                "fixed 1 s window, Retry-After rounded up, RateLimit: limit=50, remaining=N, reset=S (draft 7)"
            }
            Kind::ExpressWith(express::Headers::Legacy) => {
                "fixed 1 s window, Retry-After rounded up, X-RateLimit-Reset in Unix seconds"
            }
            Kind::Fastify => {
                "1 s window from the first hit, X-RateLimit-Reset and Retry-After in seconds rounded up"
            }
            Kind::Flask(flask::Strategy::MovingWindow) => {
                "a log of the last second's passed requests; a bare 429 (LIMITERS_FLASK_HEADERS=on: X-RateLimit-*, Retry-After rounded down)"
            }
            Kind::Flask(flask::Strategy::ElasticExpiry) => {
                "a 1 s window every request extends, refused ones too; a bare 429 (LIMITERS_FLASK_HEADERS=on: X-RateLimit-*, Retry-After rounded down)"
            }
        }
    }

    pub fn parse(name: &str) -> Option<Kind> {
        let kinds = Kind::ALGORITHMS.into_iter().chain(Kind::EXPERIMENTS);
        kinds
            .clone()
            .find(|k| k.name() == name)
            .or_else(|| kinds.into_iter().find(|k| k.name().contains(name)))
    }
}

/// Why a limiter could not be started here (a missing program or `npm ci` not run).
#[derive(Debug)]
pub struct Unavailable(pub String);

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unavailable {}

/// A running limiter; dropping it stops it (the process is killed, the task aborted).
pub struct Limiter {
    pub kind: Kind,
    pub addr: SocketAddr,
    _running: Running,
}

impl Limiter {
    /// Starts `kind` limiting at `limit` on a free loopback port.
    pub async fn start(kind: Kind, limit: RateLimit) -> Result<Limiter, Unavailable> {
        let (addr, running) = match kind {
            Kind::Governor => governor::start(limit).await,
            Kind::Express => express::start(limit, None).await?,
            Kind::ExpressWith(headers) => express::start(limit, Some(headers)).await?,
            Kind::Fastify => fastify::start(limit).await?,
            Kind::Haproxy => haproxy::start(limit, false).await?,
            Kind::LeakyBucket => leaky::start(limit).await,
            Kind::HaproxyRateLimit => haproxy::start(limit, true).await?,
            Kind::Nginx => nginx::start(limit).await?,
            Kind::Flexible => flexible::start(limit).await?,
            Kind::Flask(strategy) => flask::start(limit, strategy).await?,
        };
        Ok(Limiter {
            kind,
            addr,
            _running: running,
        })
    }

    /// The URL of `path` behind the limiter.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

/// What keeps a limiter (and its backend) alive.
pub enum Running {
    Task(tokio::task::JoinHandle<()>),
    Process(ChildGuard, Option<tokio::task::JoinHandle<()>>),
}

impl Drop for Running {
    fn drop(&mut self) {
        match self {
            Running::Task(task) => task.abort(),
            Running::Process(_, backend) => {
                if let Some(task) = backend {
                    task.abort();
                }
            }
        }
    }
}

/// A child process killed (and reaped) on drop, so no limiter outlives its test, and the
/// temporary folder of its files, removed then.
pub struct ChildGuard(pub std::process::Child, pub Option<std::path::PathBuf>);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        if let Some(dir) = &self.1 {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Starts `kind` for a test, or fails the test saying why it cannot run on this machine:
/// a test that needs an outside limiter is `#[ignore = "needs ..."]`, so it runs only when
/// asked for (`--ignored`, as `.ci/run` does after installing them), and then a missing
/// limiter is an error, never a silent pass.
pub async fn start_for_test(kind: Kind, limit: RateLimit) -> Limiter {
    match Limiter::start(kind, limit).await {
        Ok(limiter) => limiter,
        Err(why) => panic!(
            "{} is not available here: {why} (HAProxy: `apt-get install haproxy`; \
             nginx: `apt-get install nginx-light`; express-rate-limit: node and `npm ci` in lab/fixtures/express-limiter; \
             `.ci/run` installs both)",
            kind.name()
        ),
    }
}

/// Waits until something accepts connections on `addr`, for at most `within`.
pub async fn wait_for_port(addr: SocketAddr, within: std::time::Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < deadline {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    false
}
