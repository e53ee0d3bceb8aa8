//! The gates a retryable failure passes before a retry is started, in the policy's order.
//!
//! Each gate answers "may the retry go ahead?" with `Ok(())` or the [`GiveUp`] reason that
//! stops it. The cheap, certain refusals come first; the shared budget comes last, because
//! passing it spends a token that a refusal further on would waste.

use super::settings::RetrySettings;
use super::stats::GiveUp;
use crate::body::ReplayGuard;
use crate::budget::{LayerBudget, RetryThrottle};
use crate::classify::{Outcome, Resend, RetryReason, is_idempotent};
use crate::limits::Limits;
use http::Request;
use std::time::Duration;

/// A request the server may have acted on goes out again only if sending it twice is
/// harmless: an idempotent method, an `Idempotency-Key`, or settings that allow it.
pub(crate) fn resend_allowed<B>(
    resend: Resend,
    settings: &RetrySettings,
    req: &Request<B>,
) -> Result<(), GiveUp> {
    let allowed = match resend {
        Resend::AnyMethod => true,
        Resend::IfIdempotent => {
            settings.retry_non_idempotent() || is_idempotent(req.method(), req.headers())
        }
    };
    allowed.then_some(()).ok_or(GiveUp::NotIdempotent)
}

/// A body that went past its replay buffer (or failed) cannot be sent again.
pub(crate) fn body_replayable<B>(req: &Request<B>) -> Result<(), GiveUp> {
    replay_possible(req.extensions())
        .then_some(())
        .ok_or(GiveUp::BodyNotReplayable)
}

/// Whether the body of a request with these extensions can still be replayed.
#[inline]
pub(crate) fn replay_possible(extensions: &http::Extensions) -> bool {
    !extensions
        .get::<ReplayGuard>()
        .is_some_and(ReplayGuard::is_capped)
}

/// The request's own limits: attempts made, and a wait that would end past its deadline.
pub(crate) fn within_limits(
    limits: Limits,
    attempts: u32,
    elapsed: Duration,
    delay: Duration,
) -> Result<(), GiveUp> {
    limits
        .check(attempts, elapsed, delay)
        .map_err(GiveUp::Limit)
}

/// A gRPC call's own deadline, its `grpc-timeout`, must not pass before the retry starts:
/// a retry it could not make is not sent.
pub(crate) fn within_call_timeout(
    headers: &http::HeaderMap,
    elapsed: Duration,
    delay: Duration,
) -> Result<(), GiveUp> {
    match crate::grpc::timeout(headers) {
        Some(timeout) if elapsed.saturating_add(delay) >= timeout => {
            Err(GiveUp::Limit(crate::limits::LimitReached::MaxElapsed))
        }
        _ => Ok(()),
    }
}

/// A retry waits on tokio's timer: without a runtime on this thread it cannot.
pub(crate) fn runtime_present() -> Result<(), GiveUp> {
    tokio::runtime::Handle::try_current()
        .map(drop)
        .map_err(|_| GiveUp::NoRuntime)
}

/// The client's retry throttle, if any, must not have stopped retries.
pub(crate) fn throttle_open(throttle: Option<&RetryThrottle>) -> Result<(), GiveUp> {
    match throttle {
        Some(throttle) if !throttle.allows_retry() => Err(GiveUp::Throttled),
        _ => Ok(()),
    }
}

