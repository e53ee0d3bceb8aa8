//! Fixtures of the pacing tests: a scripted inner service that logs its calls, and
//! small helpers.

#![allow(dead_code)]

use http::{Request, Response};
use std::error::Error;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tower::{Service, ServiceExt};
use tower_backoff::pacing::PacingBuilder;
use tower_backoff::{PacingError, PacingLayer};

pub type BoxError = Box<dyn Error + Send + Sync>;

pub use super::time::{ms, secs};

/// When each request reached the inner service, and its URI.
#[derive(Clone, Default)]
pub struct Log(pub Arc<Mutex<Vec<(Instant, String)>>>);

impl Log {
    /// Offsets of the calls from `start`.
    pub fn offsets(&self, start: Instant) -> Vec<Duration> {
        self.offsets_where(start, |_| true)
    }

    /// Offsets from `start` of the calls to `host` (URIs with `//host/`).
    pub fn offsets_to(&self, host: &str, start: Instant) -> Vec<Duration> {
        let part = format!("//{host}/");
        self.offsets_where(start, |uri| uri.contains(&part))
    }

    fn offsets_where(&self, start: Instant, pick: impl Fn(&str) -> bool) -> Vec<Duration> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, uri)| pick(uri))
            .map(|(at, _)| *at - start)
            .collect()
    }

    pub fn uris(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(_, uri)| uri.clone())
            .collect()
    }

    pub fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// Calls whose URI contains `part`.
    pub fn count(&self, part: &str) -> usize {
        self.uris().iter().filter(|uri| uri.contains(part)).count()
    }
}

/// The inner service: answers with the status named by the path (`/503`), echoes an
/// `x-retry-after` request header as `Retry-After`, fails with an I/O error on `/err`,
/// takes `?sleep=<ms>` to answer, and logs every call.
pub fn scripted(
    log: &Log,
) -> impl Service<Request<()>, Response = Response<()>, Error = std::io::Error, Future: Send>
+ Clone
+ Send
+ 'static
+ use<> {
    let log = log.clone();
    tower::service_fn(move |request: Request<()>| {
        let log = log.clone();
        async move {
            log.0
                .lock()
                .unwrap()
                .push((Instant::now(), request.uri().to_string()));
            if let Some(sleep) = request.uri().query().and_then(|q| q.strip_prefix("sleep=")) {
                tokio::time::sleep(ms(sleep.parse().unwrap())).await;
            }
            let path = request.uri().path().trim_start_matches('/');
            if path == "err" {
                return Err(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
            }
            let mut response = Response::builder().status(path.parse::<u16>().unwrap_or(200));
            if let Some(ra) = request.headers().get("x-retry-after") {
                response = response.header("retry-after", ra);
            }
            Ok(response.body(()).unwrap())
        }
    })
}

/// A builder probing after 100 ms, then 200 ms, … up to 10 s.
pub fn builder() -> PacingBuilder {
    PacingLayer::builder().with_probe(ms(100), secs(10))
}

pub fn layer() -> PacingLayer {
    builder().build().unwrap()
}

pub fn get(uri: &str) -> Request<()> {
    Request::get(uri).body(()).unwrap()
}

pub fn get_ra(uri: &str, retry_after: &str) -> Request<()> {
    Request::get(uri)
        .header("x-retry-after", retry_after)
        .body(())
        .unwrap()
}

/// A test client whose clones send from spawned tasks.
pub trait Client:
    Service<Request<()>, Response = Response<()>, Error = BoxError, Future: Send>
    + Clone
    + Send
    + 'static
{
}

impl<S> Client for S where
    S: Service<Request<()>, Response = Response<()>, Error = BoxError, Future: Send>
        + Clone
        + Send
        + 'static
{
}

pub async fn send<S>(service: &mut S, request: Request<()>) -> Result<Response<()>, BoxError>
where
    S: Service<Request<()>, Response = Response<()>, Error = BoxError>,
{
    service.ready().await?.call(request).await
}

pub fn pacing_error(err: &BoxError) -> PacingError {
    *err.downcast_ref::<PacingError>()
        .unwrap_or_else(|| panic!("not a pacing error: {err}"))
}

/// Gaps between consecutive offsets.
pub fn gaps(offsets: &[Duration]) -> Vec<Duration> {
    offsets.windows(2).map(|w| w[1] - w[0]).collect()
}

/// The sends in each whole `period` from `from` to the last offset (a partial last period
/// is left out): a pace's rounds.
pub fn per_period(offsets: &[Duration], from: Duration, period: Duration) -> Vec<usize> {
    let last = offsets.iter().max().copied().unwrap_or_default();
    let whole = last.saturating_sub(from).as_nanos() / period.as_nanos();
    (0..whole as u32)
        .map(|k| {
            let start = from + period * k;
            let sent = |at: &&Duration| **at >= start && **at < start + period;
            offsets.iter().filter(sent).count()
        })
        .collect()
}

pub fn authority(name: &str) -> http::uri::Authority {
    name.parse().unwrap()
}
