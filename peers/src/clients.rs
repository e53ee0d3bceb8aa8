//! The libraries compared, each set up as its README or docs show, behind one `send`.

use crate::attempts::AttemptLog;
use crate::servers::ID_HEADER;
use backon::{ExponentialBuilder, Retryable};
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::TokioExecutor;
use reqwest_middleware::ClientBuilder;
use reqwest_retry::RetryTransientMiddleware;
use reqwest_retry::policies::ExponentialBackoff;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tower::retry::budget::{Budget, TpsBudget};
use tower::util::BoxCloneService;
use tower::{ServiceBuilder, ServiceExt};
use tower_backoff::{ExponentialBackOff, PacingError, PacingLayer, RetryLayer};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type TowerClient = BoxCloneService<Request<Full<Bytes>>, Response<Incoming>, BoxError>;
type HyperResult = Result<Response<Incoming>, hyper_util::client::legacy::Error>;

/// Why a request got no final status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// tower-backoff's pacing refused it (a [`PacingError`] in its error's chain).
    Pacing,
    /// Any other error: transport, body, or the harness's timeout.
    Other,
}

/// One row of every table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lib {
    ReqwestRetry,
    Backon,
    TowerRetry,
    TowerRetryBudget,
    TowerBackoff,
    TowerBackoffPaced,
}

impl Lib {
    pub const ALL: [Lib; 6] = [
        Lib::ReqwestRetry,
        Lib::Backon,
        Lib::TowerRetry,
        Lib::TowerRetryBudget,
        Lib::TowerBackoff,
        Lib::TowerBackoffPaced,
    ];

    /// The row's name in the tables.
    pub fn name(self) -> &'static str {
        match self {
            Lib::ReqwestRetry => "reqwest-retry 0.9 (3 retries)",
            Lib::Backon => "backon 1.6 (`ExponentialBuilder::default()`)",
            Lib::TowerRetry => "tower `Retry`, 3 retries",
            Lib::TowerRetryBudget => "tower `Retry`, 3 retries + `TpsBudget`",
            Lib::TowerBackoff => "tower-backoff `RetryLayer` alone",
            Lib::TowerBackoffPaced => {
                "**tower-backoff** quick start (`RetryLayer` + `PacingLayer`)"
            }
        }
    }

    /// A fresh client (fresh connection pool, budget and pacing state).
    pub fn client(self) -> Client {
        self.build(None)
    }

    /// [`client`](Self::client), logging every attempt it sends into `log`.
    pub fn logged(self, log: Arc<AttemptLog>) -> Client {
        self.build(Some(log))
    }

    fn build(self, log: Option<Arc<AttemptLog>>) -> Client {
        // reqwest reads proxy variables by default; hyper-util's client does not.
        let reqwest = || {
            reqwest::Client::builder()
                .no_proxy()
                .build()
                .expect("a reqwest client")
        };
        let hyper = || hyper_logged(log.clone());
        match self {
            Lib::ReqwestRetry => {
                // reqwest-middleware's README, as is (but for its tracing middleware); the
                // log under the retry sees each attempt.
                let retry_policy = ExponentialBackoff::builder().build_with_max_retries(3);
                let builder = ClientBuilder::new(reqwest())
                    .with(RetryTransientMiddleware::new_with_policy(retry_policy));
                Client::Middleware(match log {
                    Some(log) => builder.with(LogMiddleware(log)).build(),
                    None => builder.build(),
                })
            }
            Lib::Backon => Client::Backon(reqwest(), log),
            Lib::TowerRetry | Lib::TowerRetryBudget => {
                let budget = (self == Lib::TowerRetryBudget)
                    .then(|| Arc::new(TpsBudget::new(Duration::from_secs(10), 10, 0.2)));
                let policy = SimplePolicy {
                    retries_left: 3,
                    deposited: false,
                    budget,
                };
                Client::Tower(
                    ServiceBuilder::new()
                        .layer(tower::retry::RetryLayer::new(policy))
                        .service(hyper())
                        .map_err(BoxError::from)
                        .boxed_clone(),
                )
            }
            Lib::TowerBackoff => Client::Tower(
                ServiceBuilder::new()
                    .layer(RetryLayer::new(ExponentialBackOff::default()))
                    .service(hyper())
                    .map_err(BoxError::from)
                    .boxed_clone(),
            ),
            Lib::TowerBackoffPaced => {
                let retry = RetryLayer::new(ExponentialBackOff::default());
                Client::Tower(
                    ServiceBuilder::new()
                        .layer(retry.paced(PacingLayer::new()))
                        .service(hyper())
                        .map_err(BoxError::from)
                        .boxed_clone(),
                )
            }
        }
    }
}

