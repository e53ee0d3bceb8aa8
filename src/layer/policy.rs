//! The [`tower::retry::Policy`] that turns HTTP outcomes into retry decisions.

use super::hook::{OnRetry, RetryEvent, RetryReason};
use super::routes::{RequestHead, Routes};
use super::settings::RetrySettings;
use super::stats::{GiveUp, RetryStats};
use crate::BackOff;
use crate::body::ReplayGuard;
use crate::budget::{RetryBudget, RetryThrottle};
use crate::classify::{AsError, ErrorClass, default_error_class, is_idempotent};
use crate::grpc::{DoNotRetryReason, GrpcDecision};
use http::{Request, Response, StatusCode};
use pin_project_lite::pin_project;
use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};
use tokio::time::{Instant, Sleep};

pub(crate) type ClassifyFn = dyn Fn(&(dyn Error + 'static)) -> ErrorClass + Send + Sync;
pub(crate) type ClockFn = dyn Fn() -> SystemTime + Send + Sync;

/// State shared by every request of a layer: one `Arc`, so cloning the policy per request
/// copies a pointer.
#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) settings: RetrySettings,
    pub(crate) routes: Routes,
    pub(crate) on_retry: Arc<dyn OnRetry + Send + Sync>,
    pub(crate) classify: Option<Arc<ClassifyFn>>,
    pub(crate) wall_clock: Option<Arc<ClockFn>>,
    pub(crate) retry_budget: Option<RetryBudget>,
    pub(crate) retry_throttle: Option<RetryThrottle>,
    pub(crate) stats: bool,
}

impl Default for Shared {
    fn default() -> Self {
        Self {
            settings: RetrySettings::default(),
            routes: Routes::default(),
            on_retry: Arc::new(()),
            classify: None,
            wall_clock: None,
            retry_budget: Some(RetryBudget::default()),
            retry_throttle: None,
            stats: true,
        }
    }
}

/// The retry policy of [`RetryLayer`](crate::RetryLayer); also usable directly with
/// `tower::retry::RetryLayer::new(policy)`.
///
/// Tower clones the policy for each request: the clone holds that request's state (its
/// settings, attempt count, backoff, start time, time waited); everything else is shared.
/// A request that can never be retried (its settings allow one attempt, or its
/// [`ReplayGuard`] is already capped) is not cloned at all; for the others every attempt,
/// the last one included, is cloned so that its response can carry [`RetryStats`].
/// See the [decision table](crate::RetryLayer#decisions) for what is retried.
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
/// let mut policy = RetryLayer::new(ConstantBackOff::new(Duration::from_millis(100))).policy();
/// let req: Req = http::Request::get("/").body(String::new()).unwrap();
/// let mut copy = Policy::<Req, Res, std::io::Error>::clone_request(&mut policy, &req)
///     .expect("GETs can be retried");
/// let mut result: Result<Res, std::io::Error> =
///     Ok(http::Response::builder().status(503).body(String::new()).unwrap());
/// assert!(policy.retry(&mut copy, &mut result).is_some());
/// # }
/// ```
#[derive(Clone)]
pub struct RetryPolicy<B> {
    backoff: B,
    shared: Arc<Shared>,
    settings: RetrySettings,
    start: Instant,
    attempts: u32,
    waited: Duration,
    retrying: bool,
}

impl<B> RetryPolicy<B> {
    pub(crate) fn new(backoff: B, shared: Arc<Shared>) -> Self {
        Self {
            backoff,
            settings: shared.settings.clone(),
            shared,
            start: Instant::now(),
            attempts: 0,
            waited: Duration::ZERO,
            retrying: false,
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
        &self.settings
    }
}

impl<B: fmt::Debug> fmt::Debug for RetryPolicy<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("backoff", &self.backoff)
            .field("settings", &self.settings)
            .field("routes", &self.shared.routes)
            .field("attempts", &self.attempts)
            .field("waited", &self.waited)
            .finish_non_exhaustive()
    }
}

fn capped<B>(req: &Request<B>) -> bool {
    req.extensions()
        .get::<ReplayGuard>()
        .is_some_and(ReplayGuard::is_capped)
}

