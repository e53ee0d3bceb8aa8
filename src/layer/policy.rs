//! The retry policy: one request's state, and the path of every failed attempt —
//! decide, then admit, then act.

use super::admit;
use super::delay;
use super::hook::{GiveUpEvent, RetryEvent, server_address};
use super::settings::RetrySettings;
use super::shared::Shared;
use super::span;
use super::stats::{GiveUp, RetryStats};
use crate::backoff::BackOff;
use crate::backoff::jitter::Jitter;
use crate::budget::ThrottleOutcome;
use crate::classify::{AsError, Attempt, Outcome, RequestHead, ResponseHead, RetryReason};
use crate::pacing::PacingDeadline;
use crate::time::WallClock;
use http::{Request, Response};
use pin_project_lite::pin_project;
use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::{Instant, Sleep};

/// The retry policy of [`RetryLayer`](crate::RetryLayer).
///
/// The layer's own service drives it; it also implements [`tower::retry::Policy`], so
/// `tower::retry::RetryLayer::new(layer.policy())` works too — with tower's service the
/// last response is dropped while the retry waits, so a retry that turns out impossible
/// after its wait (a body that outgrew its buffer meanwhile) fails with the body's error
/// instead of returning that response, and failed requests do not carry [`RetryStats`].
///
/// The policy is cloned for each request: the clone holds that request's state (settings,
/// attempt count, backoff, start, time waited); everything else is shared. What happens to
/// a failed attempt, in order:
///
/// 1. **Decide**: the layer's [`Classify`](crate::classify::Classify) turns the response or
///    error into an [`Outcome`].
/// 2. **Admit**: a retryable outcome must pass, in order: the server did not forbid it, the
///    request may be sent again ([`Resend`](crate::classify::Resend)), its body can be
///    replayed, a runtime is there to wait in, attempts are left, the delay
///    (see [`RetryLayer`](crate::RetryLayer#decisions)) ends before the request's
///    deadline, the [`RetryThrottle`](crate::budget::RetryThrottle) is open and the shared
///    [`RetryBudget`](crate::budget::RetryBudget) pays.
/// 3. **Act**: the hook and `tracing` are told, the request is marked for its resend, and
///    the policy waits.
///
/// ```
/// use std::time::Duration;
/// use tower::retry::Policy;
/// use tower_backoff::{ConstantBackOff, RetryLayer};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// type Req = http::Request<String>;
/// type Res = http::Response<String>;
///
/// let mut policy = RetryLayer::new(ConstantBackOff::new(Duration::from_millis(100)).unwrap()).policy();
/// let req: Req = http::Request::get("/").body(String::new()).unwrap();
/// let mut copy = Policy::<Req, Res, std::io::Error>::clone_request(&mut policy, &req)
///     .expect("GETs can be retried");
/// let mut result: Result<Res, std::io::Error> =
///     Ok(http::Response::builder().status(503).body(String::new()).unwrap());
/// assert!(policy.retry(&mut copy, &mut result).is_some());
/// # }
/// ```
pub struct RetryPolicy<B> {
    template: Arc<Template<B>>,
    /// What only a retried request needs (its backoff, its random stream), made at its
    /// first retry: boxed, so that the response future of a request that succeeds at once
    /// stays small and allocates nothing for it.
    retry: Option<Box<Retrying<B>>>,
    /// The request's own settings or its route's; `None`: the layer's.
    settings: Option<RetrySettings>,
    /// When the request started: the first time its clock was needed (see
    /// [`clock_start`](Self::clock_start)). `None` until then.
    start: Option<Instant>,
    attempts: u32,
    waited: Duration,
    retrying: bool,
    /// The head of a request that is never retried, kept only when a retry throttle must
    /// still hear how it went.
    unretried: Option<Box<Request<()>>>,
}

