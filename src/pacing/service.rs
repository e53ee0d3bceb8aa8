//! The [`Pacing`] service, its [`ResponseFuture`], and the per-request [`PacingDeadline`].

use super::destination::{Admit, Grant, Limits, Ticket, Turn};
use super::destinations::Key;
#[cfg(feature = "redis")]
use super::fleet::{FleetGrant, FleetTicket, FleetTurn};
use super::layer::Shared;
use crate::error::BoxError;
use crate::error::pacing::PacingError;
use crate::time::{ClockFn, WallClock};
use http::{Request, Response};
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker, ready};
use tokio::time::{Instant, Sleep, sleep_until};
use tower_service::Service;

/// A request extension: the instant from which this request is no longer worth sending.
///
/// Pacing fails it then with [`DeadlinePassed`](crate::PacingError::DeadlinePassed), or at
/// once with [`WaitTooLong`](crate::PacingError::WaitTooLong) if it would wait past it.
/// A retry layer puts its deadline into every attempt.
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
/// Its error is the inner service's, or a [`PacingError`] for a request turned away unsent.
///
/// A request that must wait gives back the readiness [`poll_ready`](Service::poll_ready)
/// reserved (a `Buffer` slot, a permit), and readies a clone of the inner service when its
/// turn comes: hence `S: Clone`.
#[derive(Debug, Clone)]
pub struct Pacing<S> {
    pub(super) inner: S,
    pub(super) shared: Arc<Shared>,
}

impl<S> Pacing<S> {
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

    /// The request waits for its turn, with a clone of the inner service.
    fn wait<B>(
        &mut self,
        waiter: Waiter,
        limits: Limits,
        request: Request<B>,
        clock: Option<Arc<ClockFn>>,
    ) -> ResponseFuture<S, B>
    where
        S: Service<Request<B>> + Clone,
    {
        // Give back the readiness reserved for this call, as a call uses it up.
        self.inner = self.inner.clone();
        crate::send_mark::hold(request.extensions());
        let state = State::Waiting {
            sleep: sleep_until(limits.wake_by(Instant::now())),
            pending: Some((self.inner.clone(), request)),
            ticket: Some(waiter),
            grant: None,
            limits,
        };
        ResponseFuture { state, clock }
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
        let limits = Limits::new(now, self.shared.settings.max_wait, deadline);
        // In a fleet, even while Redis is away: a request waiting then asks it once it is back.
        #[cfg(feature = "redis")]
        if self.shared.fleet.is_some() {
            let known = self.shared.known.get(&key).copied();
            let ticket = FleetTicket::new(Arc::clone(&self.shared), key, known, now);
            return self.wait(Waiter::Fleet(Box::new(ticket)), limits, request, clock);
        }
        // `None`: a destination not paced (too many are).
        let destination = self.shared.destination(&key, now);
        let grant = match destination.map(|d| d.admit(&limits, now)) {
            None => None,
            Some(Admit::Go(grant)) => Some(Pass::Local(grant)),
            Some(Admit::Queue(ticket)) => {
                return self.wait(Waiter::Local(ticket), limits, request, clock);
            }
            Some(Admit::Fail(error)) => return ResponseFuture::failed(error),
        };
        let future = self.inner.call(request);
        let state = State::Calling { future, grant };
        ResponseFuture { state, clock }
    }
}

/// A request waiting for its turn: in its destination's queue, or for the fleet's slot.
#[derive(Debug)]
pub(crate) enum Waiter {
    Local(Ticket),
    #[cfg(feature = "redis")]
    Fleet(Box<FleetTicket>),
}

impl Waiter {
    /// Whether the request may go now (`None`: unpaced), else when to look again.
    fn turn(&mut self, limits: &Limits, waker: &Waker) -> Turn<Option<Pass>> {
        match self {
            Self::Local(ticket) => match ticket.turn(limits, waker) {
                Turn::Go(grant) => Turn::Go(Some(Pass::Local(grant))),
                Turn::At(at) => Turn::At(at),
                Turn::Fail(error) => Turn::Fail(error),
            },
            #[cfg(feature = "redis")]
            Self::Fleet(ticket) => match ticket.turn(limits, waker) {
                FleetTurn::Go(grant) => Turn::Go(Some(Pass::Fleet(grant))),
                FleetTurn::Local(grant) => Turn::Go(grant.map(Pass::Local)),
                FleetTurn::At(at) => Turn::At(at),
                FleetTurn::Fail(error) => Turn::Fail(error),
            },
        }
    }
}

