//! tonic: the retry layer in front of a `tonic::transport::Channel`, in one line.
//!
//! A tonic client sends `http::Request<tonic::body::Body>`, and that body is a stream that
//! cannot be cloned. [`TonicRetryLayer`] stacks what a channel needs around a
//! [`RetryLayer`]:
//!
//! 1. a [`ReplayBodyLayer`] makes every request body replayable: it buffers the body *as it
//!    streams* (up to a cap), so client-streaming and bidirectional calls flow at once, and
//!    a call whose body outgrew the cap is simply not retried;
//! 2. the [`RetryLayer`] (usually [`RetryLayer::grpc`]) clones requests and decides;
//! 3. [`TonicBodyLayer`] hands the channel the `tonic::body::Body` it expects.
//!
//! The channel's error, `tonic::transport::Error`, implements [`AsError`], so connection
//! failures are classified like any other transport error.
//!
//! ```no_run
//! use std::time::Duration;
//! use tower::ServiceBuilder;
//! use tower_backoff::integrations::tonic::TonicRetryLayer;
//! use tower_backoff::{ExponentialBackOff, RetryLayer};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let channel = tonic::transport::Channel::from_static("http://127.0.0.1:50051")
//!     .connect()
//!     .await?;
//! let channel = ServiceBuilder::new()
//!     .layer(TonicRetryLayer::new(RetryLayer::grpc(ExponentialBackOff::default())))
//!     .service(channel);
//! // Any generated client works over it: `GreeterClient::new(channel)`.
//! # drop(channel);
//! # Ok(())
//! # }
//! ```

use crate::backoff::BackOff;
use crate::body::{ReplayBodyLayer, ReplayBodyService};
use crate::classify::AsError;
use crate::layer::{RetryLayer, RetryService};
use bytes::Bytes;
use http::Request;
use std::error::Error as StdError;
use std::task::{Context, Poll};
use tower_layer::Layer;
use tower_service::Service;

impl AsError for ::tonic::transport::Error {
    fn as_error(&self) -> Option<&(dyn StdError + 'static)> {
        Some(self)
    }
}

/// A [`RetryLayer`] made to fit a tonic `Channel` (or any service of
/// `http::Request<tonic::body::Body>`): see the [module docs](self).
#[derive(Clone, Debug)]
pub struct TonicRetryLayer<B> {
    retry: RetryLayer<B>,
    replay: ReplayBodyLayer,
}

impl<B> TonicRetryLayer<B> {
    /// Retries with `retry`, replaying up to
    /// [`DEFAULT_MAX_BYTES`](crate::body::DEFAULT_MAX_BYTES) of each request body.
    pub fn new(retry: RetryLayer<B>) -> Self {
        Self {
            retry,
            replay: ReplayBodyLayer::new(),
        }
    }

    /// Buffers up to `max_bytes` of each request body for replays: calls that send more
    /// are sent once and not retried.
    pub fn with_max_bytes(mut self, max_bytes: usize) -> Self {
        self.replay = self.replay.with_max_bytes(max_bytes);
        self
    }
}

impl<S, B: BackOff + Clone> Layer<S> for TonicRetryLayer<B> {
    type Service = ReplayBodyService<RetryService<B, TonicBody<S>>>;

    fn layer(&self, inner: S) -> Self::Service {
        self.replay.layer(self.retry.layer(TonicBody::new(inner)))
    }
}

/// Turns the request body into a `tonic::body::Body` (for a tonic `Channel` under layers
/// that change the body type, such as the retry layer's [`ReplayBody`](crate::body::ReplayBody)).
#[derive(Clone, Copy, Debug, Default)]
pub struct TonicBodyLayer;

impl<S> Layer<S> for TonicBodyLayer {
    type Service = TonicBody<S>;

    fn layer(&self, inner: S) -> Self::Service {
        TonicBody::new(inner)
    }
}

/// The service of [`TonicBodyLayer`].
#[derive(Clone, Debug)]
pub struct TonicBody<S> {
    inner: S,
}

impl<S> TonicBody<S> {
    /// Wraps `inner`, which takes `http::Request<tonic::body::Body>`.
    pub fn new(inner: S) -> Self {
        Self { inner }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Unwraps the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, ReqB> Service<Request<ReqB>> for TonicBody<S>
where
    S: Service<Request<::tonic::body::Body>>,
    ReqB: http_body::Body<Data = Bytes> + Send + 'static,
    ReqB::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqB>) -> Self::Future {
        self.inner.call(req.map(::tonic::body::Body::new))
    }
}
