//! The [`Pacing`] service, and the per-request [`PacingDeadline`].

use super::destination::{Admit, Destination, Limits};
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

/// A request extension: the instant from which this request is no longer worth sending.
///
/// Pacing never sends it then: it fails with
/// [`PacingError::DeadlinePassed`](crate::PacingError::DeadlinePassed), or at once with
/// [`WaitTooLong`](crate::PacingError::WaitTooLong) if it would wait past it. A retry
/// layer puts its deadline into every attempt.
///
/// ```
/// # use std::time::Duration;
/// use tower_backoff::pacing::PacingDeadline;
///
/// let mut request = http::Request::new(());
/// let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
/// request.extensions_mut().insert(PacingDeadline(deadline));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PacingDeadline(pub Instant);

/// Paces the requests of a client, per destination; made by [`PacingLayer`](crate::PacingLayer).
///
/// Its error is a [`BoxError`](Box): the inner service's, or a
/// [`PacingError`](crate::PacingError) for a request turned away unsent.
///
/// # Readiness
///
/// A request that must wait gives back the readiness [`poll_ready`](Service::poll_ready)
/// reserved (a `Buffer` slot or a permit), and readies a clone of the inner service when
/// its turn comes, within its max wait: hence `S: Clone`.
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
        let shared = &self.shared;
        let known = shared.known.get(&key).copied();
        let destination = shared
            .destinations
            .get_or_insert(&key, known.is_some(), now, || {
                let gauges = shared.series.gauges(&key, known.is_some());
                Destination::new(key.clone(), shared.settings, known, gauges, now)
            });
        let Some(destination) = destination else {
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
