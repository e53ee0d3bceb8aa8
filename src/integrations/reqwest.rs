//! A `reqwest::Client` as a tower service of `http::Request`s, so the retry layer fits it.
//!
//! `reqwest::Client` is a `tower::Service<reqwest::Request>` already, but the retry policy
//! needs to see — and clone — the request and response as `http` types: [`ReqwestService`]
//! converts on the way in and out, and is the one line of glue.
//!
//! ```no_run
//! use tower::{ServiceBuilder, ServiceExt};
//! use tower_backoff::integrations::reqwest::ReqwestService;
//! use tower_backoff::{ExponentialBackOff, RetryLayer};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let client = reqwest::Client::new();
//! let service = ServiceBuilder::new()
//!     .layer(RetryLayer::new(ExponentialBackOff::default()))
//!     .service(ReqwestService::new(client));
//!
//! let request = http::Request::get("http://127.0.0.1:8080/").body(String::new())?;
//! let response = service.oneshot(request).await?;
//! println!("{}", response.status());
//! # Ok(())
//! # }
//! ```
//!
//! # Bodies
//!
//! The retry policy clones request bodies, so the body type must be `Clone`: `String`,
//! `Bytes`, `Full<Bytes>`, … A streaming body (a `reqwest::Body` made from a stream, a
//! `StreamBody`, an incoming server body) is not: put a
//! [`ReplayBodyLayer`](crate::body::ReplayBodyLayer) above the retry layer, which buffers the
//! body as it streams (up to a cap) and refuses retries of bodies that outgrew the cap.
//! Without it, a non-`Clone` body is refused at compile time, not at run time:
//!
//! ```compile_fail,E0277
//! # use tower::{ServiceBuilder, ServiceExt};
//! # use tower_backoff::integrations::reqwest::ReqwestService;
//! # use tower_backoff::{ConstantBackOff, RetryLayer};
//! # async fn run() {
//! let service = ServiceBuilder::new()
//!     .layer(RetryLayer::new(ConstantBackOff::new(std::time::Duration::from_millis(10)).unwrap()))
//!     .service(ReqwestService::new(reqwest::Client::new()));
//! // error[E0277]: the trait bound `reqwest::Body: Clone` is not satisfied
//! let request = http::Request::new(reqwest::Body::from("streamed"));
//! let _ = service.oneshot(request).await;
//! # }
//! ```
//!
//! With it, the same request is retried as long as its body fits the cap:
//!
//! ```no_run
//! # use tower::{ServiceBuilder, ServiceExt};
//! # use tower_backoff::integrations::reqwest::ReqwestService;
//! # use tower_backoff::{ConstantBackOff, ReplayBodyLayer, RetryLayer};
//! # async fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let service = ServiceBuilder::new()
//!     .layer(ReplayBodyLayer::new().with_max_bytes(1 << 20))
//!     .layer(RetryLayer::new(ConstantBackOff::new(std::time::Duration::from_millis(10)).unwrap()))
//!     .service(ReqwestService::new(reqwest::Client::new()));
//! let request = http::Request::put("http://127.0.0.1:8080/upload")
//!     .body(reqwest::Body::from("streamed"))?;
//! let _ = service.oneshot(request).await?;
//! # Ok(())
//! # }
//! ```

use bytes::Bytes;
use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tower_service::Service;

type BoxError = Box<dyn StdError + Send + Sync>;

/// `reqwest`'s response future is not nameable, so it is boxed once per attempt (as reqwest
/// itself boxes its own pending requests).
type Pending = Pin<Box<dyn Future<Output = Result<::reqwest::Response, ::reqwest::Error>> + Send>>;

/// A [`reqwest::Client`] as a `tower::Service<http::Request<B>>` whose
/// responses are `http::Response<reqwest::Body>` and whose error is `reqwest::Error`.
///
/// Any body implementing [`http_body::Body`] (and `Send + Sync`, as reqwest requires) is
/// accepted; requests and responses keep their method, URI, headers and status. Cloning is
/// cheap: a `reqwest::Client` is a handle to a shared pool.
#[derive(Clone, Debug, Default)]
pub struct ReqwestService {
    client: ::reqwest::Client,
}

impl ReqwestService {
    /// Sends requests with `client` (and its pool, timeouts and TLS settings).
    pub fn new(client: ::reqwest::Client) -> Self {
        Self { client }
    }

    /// The client requests are sent with.
    pub fn client(&self) -> &::reqwest::Client {
        &self.client
    }

    /// The client, giving up the service.
    pub fn into_inner(self) -> ::reqwest::Client {
        self.client
    }
}

impl From<::reqwest::Client> for ReqwestService {
    fn from(client: ::reqwest::Client) -> Self {
        Self::new(client)
    }
}

impl<B> Service<http::Request<B>> for ReqwestService
where
    B: http_body::Body + Send + Sync + 'static,
    B::Data: Into<Bytes>,
    B::Error: Into<BoxError>,
{
    type Response = http::Response<::reqwest::Body>;
    type Error = ::reqwest::Error;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // reqwest queues in its pool; it is always ready to take a request.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let inner = match ::reqwest::Request::try_from(req.map(::reqwest::Body::wrap)) {
            Ok(req) => Inner::Pending(Box::pin(self.client.execute(req))),
            Err(err) => Inner::Invalid(Some(err)),
        };
        ResponseFuture { inner }
    }
}

/// The response future of [`ReqwestService`].
pub struct ResponseFuture {
    inner: Inner,
}

enum Inner {
    Pending(Pending),
    /// The request could not be converted (a URI reqwest does not accept, …).
    Invalid(Option<::reqwest::Error>),
}

impl Future for ResponseFuture {
    type Output = Result<http::Response<::reqwest::Body>, ::reqwest::Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.inner {
            Inner::Pending(pending) => pending.as_mut().poll(cx).map_ok(Into::into),
            Inner::Invalid(err) => Poll::Ready(Err(err
                .take()
                .expect("ResponseFuture polled after completion"))),
        }
    }
}

impl fmt::Debug for ResponseFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.inner {
            Inner::Pending(_) => "Pending",
            Inner::Invalid(_) => "Invalid",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish()
    }
}

impl crate::classify::AsError for ::reqwest::Error {
    fn as_error(&self) -> Option<&(dyn StdError + 'static)> {
        Some(self)
    }
}
