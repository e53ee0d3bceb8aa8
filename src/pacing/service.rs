//! The [`Pacing`] service.

use super::future::ResponseFuture;
use super::gate::{Admit, Shared, destination};
use super::{BoxError, PacingDeadline};
use http::{Request, Response};
use std::sync::Arc;
use std::task::{Context, Poll};
use tower_service::Service;

/// Paces the requests of a client; made by [`PacingLayer`](crate::PacingLayer).
///
/// Its error is a [`BoxError`](Box) (`Box<dyn Error + Send + Sync>`), as tower's own
/// `Timeout` and `LoadShed`: either the inner service's error, or a
/// [`PacingError`](crate::PacingError) for a request turned away without being sent.
/// That keeps the error type one of a fixed few however many layers are stacked, and
/// the retry layer's classifiers already accept boxed errors.
///
/// # Readiness
///
/// [`poll_ready`](Service::poll_ready) forwards to the inner service. A request that
/// can go at once is sent through that ready service. A request that must wait does not
/// hold that readiness while it sleeps (a `Buffer` slot or a concurrency permit would be
/// pinned for the whole wait): it waits with a clone of the inner service, and drives
/// the clone's `poll_ready` when its time comes; the readiness reserved by this
/// service's `poll_ready` stays here for the next request. Hence `S: Clone`, as for
/// tower's `Retry`.
#[derive(Debug, Clone)]
pub struct Pacing<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> Pacing<S> {
    pub(crate) fn new(inner: S, shared: Arc<Shared>) -> Self {
        Self { inner, shared }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, ReqB, ResB> Service<Request<ReqB>> for Pacing<S>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone,
    S::Error: Into<BoxError>,
{
    type Response = Response<ResB>;
    type Error = BoxError;
    type Future = ResponseFuture<S, ReqB>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<ReqB>) -> Self::Future {
        let to = destination(&request);
        let deadline = request.extensions().get::<PacingDeadline>().map(|d| d.0);
        let end = self.shared.wait_end(deadline);
        let shared = Arc::clone(&self.shared);
        match self.shared.admit(&to, end) {
            Admit::Go(in_flight) => {
                let round = self.shared.round();
                let future = self.inner.call(request);
                ResponseFuture::calling(future, round, in_flight, shared, to)
            }
            Admit::Cool(until) => {
                ResponseFuture::cooling(until, end, (self.inner.clone(), request), shared, to)
            }
            Admit::Queue(ticket) => {
                ResponseFuture::queued(ticket, end, (self.inner.clone(), request), shared, to)
            }
            Admit::Fail(error) => ResponseFuture::failed(error, shared, to),
        }
    }
}
