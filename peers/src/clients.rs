//! The libraries compared, each set up as its README or docs show, behind one `send`.

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
use std::sync::Arc;
use std::time::Duration;
use tower::retry::budget::{Budget, TpsBudget};
use tower::util::BoxCloneService;
use tower::{ServiceBuilder, ServiceExt};
use tower_backoff::{ExponentialBackOff, PacingLayer, RetryLayer};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type TowerClient = BoxCloneService<Request<Full<Bytes>>, Response<Incoming>, BoxError>;

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
            Lib::TowerBackoff => "**tower-backoff** `RetryLayer` defaults",
            Lib::TowerBackoffPaced => "**tower-backoff** `RetryLayer` + `PacingLayer`",
        }
    }

    /// A fresh client (fresh connection pool, budget and pacing state).
    pub fn client(self) -> Client {
        // reqwest reads proxy variables by default; hyper-util's client does not.
        let reqwest = || {
            reqwest::Client::builder()
                .no_proxy()
                .build()
                .expect("a reqwest client")
        };
        let hyper = || HyperClient::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
        match self {
            Lib::ReqwestRetry => {
                // reqwest-middleware's README, as is (but for its tracing middleware).
                let retry_policy = ExponentialBackoff::builder().build_with_max_retries(3);
                Client::Middleware(
                    ClientBuilder::new(reqwest())
                        .with(RetryTransientMiddleware::new_with_policy(retry_policy))
                        .build(),
                )
            }
            Lib::Backon => Client::Backon(reqwest()),
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

/// A client of any row; cloned into each task.
#[derive(Clone)]
pub enum Client {
    Middleware(reqwest_middleware::ClientWithMiddleware),
    Backon(reqwest::Client),
    Tower(TowerClient),
}

/// Why a backon attempt failed: what its `.when(...)` looks at.
#[derive(Debug)]
enum Failure {
    Transport,
    Status(StatusCode),
}

/// The statuses every row retries: 5xx and 429.
fn retryable(status: StatusCode) -> bool {
    status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS
}

impl Client {
    /// Sends one request (with its retries) and reads the final response's body; the
    /// final status, or `None` for an error.
    pub async fn send(self, method: Method, url: String, id: u64) -> Option<StatusCode> {
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
                    .ok()?;
                let status = res.status();
                res.bytes().await.ok()?;
                Some(status)
            }
            Client::Backon(client) => {
                // backon's README: a future factory, `.retry(ExponentialBuilder::default())`,
                // `.sleep(tokio::time::sleep)`, `.when(...)`: here transport errors and
                // 5xx/429, as a reqwest user would write it.
                let attempt = || {
                    let request = client
                        .request(method.clone(), &url)
                        .header(ID_HEADER, id)
                        .body(body.clone());
                    async move {
                        let res = request.send().await.map_err(|_| Failure::Transport)?;
                        let status = res.status();
                        res.bytes().await.map_err(|_| Failure::Transport)?;
                        if retryable(status) {
                            Err(Failure::Status(status))
                        } else {
                            Ok(status)
                        }
                    }
                };
                match attempt
                    .retry(ExponentialBuilder::default())
                    .sleep(tokio::time::sleep)
                    .when(|e| matches!(e, Failure::Transport | Failure::Status(_)))
                    .await
                {
                    Ok(status) | Err(Failure::Status(status)) => Some(status),
                    Err(Failure::Transport) => None,
                }
            }
            Client::Tower(service) => {
                let req = Request::builder()
                    .method(method)
                    .uri(url)
                    .header(ID_HEADER, id)
                    .body(Full::new(body))
                    .expect("a valid request");
                let res = service.oneshot(req).await.ok()?;
                let status = res.status();
                res.into_body().collect().await.ok()?;
                Some(status)
            }
        }
    }
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
