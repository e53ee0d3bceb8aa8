//! The room a destination reports: how many more requests it grants, until when.

use crate::retry_after::QuotaLeft;
use crate::time::instant_after;
use std::time::Duration;
use tokio::time::Instant;

/// The latest quota a destination reported with a reset, counted down by the sends
/// since. A client's part of it is its sends over what the quota lost since the
/// window's first report: clients sharing a quota each see all of it reported.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Room {
    /// The send number of the request it answered.
    pub(super) number: u64,
    remaining: u64,
    pub(super) reset_at: Instant,
    /// This client's share of the quota's use.
    share: f64,
    /// The first report of this window: its send number and remaining count.
    first: (u64, u64),
}

impl Room {
    /// The room reported by the response to send `number`, after `previous`; `None`
    /// without a reset (nothing says when room comes back).
    pub(crate) fn reported(
        previous: Option<Self>,
        number: u64,
        left: QuotaLeft,
        max_reset: Duration,
        now: Instant,
    ) -> Option<Self> {
        let reset = left.reset?.min(max_reset);
        let mut room = Self {
            number,
            remaining: left.remaining,
            reset_at: instant_after(now, reset),
            share: 1.0,
            first: (number, left.remaining),
        };
        if let Some(previous) = previous {
            room.share = previous.share;
            // A count that went up is a new window.
            if left.remaining <= previous.remaining {
                room.first = previous.first;
                let used = room.first.1.saturating_sub(left.remaining);
                let sent = number.saturating_sub(room.first.0);
                if used > 0 && sent > 0 {
                    room.share = (sent as f64 / used as f64).min(1.0);
                }
            }
        }
        Some(room)
    }

    /// What is left of this client's part of the room after the sends up to `sends`.
    fn left(&self, sends: u64) -> u64 {
        let part = (self.remaining as f64 * self.share).floor() as u64;
        part.saturating_sub(sends.saturating_sub(self.number))
    }

    /// The reset, if the sends up to number `sends` spent the room before it.
    pub(crate) fn spent_until(&self, sends: u64, now: Instant) -> Option<Instant> {
        (now < self.reset_at && self.left(sends) == 0).then_some(self.reset_at)
    }

    /// The pace that spreads what is left until the reset (the IETF `RateLimit` draft's
    /// advice).
    pub(crate) fn pace(&self, sends: u64, now: Instant) -> Option<f64> {
        let left = self.left(sends);
        let until = self.reset_at.saturating_duration_since(now).as_secs_f64();
        (left > 0 && until > 0.0).then(|| left as f64 / until)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn left(remaining: u64) -> QuotaLeft {
        QuotaLeft {
            remaining,
            reset: Some(Duration::from_secs(1)),
        }
    }

    #[test]
    fn the_room_is_counted_down_by_later_sends_until_the_reset() {
        let t0 = Instant::now();
        let max = Duration::from_secs(60);
        let room = Room::reported(None, 10, left(2), max, t0).unwrap();
        assert_eq!(room.spent_until(11, t0), None);
        let reset = t0 + Duration::from_secs(1);
        assert_eq!(room.spent_until(12, t0), Some(reset));
        assert_eq!(room.spent_until(12, reset), None);
        assert_eq!(room.pace(10, t0), Some(2.0));
        assert_eq!(room.pace(11, t0 + Duration::from_millis(500)), Some(2.0));
        let no_reset = QuotaLeft {
            remaining: 0,
            reset: None,
        };
        assert!(Room::reported(None, 10, no_reset, max, t0).is_none());
    }

    #[test]
    fn a_client_sharing_the_quota_counts_its_share_of_the_room() {
        let t0 = Instant::now();
        let max = Duration::from_secs(60);
        let first = Room::reported(None, 1, left(40), max, t0);
        // Two of this client's sends later, the quota lost 8: others took 6.
        let later = Room::reported(first, 3, left(32), max, t0).unwrap();
        assert_eq!(later.left(3), 8);
        // A new window (the count went up) keeps the share until it is measured again.
        let next = Room::reported(Some(later), 4, left(50), max, t0).unwrap();
        assert_eq!(next.left(4), 12);
    }
}
