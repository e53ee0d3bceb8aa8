//! The loopback servers: real hyper HTTP/1.1 servers on `127.0.0.1:0`. Each counts what it
//! was sent, per request id. The id is the `x-peer-id` header the harness sets; every
//! library copies it into its retries. The rate limiter is the lab's leaky bucket
//! ([`leaky`]), with the lab's other limiters.

use bytes::Bytes;
use http::{Method, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tower_backoff_lab::limiters::Running;
use tower_backoff_lab::limiters::backend::serve_each;
use tower_backoff_lab::limiters::leaky;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

pub use tower_backoff_lab::matrix::ID_HEADER;

/// What a handler answers: a response, or `None` to close the connection unanswered.
type Handler = Arc<dyn Fn(&Method, u64) -> Option<Response<Full<Bytes>>> + Send + Sync>;

/// How long the server waits before answering a request for a path.
type Delay = Arc<dyn Fn(&str) -> Duration + Send + Sync>;

/// A running server; dropping it stops it and every connection it holds.
pub struct Server {
    pub addr: SocketAddr,
    _running: Running,
}

impl From<leaky::Bucket> for Server {
    fn from(bucket: leaky::Bucket) -> Self {
        Server {
            addr: bucket.addr,
            _running: bucket.running,
        }
    }
}

/// The error a handler's `None` becomes: hyper then closes the connection without answering.
#[derive(Debug)]
struct HangUp;

impl std::fmt::Display for HangUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("hung up on purpose")
    }
}

impl std::error::Error for HangUp {}

/// Serves `handler` on a fresh loopback port. The request body is read in full first, so
/// that a request the handler sees was received whole (a POST is "processed").
async fn serve(handler: Handler) -> std::io::Result<Server> {
    serve_after(handler, Arc::new(|_: &str| Duration::ZERO)).await
}

/// [`serve`], each answer sent `delay(path)` after the request was read.
async fn serve_after(handler: Handler, delay: Delay) -> std::io::Result<Server> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let task = serve_each(listener, move |req: http::Request<Incoming>| {
        let (handler, delay) = (handler.clone(), delay.clone());
        async move {
            let (parts, body) = req.into_parts();
            body.collect().await.map_err(BoxError::from)?;
            let pause = delay(parts.uri.path());
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
            let id = parts
                .headers
                .get(ID_HEADER)
                .and_then(|v| v.to_str().ok()?.parse().ok())
                .unwrap_or(u64::MAX);
            handler(&parts.method, id).ok_or_else(|| BoxError::from(HangUp))
        }
    });
    Ok(Server {
        addr,
        _running: Running::Task(task),
    })
}

/// A response with `status` and a short body.
fn reply(status: StatusCode) -> Response<Full<Bytes>> {
    let mut res = Response::new(Full::new(Bytes::from_static(b"peers")));
    *res.status_mut() = status;
    res
}

/// Counts attempts in all and per request id, and a second status's count.
#[derive(Default)]
pub struct Counts {
    pub attempts: AtomicU64,
    pub refused: AtomicU64,
    pub per_id: Mutex<HashMap<u64, u32>>,
}

impl Counts {
    /// Counts an attempt of request `id`; returns its number among that request's.
    fn record(&self, id: u64) -> u32 {
        self.attempts.fetch_add(1, Ordering::Relaxed);
        let mut per_id = self.per_id.lock().unwrap();
        let count = per_id.entry(id).or_default();
        *count += 1;
        *count
    }

    pub fn attempts(&self) -> u64 {
        self.attempts.load(Ordering::Relaxed)
    }

    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Attempts per id, taken out.
    pub fn per_id(&self) -> HashMap<u64, u32> {
        std::mem::take(&mut *self.per_id.lock().unwrap())
    }
}

/// 503 without `Retry-After` to a share `p` of all attempts; `refused` counts the 503s.
/// Each attempt's answer is drawn from `seed`, the request's id and the attempt's number:
/// in one run, every library meets the same answers, in whatever order its attempts come.
pub async fn random_failures(p: f64, seed: u64) -> std::io::Result<(Server, Arc<Counts>)> {
    let counts = Arc::new(Counts::default());
    let c = counts.clone();
    let server = serve(Arc::new(move |_: &Method, id| {
        let attempt = c.record(id);
        if tower_backoff_lab::matrix::fails(p, seed, id, attempt) {
            c.refused.fetch_add(1, Ordering::Relaxed);
            Some(reply(StatusCode::SERVICE_UNAVAILABLE))
        } else {
            Some(reply(StatusCode::OK))
        }
    }))
    .await?;
    Ok((server, counts))
}