/// The state of a request that is being retried.
struct Retrying<B> {
    /// A copy of the template's backoff, reset.
    backoff: B,
    /// Drawn from the layer's generator at the first spread delay of the request.
    jitter: Option<Jitter>,
    /// What the last retry cost the shared budget: refunded if it succeeds.
    paid: u32,
    /// The retry decided and not sent yet: counted in the metrics when it is sent, so
    /// that a request dropped during its wait counts no retry.
    scheduled: Option<(RetryReason, Duration)>,
}

/// What every request of a layer starts from: one `Arc`, so cloning the policy per request
/// copies a pointer and a few counters.
struct Template<B> {
    backoff: B,
    shared: Shared,
}

/// A clone carries the request state it was taken with: tower's `Retry` asks its own
/// policy to clone the request (which starts the request) and then clones that policy
/// into the response future. The retry-only state is left behind: it is made at the
/// clone's first retry.
impl<B> Clone for RetryPolicy<B> {
    fn clone(&self) -> Self {
        Self {
            template: Arc::clone(&self.template),
            retry: None,
            settings: self.settings.clone(),
            start: self.start,
            attempts: self.attempts,
            waited: self.waited,
            retrying: false,
            unretried: None,
        }
    }
}

/// What to do after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Wait this long, then send the request again (it is retried for this reason).
    Retry(Duration, RetryReason),
    /// Return this attempt's result; why it was not retried, if it was retryable.
    Done(Option<GiveUp>),
}

impl<B> RetryPolicy<B> {
    pub(crate) fn new(backoff: B, shared: Arc<Shared>) -> Self {
        let shared = Arc::unwrap_or_clone(shared);
        Self {
            template: Arc::new(Template { backoff, shared }),
            retry: None,
            settings: None,
            start: None,
            attempts: 0,
            waited: Duration::ZERO,
            retrying: false,
            unretried: None,
        }
    }

    /// The statistics of the current request so far.
    pub fn stats(&self) -> RetryStats {
        RetryStats {
            attempts: self.attempts,
            waited: self.waited,
            gave_up: None,
        }
    }

    /// The settings chosen for the current request.
    pub fn current_settings(&self) -> &RetrySettings {
        self.settings
            .as_ref()
            .unwrap_or(&self.template.shared.settings)
    }

    /// Starts a new logical request: chooses its settings (its own, its route's, or the
    /// layer's). Returns whether it may ever be retried.
    ///
    /// The clock is not read yet: see [`clock_start`](Self::clock_start).
    #[inline]
    pub(crate) fn begin<ReqB>(&mut self, req: &Request<ReqB>) -> bool {
        self.settings = match req.extensions().get::<RetrySettings>() {
            Some(settings) => Some(settings.clone()),
            None if self.template.shared.routes.is_empty() => None,
            None => self.template.shared.routes.find(&RequestHead::of(req)),
        };
        self.start = None;
        self.attempts = 1;
        crate::metrics::attempt();
        self.waited = Duration::ZERO;
        let retryable = self.current_settings().limits().max_attempts() > 1
            && admit::replay_possible(req.extensions());
        self.unretried = match &self.template.shared.retry_throttle {
            Some(_) if !retryable => Some(Box::new(head_of(req))),
            _ => None,
        };
        retryable
    }

    /// When the request started, reading the clock the first time it is asked: when its
    /// first attempt has to wait for its response, or is to be retried. The first reading
    /// also funds the shared retry budget (new requests fund retries; retries do not, or
    /// retries would fund retries).
    ///
    /// A response that is there at once, and not retried, needs no clock at all: its
    /// request funds the budget through [`fund_unclocked`](Self::fund_unclocked) instead.
    /// Time before the first poll of the response future does not count against
    /// `max_elapsed`: futures do nothing until polled.
    pub(crate) fn clock_start(&mut self) -> Instant {
        match self.start {
            Some(start) => start,
            None => self.clock_start_at(Instant::now()),
        }
    }

    /// [`clock_start`](Self::clock_start) with the clock already read at `now`.
    fn clock_start_at(&mut self, now: Instant) -> Instant {
        if let Some(start) = self.start {
            return start;
        }
        if let Some(budget) = &self.template.shared.retry_budget {
            budget.start_at(now);
        }
        self.start = Some(now);
        now
    }

