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
    /// The send number of the latest refused request.
    latest_refused: Option<u64>,
    until: Option<Instant>,
}

impl Cooldown {
    /// Counts the response to the destination's send number `number`. A success of a
    /// request sent before the latest refused one is older news than that refusal, and
    /// not counted: a limiter answers its refusals sooner than its backend answers what
    /// it let through, so a refused burst's successes would otherwise come back among
    /// its refusals and keep their share under half, and the cool-down would start late.
    pub(crate) fn record(&mut self, refused: bool, number: u64) {
        if refused {
            self.latest_refused = Some(self.latest_refused.map_or(number, |n| n.max(number)));
        } else if self.latest_refused.is_some_and(|latest| number < latest) {
            return;
        }
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
    /// `asked` (its `Retry-After`, or `RateLimit` reset) and `extra` time after it, at most
    /// `max` in all, if the destination mostly refuses. Returns its end when it starts or
    /// moves.
    pub(crate) fn start(
        &mut self,
        asked: Duration,
        extra: Duration,
        max: Duration,
        now: Instant,
    ) -> Option<Instant> {
        if max.is_zero() || self.refusals.is_none_or(|share| share <= COOL_SHARE) {
            return None;
        }
        if asked.is_zero() {
            return None;
        }
        let cooldown = asked.saturating_add(extra).min(max);
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

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    fn asked(headers: &HeaderMap) -> Duration {
        crate::retry_after::from_headers(headers, SystemTime::now()).expect("a Retry-After")
    }

    #[tokio::test(start_paused = true)]
    async fn only_a_destination_that_mostly_refuses_cools_down() {
        let now = Instant::now();
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", "5".parse().unwrap());
        let mut cooldown = Cooldown::default();
        for n in 0..20 {
            cooldown.record(false, n);
        }
        cooldown.record(true, 20);
        assert_eq!(
            cooldown.start(asked(&headers), Duration::ZERO, Duration::MAX, now),
            None
        );
        for n in 21..27 {
            cooldown.record(true, n);
        }
        let until = now + Duration::from_secs(5);
        assert_eq!(
            cooldown.start(asked(&headers), Duration::ZERO, Duration::MAX, now),
            Some(until)
        );
        assert_eq!(cooldown.until(now), Some(until));
        assert_eq!(cooldown.until(until), None);
        // Capped, and zero ignores the header.
        let mut fresh = Cooldown::default();
        fresh.record(true, 0);
        let cap = Duration::from_secs(2);
        assert_eq!(
            fresh.start(asked(&headers), Duration::ZERO, cap, now),
            Some(now + cap)
        );
        // Time asked for and more, capped in all.
        let mut longer = Cooldown::default();
        longer.record(true, 0);
        assert_eq!(
            longer.start(asked(&headers), secs(2), secs(6), now),
            Some(now + secs(6))
        );
        let mut off = Cooldown::default();
        off.record(true, 0);
        assert_eq!(
            off.start(asked(&headers), Duration::ZERO, Duration::ZERO, now),
            None
        );
    }

    /// A limiter answers its refusals before its backend answers the requests it let
    /// through: the successes of a burst's earlier sends come back among the refusals of
    /// its later ones, and do not keep the refusal share under half.
    #[tokio::test(start_paused = true)]
    async fn a_success_older_than_the_latest_refusal_does_not_dilute_the_share() {
        let now = Instant::now();
        let asked = Duration::from_secs(1);
        let burst = |older_successes: bool| {
            let mut cooldown = Cooldown::default();
            for n in 0..40 {
                cooldown.record(false, n);
            }
            // Sends 40..50 succeed, 50..60 are refused; answers interleaved.
            for i in 0..10 {
                cooldown.record(true, 50 + i);
                let n = if older_successes { 40 + i } else { 60 + i };
                cooldown.record(false, n);
            }
            cooldown.start(asked, Duration::ZERO, Duration::MAX, now)
        };
        assert_eq!(burst(true), Some(now + Duration::from_secs(1)));
        // Successes of later sends do say the destination serves again.
        assert_eq!(burst(false), None);
    }
}
