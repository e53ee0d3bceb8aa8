//! The future of [`RetryService`](super::RetryService): one request, all its attempts.

use super::error::{AttemptTimedOut, RetryError};
use super::policy::{RetryPolicy, Step};
use super::stats::GiveUp;
use crate::backoff::BackOff;
use crate::body::CloneBody;
use crate::body::ReplayGuard;
use crate::classify::RetryReason;
use crate::limits::LimitReached;
use http::{Request, Response};
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::time::Sleep;
use tower_service::Service;

use crate::error::BoxError;

pin_project! {
    /// The response future of [`RetryService`](super::RetryService).
    pub struct ResponseFuture<B, S, ReqB>
    where
        S: Service<Request<ReqB>>,
    {
        #[pin]
        pub(super) state: State<S::Future, S::Response>,
        pub(super) policy: RetryPolicy<B>,
        pub(super) service: S,
        // The copy every retry is cloned from; `None` when the request is never retried.
        pub(super) request: Option<Request<ReqB>>,
        pub(super) timeout: Option<Pin<Box<Sleep>>>,
    }
}

pin_project! {
    #[project = StateProj]
    pub(super) enum State<F, R> {
        // An attempt is in flight.
        Attempt { #[pin] future: F },
        // A retry waits. (Boxed: a request that succeeds at once never waits, and should
        // carry neither a timer nor a kept result in its future.)
        Waiting { wait: Pin<Box<Wait<R>>> },
    }
}

pin_project! {
    /// A retry waiting: first for its delay, then (`for_body`) for the previous attempt to
    /// hand the body back, until the request's deadline.
    struct Wait<R> {
        #[pin]
        sleep: Sleep,
        for_body: bool,
        // The failed attempt's result, returned if the retry cannot start after all.
        last: Option<(Result<R, BoxError>, RetryReason)>,
    }
}

/// A timer for the attempt about to start, when the settings ask for one (and a runtime is
/// there to run it).
#[inline]
pub(super) fn attempt_timeout<B>(policy: &RetryPolicy<B>) -> Option<Pin<Box<Sleep>>> {
    policy.current_settings().attempt_timeout().and_then(timer)
}

#[inline(never)]
fn timer(timeout: std::time::Duration) -> Option<Pin<Box<Sleep>>> {
    tokio::runtime::Handle::try_current().ok()?;
    Some(Box::pin(tokio::time::sleep(timeout)))
}

fn finish<B, ResB>(
    policy: &RetryPolicy<B>,
    result: Result<Response<ResB>, BoxError>,
    gave_up: Option<GiveUp>,
) -> Result<Response<ResB>, RetryError> {
    match result {
        Ok(mut res) => {
            policy.attach_stats(&mut res, gave_up);
            Ok(res)
        }
        Err(err) => Err(RetryError::new(err, policy.final_stats(gave_up))),
    }
}

impl<B, S, ReqB, ResB> Future for ResponseFuture<B, S, ReqB>
where
    B: BackOff + Clone,
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    S::Error: Into<BoxError>,
    ReqB: CloneBody,
{
    type Output = Result<Response<ResB>, RetryError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Attempt { future } => {
                    let (step, result) = match future.poll(cx) {
                        Poll::Ready(Ok(mut res)) => {
                            // Most requests end here, at a response: decided on the spot
                            // and returned as it came, moved once (as tower's `Retry`
                            // does), rather than through the error path's result type.
                            let step = match this.request.as_mut() {
                                Some(request) if !this.policy.ends_at(res.status()) => {
                                    let outcome = this.policy.classify_response(request, &res);
                                    this.policy.next_step(request, &outcome, None)
                                }
                                // Never retried, or a response that ends the request.
                                _ => {
                                    this.policy.fund_unclocked();
                                    Step::Done(None)
                                }
                            };
                            if let Step::Done(gave_up) = step {
                                this.policy.attach_stats(&mut res, gave_up);
                                return Poll::Ready(Ok(res));
                            }
                            (step, Ok(res))
                        }
                        Poll::Ready(Err(err)) => {
                            let err = err.into();
                            let step = this.policy.error_step(this.request.as_mut(), &err, false);
                            (step, Err(err))
                        }
                        Poll::Pending => {
                            this.policy.clock_start();
                            let expired = this
                                .timeout
                                .as_mut()
                                .is_some_and(|timer| timer.as_mut().poll(cx).is_ready());
                            if !expired {
                                return Poll::Pending;
                            }
                            let err = AttemptTimedOut::new().into();
                            let step = this.policy.error_step(this.request.as_mut(), &err, true);
                            (step, Err(err))
                        }
                    };
                    match step {
                        Step::Done(gave_up) => {
                            return Poll::Ready(finish(this.policy, result, gave_up));
                        }
                        Step::Retry(delay, reason) => {
                            *this.timeout = None;
                            let wait = Box::pin(Wait {
                                sleep: tokio::time::sleep(delay),
                                for_body: false,
                                last: Some((result, reason)),
                            });
                            this.state.set(State::Waiting { wait });
                        }
                    }
                }
                StateProj::Waiting { wait } => {
                    let wait = wait.as_mut().project();
                    let (mut sleep, for_body) = (wait.sleep, wait.for_body);
                    if !*for_body {
                        ready!(sleep.as_mut().poll(cx));
                    }
                    let request = this.request.as_ref().expect("only retryable requests wait");
                    if let Some(guard) = request.extensions().get::<ReplayGuard>() {
                        let why = if guard.is_capped() {
                            Some(GiveUp::BodyNotReplayable)
                        } else if guard.poll_released(cx).is_pending() {
                            // The previous attempt still holds the body (a stalled
                            // connection): wait for it, but never past the deadline.
                            if !*for_body {
                                *for_body = true;
                                sleep.as_mut().reset(this.policy.deadline());
                            }
                            ready!(sleep.as_mut().poll(cx));
                            Some(GiveUp::Limit(LimitReached::MaxElapsed))
                        } else {
                            None
                        };
                        if let Some(why) = why {
                            let (result, reason) =
                                wait.last.take().expect("a retry keeps its last result");
                            this.policy.give_up(request, reason, why);
                            return Poll::Ready(finish(this.policy, result, Some(why)));
                        }
                    }
                    if let Err(err) = ready!(this.service.poll_ready(cx)) {
                        let stats = this.policy.final_stats(None);
                        return Poll::Ready(Err(RetryError::new(err.into(), stats)));
                    }
                    this.policy.next_attempt();
                    let attempt = this.policy.retry_request(request);
                    *this.timeout = attempt_timeout(this.policy);
                    let future = this.service.call(attempt);
                    this.state.set(State::Attempt { future });
                }
            }
        }
    }
}
