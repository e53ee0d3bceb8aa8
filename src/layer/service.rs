//! The service [`RetryLayer`](crate::RetryLayer) wraps a client in.

use super::error::RetryError;
use super::future::{ResponseFuture, State, attempt_timeout};
use super::policy::{RetryPolicy, clone_request};
use super::stats::RetryStats;
use crate::backoff::BackOff;
use crate::body::CloneBody;
use http::{Request, Response};
use std::task::{Context, Poll};
use tower_service::Service;

use crate::error::BoxError;

/// Retries requests to an inner HTTP service; made by [`RetryLayer`](crate::RetryLayer).
///
/// Each call runs the layer's [`RetryPolicy`] over the attempts of one request. A response
/// that is retried is dropped at once, but for its head: its unread body would hold the
/// connection (an HTTP/2 window other requests share) for the whole wait. A retry that
/// cannot start after its wait fails with a [`RetryError`] around a
/// [`LastResponse`](crate::layer::LastResponse), the head of what the server last said. Every
/// failure carries the request's [`RetryStats`].
///
/// The inner service must be `Clone` (each request keeps a handle for its retries, as with
/// tower's own `Retry`) and its request body too: wrap streaming bodies with
/// [`RetryLayer::replay_bodies`](crate::RetryLayer::replay_bodies).
#[derive(Debug, Clone)]
pub struct RetryService<B, S> {
    inner: S,
    policy: RetryPolicy<B>,
}

impl<B, S> RetryService<B, S> {
    pub(crate) fn new(inner: S, policy: RetryPolicy<B>) -> Self {
        Self { inner, policy }
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

impl<B, S, ReqB, ResB> Service<Request<ReqB>> for RetryService<B, S>
where
    B: BackOff + Clone,
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone,
    S::Error: Into<BoxError>,
    ReqB: CloneBody,
{
    type Response = Response<ResB>;
    type Error = RetryError;
    type Future = ResponseFuture<B, S, ReqB>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(|e| {
            RetryError::new(
                e.into(),
                RetryStats {
                    attempts: 0,
                    ..RetryStats::default()
                },
            )
        })
    }

    // Inlined, so that the response future is built where the caller keeps it rather
    // than returned and copied there, as tower's own `Retry::call` is.
    #[inline]
    fn call(&mut self, mut req: Request<ReqB>) -> Self::Future {
        crate::send_mark::warn_if_paced_above(req.extensions());
        let mut policy = self.policy.clone();
        policy.lend_clock(&mut req);
        // The original goes out first (a replayable body's original owns its stream); a
        // copy is kept for the retries.
        let request = if policy.begin(&req) {
            Some(clone_request(&req))
        } else {
            None
        };
        let timeout = attempt_timeout(&policy, &mut req);
        let span = policy.attempt_span(&req);
        // NOTE: the request goes to the service that was driven to readiness, and the
        // future gets a clone for its retries, as in tower's `Retry`. A layer below that
        // holds the request back (pacing) then leaves its reserved permit or buffer slot
        // here, for the next request, rather than pinned in a waiting future.
        let future = super::span::within(&span, || self.inner.call(req));
        let service = self.inner.clone();
        ResponseFuture {
            state: State::Attempt { future, span },
            policy,
            service,
            request,
            timeout,
        }
    }
}
