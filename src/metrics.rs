//! Metrics through the [`metrics`](https://docs.rs/metrics) facade (feature `metrics`).
//!
//! With the feature on, the crate records these; any `metrics` recorder (Prometheus,
//! StatsD, OpenTelemetry exporters, …) installed by the application receives them. Without
//! it, every function here is empty and compiles away.
//!
//! | name | kind | labels | what |
//! |---|---|---|---|
//! | `tower_backoff.attempts` | counter | — | attempts sent, first attempts included |
//! | `tower_backoff.retries` | counter | `reason` | retries started, by [`RetryReason`] |
//! | `tower_backoff.retry.wait` | histogram (seconds) | `reason` | the wait before each retry |
//! | `tower_backoff.give_ups` | counter | `why` | requests given up on, by [`GiveUp`] |
//! | `tower_backoff.retry_budget.refusals` | counter | — | retries the shared budget refused |
//! | `tower_backoff.retry_throttle.refusals` | counter | — | retries the throttle refused |
//! | `tower_backoff.pacing.queue` | gauge | `server.address` | requests waiting for a destination's pace |
//! | `tower_backoff.pacing.rate` | gauge | `server.address` | a destination's send rate (requests per second; 0 while it is not paced) |
//!
//! Labels are fixed words (`status_503`, `connect`, `retry_budget`, …) or a destination's
//! host and port, never a whole URI: no credentials reach a metrics backend, and the
//! destinations are bounded by pacing's
//! [`with_max_destinations`](crate::PacingBuilder::with_max_destinations).

use crate::classify::RetryReason;
use crate::layer::GiveUp;
use std::time::Duration;

/// Names of the metrics, for dashboards and tests.
pub mod names {
    /// Attempts sent, first attempts included.
    pub const ATTEMPTS: &str = "tower_backoff.attempts";
    /// Retries started, labelled `reason`.
    pub const RETRIES: &str = "tower_backoff.retries";
    /// The wait before each retry in seconds, labelled `reason`.
    pub const RETRY_WAIT: &str = "tower_backoff.retry.wait";
    /// Requests given up on, labelled `why`.
    pub const GIVE_UPS: &str = "tower_backoff.give_ups";
    /// Retries refused by the shared retry budget.
    pub const BUDGET_REFUSALS: &str = "tower_backoff.retry_budget.refusals";
    /// Retries refused by the retry throttle.
    pub const THROTTLE_REFUSALS: &str = "tower_backoff.retry_throttle.refusals";
    /// Requests waiting for a destination's pace, labelled `server.address`.
    pub const PACING_QUEUE: &str = "tower_backoff.pacing.queue";
    /// A destination's send rate in requests per second, labelled `server.address`.
    pub const PACING_RATE: &str = "tower_backoff.pacing.rate";
}

/// A destination's gauges, registered once per destination (not per request): setting
/// them then costs no label building or recorder lookup.
#[derive(Debug, Clone)]
pub(crate) struct DestinationGauges {
    #[cfg(feature = "metrics")]
    queue: metrics::Gauge,
    #[cfg(feature = "metrics")]
    rate: metrics::Gauge,
}

impl DestinationGauges {
    /// The gauges of the destination shown as `address` (host and port, no credentials),
    /// from the recorder installed now.
    pub(crate) fn new(address: &impl std::fmt::Display) -> Self {
        #[cfg(feature = "metrics")]
        {
            let address = metrics::SharedString::from(address.to_string());
            Self {
                queue: metrics::gauge!(names::PACING_QUEUE, "server.address" => address.clone()),
                rate: metrics::gauge!(names::PACING_RATE, "server.address" => address),
            }
        }
        #[cfg(not(feature = "metrics"))]
        {
            let _ = address;
            Self {}
        }
    }

    /// Its queue length and send rate (`None`: not paced).
    #[inline]
    pub(crate) fn set(&self, queue: usize, rate: Option<f64>) {
        #[cfg(feature = "metrics")]
        {
            self.queue.set(queue as f64);
            self.rate.set(rate.unwrap_or(0.0));
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (queue, rate);
    }
}

/// The label value of a retry reason.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
pub(crate) fn reason_label(reason: RetryReason) -> &'static str {
    match reason {
        RetryReason::Status(status) => match status.as_u16() {
            408 => "status_408",
            429 => "status_429",
            502 => "status_502",
            503 => "status_503",
            504 => "status_504",
            400..=499 => "status_4xx",
            _ => "status_5xx",
        },
        RetryReason::Connect => "connect",
        RetryReason::Unprocessed => "unprocessed",
        RetryReason::Transport => "transport",
        RetryReason::Timeout => "timeout",
        RetryReason::Grpc(_) => "grpc",
    }
}

/// The label value of a give-up reason.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
pub(crate) fn give_up_label(why: GiveUp) -> &'static str {
    match why {
        GiveUp::NotIdempotent => "not_idempotent",
        GiveUp::BodyNotReplayable => "body_not_replayable",
        GiveUp::BackOff => "backoff",
        GiveUp::RetryAfterTooLong(_) => "retry_after_too_long",
        GiveUp::Limit(_) => "limits",
        GiveUp::RetryBudget => "retry_budget",
        GiveUp::Throttled => "throttled",
        GiveUp::Pushback => "pushback",
        GiveUp::NoRuntime => "no_runtime",
        GiveUp::ServiceNotReady => "service_not_ready",
    }
}

/// An attempt is sent.
#[inline]
pub(crate) fn attempt() {
    #[cfg(feature = "metrics")]
    metrics::counter!(names::ATTEMPTS).increment(1);
}

/// A retry starts after `delay`.
#[inline]
pub(crate) fn retry(reason: RetryReason, delay: Duration) {
    #[cfg(feature = "metrics")]
    {
        let reason = reason_label(reason);
        metrics::counter!(names::RETRIES, "reason" => reason).increment(1);
        metrics::histogram!(names::RETRY_WAIT, "reason" => reason).record(delay.as_secs_f64());
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (reason, delay);
}

/// A request is given up on.
#[inline]
pub(crate) fn give_up(why: GiveUp) {
    #[cfg(feature = "metrics")]
    {
        metrics::counter!(names::GIVE_UPS, "why" => give_up_label(why)).increment(1);
        match why {
            GiveUp::RetryBudget => metrics::counter!(names::BUDGET_REFUSALS).increment(1),
            GiveUp::Throttled => metrics::counter!(names::THROTTLE_REFUSALS).increment(1),
            _ => {}
        }
    }
    #[cfg(not(feature = "metrics"))]
    let _ = why;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::LimitReached;
    use http::StatusCode;

    #[test]
    fn labels_are_fixed_words() {
        assert_eq!(
            reason_label(RetryReason::Status(StatusCode::TOO_MANY_REQUESTS)),
            "status_429"
        );
        assert_eq!(
            reason_label(RetryReason::Status(StatusCode::IM_A_TEAPOT)),
            "status_4xx"
        );
        assert_eq!(reason_label(RetryReason::Connect), "connect");
        assert_eq!(
            give_up_label(GiveUp::Limit(LimitReached::MaxElapsed)),
            "limits"
        );
        assert_eq!(give_up_label(GiveUp::RetryBudget), "retry_budget");
    }
}
