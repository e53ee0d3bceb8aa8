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
//! | `tower_backoff.give_ups` | counter | `why` | requests given up on, by [`GiveUp`](crate::GiveUp) |
//! | `tower_backoff.retry_budget.refusals` | counter | — | retries the shared budget refused |
//! | `tower_backoff.retry_throttle.refusals` | counter | — | retries the throttle refused |
//! | `tower_backoff.pacing.queue` | gauge | `server.address` | requests waiting for a destination's pace |
//! | `tower_backoff.pacing.rate` | gauge | `server.address` | a destination's send rate (requests per second; 0 while it is not paced) |
//! | `tower_backoff.pacing.store_failures` | counter | — | calls to Redis that failed or timed out (feature `redis`): those requests were paced in-process |
//!
//! Labels are fixed words (`status_503`, `connect`, `retry_budget`, …) or a destination's
//! host and port, never a whole URI: no credentials reach a metrics backend.
//!
//! # Bounded series
//!
//! The `metrics` facade cannot remove a series, so the pacing gauges bound their labels
//! instead. A pacing layer names at most
//! [`with_max_destinations`](crate::pacing::PacingBuilder::with_max_destinations) destinations,
//! the first ones it paces, plus those given a
//! [known rate](crate::pacing::PacingBuilder::with_known_rate). Later destinations are summed
//! under `server.address="(other)"`: their queues and rates add up. Each pacing gauge thus
//! has at most that bound plus one series per layer, however many hosts the client calls.
//!
//! A destination the layer forgets (idle, or the layer dropped) sets its series to zero
//! and stops updating it. A recorder that drops idle series (the Prometheus exporter's
//! `idle_timeout`, `metrics-util`'s `Recency`) then removes it; otherwise it reads zero,
//! and reports again if the destination comes back.

use crate::classify::RetryReason;
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
    /// Calls to Redis that failed or timed out (feature `redis`).
    pub const PACING_STORE_FAILURES: &str = "tower_backoff.pacing.store_failures";
}

/// The label of destinations past a layer's named ones.
#[cfg(feature = "metrics")]
const OTHER: &str = "(other)";

/// Rates of the `(other)` series are summed in millionths of a request per second: an
/// integer total returns to exactly zero when every destination has left.
#[cfg(feature = "metrics")]
const MICROS: f64 = 1e6;

/// Which labels a pacing layer's destinations get: at most `max` addresses are named
/// (see the module docs), the others share the `(other)` series.
#[derive(Debug)]
pub(crate) struct PacingSeries {
    #[cfg(feature = "metrics")]
    labels: std::sync::Mutex<Labels>,
}

#[cfg(feature = "metrics")]
#[derive(Debug)]
struct Labels {
    /// The addresses given series of their own. It never shrinks: a name, once given,
    /// is kept for when its destination comes back.
    named: std::collections::HashSet<String>,
    max: usize,
    /// Made with the first destination past `max`.
    other: Option<std::sync::Arc<Other>>,
}

/// The `(other)` series and their totals.
#[cfg(feature = "metrics")]
#[derive(Debug)]
struct Other {
    queue: metrics::Gauge,
    rate: metrics::Gauge,
    /// Queue lengths and rates (in [`MICROS`]) summed; locked so the gauges get the
    /// totals in the order they were reached.
    totals: std::sync::Mutex<(u64, u64)>,
}

impl PacingSeries {
    /// Names at most `max` destinations.
    pub(crate) fn new(max: usize) -> Self {
        #[cfg(feature = "metrics")]
        {
            Self {
                labels: std::sync::Mutex::new(Labels {
                    named: std::collections::HashSet::new(),
                    max,
                    other: None,
                }),
            }
        }
        #[cfg(not(feature = "metrics"))]
        {
            let _ = max;
            Self {}
        }
    }

    /// The gauges of a new destination shown as `address` (host and port, no
    /// credentials), from the recorder installed now. `always`: a destination the user
    /// configured, named whatever the bound.
    pub(crate) fn gauges(
        &self,
        address: &impl std::fmt::Display,
        always: bool,
    ) -> DestinationGauges {
        #[cfg(feature = "metrics")]
        {
            let address = address.to_string();
            let mut labels = lock(&self.labels);
            let named = labels.named.contains(&address)
                || ((always || labels.named.len() < labels.max)
                    && labels.named.insert(address.clone()));
            let reporting = if named {
                let label = metrics::SharedString::from(address);
                Reporting::Named {
                    queue: metrics::gauge!(names::PACING_QUEUE, "server.address" => label.clone()),
                    rate: metrics::gauge!(names::PACING_RATE, "server.address" => label),
                }
            } else {
                let other = labels.other.get_or_insert_with(|| {
                    std::sync::Arc::new(Other {
                        queue: metrics::gauge!(names::PACING_QUEUE, "server.address" => OTHER),
                        rate: metrics::gauge!(names::PACING_RATE, "server.address" => OTHER),
                        totals: std::sync::Mutex::default(),
                    })
                });
                Reporting::Other {
                    other: std::sync::Arc::clone(other),
                    queue: 0,
                    micros: 0,
                }
            };
            DestinationGauges { reporting }
        }
        #[cfg(not(feature = "metrics"))]
        {
            let _ = (address, always);
            DestinationGauges {}
        }
    }
}

/// Locks, recovering from poisoning: every update leaves the value consistent.
#[cfg(feature = "metrics")]
fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A destination's gauges, registered once per destination (not per request): setting
/// them then costs no label building or recorder lookup. Dropped or
/// [retired](Self::retire), they read zero and are no longer updated.
#[derive(Debug)]
pub(crate) struct DestinationGauges {
    #[cfg(feature = "metrics")]
    reporting: Reporting,
}

