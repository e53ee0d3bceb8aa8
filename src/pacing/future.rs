//! The response future of [`Pacing`](super::Pacing).

use super::gate::{Admit, Destination, InFlight, Shared, Ticket, Turn};
use super::{BoxError, PacingError};
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
    /// turn, sends it, and teaches the pace from the response.
    pub struct ResponseFuture<S, B>
    where
        S: Service<Request<B>>,
    {
        #[pin]
        state: State<S, Request<B>, S::Future>,
        shared: Arc<Shared>,
        to: Destination,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, R, F> {
        // Turned away: the error, taken when polled.
        Failed { error: Option<PacingError> },
        // Held by the destination's cool-down until `sleep` fires, then admitted afresh.
        // `pending` (a clone of the inner service, never polled ready, and the request)
        // is `Some` until the call.
        Cooling {
            #[pin]
            sleep: Sleep,
            pending: Option<(S, R)>,
            end: Instant,
            since: Instant,
        },
        // In the client's queue: `sleep` fires at the request's slot when it is first in
        // line, and at the end of its budget in any case.
        Queued {
            #[pin]
            sleep: Sleep,
            pending: Option<(S, R)>,
            ticket: Option<Ticket>,
            end: Instant,
            since: Instant,
        },
        // Its turn came: readying the clone of the inner service.
        Ready {
            pending: Option<(S, R)>,
            in_flight: Option<InFlight>,
        },
        // Sent during pacing round `round`: awaiting the inner service's response.
        Calling {
            #[pin]
            future: F,
            round: u64,
            sent: Instant,
            in_flight: Option<InFlight>,
        },
    }
}

impl<S, B> ResponseFuture<S, B>
where
    S: Service<Request<B>>,
{
    pub(crate) fn calling(
        future: S::Future,
        round: u64,
        in_flight: Option<InFlight>,
        shared: Arc<Shared>,
        to: Destination,
    ) -> Self {
        Self {
            state: State::Calling {
                future,
                round,
                sent: Instant::now(),
                in_flight,
            },
            shared,
            to,
        }
    }

    pub(crate) fn cooling(
        until: Instant,
        end: Instant,
        pending: (S, Request<B>),
        shared: Arc<Shared>,
        to: Destination,
    ) -> Self {
        Self {
            state: State::Cooling {
                sleep: sleep_until(until),
                pending: Some(pending),
                end,
                since: Instant::now(),
            },
            shared,
            to,
        }
    }

    pub(crate) fn queued(
        ticket: Ticket,
        end: Instant,
        pending: (S, Request<B>),
        shared: Arc<Shared>,
        to: Destination,
    ) -> Self {
        Self {
            state: State::Queued {
                sleep: sleep_until(end),
                pending: Some(pending),
                ticket: Some(ticket),
                end,
                since: Instant::now(),
            },
            shared,
            to,
        }
    }

    pub(crate) fn failed(error: PacingError, shared: Arc<Shared>, to: Destination) -> Self {
        Self {
            state: State::Failed { error: Some(error) },
            shared,
            to,
        }
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
                StateProj::Cooling {
                    sleep,
                    pending,
                    end,
                    since,
                } => {
                    ready!(sleep.poll(cx));
                    let pending = pending
                        .take()
                        .expect("ResponseFuture polled after completion");
                    let (end, since) = (*end, *since);
                    let next = match this.shared.admit(this.to, end) {
                        Admit::Go(in_flight) => State::Ready {
                            pending: Some(pending),
                            in_flight,
                        },
                        Admit::Cool(until) => State::Cooling {
                            sleep: sleep_until(until),
                            pending: Some(pending),
                            end,
                            since,
                        },
                        Admit::Queue(ticket) => State::Queued {
                            sleep: sleep_until(end),
                            pending: Some(pending),
                            ticket: Some(ticket),
                            end,
                            since,
                        },
                        Admit::Fail(error) => State::Failed { error: Some(error) },
                    };
                    this.state.set(next);
                }
                StateProj::Queued {
                    mut sleep,
                    pending,
                    ticket,
                    end,
                    since,
                } => {
                    let held = ticket
                        .as_ref()
                        .expect("ResponseFuture polled after completion");
                    match this.shared.turn(held, cx.waker()) {
                        Turn::Go(in_flight) => {
                            drop(ticket.take());
                            let pending = pending.take();
                            this.state.set(State::Ready { pending, in_flight });
                            continue;
                        }
                        Turn::At(at) => {
                            let at = at.min(*end);
                            if sleep.deadline() != at {
                                sleep.as_mut().reset(at);
                            }
                        }
                        Turn::Wait => {
                            if sleep.deadline() != *end {
                                sleep.as_mut().reset(*end);
                            }
                        }
                    }
                    ready!(sleep.poll(cx));
                    if Instant::now() < *end {
                        // The slot is open: take it.
                        continue;
                    }
                    // The budget ran out in the queue (the pace went down meanwhile).
                    let budget = *end - *since;
                    let wait = budget.saturating_add(this.shared.estimate(held));
                    drop(ticket.take());
                    tracing::debug!(?wait, ?budget, "pacing: request waited too long");
                    this.state.set(State::Failed {
                        error: Some(PacingError::WouldExceedBudget { wait, budget }),
                    });
                }
                StateProj::Ready { pending, in_flight } => {
                    let (service, _) = pending
                        .as_mut()
                        .expect("ResponseFuture polled after completion");
                    ready!(service.poll_ready(cx)).map_err(Into::into)?;
                    let (mut service, request) = pending.take().expect("checked above");
                    let in_flight = in_flight.take();
                    let round = this.shared.round();
                    let future = service.call(request);
                    this.state.set(State::Calling {
                        future,
                        round,
                        sent: Instant::now(),
                        in_flight,
                    });
                }
                StateProj::Calling {
                    future,
                    round,
                    sent,
                    in_flight,
                } => {
                    let result = ready!(future.poll(cx));
                    // Transport errors leave the pace alone: they say nothing about the
                    // server's load, and a dead host must not slow down the others.
                    if let Ok(response) = &result {
                        let (status, headers) = (response.status(), response.headers());
                        this.shared.record(this.to, *round, *sent, status, headers);
                    }
                    drop(in_flight.take());
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
            State::Cooling { .. } => "Cooling",
            State::Queued { .. } => "Queued",
            State::Ready { .. } => "Ready",
            State::Calling { .. } => "Calling",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .field("to", &self.to)
            .finish_non_exhaustive()
    }
}