fn clone_parts<B: Clone>(req: &Request<B>) -> Request<B> {
    let mut copy = Request::new(req.body().clone());
    *copy.method_mut() = req.method().clone();
    *copy.uri_mut() = req.uri().clone();
    *copy.version_mut() = req.version();
    *copy.headers_mut() = req.headers().clone();
    *copy.extensions_mut() = req.extensions().clone();
    copy
}

impl<B> RetryPolicy<B>
where
    B: BackOff,
{
    fn finish<Res, E>(&self, result: &mut Result<Response<Res>, E>, gave_up: Option<GiveUp>) {
        if let Ok(res) = result
            && self.shared.stats
        {
            res.extensions_mut().insert(RetryStats {
                gave_up,
                ..self.stats()
            });
        }
    }

    /// Tells the retry throttle, if any, how an attempt went.
    fn outcome(&self, success: bool) {
        if let Some(throttle) = &self.shared.retry_throttle {
            if success {
                throttle.on_success();
            } else {
                throttle.on_failure();
            }
        }
    }

    fn give_up<Res, E>(
        &self,
        why: GiveUp,
        reason: RetryReason,
        result: &mut Result<Response<Res>, E>,
    ) {
        tracing::debug!(
            attempt = self.attempts,
            reason = %reason,
            why = %why,
            "not retrying"
        );
        self.finish(result, Some(why));
    }
}

