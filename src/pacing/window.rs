//! The slow-start window of a destination.

use crate::time::instant_after;
use std::time::Duration;
use tokio::time::Instant;

/// The slow start ends once the window reaches this many requests in flight.
pub(crate) const OPEN_WINDOW: u32 = 64;
/// A full window with no response for this long doubles: a slow server holds a burst
/// back a second or so, not until its slowest answer.
pub(crate) const STALL: Duration = Duration::from_secs(1);

/// How many requests a destination that has refused nothing may have in flight: one
/// more per success (doubling per round trip), twice as many after each [`STALL`] spent
/// full, and no limit from [`OPEN_WINDOW`] on or after the first refusal.
#[derive(Debug)]
pub(crate) struct Window {
    /// `None`: no limit (after a refusal, or from [`OPEN_WINDOW`] on).
    pub(super) limit: Option<u32>,
    pub(super) in_flight: u32,
    /// The last response, growth or start.
    progress_at: Instant,
}

impl Window {
    /// A window of `initial` requests; zero: no limit.
    pub(crate) fn new(initial: u32, now: Instant) -> Self {
        Self {
            limit: (initial > 0).then_some(initial),
            in_flight: 0,
            progress_at: now,
        }
    }

    pub(crate) fn limit(&self) -> Option<u32> {
        self.limit
    }

    /// `None` when a request may go now, else when the window grows if nothing comes back.
    pub(crate) fn ready_at(&mut self, now: Instant) -> Option<Instant> {
        loop {
            let limit = self.limit?;
            if self.in_flight < limit {
                return None;
            }
            let grow_at = instant_after(self.progress_at, STALL);
            if now < grow_at {
                return Some(grow_at);
            }
            self.progress_at = now;
            self.set(limit.saturating_mul(2));
        }
    }

    pub(crate) fn acquire(&mut self) {
        self.in_flight = self.in_flight.saturating_add(1);
    }

    pub(crate) fn release(&mut self, now: Instant) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.progress_at = now;
    }

    /// A success: one more in flight allowed.
    pub(crate) fn grow(&mut self) {
        if let Some(limit) = self.limit {
            self.set(limit.saturating_add(1));
        }
    }

    fn set(&mut self, limit: u32) {
        self.limit = (limit < OPEN_WINDOW).then_some(limit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_full_window_grows_with_successes_and_doubles_when_stalled() {
        let start = Instant::now();
        let mut window = Window::new(2, start);
        assert_eq!(window.ready_at(start), None);
        window.acquire();
        window.acquire();
        assert_eq!(window.ready_at(start), Some(start + STALL));
        window.grow();
        assert_eq!(window.ready_at(start), None);
        window.acquire();
        // Full at 3; a second without response: 6.
        assert_eq!(window.ready_at(start + STALL), None);
        assert_eq!(window.limit(), Some(6));
        for _ in 0..5 {
            window.grow();
        }
        assert_eq!(window.limit(), Some(11));
        for _ in 0..3 {
            window.set(window.limit().unwrap() * 2);
        }
        assert_eq!(window.limit(), None, "open at {OPEN_WINDOW}");
        assert_eq!(Window::new(0, start).limit(), None);
    }
}
