//! The response future of [`Pacing`](super::Pacing).

use super::destination::{Grant, Limits, Ticket, Turn};
use super::queue::RECHECK;
use crate::error::BoxError;
use crate::error::pacing::PacingError;
use crate::time::ClockFn;
use crate::time::instant_after;
use http::{Request, Response};
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use tokio::time::{Instant, Sleep, sleep_until};
use tower_service::Service;

pin_project! {
    /// The response of a [`Pacing`](super::Pacing) service: waits for the request's
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
        // In its destination's queue. `pending` (a clone of the inner service, never
        // polled ready, and the request) is `Some` until the call.
        Queued {
            #[pin]
            sleep: Sleep,
            pending: Option<(S, R)>,
            ticket: Option<Ticket>,
            limits: Limits,
        },
        // Its turn came: readying the clone of the inner service, until the end of its
        // wait (a full `Buffer` or a concurrency limit must not hold it past that).
        Ready {
            #[pin]
            sleep: Sleep,
            pending: Option<(S, R)>,
            grant: Option<Grant>,
            limits: Limits,
        },
        // Sent: awaiting the inner service's response (`grant` is `None` for a
        // destination not paced).
        Calling {
            #[pin]
            future: F,
            grant: Option<Grant>,
        },
    }
}

impl<S, B> ResponseFuture<S, B>
where
    S: Service<Request<B>>,
{
    pub(crate) fn calling(
        future: S::Future,
        grant: Option<Grant>,
        clock: Option<Arc<ClockFn>>,
    ) -> Self {
        Self {
            state: State::Calling { future, grant },
            clock,
        }
    }

    pub(crate) fn queued(
        ticket: Ticket,
        limits: Limits,
        pending: (S, Request<B>),
        clock: Option<Arc<ClockFn>>,
    ) -> Self {
        Self {
            state: State::Queued {
                sleep: sleep_until(limits.wake_by(Instant::now())),
                pending: Some(pending),
                ticket: Some(ticket),
                limits,
            },
            clock,
        }
    }

    pub(crate) fn failed(error: PacingError) -> Self {
        Self {
            state: State::Failed { error: Some(error) },
            clock: None,
        }
    }
}

/// What a queued request does after looking at its turn.
enum Look<S, R, F> {
    /// Looks again then (or when woken).
    Again(Instant),
    /// Moves on to this state: its turn came, or it cannot wait for it.
    Move(State<S, R, F>),
}

/// Looks at a queued request's turn.
fn next_look<S, R, F>(
    ticket: &mut Option<Ticket>,
    pending: &mut Option<(S, R)>,
    limits: &Limits,
    cx: &mut Context<'_>,
) -> Look<S, R, F> {
    let held = ticket
        .as_ref()
        .expect("ResponseFuture polled after completion");
    match held.turn(limits, cx.waker()) {
        Turn::Go(grant) => {
            drop(ticket.take());
            Look::Move(State::Ready {
                sleep: sleep_until(limits.end()),
                pending: pending.take(),
                grant: Some(grant),
                limits: *limits,
            })
        }
        Turn::Fail(error) => {
            drop(ticket.take());
            Look::Move(State::Failed { error: Some(error) })
        }
        Turn::At(at) => Look::Again(at.min(limits.wake_by(Instant::now()))),
        Turn::Wait => {
            let now = Instant::now();
            Look::Again(limits.wake_by(now).min(instant_after(now, RECHECK)))
        }
    }
}

/// Teaches the pace from the response to a request sent under `grant`, read with
/// `clock`, and releases the grant.
fn learn<ResB, E>(
    result: &mut Result<Response<ResB>, E>,
    grant: Option<Grant>,
    clock: Option<&ClockFn>,
) {
    // Transport errors leave the pace alone: they say nothing about the server's load,
    // and a dead host must not slow down the others.
    match (result, grant) {
        (Ok(response), Some(grant)) => {
            let (status, headers) = (response.status(), response.headers());
            let said = grant.finish(status, headers, clock);
            // Read once: the retry layer above takes the delay from here.
            said.share(response.extensions_mut());
        }
        (_, grant) => drop(grant),
    }
}

impl<S, B, ResB> Future for ResponseFuture<S, B>
where
    S: Service<Request<B>, Response = Response<ResB>>,
    S::Error: Into<BoxError>,
{
    type Output = Result<Response<ResB>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Failed { error } => {
                    let error = error
                        .take()
                        .expect("ResponseFuture polled after completion");
                    return Poll::Ready(Err(error.into()));
                }
                StateProj::Queued {
                    mut sleep,
                    pending,
                    ticket,
                    limits,
                } => {
                    let target = match next_look(ticket, pending, limits, cx) {
                        Look::Again(target) => target,
                        Look::Move(next) => {
                            this.state.set(next);
                            continue;
                        }
                    };
                    if sleep.deadline() != target {
                        sleep.as_mut().reset(target);
                    }
                    ready!(sleep.poll(cx));
                }
                StateProj::Ready {
                    sleep,
                    pending,
                    grant,
                    limits,
                } => {
                    let (service, _) = pending
                        .as_mut()
                        .expect("ResponseFuture polled after completion");
                    let ready = service.poll_ready(cx).map_err(Into::into)?;
                    let now = Instant::now();
                    if ready.is_pending() || limits.deadline().is_some_and(|d| now >= d) {
                        // Not ready by the end of its wait, or readied past its deadline.
                        ready!(sleep.poll(cx));
                        tracing::debug!("pacing: inner service not ready in time");
                        let error = limits.expired(Instant::now());
                        this.state.set(State::Failed { error: Some(error) });
                        continue;
                    }
                    let (mut service, request) = pending.take().expect("checked above");
                    crate::send_mark::send(request.extensions(), now);
                    let grant = grant.take();
                    let future = service.call(request);
                    this.state.set(State::Calling { future, grant });
                }
                StateProj::Calling { future, grant } => {
                    let mut result = ready!(future.poll(cx));
                    learn(&mut result, grant.take(), this.clock.as_deref());
                    return Poll::Ready(result.map_err(Into::into));
                }
            }
        }
    }
}

impl<S, B> std::fmt::Debug for ResponseFuture<S, B>
where
    S: Service<Request<B>>,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match self.state {
            State::Failed { .. } => "Failed",
            State::Queued { .. } => "Queued",
            State::Ready { .. } => "Ready",
            State::Calling { .. } => "Calling",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}