    /// Funds the retry budget for a request that ends without having read the clock.
    #[inline]
    pub(crate) fn fund_unclocked(&self) {
        if self.start.is_none()
            && let Some(budget) = &self.template.shared.retry_budget
        {
            budget.start_unclocked();
        }
    }

    /// Ends a request that was not retried further: when it succeeded, its last retry's
    /// cost comes back to the shared budget (a first-attempt success rewards a quota).
    #[inline]
    pub(crate) fn settle(&mut self, success: bool) {
        let paid = self
            .retry
            .as_deref_mut()
            .map_or(0, |r| std::mem::take(&mut r.paid));
        if success && let Some(budget) = &self.template.shared.retry_budget {
            budget.settle(paid, self.attempts > 1);
        }
    }

    /// Counts the attempt about to be sent, and the retry it is.
    pub(crate) fn next_attempt(&mut self) {
        self.attempts = self.attempts.saturating_add(1);
        crate::metrics::attempt();
        if let Some((reason, delay)) = self.retry.as_deref_mut().and_then(|r| r.scheduled.take()) {
            crate::metrics::retry(reason, delay);
        }
    }

    /// The span of the attempt of `req` about to be sent (see [`span::attempt`]).
    #[inline]
    pub(crate) fn attempt_span<ReqB>(&self, req: &Request<ReqB>) -> Option<Box<tracing::Span>> {
        let resend = self.attempts.saturating_sub(1);
        span::attempt(req, resend, &self.template.shared.redacted)
    }

    /// The reason of the retry that waits, if one does; it will not be sent.
    pub(crate) fn take_waiting_retry(&mut self) -> Option<RetryReason> {
        let retrying = self.retry.as_deref_mut()?;
        retrying.scheduled.take().map(|(reason, _)| reason)
    }

    /// Reports a request given up on, to `tracing` and the hook.
    pub(crate) fn give_up<ReqB>(&self, req: &Request<ReqB>, reason: RetryReason, why: GiveUp) {
        let redacted = &self.template.shared.redacted;
        tracing::debug!(
            http.request.resend_count = self.attempts.saturating_sub(1),
            http.request.method = %req.method(),
            server.address = server_address(req.uri()),
            reason = %reason,
            why = %why,
            url.full = %redacted.uri(req.uri()),
            "not retrying"
        );
        crate::metrics::give_up(why.label());
        match why {
            GiveUp::RetryBudget => crate::metrics::budget_refusal(),
            GiveUp::Throttled => crate::metrics::throttle_refusal(),
            _ => {}
        }
        self.template.shared.on_give_up.on_give_up(&GiveUpEvent {
            attempts: self.attempts,
            reason,
            why,
            method: req.method(),
            uri: req.uri(),
            redacted,
        });
    }

    /// The instant past which no attempt of this request starts.
    pub(crate) fn deadline(&self) -> Instant {
        // Only asked once a retry was admitted, which read the clock.
        let start = self.start.unwrap_or_else(Instant::now);
        crate::time::instant_after(start, self.current_settings().limits().max_elapsed())
    }

    /// Puts the request's deadline into `req`, so that a pacing layer inside never starts
    /// the attempt past it.
    pub(crate) fn mark_deadline<ReqB>(&self, req: &mut Request<ReqB>) {
        req.extensions_mut().insert(PacingDeadline(self.deadline()));
    }

    /// A copy of `req` for a retry, carrying the request's deadline. (The first attempt
    /// starts at the request's start, so it needs none: pacing's own max wait bounds it.)
    /// A gRPC call announces only the time it has left, as A6 asks.
    pub(crate) fn retry_request<ReqB: Clone>(&self, req: &Request<ReqB>) -> Request<ReqB> {
        let mut copy = clone_request(req);
        self.lend_clock(&mut copy);
        self.mark_deadline(&mut copy);
        if let Some(timeout) = crate::grpc::timeout(req.headers()) {
            let elapsed = self.start.map_or(Duration::ZERO, |start| start.elapsed());
            crate::grpc::set_timeout(copy.headers_mut(), timeout.saturating_sub(elapsed));
        }
        copy
    }