/// A request let through, in flight until finished or dropped.
#[derive(Debug)]
pub(crate) enum Pass {
    Local(Grant),
    #[cfg(feature = "redis")]
    Fleet(FleetGrant),
}

pin_project! {
    /// The response of a [`Pacing`] service: waits for the request's
    /// turn at its destination, sends it, and teaches the pace from the response.
    pub struct ResponseFuture<S, B>
    where
        S: Service<Request<B>>,
    {
        #[pin]
        state: State<S, Request<B>, S::Future>,
        // The retry layer's wall clock, when it lent one: the response is read with it.
        clock: Option<Arc<ClockFn>>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, R, F> {
        // Turned away: the error, taken when polled.
        Failed { error: Option<PacingError> },
        // In its destination's queue while `ticket` is `Some`; then, its turn come,
        // readying `pending`'s clone of the inner service until the end of its wait (a
        // full `Buffer` or a concurrency limit must not hold it past that).
        Waiting {
            #[pin]
            sleep: Sleep,
            pending: Option<(S, R)>,
            ticket: Option<Waiter>,
            grant: Option<Pass>,
            limits: Limits,
        },
        // Sent (`grant` is `None` for a destination not paced).
        Calling {
            #[pin]
            future: F,
            grant: Option<Pass>,
        },
    }
}

impl<S: Service<Request<B>>, B> ResponseFuture<S, B> {
    pub(crate) fn failed(error: PacingError) -> Self {
        let state = State::Failed { error: Some(error) };
        Self { state, clock: None }
    }
}

impl<S, B, ResB> Future for ResponseFuture<S, B>
where
    S: Service<Request<B>, Response = Response<ResB>>,
    S::Error: Into<BoxError>,
{
    type Output = Result<Response<ResB>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        const DONE: &str = "ResponseFuture polled after completion";
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Failed { error } => {
                    return Poll::Ready(Err(error.take().expect(DONE).into()));
                }
                StateProj::Waiting {
                    mut sleep,
                    pending,
                    ticket,
                    grant,
                    limits,
                } => {
                    if let Some(held) = ticket {
                        let at = match held.turn(limits, cx.waker()) {
                            Turn::Go(go) => {
                                (*ticket, *grant) = (None, go);
                                sleep.as_mut().reset(limits.end);
                                continue;
                            }
                            Turn::Fail(error) => {
                                this.state.set(State::Failed { error: Some(error) });
                                continue;
                            }
                            Turn::At(at) => at.min(limits.wake_by(Instant::now())),
                        };
                        if sleep.deadline() != at {
                            sleep.as_mut().reset(at);
                        }
                        ready!(sleep.poll(cx));
                        continue;
                    }
                    let (service, _) = pending.as_mut().expect(DONE);
                    let ready = service.poll_ready(cx).map_err(Into::into)?;
                    let now = Instant::now();
                    if ready.is_pending() || limits.deadline.is_some_and(|d| now >= d) {
                        // Not ready by the end of its wait, or readied past its deadline.
                        ready!(sleep.poll(cx));
                        tracing::debug!("pacing: inner service not ready in time");
                        let error = Some(limits.expired(Instant::now()));
                        this.state.set(State::Failed { error });
                        continue;
                    }
                    let (mut service, request) = pending.take().expect(DONE);
                    crate::send_mark::send(request.extensions(), now);
                    let (future, grant) = (service.call(request), grant.take());
                    this.state.set(State::Calling { future, grant });
                }
                StateProj::Calling { future, grant } => {
                    let mut result = ready!(future.poll(cx));
                    // Transport errors leave the pace alone: they say nothing of the
                    // server's load, and a dead host must not slow the others down.
                    if let (Ok(response), Some(grant)) = (&mut result, grant.take()) {
                        let (status, headers) = (response.status(), response.headers());
                        let clock = this.clock.as_deref();
                        let said = match grant {
                            Pass::Local(grant) => grant.finish(status, headers, clock),
                            #[cfg(feature = "redis")]
                            Pass::Fleet(grant) => grant.finish(status, headers, clock),
                        };
                        // Read once: the retry layer above takes the delay from here.
                        said.share(response.extensions_mut());
                    }
                    return Poll::Ready(result.map_err(Into::into));
                }
            }
        }
    }
}

impl<S: Service<Request<B>>, B> std::fmt::Debug for ResponseFuture<S, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.state {
            State::Failed { .. } => "Failed",
            State::Waiting { ticket, .. } if ticket.is_some() => "Queued",
            State::Waiting { .. } => "Ready",
            State::Calling { .. } => "Calling",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}