/// An outage's answer that pacing ignores: 503 without `Retry-After`.
pub const BARE_503: (StatusCode, Option<u64>) = (StatusCode::SERVICE_UNAVAILABLE, None);

/// `status` (with `Retry-After: retry_after` seconds, if any) to everything until
/// `origin + outage`, then 200.
pub async fn outage(
    origin: Instant,
    outage: Duration,
    (status, retry_after): (StatusCode, Option<u64>),
) -> std::io::Result<(Server, Arc<Counts>)> {
    let counts = Arc::new(Counts::default());
    let c = counts.clone();
    let server = serve(Arc::new(move |_: &Method, id| {
        c.record(id);
        if origin.elapsed() < outage {
            c.refused.fetch_add(1, Ordering::Relaxed);
            let mut res = reply(status);
            if let Some(seconds) = retry_after {
                res.headers_mut().insert("retry-after", seconds.into());
            }
            Some(res)
        } else {
            Some(reply(StatusCode::OK))
        }
    }))
    .await?;
    Ok((server, counts))
}

/// Reads each POST whole, counts it as processed (per id), and closes the connection
/// without answering: the client cannot tell whether it was processed.
pub async fn post_hang_up() -> std::io::Result<(Server, Arc<Counts>)> {
    let counts = Arc::new(Counts::default());
    let c = counts.clone();
    let server = serve(Arc::new(move |method: &Method, id| {
        if method == Method::POST {
            c.record(id);
            None
        } else {
            Some(reply(StatusCode::OK))
        }
    }))
    .await?;
    Ok((server, counts))
}

/// 200 to everything, at once.
pub async fn healthy() -> std::io::Result<(Server, Arc<Counts>)> {
    let counts = Arc::new(Counts::default());
    let c = counts.clone();
    let server = serve(Arc::new(move |_: &Method, id| {
        c.record(id);
        Some(reply(StatusCode::OK))
    }))
    .await?;
    Ok((server, counts))
}

/// 200 to everything, after a pause: `long_poll` for paths starting with `/poll`, else a
/// duration drawn uniformly from `slow` (seeded with `seed`).
pub async fn slow(
    slow: std::ops::Range<Duration>,
    long_poll: Duration,
    seed: u64,
) -> std::io::Result<(Server, Arc<Counts>)> {
    let counts = Arc::new(Counts::default());
    let c = counts.clone();
    let rng = Mutex::new(StdRng::seed_from_u64(seed));
    let delay = Arc::new(move |path: &str| {
        if path.starts_with("/poll") {
            long_poll
        } else {
            rng.lock().unwrap().random_range(slow.clone())
        }
    });
    let handler = Arc::new(move |_: &Method, id| {
        c.record(id);
        Some(reply(StatusCode::OK))
    });
    Ok((serve_after(handler, delay).await?, counts))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The status of attempt `attempt` of request `id`, made as the `attempt`th with that id.
    async fn answers(seed: u64, order: &[(u64, u32)]) -> HashMap<(u64, u32), u16> {
        let (server, counts) = random_failures(0.2, seed).await.unwrap();
        let client = reqwest::Client::new();
        let mut answers = HashMap::new();
        for &(id, attempt) in order {
            let url = format!("http://{}/", server.addr);
            let res = client.get(url).header(ID_HEADER, id).send().await.unwrap();
            answers.insert((id, attempt), res.status().as_u16());
        }
        assert_eq!(counts.attempts(), order.len() as u64);
        answers
    }

    /// Matrix row 2 is paired: each attempt's answer depends on the seed, the request and
    /// the attempt's number, not on the order attempts arrive in.
    #[tokio::test]
    async fn random_failures_answer_each_attempt_from_the_seed_alone() {
        let by_request: Vec<(u64, u32)> = (0..50)
            .flat_map(|id| (1..=4).map(move |attempt| (id, attempt)))
            .collect();
        let by_attempt: Vec<(u64, u32)> = (1..=4)
            .flat_map(|attempt| (0..50).rev().map(move |id| (id, attempt)))
            .collect();
        let first = answers(7, &by_request).await;
        assert_eq!(first, answers(7, &by_attempt).await);
        let failed = first.values().filter(|&&status| status == 503).count();
        assert!((20..=60).contains(&failed), "{failed} of 200 failed");
        assert_ne!(first, answers(8, &by_request).await);
    }
}