    /// Lends the layer's own wall clock, if it has one, to an attempt: a pacing layer
    /// below then reads the response with it (see [`ServerSaid`](crate::retry_after::ServerSaid)).
    #[inline]
    pub(crate) fn lend_clock<ReqB>(&self, req: &mut Request<ReqB>) {
        if let Some(clock) = &self.template.shared.wall_clock {
            req.extensions_mut().insert(WallClock(Arc::clone(clock)));
        }
    }

    /// The stats of the finished request, for its response or error.
    pub(crate) fn final_stats(&self, gave_up: Option<GiveUp>) -> RetryStats {
        RetryStats {
            gave_up,
            ..self.stats()
        }
    }

    /// Inserts the final stats into `res` when there is something to say: the request was
    /// retried or given up on (a first-attempt success carries none, for free).
    #[inline]
    pub(crate) fn attach_stats<T>(&self, res: &mut Response<T>, gave_up: Option<GiveUp>) {
        if (self.attempts > 1 || gave_up.is_some()) && self.template.shared.stats {
            res.extensions_mut().insert(self.final_stats(gave_up));
        }
    }

    /// Whether a response with `status` ends the request as it is, with nothing to decide
    /// or tell: the classifier never retries it and no throttle counts it. Most responses;
    /// the others go through [`classify_response`](Self::classify_response) and
    /// [`next_step`](RetryPolicy::next_step), which end at the same step for these.
    #[inline]
    pub(crate) fn ends_at(&self, status: http::StatusCode) -> bool {
        let shared = &self.template.shared;
        shared.retry_throttle.is_none()
            && shared
                .classifier
                .never_retries(self.current_settings().statuses_ref(), status)
    }

    /// **Decide**, for a response.
    #[inline]
    pub(crate) fn classify_response<ReqB, ResB>(
        &self,
        req: &Request<ReqB>,
        res: &Response<ResB>,
    ) -> Outcome {
        self.template.shared.classifier.classify_response(
            self.current_settings().statuses_ref(),
            || self.attempt_view(req),
            &ResponseHead::of(res),
        )
    }