/// hyper-util's client, each attempt logged into `log` if any; its error type is kept, so
/// that error classifiers see hyper-util's error.
fn hyper_logged(
    log: Option<Arc<AttemptLog>>,
) -> impl tower::Service<
    TowerReq,
    Response = Response<Incoming>,
    Error = hyper_util::client::legacy::Error,
    Future = Pin<Box<dyn Future<Output = HyperResult> + Send>>,
> + Clone
+ Send
+ 'static {
    let client = HyperClient::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    tower::service_fn(move |req: TowerReq| {
        let (sent, port) = (Instant::now(), req.uri().port_u16().unwrap_or(80));
        let response = client.request(req);
        let log = log.clone();
        Box::pin(async move {
            let result = response.await;
            if let Some(log) = log {
                log.record(
                    sent,
                    port,
                    result.as_ref().map_or(0, |r| r.status().as_u16()),
                );
            }
            result
        }) as Pin<Box<dyn Future<Output = HyperResult> + Send>>
    })
}

/// A reqwest-middleware middleware logging each attempt that passes it.
struct LogMiddleware(Arc<AttemptLog>);

#[async_trait::async_trait]
impl reqwest_middleware::Middleware for LogMiddleware {
    async fn handle(
        &self,
        req: reqwest::Request,
        extensions: &mut http::Extensions,
        next: reqwest_middleware::Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        let (sent, port) = (Instant::now(), req.url().port_or_known_default());
        let result = next.run(req, extensions).await;
        let status = result.as_ref().map_or(0, |r| r.status().as_u16());
        self.0.record(sent, port.unwrap_or(80), status);
        result
    }
}

/// A client of any row; cloned into each task.
#[derive(Clone)]
pub enum Client {
    Middleware(reqwest_middleware::ClientWithMiddleware),
    Backon(reqwest::Client, Option<Arc<AttemptLog>>),
    Tower(TowerClient),
}

/// Why a backon attempt failed: what its `.when(...)` looks at.
#[derive(Debug)]
enum AttemptFailure {
    Transport,
    Status(StatusCode),
}

