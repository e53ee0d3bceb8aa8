//! The delivery rate of a destination: successes over the last second.

use std::time::Duration;
use tokio::time::Instant;

/// The span the delivery rate is counted over: the window of most published limits.
pub(crate) const SERVED_WINDOW: Duration = Duration::from_secs(1);

/// Successes per second, by a sliding-window counter: the current window's count plus
/// the previous one's, weighted by its share still inside the last second.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Served {
    born: Instant,
    start: Instant,
    current: u32,
    previous: u32,
    /// Successes of this round since the last [`take_since`](Self::take_since).
    since: u32,
}

impl Served {
    pub(crate) fn new(now: Instant) -> Self {
        Self {
            born: now,
            start: now,
            current: 0,
            previous: 0,
            since: 0,
        }
    }

    fn roll(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.start);
        if elapsed < SERVED_WINDOW {
            return;
        }
        let windows = elapsed.as_nanos() / SERVED_WINDOW.as_nanos();
        self.previous = if windows == 1 { self.current } else { 0 };
        self.current = 0;
        let whole = SERVED_WINDOW.saturating_mul(u32::try_from(windows).unwrap_or(u32::MAX));
        self.start = self.start.checked_add(whole).unwrap_or(now);
    }

    /// Counts one success; `this_round`: of a request sent since the last cut.
    pub(crate) fn add(&mut self, this_round: bool, now: Instant) {
        self.roll(now);
        self.current = self.current.saturating_add(1);
        self.since = self.since.saturating_add(u32::from(this_round));
    }

    /// The successes of the last [`SERVED_WINDOW`] (a window limiter's allowance).
    pub(crate) fn in_window(&mut self, now: Instant) -> f64 {
        self.roll(now);
        let into = now.saturating_duration_since(self.start).as_secs_f64();
        let left = 1.0 - into / SERVED_WINDOW.as_secs_f64();
        f64::from(self.previous) * left + f64::from(self.current)
    }

    /// Successes per second over the last [`SERVED_WINDOW`], or over a younger
    /// destination's life (at least `min_span`): a burst is not a rate.
    pub(crate) fn rate(&mut self, min_span: Duration, now: Instant) -> f64 {
        let age = now.saturating_duration_since(self.born);
        let span = age.clamp(min_span, SERVED_WINDOW.max(min_span));
        self.in_window(now) / span.as_secs_f64()
    }

    /// The successes since the last call, which starts a new count.
    pub(crate) fn take_since(&mut self) -> u32 {
        std::mem::take(&mut self.since)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_steady_rate_reads_as_itself_and_a_burst_as_a_few_in_a_second() {
        let t0 = Instant::now();
        let mut served = Served::new(t0);
        for i in 0..10 {
            served.add(true, t0 + ms(i));
        }
        assert_eq!(served.in_window(t0 + ms(10)), 10.0);
        assert_eq!(served.rate(ms(100), t0 + ms(10)), 100.0);
        let mut steady = Served::new(t0);
        for i in 0..150 {
            steady.add(true, t0 + ms(20 * i));
        }
        let rate = steady.rate(ms(100), t0 + ms(2990));
        assert!((rate - 50.0).abs() < 1.5, "{rate}");
    }

    #[test]
    fn a_quiet_destination_reads_zero_and_since_counts_from_the_last_take() {
        let t0 = Instant::now();
        let mut served = Served::new(t0);
        served.add(true, t0);
        served.add(true, t0 + ms(5));
        assert_eq!(served.take_since(), 2);
        assert_eq!(served.take_since(), 0);
        assert_eq!(served.in_window(t0 + ms(5000)), 0.0);
    }
}