    /// **Decide**, for an error (`None`: an error with nothing to inspect).
    pub(crate) fn classify_error<ReqB>(
        &self,
        req: &Request<ReqB>,
        err: Option<&(dyn Error + 'static)>,
    ) -> Outcome {
        match err {
            Some(err) => self
                .template
                .shared
                .classifier
                .as_dyn()
                .classify_error(&self.attempt_view(req), err),
            None => Outcome::retry(RetryReason::Transport),
        }
    }

    fn attempt_view<'a, ReqB>(&'a self, req: &'a Request<ReqB>) -> Attempt<'a> {
        Attempt::new(
            RequestHead::of(req),
            self.attempts,
            self.current_settings().statuses_ref(),
        )
        .with_clock(self.template.shared.wall_clock.as_deref())
    }
}

impl<B: BackOff + Clone> RetryPolicy<B> {
    /// The path of a finished attempt: admit its outcome, then act on it.
    #[inline]
    pub(crate) fn next_step<ReqB>(
        &mut self,
        req: &mut Request<ReqB>,
        outcome: &Outcome,
        error: Option<&(dyn Error + 'static)>,
    ) -> Step {
        if self.template.shared.retry_throttle.is_some() {
            self.report_health(outcome);
        }
        match outcome.reason() {
            None => {
                self.settle(outcome.is_success());
                self.fund_unclocked();
                Step::Done(None)
            }
            Some(reason) => self.retry_step(req, reason, outcome, error),
        }
    }

    /// [`next_step`](Self::next_step) for an attempt that failed with `err` (`timed_out`:
    /// the attempt's own timer ran out); `req` is `None` for a request never retried.
    /// Kept out of line, as the retry path is.
    #[inline(never)]
    pub(crate) fn error_step<ReqB>(
        &mut self,
        req: Option<&mut Request<ReqB>>,
        err: &crate::error::BoxError,
        timed_out: bool,
    ) -> Step {
        let Some(req) = req else {
            if let Some(head) = self.unretried.take() {
                let outcome = self.classify_error(&head, Some(&**err));
                self.report_health(&outcome);
            }
            self.fund_unclocked();
            return Step::Done(None);
        };
        let err: &(dyn Error + 'static) = &**err;
        let outcome = if timed_out {
            Outcome::retry(RetryReason::Timeout)
        } else {
            self.classify_error(req, Some(err))
        };
        self.next_step(req, &outcome, Some(err))
    }

    /// [`next_step`](Self::next_step) for a retryable outcome: kept out of line, so that
    /// the path of a success stays short.
    #[inline(never)]
    fn retry_step<ReqB>(
        &mut self,
        req: &mut Request<ReqB>,
        reason: RetryReason,
        outcome: &Outcome,
        error: Option<&(dyn Error + 'static)>,
    ) -> Step {
        // One reading of the clock starts the request's time (on its first retry) and
        // measures it.
        let now = Instant::now();
        let start = self.clock_start_at(now);
        match self.admit(req, outcome, start, now) {
            Ok(delay) => {
                self.act(req, reason, delay, outcome, error);
                Step::Retry(delay, reason)
            }
            Err(why) => {
                self.give_up(req, reason, why);
                Step::Done(Some(why))
            }
        }
    }

    /// **Admit**: the gates of [`admit`], in order; the delay when all let it through.
    fn admit<ReqB>(
        &mut self,
        req: &Request<ReqB>,
        outcome: &Outcome,
        start: Instant,
        now: Instant,
    ) -> Result<Duration, GiveUp> {
        if outcome.is_stopped() {
            return Err(GiveUp::Pushback);
        }
        let settings = self
            .settings
            .as_ref()
            .unwrap_or(&self.template.shared.settings);
        admit::resend_allowed(outcome.resend(), settings, req)?;
        admit::body_replayable(req)?;
        admit::runtime_present()?;
        let limits = settings.limits();
        admit::within_limits(limits, self.attempts, Duration::ZERO, Duration::ZERO)?;
        // The first retry of this request gets its backoff, fresh. (Not the first attempt,
        // so a request that succeeds at once does not pay for it.)
        let template = &self.template;
        let retrying = &mut **self.retry.get_or_insert_with(|| {
            let mut backoff = template.backoff.clone();
            backoff.reset();
            Box::new(Retrying {
                backoff,
                jitter: None,
                paid: 0,
                scheduled: None,
            })
        });
        let elapsed = now.saturating_duration_since(start);
        let time_left = limits.max_elapsed().saturating_sub(elapsed);
        let server = outcome.server_delay();
        let delay = delay::plan(
            &mut retrying.backoff,
            server,
            settings,
            &mut delay::Draw {
                own: &mut retrying.jitter,
                layer: &self.template.shared.jitter,
            },
            time_left,
        )?;
        admit::within_limits(limits, self.attempts, elapsed, delay)?;
        admit::within_call_timeout(req.headers(), elapsed, delay)?;
        admit::throttle_open(self.template.shared.retry_throttle.as_ref())?;
        // Last: passing it spends a token.
        let paid = admit::budget_withdraw(self.template.shared.retry_budget.as_ref(), outcome)?;
        if let Some(retrying) = self.retry.as_deref_mut() {
            retrying.paid = paid;
        }
        Ok(delay)
    }

    /// **Act**: tell the hook and `tracing`, mark the request for its resend, count the wait.
    fn act<ReqB>(
        &mut self,
        req: &mut Request<ReqB>,
        reason: RetryReason,
        delay: Duration,
        outcome: &Outcome,
        error: Option<&(dyn Error + 'static)>,
    ) {
        let event = RetryEvent {
            attempt: self.attempts,
            delay,
            reason,
            retry_after: outcome.server_delay().map(|d| d.duration()),
            method: req.method(),
            uri: req.uri(),
            error,
            redacted: &self.template.shared.redacted,
        };
        tracing::debug!(
            http.request.resend_count = self.attempts,
            http.request.method = %req.method(),
            server.address = server_address(req.uri()),
            http.response.status_code = event.status().map(|s| s.as_u16()),
            delay = ?delay,
            reason = %reason,
            // Redacted: credentials and signed query values never reach a trace.
            url.full = %self.template.shared.redacted.uri(req.uri()),
            "retrying request"
        );
        self.template.shared.on_retry.on_retry(&event);
        if let Some(retrying) = self.retry.as_deref_mut() {
            retrying.scheduled = Some((reason, delay));
        }
        self.template
            .shared
            .classifier
            .as_dyn()
            .prepare_resend(req.headers_mut(), self.attempts);
        self.waited = self.waited.saturating_add(delay);
    }

    /// Ends a request at a response nothing is decided on (never retried, or a status
    /// the classifier never retries): the budget and the throttle still hear of it.
    #[inline]
    pub(crate) fn end_at<ResB>(&mut self, res: &Response<ResB>) {
        let status = res.status();
        self.settle(!(status.is_client_error() || status.is_server_error()));
        self.observe_unretried(res);
        self.fund_unclocked();
    }

    /// Tells the retry throttle, if any, how a request that is never retried went: every
    /// outcome counts, as A6 defines, not only those of retryable requests.
    #[inline]
    pub(crate) fn observe_unretried<ResB>(&mut self, res: &Response<ResB>) {
        if let Some(head) = self.unretried.take() {
            let outcome = self.classify_response(&head, res);
            self.report_health(&outcome);
        }
    }

    /// Tells the retry throttle, if any, how the attempt went, as gRPC's A6 counts: a
    /// success refills, a retryable failure drains, anything else leaves it alone (a
    /// request that never reached the server, or was refused unprocessed, included: it
    /// says nothing of the server's health).
    fn report_health(&self, outcome: &Outcome) {
        let Some(throttle) = &self.template.shared.retry_throttle else {
            return;
        };
        throttle.record(match outcome.health() {
            Some(true) => ThrottleOutcome::Success,
            Some(false) => ThrottleOutcome::RetryableFailure,
            None => ThrottleOutcome::Other,
        });
    }
}

/// The method, URI and headers of `req`, all a classifier reads of a request.
fn head_of<B>(req: &Request<B>) -> Request<()> {
    let mut head = Request::new(());
    *head.method_mut() = req.method().clone();
    *head.uri_mut() = req.uri().clone();
    *head.headers_mut() = req.headers().clone();
    head
}

/// A copy of `req`: head, extensions and body. (`Request::clone` copies each part once;
/// building a copy field by field would first make and drop a default head.)
#[inline]
pub(crate) fn clone_request<ReqB: Clone>(req: &Request<ReqB>) -> Request<ReqB> {
    req.clone()
}

impl<B: fmt::Debug> fmt::Debug for RetryPolicy<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("backoff", &self.template.backoff)
            .field("settings", self.current_settings())
            .field("routes", &self.template.shared.routes)
            .field("attempts", &self.attempts)
            .field("waited", &self.waited)
            .finish_non_exhaustive()
    }
}

impl<B, ReqB, ResB, E> tower::retry::Policy<Request<ReqB>, Response<ResB>, E> for RetryPolicy<B>
where
    B: BackOff + Clone,
    ReqB: crate::body::CloneBody,
    E: AsError,
{
    type Future = RetryDelay;

    fn retry(
        &mut self,
        req: &mut Request<ReqB>,
        result: &mut Result<Response<ResB>, E>,
    ) -> Option<Self::Future> {
        let outcome = match result {
            Ok(res) => self.classify_response(req, res),
            Err(err) => self.classify_error(req, err.as_error()),
        };
        let error = result.as_ref().err().and_then(AsError::as_error);
        match self.next_step(req, &outcome, error) {
            Step::Retry(delay, _) => {
                self.retrying = true;
                Some(RetryDelay {
                    sleep: tokio::time::sleep(delay),
                })
            }
            Step::Done(gave_up) => {
                if let Ok(res) = result {
                    self.attach_stats(res, gave_up);
                }
                None
            }
        }
    }

    fn clone_request(&mut self, req: &Request<ReqB>) -> Option<Request<ReqB>> {
        if self.retrying {
            // Tower clones the request again right before sending each retry.
            self.retrying = false;
            self.next_attempt();
            Some(self.retry_request(req))
        } else {
            let retryable = self.begin(req);
            // Tower's service gives the policy no look at the first attempt's progress:
            // the request starts now.
            self.clock_start();
            retryable.then(|| clone_request(req))
        }
    }
}

pin_project! {
    /// The wait before a retry, for tower's `Retry` service: a named future around
    /// [`tokio::time::Sleep`].
    #[derive(Debug)]
    pub struct RetryDelay {
        #[pin]
        sleep: Sleep,
    }
}

impl Future for RetryDelay {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.project().sleep.poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::super::shared::Classifier;
    use super::*;
    use crate::budget::RetryThrottle;
    use crate::classify::{HttpClassifier, StatusSet};
    use crate::{ConstantBackOff, RetryLayer, RetrySettings};
    use http::StatusCode;

    fn layer() -> RetryLayer<ConstantBackOff> {
        RetryLayer::new(ConstantBackOff::new(Duration::from_millis(10)).unwrap())
    }

    /// For every status, with `settings` on the request: whether the shortcut ends the
    /// request at once, checked against the full path (decide, then `next_step`).
    fn shortcut_agrees(mut policy: RetryPolicy<ConstantBackOff>, settings: &RetrySettings) -> u32 {
        let mut ended = 0;
        for code in 100..1000 {
            let status = StatusCode::from_u16(code).unwrap();
            let mut req = Request::get("/").body(()).unwrap();
            req.extensions_mut().insert(settings.clone());
            let res = Response::builder().status(status).body(()).unwrap();
            assert!(policy.begin(&req));
            let outcome = policy.classify_response(&req, &res);
            if policy.ends_at(status) {
                ended += 1;
                assert_eq!(outcome.reason(), None, "{code}: the classifier retries it");
                let step = policy.next_step(&mut req, &outcome, None);
                assert_eq!(step, Step::Done(None), "{code}");
            } else {
                let default = matches!(policy.template.shared.classifier, Classifier::Default(_));
                let throttled = policy.template.shared.retry_throttle.is_some();
                assert!(
                    throttled || !default || outcome.reason().is_some(),
                    "{code}: left to the full path for nothing"
                );
            }
        }
        ended
    }

    #[test]
    fn a_response_the_shortcut_ends_at_is_one_the_full_path_ends_at() {
        let defaults = RetrySettings::new();
        let own = RetrySettings::new().with_statuses(
            StatusSet::EMPTY
                .with(StatusCode::INTERNAL_SERVER_ERROR)
                .unwrap(),
        );
        // Default classifier: every status but the retried ones ends at once.
        let retried = defaults.statuses().iter().count() as u32;
        assert_eq!(shortcut_agrees(layer().policy(), &defaults), 900 - retried);
        assert_eq!(shortcut_agrees(layer().policy(), &own), 899);
        // A throttle must hear of every response, and a custom classifier be asked:
        // nothing is ended by the shortcut.
        let throttled = layer()
            .with_retry_throttle(RetryThrottle::default())
            .policy();
        assert_eq!(shortcut_agrees(throttled, &defaults), 0);
        let custom = layer().with_classifier(HttpClassifier::new()).policy();
        assert_eq!(shortcut_agrees(custom, &defaults), 0);
    }
}