#[cfg(feature = "metrics")]
#[derive(Debug)]
enum Reporting {
    /// The destination's own series.
    Named {
        queue: metrics::Gauge,
        rate: metrics::Gauge,
    },
    /// Its share of the `(other)` totals: what it last added.
    Other {
        other: std::sync::Arc<Other>,
        queue: u64,
        micros: u64,
    },
    /// Forgotten: reports nothing more.
    Retired,
}

impl DestinationGauges {
    /// Its queue length and send rate (`None`: not paced).
    #[inline]
    pub(crate) fn set(&mut self, queue: usize, rate: Option<f64>) {
        #[cfg(feature = "metrics")]
        match &mut self.reporting {
            Reporting::Named { queue: q, rate: r } => {
                q.set(queue as f64);
                r.set(rate.unwrap_or(0.0));
            }
            Reporting::Other {
                other,
                queue: mine,
                micros: my_micros,
            } => {
                let queue = u64::try_from(queue).unwrap_or(u64::MAX);
                // A float-to-integer `as` saturates, and maps NaN to zero.
                let micros = (rate.unwrap_or(0.0) * MICROS).round() as u64;
                let mut totals = lock(&other.totals);
                // The totals hold this destination's last share: the subtraction is exact.
                totals.0 = totals.0.saturating_sub(*mine).saturating_add(queue);
                totals.1 = totals.1.saturating_sub(*my_micros).saturating_add(micros);
                other.queue.set(totals.0 as f64);
                other.rate.set(totals.1 as f64 / MICROS);
                (*mine, *my_micros) = (queue, micros);
            }
            Reporting::Retired => {}
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (queue, rate);
    }

    /// The destination is forgotten: its series read zero (its share of `(other)` is
    /// taken back) and are no longer updated.
    pub(crate) fn retire(&mut self) {
        #[cfg(feature = "metrics")]
        {
            self.set(0, None);
            self.reporting = Reporting::Retired;
        }
    }
}

impl Drop for DestinationGauges {
    fn drop(&mut self) {
        self.retire();
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

/// A request is given up on, for the reason labelled `why` (a fixed word).
#[inline]
pub(crate) fn give_up(why: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(names::GIVE_UPS, "why" => why).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = why;
}

/// The shared retry budget refused a retry.
#[inline]
pub(crate) fn budget_refusal() {
    #[cfg(feature = "metrics")]
    metrics::counter!(names::BUDGET_REFUSALS).increment(1);
}

/// The retry throttle refused a retry.
#[inline]
pub(crate) fn throttle_refusal() {
    #[cfg(feature = "metrics")]
    metrics::counter!(names::THROTTLE_REFUSALS).increment(1);
}

/// A call to the pacing store failed (feature `redis`).
#[cfg(feature = "redis")]
#[inline]
pub(crate) fn pacing_store_failure() {
    #[cfg(feature = "metrics")]
    metrics::counter!(names::PACING_STORE_FAILURES).increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;
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
    }

    /// The pacing gauges by `name{server.address}`.
    #[cfg(feature = "metrics")]
    fn gauges(
        snapshotter: &metrics_util::debugging::Snapshotter,
    ) -> std::collections::HashMap<String, f64> {
        use metrics_util::debugging::DebugValue;
        let snapshot = snapshotter.snapshot().into_vec();
        snapshot
            .into_iter()
            .filter_map(|(key, _, _, value)| {
                let key = key.key();
                let label = key.labels().next()?.value().to_owned();
                match value {
                    DebugValue::Gauge(v) => Some((format!("{}{{{label}}}", key.name()), *v)),
                    _ => None,
                }
            })
            .collect()
    }

    #[cfg(feature = "metrics")]
    #[test]
    fn destinations_past_the_bound_share_one_series_that_sums_them() {
        let recorder = metrics_util::debugging::DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        // A snapshot reads every gauge and sets it back to zero: each one below sees
        // what was set since the one before.
        let snapshot = || {
            let all = gauges(&snapshotter);
            move |label: &str| {
                let of = |name: &str| all.get(&format!("{name}{{{label}}}")).copied();
                (of(names::PACING_QUEUE), of(names::PACING_RATE))
            }
        };
        metrics::with_local_recorder(&recorder, || {
            let series = PacingSeries::new(1);
            let mut a = series.gauges(&"a", false);
            let (mut b, mut c) = (series.gauges(&"b", false), series.gauges(&"c", false));
            a.set(1, Some(3.0));
            b.set(2, Some(0.1));
            c.set(3, Some(0.2));
            let shown = snapshot();
            assert_eq!(shown("a"), (Some(1.0), Some(3.0)));
            assert_eq!(shown("b"), (None, None));
            assert_eq!(shown(OTHER), (Some(5.0), Some(0.3)));
            // A retired destination takes its share back, and reports nothing after.
            b.retire();
            b.set(9, Some(9.0));
            assert_eq!(snapshot()(OTHER), (Some(3.0), Some(0.2)));
            drop(c);
            let mut d = series.gauges(&"d", false);
            d.set(1, Some(0.5));
            // Dropped, a named destination reads zero.
            a.set(7, Some(1.0));
            drop(a);
            let shown = snapshot();
            assert_eq!(shown(OTHER), (Some(1.0), Some(0.5)));
            assert_eq!(shown("a"), (Some(0.0), Some(0.0)));
            // A name once given is kept; a configured destination is named past the bound.
            let mut again = series.gauges(&"a", false);
            let mut known = series.gauges(&"known", true);
            again.set(4, None);
            known.set(6, None);
            let shown = snapshot();
            assert_eq!(shown("a").0, Some(4.0));
            assert_eq!(shown("known").0, Some(6.0));
            assert_eq!(
                gauges(&snapshotter).len(),
                6,
                "a, known and (other), two each"
            );
        });
    }
}
