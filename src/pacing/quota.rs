//! What a destination says of its quota before it refuses: `RateLimit` and its kin.
//!
//! A rate limiter that reports the requests it still grants (`r=0`, `X-RateLimit-Remaining:
//! 0`) has said that the next one will be refused. Sending it anyway costs a 429 and, with
//! limiters that count refusals, more waiting. So a destination whose quota is spent holds
//! its requests until the quota resets, and one that reports no room left is not pushed
//! faster.

use crate::retry_after::QuotaLeft;
use crate::time::instant_after;
use std::time::Duration;
use tokio::time::Instant;

/// One destination's quota, as its latest response reported it, less what was sent since.
#[derive(Debug, Default)]
pub(crate) struct Quota {
    /// Requests sent to the destination so far; a send's number is its place in that count.
    sent: u64,
    /// What the latest report allows.
    known: Option<Known>,
}

#[derive(Debug)]
struct Known {
    /// Sends the destination still grants (negative: more were sent than it granted).
    credit: i64,
    /// When the count resets, if the destination said.
    reset: Option<Instant>,
    /// The number of the send whose response reported it: an older report is stale.
    basis: u64,
}

impl Quota {
    /// Counts a send, returning its number (for [`learn`](Self::learn)).
    pub(crate) fn sent(&mut self) -> u64 {
        let number = self.sent;
        self.sent = self.sent.saturating_add(1);
        if let Some(known) = &mut self.known {
            known.credit = known.credit.saturating_sub(1);
        }
        number
    }

    /// Learns what the response to send `number` reports, capping a reset at `max_reset`.
    ///
    /// The `others` requests still in flight spend the reported room too: whether sent
    /// after this one or before it (a request sent earlier may reach the server later, on
    /// a connection still being set up), the count the response reports may not include
    /// them yet.
    pub(crate) fn learn(
        &mut self,
        number: u64,
        left: QuotaLeft,
        others: u32,
        max_reset: Duration,
        now: Instant,
    ) {
        if self
            .known
            .as_ref()
            .is_some_and(|known| number < known.basis)
        {
            return;
        }
        let remaining = i64::try_from(left.remaining).unwrap_or(i64::MAX);
        let mut credit = remaining.saturating_sub(i64::from(others));
        let mut reset = left
            .reset
            .map(|reset| instant_after(now, reset.min(max_reset)));
        // Until the reported reset, the room only shrinks: two requests on two connections
        // may be counted in one order and answered in the other, and the report that
        // arrives last is then not the newest count. And the earliest reset holds: each
        // is at or after the true one (a reset in whole seconds is rounded up, and counts
        // from when the server answered), so the earliest is the closest. (Clients that
        // shared one limit and each waited for a late estimate came back late together,
        // and those that came back first took the whole next window.)
        if let Some(known) = &self.known
            && let Some(until) = known.reset
            && until > now
        {
            credit = credit.min(known.credit);
            reset = Some(reset.map_or(until, |reset| reset.min(until)));
        }
        self.known = Some(Known {
            credit,
            reset,
            basis: number,
        });
    }

    /// Until when the destination's quota is spent, if it said when it resets. A report
    /// whose reset has passed is forgotten: the count started over.
    pub(crate) fn spent_until(&mut self, now: Instant) -> Option<Instant> {
        let known = self.known.as_ref()?;
        match known.reset {
            Some(reset) if reset <= now => {
                self.known = None;
                None
            }
            Some(reset) if known.credit <= 0 => Some(reset),
            _ => None,
        }
    }

    /// Whether the destination reported no room left for more than what is sent: no
    /// reason to send it faster.
    pub(crate) fn is_full(&self) -> bool {
        self.known.as_ref().is_some_and(|known| known.credit <= 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: Duration = Duration::from_secs(1);

    fn left(remaining: u64, reset: Option<Duration>) -> QuotaLeft {
        QuotaLeft { remaining, reset }
    }

    #[tokio::test(start_paused = true)]
    async fn a_spent_quota_holds_until_its_reset_counting_sends_in_flight() {
        let now = Instant::now();
        let mut quota = Quota::default();
        assert_eq!(quota.spent_until(now), None);
        let older = quota.sent();
        let first = quota.sent();
        for _ in 0..3 {
            quota.sent();
        }
        // The first response says 3 left: the other three in flight spend them.
        quota.learn(first, left(3, Some(SEC)), 3, Duration::MAX, now);
        assert!(quota.is_full());
        assert_eq!(quota.spent_until(now), Some(now + SEC));
        // A stale report (an older send's, arriving late) changes nothing.
        quota.learn(older, left(40, Some(SEC)), 0, Duration::MAX, now);
        assert_eq!(quota.spent_until(now), Some(now + SEC));
        // At the reset the count starts over.
        assert_eq!(quota.spent_until(now + SEC), None);
        assert!(!quota.is_full());
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_reset_nothing_is_held_and_a_reset_is_capped() {
        let now = Instant::now();
        let mut quota = Quota::default();
        let n = quota.sent();
        quota.learn(n, left(0, None), 0, Duration::MAX, now);
        assert!(quota.is_full());
        assert_eq!(quota.spent_until(now), None);
        let n = quota.sent();
        quota.learn(n, left(0, Some(3600 * SEC)), 0, 5 * SEC, now);
        assert_eq!(quota.spent_until(now), Some(now + 5 * SEC));
        // Past the reset, room reported: not full, nothing held.
        let later = now + 5 * SEC;
        let n = quota.sent();
        quota.learn(n, left(2, Some(SEC)), 0, Duration::MAX, later);
        assert!(!quota.is_full());
        assert_eq!(quota.spent_until(later), None);
    }

    #[tokio::test(start_paused = true)]
    async fn before_its_reset_a_quota_only_shrinks() {
        // Sends 0 and 1 on two connections; the server counts 1 first (9 left), then 0
        // (8 left), and the answers arrive in send order.
        let now = Instant::now();
        let mut quota = Quota::default();
        let (zero, one) = (quota.sent(), quota.sent());
        quota.learn(zero, left(8, Some(SEC)), 1, Duration::MAX, now);
        quota.learn(one, left(9, Some(SEC)), 0, Duration::MAX, now);
        // Not 9: when 0's answer came, 1 was in flight and might not have been counted
        // yet (8 − 1), and 1's later answer cannot raise that.
        for _ in 0..7 {
            assert_eq!(quota.spent_until(now), None);
            quota.sent();
        }
        assert_eq!(quota.spent_until(now), Some(now + SEC));
    }
    #[tokio::test(start_paused = true)]
    async fn the_earliest_reported_reset_holds() {
        // Two reports of one window, the later one rounded further up.
        let now = Instant::now();
        let mut quota = Quota::default();
        let (a, b) = (quota.sent(), quota.sent());
        quota.learn(a, left(0, Some(SEC)), 1, Duration::MAX, now);
        quota.learn(b, left(0, Some(2 * SEC)), 0, Duration::MAX, now);
        assert_eq!(quota.spent_until(now), Some(now + SEC));
    }
}
