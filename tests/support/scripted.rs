//! A scripted in-process service behind a `RetryLayer`, on tokio's (paused) clock: it answers
//! a list of replies in order and records when each attempt arrived, so that a test can name
//! every instant of a retry sequence.

use http::{HeaderValue, Method, Request, Response};
use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tower::{Layer, ServiceExt};
use tower_backoff::{RetryError, RetryLayer, RetrySettings, RetryStats};

use super::backoffs::Steps;

/// What the test server answers, in order.
#[derive(Clone, Copy)]
pub enum Reply {
    Status(u16),
    WithHeader(u16, &'static str, &'static [u8]),
    Error(io::ErrorKind),
    /// Takes this long, then answers the status.
    Slow(Duration, u16),
}

use Reply::*;

/// A scripted service: records when each attempt arrived, answers the next reply
/// (200 once the script is over).
#[derive(Clone)]
pub struct Script {
    replies: Arc<Mutex<VecDeque<Reply>>>,
    arrivals: Arc<Mutex<Vec<(Duration, Method)>>>,
    t0: Instant,
}

impl Script {
    pub fn new(replies: &[Reply]) -> Self {
        Self {
            replies: Arc::new(Mutex::new(replies.iter().cloned().collect())),
            arrivals: Arc::default(),
            t0: Instant::now(),
        }
    }

    pub fn arrivals(&self) -> Vec<Duration> {
        self.arrivals.lock().unwrap().iter().map(|a| a.0).collect()
    }

    pub fn service(
        &self,
    ) -> impl tower::Service<
        Request<String>,
        Response = Response<String>,
        Error = io::Error,
        Future = impl Send,
    > + Clone {
        let this = self.clone();
        tower::service_fn(move |req: Request<String>| {
            let this = this.clone();
            async move {
                this.arrivals
                    .lock()
                    .unwrap()
                    .push((this.t0.elapsed(), req.method().clone()));
                let reply = this
                    .replies
                    .lock()
                    .unwrap()
                    .pop_front()
                    .unwrap_or(Status(200));
                let status = |code| {
                    Response::builder()
                        .status(code)
                        .body(format!("body {code}"))
                        .unwrap()
                };
                match reply {
                    Status(code) => Ok(status(code)),
                    WithHeader(code, name, value) => {
                        let mut res = status(code);
                        res.headers_mut()
                            .insert(name, HeaderValue::from_bytes(value).unwrap());
                        Ok(res)
                    }
                    Error(kind) => Err(io::Error::new(kind, "scripted")),
                    Slow(d, code) => {
                        tokio::time::sleep(d).await;
                        Ok(status(code))
                    }
                }
            }
        })
    }
}

pub fn req(method: Method, path: &str) -> Request<String> {
    Request::builder()
        .method(method)
        .uri(path)
        .body("payload".to_owned())
        .unwrap()
}

pub fn get() -> Request<String> {
    req(Method::GET, "/")
}

pub fn post() -> Request<String> {
    req(Method::POST, "/")
}

/// Sends `request` through `layer` to a server answering `replies`.
pub async fn run(
    layer: RetryLayer<Steps>,
    request: Request<String>,
    replies: &[Reply],
) -> (Result<Response<String>, RetryError>, Vec<Duration>) {
    let script = Script::new(replies);
    let result = layer.layer(script.service()).oneshot(request).await;
    (result, script.arrivals())
}

/// The default settings, but server delays waited exactly (no spread), so that the
/// tables of the tests can name every instant.
pub fn exact() -> RetrySettings {
    RetrySettings::new().with_retry_after_jitter(0.0).unwrap()
}

pub fn layer() -> RetryLayer<Steps> {
    RetryLayer::new(Steps::new()).with_settings(exact())
}

pub fn attempts_layer(n: u32) -> RetryLayer<Steps> {
    layer().with_settings(exact().with_max_attempts(n).unwrap())
}

/// The stats of a final response: a response that succeeded at its first attempt carries
/// none, which means one attempt and nothing waited.
pub fn stats(res: &Response<String>) -> RetryStats {
    res.extensions()
        .get::<RetryStats>()
        .copied()
        .unwrap_or(RetryStats {
            attempts: 1,
            ..RetryStats::default()
        })
}