/// The client's shared retry budget, if any, pays for the retry, unless the classifier
/// says the server scheduled it ([`Outcome::is_scheduled`]). (Outcomes of outages — 503s,
/// resets, refused connections — are not scheduled: those retries always pay.) The cost
/// paid (0 when none): it comes back if the retry succeeds.
pub(crate) fn budget_withdraw(
    budget: Option<&LayerBudget>,
    outcome: &Outcome,
) -> Result<u32, GiveUp> {
    match budget {
        Some(budget) if !outcome.is_scheduled() => {
            let timed_out = outcome.reason() == Some(RetryReason::Timeout);
            budget.withdraw(timed_out).ok_or(GiveUp::RetryBudget)
        }
        _ => Ok(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::RetryBudget;
    use crate::classify::IDEMPOTENCY_KEY;
    use crate::limits::LimitReached;
    use http::StatusCode;

    const SEC: Duration = Duration::from_secs(1);

    #[test]
    fn only_idempotent_requests_are_resent_when_they_may_have_been_processed() {
        let settings = RetrySettings::new();
        let post = Request::post("/").body(()).unwrap();
        let get = Request::get("/").body(()).unwrap();
        let keyed = Request::post("/")
            .header(IDEMPOTENCY_KEY, "k1")
            .body(())
            .unwrap();
        assert_eq!(
            resend_allowed(Resend::IfIdempotent, &settings, &post),
            Err(GiveUp::NotIdempotent)
        );
        assert_eq!(
            resend_allowed(Resend::IfIdempotent, &settings, &get),
            Ok(())
        );
        assert_eq!(
            resend_allowed(Resend::IfIdempotent, &settings, &keyed),
            Ok(())
        );
        assert_eq!(resend_allowed(Resend::AnyMethod, &settings, &post), Ok(()));
        let allowed = settings.with_retry_non_idempotent(true);
        assert_eq!(
            resend_allowed(Resend::IfIdempotent, &allowed, &post),
            Ok(())
        );
    }

    #[test]
    fn a_capped_body_is_not_replayed() {
        let mut req = Request::put("/").body(()).unwrap();
        assert_eq!(body_replayable(&req), Ok(()));
        let guard = ReplayGuard::new();
        req.extensions_mut().insert(guard.clone());
        assert_eq!(body_replayable(&req), Ok(()));
        guard.set_capped();
        assert_eq!(body_replayable(&req), Err(GiveUp::BodyNotReplayable));
    }

    #[test]
    fn limits_count_attempts_and_the_wait_against_the_deadline() {
        let limits = Limits::new(3, 10 * SEC).unwrap();
        assert_eq!(within_limits(limits, 2, 2 * SEC, 5 * SEC), Ok(()));
        assert_eq!(
            within_limits(limits, 3, SEC, SEC),
            Err(GiveUp::Limit(LimitReached::MaxAttempts))
        );
        assert_eq!(
            within_limits(limits, 1, 6 * SEC, 5 * SEC),
            Err(GiveUp::Limit(LimitReached::MaxElapsed))
        );
    }

    #[test]
    fn throttle_and_budget_refuse_when_spent() {
        assert_eq!(throttle_open(None), Ok(()));
        let throttle = RetryThrottle::new(2, 0.1).unwrap();
        assert_eq!(throttle_open(Some(&throttle)), Ok(()));
        throttle.record(crate::budget::ThrottleOutcome::RetryableFailure);
        assert_eq!(throttle_open(Some(&throttle)), Err(GiveUp::Throttled));

        let unavailable = Outcome::retry(RetryReason::Status(StatusCode::SERVICE_UNAVAILABLE));
        assert_eq!(budget_withdraw(None, &unavailable), Ok(0));
        let budget =
            LayerBudget::Window(RetryBudget::new(Duration::from_secs(10), 0, 0.0).unwrap());
        assert_eq!(
            budget_withdraw(Some(&budget), &unavailable),
            Err(GiveUp::RetryBudget)
        );
    }

    #[test]
    fn a_retry_the_server_scheduled_does_not_spend_the_budget() {
        use crate::classify::ServerDelay;
        let spent = LayerBudget::Window(RetryBudget::new(Duration::from_secs(10), 0, 0.0).unwrap());
        let too_many = Outcome::retry(RetryReason::Status(StatusCode::TOO_MANY_REQUESTS));
        let scheduled = too_many
            .with_server_delay(ServerDelay::Exactly(SEC))
            .with_scheduled();
        assert_eq!(budget_withdraw(Some(&spent), &scheduled), Ok(0));
        // Which outcomes are scheduled is the classifier's call (a 429 with any
        // Retry-After, "0" included, for HttpClassifier); one that is not pays.
        assert_eq!(
            budget_withdraw(Some(&spent), &too_many.with_scheduled()),
            Ok(0)
        );
        assert_eq!(
            budget_withdraw(Some(&spent), &too_many),
            Err(GiveUp::RetryBudget)
        );
        // A 503 with Retry-After (an outage page, say) still pays.
        let outage = Outcome::retry(RetryReason::Status(StatusCode::SERVICE_UNAVAILABLE))
            .with_server_delay(ServerDelay::Exactly(SEC));
        assert_eq!(
            budget_withdraw(Some(&spent), &outage),
            Err(GiveUp::RetryBudget)
        );
    }

    #[test]
    fn no_runtime_no_retry() {
        assert_eq!(runtime_present(), Err(GiveUp::NoRuntime));
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async { assert_eq!(runtime_present(), Ok(())) });
    }
}
