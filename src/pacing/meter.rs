//! A rate meter: events per second over about the last second.

use std::time::Duration;
use tokio::time::Instant;

/// What "lately" means to the meters: about the last second counts.
pub(crate) const WINDOW: Duration = Duration::from_secs(1);
/// The meters' time constant, [`WINDOW`] in seconds.
const TAU: f64 = WINDOW.as_secs_f64();
/// A meter needs this much history before its rate means anything.
pub(crate) const MIN_SPAN: Duration = Duration::from_millis(100);

/// Events per second, weighted exponentially over about the last [`TAU`] seconds.
///
/// `count / span` where both decay by `e^(-dt/TAU)`: unbiased from the first instant on
/// (a meter 50 ms old that saw 5 events says 100/s).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Meter {
    count: f64,
    span: f64,
    at: Instant,
}

impl Meter {
    pub(crate) fn new(at: Instant) -> Self {
        Self {
            count: 0.0,
            span: 0.0,
            at,
        }
    }

    fn advance(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        if dt > 0.0 {
            let keep = (-dt / TAU).exp();
            self.count *= keep;
            self.span = self.span * keep + TAU * (1.0 - keep);
            self.at = now;
        }
    }

    pub(crate) fn add(&mut self, now: Instant) {
        self.advance(now);
        self.count += 1.0;
    }

    /// The events of about the last [`TAU`] seconds, each weighted by its age: two
    /// meters' counts at the same instant compare what they saw over the same time.
    pub(crate) fn count(&mut self, now: Instant) -> f64 {
        self.advance(now);
        self.count
    }

    /// The rate, once the meter has [`MIN_SPAN`] of history.
    pub(crate) fn rate(&mut self, now: Instant) -> Option<f64> {
        self.advance(now);
        (self.span >= MIN_SPAN.as_secs_f64()).then(|| self.count / self.span)
    }

    /// The rate, however short the history (`None` only without any), counted over at
    /// least [`MIN_SPAN`]: the few successes of a burst's first milliseconds are a
    /// server's burst allowance, not its rate (4 in 2 ms is no 2000 r/s).
    pub(crate) fn rough_rate(&mut self, now: Instant) -> Option<f64> {
        self.rate_over(now, MIN_SPAN)
    }

    /// The rate, however short the history (`None` only without any), counted over at
    /// least `span`.
    pub(crate) fn rate_over(&mut self, now: Instant, span: Duration) -> Option<f64> {
        self.advance(now);
        (self.span > 0.0).then(|| self.count / self.span.max(span.as_secs_f64()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_meter_measures_the_recent_rate() {
        let start = Instant::now();
        let mut meter = Meter::new(start);
        assert_eq!(meter.rate(start), None);
        for i in 1..=50 {
            meter.add(start + Duration::from_millis(10 * i));
        }
        let at = start + Duration::from_millis(500);
        let rate = meter.rate(at).unwrap();
        assert!((95.0..=105.0).contains(&rate), "{rate}");
        // A second of silence: the rate decays, it does not stay at 100.
        let rate = meter.rate(at + Duration::from_secs(1)).unwrap();
        assert!(rate < 40.0, "{rate}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_milliseconds_is_no_rate() {
        let start = Instant::now();
        let mut meter = Meter::new(start);
        for i in 1..=4 {
            meter.add(start + Duration::from_micros(500 * i));
        }
        // 4 successes in 2 ms: counted over 100 ms, 40 r/s, not 2000.
        let rate = meter.rough_rate(start + Duration::from_millis(2)).unwrap();
        assert!((39.0..=41.0).contains(&rate), "{rate}");
        assert_eq!(meter.rate(start + Duration::from_millis(2)), None);
    }
}
