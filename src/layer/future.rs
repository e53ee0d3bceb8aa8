//! The future of [`RetryService`](super::RetryService): one request, all its attempts.

use super::error::{AttemptTimedOut, LastResponse, RetryError};
use super::policy::{RetryPolicy, Step};
use super::span;
use super::stats::GiveUp;
use crate::backoff::BackOff;
use crate::body::CloneBody;
use crate::body::ReplayGuard;
use crate::classify::RetryReason;
use crate::limits::LimitReached;
use crate::send_mark::{SendMark, Sent};
use crate::time::instant_after;
use http::{Request, Response};
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::time::Sleep;
use tower_service::Service;
use tracing::Span;

use crate::error::BoxError;

pin_project! {
    /// The response future of [`RetryService`](super::RetryService).
    pub struct ResponseFuture<B, S, ReqB>
    where
        S: Service<Request<ReqB>>,
    {
        #[pin]
        pub(super) state: State<S::Future>,
        pub(super) policy: RetryPolicy<B>,
        pub(super) service: S,
        // The copy every retry is cloned from; `None` when the request is never retried.
        pub(super) request: Option<Request<ReqB>>,
        pub(super) timeout: Option<Pin<Box<AttemptTimer>>>,
    }

    // A request dropped while its retry waits (a timeout above the retry layer, say) is
    // given up on where hooks, metrics and traces see it, rather than silently.
    impl<B, S, ReqB> PinnedDrop for ResponseFuture<B, S, ReqB>
    where
        S: Service<Request<ReqB>>,
    {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if let (Some(reason), Some(request)) = (this.policy.take_waiting_retry(), this.request) {
                this.policy.give_up(request, reason, GiveUp::Cancelled);
            }
        }
    }
}

