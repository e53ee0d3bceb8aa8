//! The response future of [`Pacing`](super::Pacing).

use super::gate::{Destination, Shared};
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
    /// slot, sends it, and teaches the pace from the response.
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
        // Sleeping until the reserved start, then readying the clone of the inner
        // service. NOTE: `pending` is `Some` until the call; the clone was never polled
        // ready, so it must be before `call`.
        Waiting {
            #[pin]
            sleep: Sleep,
            pending: Option<(S, R)>,
        },
        // Sent during pacing round `round`: awaiting the inner service's response.
        Calling { #[pin] future: F, round: u64 },
    }
}

impl<S, B> ResponseFuture<S, B>
where
    S: Service<Request<B>>,
{
    pub(crate) fn calling(
        future: S::Future,
        round: u64,
        shared: Arc<Shared>,
        to: Destination,
    ) -> Self {
        Self {
            state: State::Calling { future, round },
            shared,
            to,
        }
    }

    pub(crate) fn waiting(
        start: Instant,
        service: S,
        request: Request<B>,
        shared: Arc<Shared>,
        to: Destination,
    ) -> Self {
        Self {
            state: State::Waiting {
                sleep: sleep_until(start),
                pending: Some((service, request)),
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
                StateProj::Waiting { sleep, pending } => {
                    ready!(sleep.poll(cx));
                    let (service, _) = pending
                        .as_mut()
                        .expect("ResponseFuture polled after completion");
                    ready!(service.poll_ready(cx)).map_err(Into::into)?;
                    let (mut service, request) = pending.take().expect("checked above");
                    let round = this.shared.round();
                    let future = service.call(request);
                    this.state.set(State::Calling { future, round });
                }
                StateProj::Calling { future, round } => {
                    let result = ready!(future.poll(cx));
                    // Transport errors leave the pace alone: they say nothing about the
                    // server's load, and a dead host must not slow down the others.
                    if let Ok(response) = &result {
                        let (status, headers) = (response.status(), response.headers());
                        this.shared.record(this.to, *round, status, headers);
                    }
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
            State::Waiting { .. } => "Waiting",
            State::Calling { .. } => "Calling",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .field("to", &self.to)
            .finish_non_exhaustive()
    }
}
