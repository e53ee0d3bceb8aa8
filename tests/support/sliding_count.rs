//! HAProxy's request rate (`http_req_rate(1s)` in a stick table), counted as its
//! `update_freq_ctr_period` and `read_freq_ctr_period` do. Shared by the pacing tests'
//! limiter and the simulation's model of HAProxy, which the real runs calibrate.

/// Requests over periods of a second, from the first request on.
#[derive(Debug, Default, Clone)]
pub struct SlidingCount {
    /// The current period's start, in seconds on the caller's clock.
    period_start: Option<f64>,
    current: u64,
    previous: u64,
}

impl SlidingCount {
    /// Counts a request at `now` (seconds, on any clock that only goes forward) and
    /// returns the rate HAProxy reads then, this request included: the current period's
    /// count plus the previous period's weighted by the whole milliseconds left of the
    /// current one, in whole requests rounded down. Refused requests count too: HAProxy
    /// counts every request it tracks. (Rounded down, a fleet sending exactly at the limit
    /// passes; with exact arithmetic each request would take the count just over it.)
    pub fn hit(&mut self, now: f64) -> u64 {
        let start = self.period_start.get_or_insert(now);
        let periods = (now - *start).floor();
        if periods >= 1.0 {
            self.previous = if periods >= 2.0 { 0 } else { self.current };
            self.current = 0;
            *start += periods;
        }
        self.current += 1;
        let elapsed_ms = ((now - *start) * 1000.0).floor() as u64;
        let remain_ms = 1000_u64.saturating_sub(elapsed_ms);
        self.current + self.previous * remain_ms / 1000
    }
}
