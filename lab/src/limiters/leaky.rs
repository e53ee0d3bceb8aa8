//! A leaky bucket with a burst, as a hyper server in this process. Requests drain out at
//! `rate` per second and at most `burst` fit in the bucket; a request that finds it full
//! gets 429 with `Retry-After: 1` and takes no place, so refusals are not counted. It
//! reports nothing of its count: no quota header, on a success or a refusal.
//!
//! Unlike the other limiters it is written here: its rate may change with time
//! ([`serve`]), as issue #29's row 4 needs (a limit that changes under a running load),
//! and the algorithm is a few lines (`Level::admit`).

use super::backend::serve_each;
use super::{RateLimit, Running};
use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The rate in requests per second, `t` after the bucket's origin.
pub type Rate = Arc<dyn Fn(Duration) -> f64 + Send + Sync>;

/// What the bucket answered: every request, and the refused among them.
#[derive(Debug, Default)]
pub struct Tally {
    attempts: AtomicU64,
    refused: AtomicU64,
}

impl Tally {
    pub fn attempts(&self) -> u64 {
        self.attempts.load(Ordering::Relaxed)
    }

    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

/// A running bucket: where it listens, what keeps it running (drop it to stop the server
/// and every connection), and what it answered.
pub struct Bucket {
    pub addr: SocketAddr,
    pub running: Running,
    pub tally: Arc<Tally>,
}

/// A rate that never changes.
pub fn steady(per_second: f64) -> Rate {
    Arc::new(move |_| per_second)
}

/// The bucket at `limit` for [`Limiter`](super::Limiter): `per_second` drain it, `burst`
/// fit in it.
pub async fn start(limit: RateLimit) -> (SocketAddr, Running) {
    let rate = steady(f64::from(limit.per_second));
    let bucket = serve(Instant::now(), rate, f64::from(limit.burst))
        .await
        .expect("bind 127.0.0.1");
    (bucket.addr, bucket.running)
}

/// The bucket draining at `rate(t)` at `t` after `origin`, holding `burst`, on a free
/// loopback port. It starts empty: a first burst of `burst` passes at once.
pub async fn serve(origin: Instant, rate: Rate, burst: f64) -> std::io::Result<Bucket> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let tally = Arc::new(Tally::default());
    let level = Mutex::new(Level::new(burst, Instant::now()));
    let answer = {
        let tally = tally.clone();
        move || {
            tally.attempts.fetch_add(1, Ordering::Relaxed);
            // The time read under the lock: the requests pass through the bucket in order.
            let admitted = level
                .lock()
                .unwrap()
                .admit(Instant::now(), origin, &rate, burst);
            if admitted {
                reply(StatusCode::OK)
            } else {
                tally.refused.fetch_add(1, Ordering::Relaxed);
                let mut res = reply(StatusCode::TOO_MANY_REQUESTS);
                let after = HeaderValue::from_static("1");
                res.headers_mut().insert(http::header::RETRY_AFTER, after);
                res
            }
        }
    };
    let answer = Arc::new(answer);
    let task = serve_each(listener, move |req: http::Request<Incoming>| {
        let answer = answer.clone();
        async move {
            // The whole request first: the bucket sees it as received.
            req.into_body().collect().await.map_err(BoxError::from)?;
            Ok(answer())
        }
    });
    Ok(Bucket {
        addr,
        running: Running::Task(task),
        tally,
    })
}

/// The room left in the bucket, as of `at`: the algorithm, for the models too.
pub struct Level {
    room: f64,
    at: Instant,
}

impl Level {
    /// An empty bucket as of `at`: a first burst of `burst` passes at once.
    pub fn new(burst: f64, at: Instant) -> Self {
        Self { room: burst, at }
    }

    /// Whether a request arriving `now` fits; it takes one place if so. The room grows
    /// by the rate of the moment over the time since the last request, up to `burst`.
    pub fn admit(&mut self, now: Instant, origin: Instant, rate: &Rate, burst: f64) -> bool {
        let per_second = rate(now.saturating_duration_since(origin));
        let drained = now.duration_since(self.at).as_secs_f64() * per_second;
        self.room = (self.room + drained).min(burst);
        self.at = now;
        if self.room >= 1.0 {
            self.room -= 1.0;
            true
        } else {
            false
        }
    }
}

/// A response with `status` and a short body.
fn reply(status: StatusCode) -> Response<Full<Bytes>> {
    let mut res = Response::new(Full::new(Bytes::from_static(b"ok")));
    *res.status_mut() = status;
    res
}
