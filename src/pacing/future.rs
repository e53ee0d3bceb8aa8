//! The response future of [`Pacing`](super::Pacing).

use super::destination::{Grant, Limits, Ticket, Turn};
use crate::error::BoxError;
use crate::error::pacing::PacingError;
use crate::time::ClockFn;
use http::{Request, Response};
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use tokio::time::{Instant, Sleep, sleep_until};
use tower_service::Service;

/// The retry layer's wall clock, when it lent one: the response is read with it.
type Clock = Option<Arc<ClockFn>>;

pin_project! {
    /// The response of a [`Pacing`](super::Pacing) service: waits for the request's
    /// turn at its destination, sends it, and teaches the pace from the response.
    pub struct ResponseFuture<S, B>
    where
        S: Service<Request<B>>,
    {
        #[pin]
        state: State<S, Request<B>, S::Future>,
        clock: Clock,
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
            ticket: Option<Ticket>,
            grant: Option<Grant>,
            limits: Limits,
        },
        // Sent (`grant` is `None` for a destination not paced).
        Calling {
            #[pin]
            future: F,
            grant: Option<Grant>,
        },
    }
}

impl<S: Service<Request<B>>, B> ResponseFuture<S, B> {
    pub(crate) fn calling(future: S::Future, grant: Option<Grant>, clock: Clock) -> Self {
        let state = State::Calling { future, grant };
        Self { state, clock }
    }

    pub(crate) fn queued(
        ticket: Ticket,
        limits: Limits,
        pending: (S, Request<B>),
        clock: Clock,
    ) -> Self {
        let state = State::Waiting {
            sleep: sleep_until(limits.wake_by(Instant::now())),
            pending: Some(pending),
            ticket: Some(ticket),
            grant: None,
            limits,
        };
        Self { state, clock }
    }

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
                                (*ticket, *grant) = (None, Some(go));
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
                    let grant = grant.take();
                    let future = service.call(request);
                    this.state.set(State::Calling { future, grant });
                }
                StateProj::Calling { future, grant } => {
                    let mut result = ready!(future.poll(cx));
                    // Transport errors leave the pace alone: they say nothing of the
                    // server's load, and a dead host must not slow the others down.
                    if let (Ok(response), Some(grant)) = (&mut result, grant.take()) {
                        let (status, headers) = (response.status(), response.headers());
                        let said = grant.finish(status, headers, this.clock.as_deref());
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
            State::Waiting {
                ticket: Some(_), ..
            } => "Queued",
            State::Waiting { .. } => "Ready",
            State::Calling { .. } => "Calling",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}
