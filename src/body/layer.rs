//! [`ReplayBodyLayer`]: makes every request body replayable before it reaches the retry.

use std::task::{Context, Poll};

use http::Request;
use http_body::Body;
use tower_layer::Layer;
use tower_service::Service;

use super::replay::{DEFAULT_MAX_BYTES, ReplayBody};

/// Wraps the body of every request in a [`ReplayBody`], so that a retry layer below it can
/// clone requests whose bodies are not `Clone`.
///
/// The request also gets the body's [`ReplayGuard`](super::ReplayGuard) in its extensions:
/// a retry policy checks [`is_capped`](super::ReplayGuard::is_capped) and does not retry a
/// request whose body outgrew the cap. A body whose size hint is over the cap from the start
/// is passed through untouched ([`ReplayBody::unreplayable`]), with a guard that is already
/// capped.
///
/// ```
/// use bytes::Bytes;
/// use http::Request;
/// use http_body_util::{BodyExt, Full};
/// use tower::{Service, ServiceExt, service_fn};
/// use tower_backoff::body::{ReplayBody, ReplayBodyLayer, ReplayGuard};
/// use tower_layer::Layer;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let inner = service_fn(|req: Request<ReplayBody<_>>| async move {
///     let guard = req.extensions().get::<ReplayGuard>().cloned().unwrap();
///     let replay = req.body().clone();
///     let first = req.into_body().collect().await?.to_bytes();
///     let second = replay.collect().await?.to_bytes();
///     assert_eq!(first, second);
///     Ok::<_, Box<dyn std::error::Error + Send + Sync>>(guard.is_capped())
/// });
/// let mut svc = ReplayBodyLayer::new().with_max_bytes(1024).layer(inner);
///
/// let body = Full::new(Bytes::from("hello")).boxed();
/// let capped = svc.ready().await.unwrap().call(Request::new(body)).await.unwrap();
/// assert!(!capped);
/// # }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ReplayBodyLayer {
    max_bytes: usize,
}

impl ReplayBodyLayer {
    /// A layer that buffers up to [`DEFAULT_MAX_BYTES`] of each body.
    pub const fn new() -> Self {
        Self {
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }

    /// Buffers up to `max_bytes` of each body: bigger bodies are sent but not retried.
    ///
    /// # Default
    ///
    /// [`DEFAULT_MAX_BYTES`] (64 KiB). Any value is valid; `0` allows retrying only requests
    /// without a body.
    pub const fn with_max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// How many bytes of each body are buffered at most.
    pub const fn max_bytes(&self) -> usize {
        self.max_bytes
    }
}

impl Default for ReplayBodyLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl<S> Layer<S> for ReplayBodyLayer {
    type Service = ReplayBodyService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ReplayBodyService {
            inner,
            max_bytes: self.max_bytes,
        }
    }
}

/// The service of [`ReplayBodyLayer`]: hands `S` requests whose body is a [`ReplayBody`].
#[derive(Debug, Clone)]
pub struct ReplayBodyService<S> {
    inner: S,
    max_bytes: usize,
}

impl<S> ReplayBodyService<S> {
    /// Wraps `inner`, buffering up to `max_bytes` of each request body.
    pub const fn new(inner: S, max_bytes: usize) -> Self {
        Self { inner, max_bytes }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwraps the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, B> Service<Request<B>> for ReplayBodyService<S>
where
    S: Service<Request<ReplayBody<B>>>,
    B: Body,
{
    type Response = S::Response;
    type Error = S::Error;
    // The body is wrapped before the call, so the inner future is all there is to wait on.
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        self.inner.call(replayable(req, self.max_bytes))
    }
}

/// `req` with its body made replayable up to `max_bytes` (one that is known to be larger
/// is sent once, unreplayable), and the body's guard in its extensions for the policy.
pub(crate) fn replayable<B: Body>(req: Request<B>, max_bytes: usize) -> Request<ReplayBody<B>> {
    let (mut parts, body) = req.into_parts();
    let body = ReplayBody::try_new(body, max_bytes).unwrap_or_else(|body| {
        tracing::debug!(
            max_bytes,
            "request body is larger than the replay cap; it will not be retried"
        );
        ReplayBody::unreplayable(body)
    });
    parts.extensions.insert(body.guard());
    Request::from_parts(parts, body)
}