impl<B, ReqB, ResB, E> tower::retry::Policy<Request<ReqB>, Response<ResB>, E> for RetryPolicy<B>
where
    B: BackOff,
    ReqB: crate::body::CloneBody,
    E: AsError,
{
    type Future = RetryDelay;

    fn retry(
        &mut self,
        req: &mut Request<ReqB>,
        result: &mut Result<Response<ResB>, E>,
    ) -> Option<Self::Future> {
        let settings = &self.settings;
        let idempotent =
            settings.retry_non_idempotent() || is_idempotent(req.method(), req.headers());
        let (reason, asked) = match result {
            Ok(res) if settings.grpc_codes().is_some() => {
                let codes = settings.grpc_codes().unwrap_or_default();
                match crate::grpc::classify_response(res, codes) {
                    GrpcDecision::Retry { code, after, .. } => {
                        self.outcome(false);
                        (RetryReason::Grpc(code), after)
                    }
                    GrpcDecision::DoNotRetry(DoNotRetryReason::Pushback(code)) => {
                        self.outcome(false);
                        self.give_up(GiveUp::Pushback, RetryReason::Grpc(code), result);
                        return None;
                    }
                    _ => {
                        self.outcome(true);
                        self.finish(result, None);
                        return None;
                    }
                }
            }
            Ok(res) => {
                let status = res.status();
                if !settings.statuses().contains(status) {
                    self.outcome(true);
                    self.finish(result, None);
                    return None;
                }
                // A 429 was refused before any processing: safe to resend for every method.
                if !idempotent && status != StatusCode::TOO_MANY_REQUESTS {
                    self.outcome(false);
                    self.give_up(GiveUp::NotIdempotent, RetryReason::Status(status), result);
                    return None;
                }
                let now = match &self.shared.wall_clock {
                    Some(clock) => clock(),
                    None => SystemTime::now(),
                };
                let asked = crate::retry_after::from_headers(res.headers(), now);
                self.outcome(false);
                (RetryReason::Status(status), asked)
            }
            Err(e) => {
                let class = match (e.as_error(), &self.shared.classify) {
                    (Some(err), Some(classify)) => classify(err),
                    (Some(err), None) => default_error_class(err),
                    (None, _) => ErrorClass::Transport,
                };
                if class != ErrorClass::Fatal {
                    self.outcome(false);
                }
                let reason = match class {
                    ErrorClass::Connect => RetryReason::Connect,
                    ErrorClass::Transport if idempotent => RetryReason::Transport,
                    ErrorClass::Transport | ErrorClass::Fatal => {
                        tracing::debug!(
                            attempt = self.attempts,
                            class = ?class,
                            "not retrying this error"
                        );
                        return None;
                    }
                };
                (reason, None)
            }
        };
        if capped(req) {
            self.give_up(GiveUp::BodyNotReplayable, reason, result);
            return None;
        }
        let limits = settings.limits();
        if let Err(why) = limits.check(self.attempts, Duration::ZERO, Duration::ZERO) {
            self.give_up(GiveUp::Budget(why), reason, result);
            return None;
        }
        if self.attempts == 1 {
            // The first retry of this logical request: its backoff starts fresh.
            self.backoff.reset();
        }
        // A gRPC pushback replaces the backoff's delay and starts the backoff over (A6).
        let pushback = matches!(reason, RetryReason::Grpc(_)) && asked.is_some();
        let backoff = if pushback {
            self.backoff.reset();
            Duration::ZERO
        } else {
            let Some(backoff) = self.backoff.next_backoff() else {
                self.give_up(GiveUp::BackOff, reason, result);
                return None;
            };
            backoff
        };
        let delay = match asked {
            None => backoff,
            Some(asked) => {
                let cap = settings.max_retry_after();
                let asked = if asked <= cap {
                    asked
                } else if settings.clamp_retry_after() {
                    cap
                } else {
                    self.give_up(GiveUp::RetryAfterTooLong(asked), reason, result);
                    return None;
                };
                match reason {
                    // The server said when: trust it.
                    RetryReason::Status(
                        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE,
                    ) => asked,
                    RetryReason::Grpc(_) => asked,
                    // Elsewhere a Retry-After is a floor: never sooner than asked.
                    _ => backoff.max(asked),
                }
            }
        };
        let elapsed = Instant::now().saturating_duration_since(self.start);
        if let Err(why) = limits.check(self.attempts, elapsed, delay) {
            self.give_up(GiveUp::Budget(why), reason, result);
            return None;
        }

        if let Some(throttle) = &self.shared.retry_throttle
            && !throttle.allows_retry()
        {
            self.give_up(GiveUp::Throttled, reason, result);
            return None;
        }
        // Last check, so that a retry refused for another reason costs no token.
        if let Some(budget) = &self.shared.retry_budget
            && !budget.withdraw()
        {
            self.give_up(GiveUp::RetryBudget, reason, result);
            return None;
        }

        let event = RetryEvent {
            attempt: self.attempts,
            delay,
            reason,
            retry_after: asked,
            method: req.method(),
            uri: req.uri(),
            error: result.as_ref().err().and_then(AsError::as_error),
        };
        tracing::debug!(
            attempt = event.attempt,
            delay = ?delay,
            reason = %reason,
            status = event.status().map(|s| s.as_u16()),
            "retrying request"
        );
        self.shared.on_retry.on_retry(&event);
        if self.settings.grpc_codes().is_some() {
            crate::grpc::set_previous_attempts(req.headers_mut(), self.attempts);
        }
        self.waited = self.waited.saturating_add(delay);
        self.retrying = true;
        Some(RetryDelay {
            sleep: tokio::time::sleep(delay),
        })
    }

    fn clone_request(&mut self, req: &Request<ReqB>) -> Option<Request<ReqB>> {
        if self.retrying {
            // Tower re-clones the request right before sending each retry.
            self.retrying = false;
            self.attempts = self.attempts.saturating_add(1);
            return Some(clone_parts(req));
        }
        // A new logical request: it funds the shared retry budget (retries do not, or
        // retries would fund more retries), then chooses its settings and starts afresh.
        let now = Instant::now();
        if let Some(budget) = &self.shared.retry_budget {
            budget.deposit_at(now);
        }
        let settings = match req.extensions().get::<RetrySettings>() {
            Some(settings) => settings.clone(),
            None => self
                .shared
                .routes
                .find(&RequestHead::of(req))
                .unwrap_or_else(|| self.shared.settings.clone()),
        };
        if settings.limits().max_attempts() <= 1 || capped(req) {
            return None;
        }
        self.settings = settings;
        self.start = now;
        self.attempts = 1;
        self.waited = Duration::ZERO;
        // The backoff is reset at this request's first retry (in `retry`), so that a
        // request that succeeds at once does not pay for it.
        Some(clone_parts(req))
    }
}

pin_project! {
    /// The wait before a retry: a named future around [`tokio::time::Sleep`].
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
