//! The [`Pacing`] service.

use super::deadline::PacingDeadline;
use super::destination::Admit;
use super::future::ResponseFuture;
use super::key::Key;
use super::shared::Shared;
use crate::error::BoxError;
use crate::error::pacing::PacingError;
use crate::time::WallClock;
use http::{Request, Response};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::time::Instant;
use tower_service::Service;

/// Paces the requests of a client, per destination; made by
/// [`PacingLayer`](crate::PacingLayer).
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
/// the clone's `poll_ready` when its turn comes. The readiness reserved by this service's
/// `poll_ready` is given back at the call, as any call uses it up. Hence `S: Clone`, as
/// for tower's `Retry`. The wait for the clone's readiness ends with the request's
/// wait: a full `Buffer` or concurrency limit below never holds it past its max wait or
/// deadline.
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

    fn call(&mut self, mut request: Request<ReqB>) -> Self::Future {
        request
            .extensions_mut()
            .insert(crate::send_mark::PacedAbove);
        let now = Instant::now();
        // The retry layer's wall clock, lent to the attempt: the response is read with it.
        let clock = request.extensions().get::<WallClock>().map(|c| c.0.clone());
        let key = Key::of(&request);
        let deadline = request.extensions().get::<PacingDeadline>().map(|d| d.0);
        if deadline.is_some_and(|deadline| now >= deadline) {
            tracing::debug!(to = %key, "pacing: request past its deadline");
            return ResponseFuture::failed(PacingError::DeadlinePassed);
        }
        let Some(destination) = self.shared.destination(&key, now) else {
            return ResponseFuture::calling(self.inner.call(request), None, clock);
        };
        let limits = self.shared.limits(deadline, now);
        match destination.admit(&limits, now) {
            Admit::Go(grant) => {
                ResponseFuture::calling(self.inner.call(request), Some(grant), clock)
            }
            Admit::Queue(ticket) => {
                // The readiness reserved for this call is given back (a dropped permit or
                // buffer slot), as a call uses it up: whoever holds this service must
                // ready it again, and no reservation sits idle while the request waits.
                let fresh = self.inner.clone();
                drop(std::mem::replace(&mut self.inner, fresh));
                crate::send_mark::hold(request.extensions());
                ResponseFuture::queued(ticket, limits, (self.inner.clone(), request), clock)
            }
            Admit::Fail(error) => ResponseFuture::failed(error),
        }
    }
}