/// A [`Failure`] of an error: pacing's if a [`PacingError`] is in its chain.
fn failure_of(error: &(dyn std::error::Error + 'static)) -> Failure {
    let mut next = Some(error);
    // Bounded: error chains are short; 32 links at most are looked at.
    for _ in 0..32 {
        let Some(error) = next else { break };
        if error.downcast_ref::<PacingError>().is_some() {
            return Failure::Pacing;
        }
        next = error.source();
    }
    Failure::Other
}

/// The statuses every row retries: 5xx and 429.
fn retryable(status: StatusCode) -> bool {
    status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS
}

impl Client {
    /// Sends one request (with its retries) and reads the final response's body; the
    /// final status, or `None` for an error.
    pub async fn send(self, method: Method, url: String, id: u64) -> Option<StatusCode> {
        self.outcome(method, url, id).await.ok()
    }

    /// [`send`](Self::send), telling why a request failed.
    pub async fn outcome(
        self,
        method: Method,
        url: String,
        id: u64,
    ) -> Result<StatusCode, Failure> {
        let body = if method == Method::POST {
            Bytes::from_static(b"{\"order\":42}")
        } else {
            Bytes::new()
        };
        match self {
            Client::Middleware(client) => {
                let res = client
                    .request(method, &url)
                    .header(ID_HEADER, id)
                    .body(body)
                    .send()
                    .await
                    .map_err(|_| Failure::Other)?;
                let status = res.status();
                res.bytes().await.map_err(|_| Failure::Other)?;
                Ok(status)
            }
            Client::Backon(client, log) => {
                let port = port_of(&url);
                // backon's README: a future factory, `.retry(ExponentialBuilder::default())`,
                // `.sleep(tokio::time::sleep)`, `.when(...)`: here transport errors and
                // 5xx/429, as a reqwest user would write it.
                let attempt = || {
                    let request = client
                        .request(method.clone(), &url)
                        .header(ID_HEADER, id)
                        .body(body.clone());
                    let log = log.clone();
                    async move {
                        let sent = Instant::now();
                        let res = request.send().await;
                        if let Some(log) = &log {
                            let status = res.as_ref().map_or(0, |r| r.status().as_u16());
                            log.record(sent, port, status);
                        }
                        let res = res.map_err(|_| AttemptFailure::Transport)?;
                        let status = res.status();
                        res.bytes().await.map_err(|_| AttemptFailure::Transport)?;
                        if retryable(status) {
                            Err(AttemptFailure::Status(status))
                        } else {
                            Ok(status)
                        }
                    }
                };
                match attempt
                    .retry(ExponentialBuilder::default())
                    .sleep(tokio::time::sleep)
                    .when(|e| matches!(e, AttemptFailure::Transport | AttemptFailure::Status(_)))
                    .await
                {
                    Ok(status) | Err(AttemptFailure::Status(status)) => Ok(status),
                    Err(AttemptFailure::Transport) => Err(Failure::Other),
                }
            }
            Client::Tower(service) => {
                let req = Request::builder()
                    .method(method)
                    .uri(url)
                    .header(ID_HEADER, id)
                    .body(Full::new(body))
                    .expect("a valid request");
                let res = service.oneshot(req).await.map_err(|e| failure_of(&*e))?;
                let status = res.status();
                res.into_body()
                    .collect()
                    .await
                    .map_err(|_| Failure::Other)?;
                Ok(status)
            }
        }
    }
}

/// The port of a loopback URL (80 if it names none).
fn port_of(url: &str) -> u16 {
    url.parse::<http::Uri>()
        .ok()
        .and_then(|u| u.port_u16())
        .unwrap_or(80)
}

/// tower's `Retry` policy a user writes from tower's docs: retry errors, 5xx and 429 at
/// once, up to 3 times; with a budget, one deposit per request and a withdrawal per retry
/// (the budget example in `tower::retry::budget`).
#[derive(Clone)]
struct SimplePolicy {
    retries_left: u32,
    deposited: bool,
    budget: Option<Arc<TpsBudget>>,
}

type TowerReq = Request<Full<Bytes>>;

impl<E> tower::retry::Policy<TowerReq, Response<Incoming>, E> for SimplePolicy {
    type Future = std::future::Ready<()>;

    fn retry(
        &mut self,
        _req: &mut TowerReq,
        result: &mut Result<Response<Incoming>, E>,
    ) -> Option<Self::Future> {
        if let Some(budget) = &self.budget
            && !std::mem::replace(&mut self.deposited, true)
        {
            budget.deposit();
        }
        let failed = match result {
            Ok(res) => retryable(res.status()),
            Err(_) => true,
        };
        if !failed || self.retries_left == 0 {
            return None;
        }
        if let Some(budget) = &self.budget
            && !budget.withdraw()
        {
            return None;
        }
        self.retries_left -= 1;
        Some(std::future::ready(()))
    }

    fn clone_request(&mut self, req: &TowerReq) -> Option<TowerReq> {
        let mut clone = Request::new(req.body().clone());
        *clone.method_mut() = req.method().clone();
        *clone.uri_mut() = req.uri().clone();
        *clone.version_mut() = req.version();
        *clone.headers_mut() = req.headers().clone();
        Some(clone)
    }
}
