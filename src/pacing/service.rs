//! The [`Pacing`] service, and the per-request [`PacingDeadline`].

use super::destination::{Admit, Limits};
use super::destinations::Key;
use super::future::ResponseFuture;
use super::layer::Shared;
use crate::error::BoxError;
use crate::error::pacing::PacingError;
use crate::time::WallClock;
use http::{Request, Response};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::time::Instant;
use tower_service::Service;

/// A request extension: the instant after which this request is no longer worth sending.
///
/// Pacing never sends a request at or after its deadline: one its destination would hold
/// longer fails at once with [`PacingError::WaitTooLong`](crate::PacingError::WaitTooLong),
/// one that arrives or waits until then with
/// [`PacingError::DeadlinePassed`](crate::PacingError::DeadlinePassed). The shorter of it
/// and [`with_max_wait`](crate::pacing::PacingBuilder::with_max_wait) wins. A retry layer
/// puts the request's deadline into every attempt.
///
/// ```
/// use std::time::Duration;
/// use tokio::time::Instant;
/// use tower_backoff::pacing::PacingDeadline;
///
/// let mut request = http::Request::new(());
/// // This request may wait at most 2 s for the pace or a cool-down.
/// let deadline = PacingDeadline(Instant::now() + Duration::from_secs(2));
/// request.extensions_mut().insert(deadline);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PacingDeadline(pub Instant);

/// Paces the requests of a client, per destination; made by
/// [`PacingLayer`](crate::PacingLayer).
///
/// Its error is a [`BoxError`](Box), as tower's `Timeout`'s: the inner service's error, or
/// a [`PacingError`](crate::PacingError) for a request turned away unsent.
///
/// # Readiness
///
/// [`poll_ready`](Service::poll_ready) forwards to the inner service. A request that must
/// wait gives that readiness back (a `Buffer` slot or a permit would be pinned for the
/// whole wait), and readies a clone of the inner service when its turn comes, hence
/// `S: Clone`. That readying never holds it past its max wait or deadline.
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
        let extensions = request.extensions_mut();
        extensions.insert(crate::send_mark::PacedAbove);
        let now = Instant::now();
        let clock = extensions.get::<WallClock>().map(|c| c.0.clone());
        let deadline = extensions.get::<PacingDeadline>().map(|d| d.0);
        let key = Key::of(&request);
        if deadline.is_some_and(|deadline| now >= deadline) {
            tracing::debug!(to = %key, "pacing: request past its deadline");
            return ResponseFuture::failed(PacingError::DeadlinePassed);
        }
        let Some(destination) = self.shared.destination(&key, now) else {
            return ResponseFuture::calling(self.inner.call(request), None, clock);
        };
        let limits = Limits::new(now, self.shared.settings.max_wait, deadline);
        match destination.admit(&limits, now) {
            Admit::Go(grant) => {
                ResponseFuture::calling(self.inner.call(request), Some(grant), clock)
            }
            Admit::Queue(ticket) => {
                // Give back the readiness reserved for this call, as a call uses it up.
                let fresh = self.inner.clone();
                drop(std::mem::replace(&mut self.inner, fresh));
                crate::send_mark::hold(request.extensions());
                ResponseFuture::queued(ticket, limits, (self.inner.clone(), request), clock)
            }
            Admit::Fail(error) => ResponseFuture::failed(error),
        }
    }
}