pin_project! {
    #[project = StateProj]
    pub(super) enum State<F> {
        // An attempt is in flight, in its span.
        // (Boxed: most requests run without a subscriber that wants the span, and
        // should not carry its room in their future.)
        Attempt { #[pin] future: F, span: Option<Box<Span>> },
        // A retry waits. (Boxed: a request that succeeds at once never waits, and should
        // carry neither a timer nor a kept result in its future.)
        Waiting { wait: Pin<Box<Wait>> },
    }
}

pin_project! {
    /// A retry waiting: first for its delay, then (`at_deadline`) for the previous attempt
    /// to hand the body back and for the inner service to be ready, until the request's
    /// deadline.
    struct Wait {
        #[pin]
        sleep: Sleep,
        at_deadline: bool,
        // The failed attempt's error, or the head of its response (its body is dropped at
        // once, to free the connection), returned if the retry cannot start after all.
        last: Option<(BoxError, RetryReason)>,
    }
}

pin_project! {
    /// The timer of one attempt. It runs from the attempt's send: a pacing layer below
    /// that holds the attempt back marks when it lets it go.
    pub(super) struct AttemptTimer {
        #[pin]
        sleep: Sleep,
        timeout: Duration,
        mark: SendMark,
        // Whether the timer was moved to the send time of a held attempt.
        from_send: bool,
    }
}

impl AttemptTimer {
    /// Whether the attempt has run out of time: never while it is held unsent.
    fn poll_expired(self: Pin<&mut Self>, cx: &mut Context<'_>) -> bool {
        let this = self.project();
        match this.mark.get() {
            Sent::Held => return false,
            Sent::At(at) if !*this.from_send => {
                *this.from_send = true;
                this.sleep.reset(instant_after(at, *this.timeout));
                return false;
            }
            _ => {}
        }
        this.sleep.poll(cx).is_ready()
    }
}

/// A timer for the attempt `request` is about to start, when the settings ask for one (and
/// a runtime is there to run it); it marks the request so that pacing can tell when it
/// leaves.
#[inline]
pub(super) fn attempt_timeout<B, ReqB>(
    policy: &RetryPolicy<B>,
    request: &mut Request<ReqB>,
) -> Option<Pin<Box<AttemptTimer>>> {
    policy
        .current_settings()
        .attempt_timeout()
        .and_then(|timeout| timer(timeout, request.extensions_mut()))
}

#[inline(never)]
fn timer(timeout: Duration, extensions: &mut http::Extensions) -> Option<Pin<Box<AttemptTimer>>> {
    tokio::runtime::Handle::try_current().ok()?;
    let mark = SendMark::default();
    extensions.insert(mark.clone());
    Some(Box::pin(AttemptTimer {
        sleep: tokio::time::sleep(timeout),
        timeout,
        mark,
        from_send: false,
    }))
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

/// Whether the retry of `request` can go now: its body is back from the previous attempt
/// and `service` is ready. A body past its buffer, or a service that failed to get ready
/// (a `Buffer` whose worker died, a closed pool), gives up the retry.
fn poll_resend_ready<S, ReqB>(
    request: &Request<ReqB>,
    service: &mut S,
    cx: &mut Context<'_>,
) -> Poll<Result<(), GiveUp>>
where
    S: Service<Request<ReqB>>,
    S::Error: Into<BoxError>,
{
    if let Some(guard) = request.extensions().get::<ReplayGuard>() {
        if guard.is_capped() {
            return Poll::Ready(Err(GiveUp::BodyNotReplayable));
        }
        ready!(guard.poll_released(cx));
    }
    Poll::Ready(ready!(service.poll_ready(cx)).map_err(|err| {
        let err: BoxError = err.into();
        tracing::debug!(error = %err, "the inner service failed to get ready for a retry");
        GiveUp::ServiceNotReady
    }))
}

impl Wait {
    /// The wait of `delay` before a retry, keeping the failed attempt's `result` in case
    /// the retry cannot start after all.
    fn new<ResB>(
        delay: Duration,
        result: Result<Response<ResB>, BoxError>,
        reason: RetryReason,
    ) -> Pin<Box<Self>> {
        // An unread body would hold its connection (an HTTP/2 window, an HTTP/1
        // connection) for the whole wait: only its head stays.
        let last = match result {
            Ok(res) => LastResponse::of(res).into(),
            Err(err) => err,
        };
        Box::pin(Wait {
            sleep: tokio::time::sleep(delay),
            at_deadline: false,
            last: Some((last, reason)),
        })
    }
}

/// Polls a retry's wait: `Ok` once the retry of `request` can go, `Err` with the
/// request's result when it is given up (the body is past its buffer, the inner service
/// failed to get ready, or the deadline came first).
fn poll_wait<B, S, ReqB, ResB>(
    wait: Pin<&mut Wait>,
    policy: &mut RetryPolicy<B>,
    request: &mut Request<ReqB>,
    service: &mut S,
    cx: &mut Context<'_>,
) -> Poll<Result<(), Result<Response<ResB>, RetryError>>>
where
    S: Service<Request<ReqB>>,
    S::Error: Into<BoxError>,
{
    let wait = wait.project();
    let (mut sleep, at_deadline) = (wait.sleep, wait.at_deadline);
    if !*at_deadline {
        ready!(sleep.as_mut().poll(cx));
    }
    let why = match poll_resend_ready(request, service, cx) {
        Poll::Ready(Ok(())) => return Poll::Ready(Ok(())),
        Poll::Ready(Err(why)) => why,
        Poll::Pending => {
            // A stalled connection still holds the body, or a full buffer or concurrency
            // limit below: wait, but never past the deadline.
            if !*at_deadline {
                *at_deadline = true;
                sleep.as_mut().reset(policy.deadline());
            }
            ready!(sleep.as_mut().poll(cx));
            GiveUp::Limit(LimitReached::MaxElapsed)
        }
    };
    let (last, reason) = wait.last.take().expect("a retry keeps its last result");
    policy.take_waiting_retry();
    policy.give_up(request, reason, why);
    Poll::Ready(Err(finish(policy, Err(last), Some(why))))
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
                StateProj::Attempt { future, span } => {
                    let poll = span::within(span, || future.poll(cx));
                    let (step, result) = match poll {
                        Poll::Ready(Ok(mut res)) => {
                            span::ended(span, Ok(res.status()));
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
                                    this.policy.end_at(&res);
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
                            span::ended(span, Err("_OTHER"));
                            let err = err.into();
                            let step = this.policy.error_step(this.request.as_mut(), &err, false);
                            (step, Err(err))
                        }
                        Poll::Pending => {
                            this.policy.clock_start();
                            let expired = this
                                .timeout
                                .as_mut()
                                .is_some_and(|timer| timer.as_mut().poll_expired(cx));
                            if !expired {
                                return Poll::Pending;
                            }
                            span::ended(span, Err("timeout"));
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
                            let wait = Wait::new(delay, result, reason);
                            this.state.set(State::Waiting { wait });
                        }
                    }
                }
                StateProj::Waiting { wait } => {
                    let request = this.request.as_mut().expect("only retryable requests wait");
                    let waited = poll_wait(wait.as_mut(), this.policy, request, this.service, cx);
                    if let Err(given_up) = ready!(waited) {
                        return Poll::Ready(given_up);
                    }
                    this.policy.next_attempt();
                    let mut attempt = this.policy.retry_request(request);
                    *this.timeout = attempt_timeout(this.policy, &mut attempt);
                    let span = this.policy.attempt_span(&attempt);
                    let future = span::within(&span, || this.service.call(attempt));
                    this.state.set(State::Attempt { future, span });
                }
            }
        }
    }
}
