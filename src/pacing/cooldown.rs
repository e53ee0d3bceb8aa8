//! The cool-down of a destination that refuses everything with `Retry-After`.

use crate::time::instant_after;
use std::time::Duration;
use tokio::time::Instant;

/// Weight of one response in a destination's refusal share.
const SHARE_WEIGHT: f64 = 1.0 / 8.0;
/// `Retry-After` becomes a cool-down once more than this share of the destination's
/// recent responses are refusals.
const COOL_SHARE: f64 = 0.5;

/// Whether a destination is closed, and how much of what it says lately is "no".
///
/// One shed request among many successes is no reason to close a destination (a server
/// shedding its excess sends `Retry-After` with each refusal): only a destination whose
/// recent answers are mostly refusals — a spent quota, an outage — cools down.
#[derive(Debug, Default)]
pub(crate) struct Cooldown {
    /// Share of recent responses that were refusals; `None` before the first.
    refusals: Option<f64>,
    until: Option<Instant>,
}

impl Cooldown {
    /// Counts a response.
    pub(crate) fn record(&mut self, refused: bool) {
        let x = if refused { 1.0 } else { 0.0 };
        // A destination's first answer is all it has said so far.
        let share = self.refusals.map_or(x, |s| s + (x - s) * SHARE_WEIGHT);
        self.refusals = Some(share);
    }

    /// The end of the live cool-down, forgetting an expired one.
    pub(crate) fn until(&mut self, now: Instant) -> Option<Instant> {
        match self.until {
            Some(until) if until > now => Some(until),
            Some(_) => {
                self.until = None;
                None
            }
            None => None,
        }
    }

    /// After a refusal: starts (or extends) a cool-down for the delay the response
    /// `asked` (its `Retry-After`, or `RateLimit` reset), at most `max`, if the destination
    /// mostly refuses. Returns its end when it starts or moves.
    pub(crate) fn start(
        &mut self,
        asked: Option<Duration>,
        max: Duration,
        now: Instant,
    ) -> Option<Instant> {
        if max.is_zero() || self.refusals.is_none_or(|share| share <= COOL_SHARE) {
            return None;
        }
        let cooldown = asked?.min(max);
        if cooldown.is_zero() {
            return None;
        }
        let until = instant_after(now, cooldown);
        if self.until(now).is_some_and(|current| current >= until) {
            return None;
        }
        self.until = Some(until);
        Some(until)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderMap;
    use std::time::SystemTime;

    fn asked(headers: &HeaderMap) -> Option<Duration> {
        crate::retry_after::from_headers(headers, SystemTime::now())
    }

    #[tokio::test(start_paused = true)]
    async fn only_a_destination_that_mostly_refuses_cools_down() {
        let now = Instant::now();
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", "5".parse().unwrap());
        let mut cooldown = Cooldown::default();
        for _ in 0..20 {
            cooldown.record(false);
        }
        cooldown.record(true);
        assert_eq!(cooldown.start(asked(&headers), Duration::MAX, now), None);
        for _ in 0..6 {
            cooldown.record(true);
        }
        let until = now + Duration::from_secs(5);
        assert_eq!(
            cooldown.start(asked(&headers), Duration::MAX, now),
            Some(until)
        );
        assert_eq!(cooldown.until(now), Some(until));
        assert_eq!(cooldown.until(until), None);
        // Capped, and zero ignores the header.
        let mut fresh = Cooldown::default();
        fresh.record(true);
        let cap = Duration::from_secs(2);
        assert_eq!(fresh.start(asked(&headers), cap, now), Some(now + cap));
        let mut off = Cooldown::default();
        off.record(true);
        assert_eq!(off.start(asked(&headers), Duration::ZERO, now), None);
    }
}
