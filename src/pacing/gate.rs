//! The state every clone of a pacing layer shares: the client's pace and the cool-downs
//! of its destinations.

use super::PacingError;
use crate::ResponsiveBackOff;
use http::uri::Authority;
use http::{HeaderMap, Request, StatusCode};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};
use tokio::time::Instant;

/// Where a request goes: its URI's authority, else its `Host` header, else `None` (one
/// bucket for every request without a destination, e.g. a service bound to one server).
pub(crate) type Destination = Option<Authority>;

/// The destination of `request`.
pub(crate) fn destination<B>(request: &Request<B>) -> Destination {
    if let Some(authority) = request.uri().authority() {
        return Some(authority.clone());
    }
    let host = request.headers().get(http::header::HOST)?;
    Authority::try_from(host.as_bytes()).ok()
}

/// The statuses 400 to 599, as bits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct StatusSet([u64; 4]);

impl StatusSet {
    pub(crate) const FIRST: u16 = 400;
    pub(crate) const LAST: u16 = 599;

    /// Adds `status`, which the caller has checked is within `FIRST..=LAST`.
    pub(crate) fn insert(&mut self, status: StatusCode) {
        let i = usize::from(status.as_u16() - Self::FIRST);
        self.0[i / 64] |= 1 << (i % 64);
    }

    pub(crate) fn contains(&self, status: StatusCode) -> bool {
        match status.as_u16().checked_sub(Self::FIRST) {
            Some(i) if status.as_u16() <= Self::LAST => {
                let i = usize::from(i);
                self.0[i / 64] & (1 << (i % 64)) != 0
            }
            _ => false,
        }
    }
}

/// The validated settings of a layer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    pub(crate) max_wait: Duration,
    pub(crate) max_cooldown: Duration,
    pub(crate) slow_down: StatusSet,
}

/// Shared by a layer, its clones, and every service and response future they make.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) backoff: ResponsiveBackOff,
    pub(crate) settings: Settings,
    /// Fast path: `false` means no request has anything to wait for (the delay is zero,
    /// no slot lies ahead, no cool-down is active), so `admit` touches no lock. Set under
    /// the gate's lock after every slow-down response; cleared under it by `admit`, after
    /// reading the delay under it too, so a concurrent slow-down is never lost.
    throttled: AtomicBool,
    /// Counts the raises of the delay; a request remembers the round it was sent in.
    /// Written under the gate's lock.
    round: AtomicU64,
    gate: Mutex<Gate>,
}

/// What the lock protects.
#[derive(Debug, Default)]
struct Gate {
    /// The earliest start of the next request not held by a cool-down: requests are
    /// spaced at least the current delay apart.
    next_slot: Option<Instant>,
    /// Per destination, the earliest start of its next request: the end of its cool-down,
    /// then one delay later per request queued behind it.
    cooldowns: HashMap<Destination, Instant>,
    /// The latest instant in `cooldowns`: past it, the whole map is stale.
    cooling_until: Option<Instant>,
}

/// `at + d`, saturating at about 30 years from `at` (as tokio does for far deadlines).
fn later(at: Instant, d: Duration) -> Instant {
    const FAR: Duration = Duration::from_secs(86_400 * 365 * 30);
    at.checked_add(d)
        .or_else(|| at.checked_add(FAR))
        .unwrap_or(at)
}

impl Shared {
    pub(crate) fn new(backoff: ResponsiveBackOff, settings: Settings) -> Self {
        Self {
            backoff,
            settings,
            throttled: AtomicBool::new(false),
            round: AtomicU64::new(0),
            gate: Mutex::new(Gate::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Gate> {
        // Every update leaves the gate consistent (instants only move forward): recover
        // from poisoning rather than panic.
        self.gate.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reserves a start for a request to `to`: `Ok(None)` to go now, `Ok(Some(at))` to
    /// wait until `at`, or an error, reserving nothing, when that wait exceeds the
    /// request's budget.
    pub(crate) fn admit(
        &self,
        to: &Destination,
        deadline: Option<Instant>,
    ) -> Result<Option<Instant>, PacingError> {
        if !self.throttled.load(Ordering::Acquire) {
            return Ok(None);
        }
        let now = Instant::now();
        let mut gate = self.lock();
        let delay = self.backoff.current();
        if gate.cooling_until.is_some_and(|until| until <= now) {
            gate.cooldowns.clear();
            gate.cooling_until = None;
        }
        let slot = gate.next_slot.map_or(now, |slot| slot.max(now));
        // A cool-down ending after the client's next slot holds the request in its own
        // queue, without taking one of the client's slots (requests to other destinations
        // need not wait behind it); one ending sooner is covered by that slot.
        let cooling = if gate.cooldowns.is_empty() {
            None
        } else {
            gate.cooldowns.get(to).copied().filter(|at| *at > slot)
        };
        let start = cooling.unwrap_or(slot);
        let wait = start - now;
        let budget = match deadline {
            Some(deadline) => self
                .settings
                .max_wait
                .min(deadline.saturating_duration_since(now)),
            None => self.settings.max_wait,
        };
        if wait > budget {
            tracing::debug!(?to, ?wait, ?budget, "pacing: request would wait too long");
            return Err(PacingError::WouldExceedBudget { wait, budget });
        }
        if !delay.is_zero() {
            let next = later(start, delay);
            if cooling.is_some() {
                gate.cooldowns.insert(to.clone(), next);
                gate.cooling_until = gate.cooling_until.max(Some(next));
            } else {
                gate.next_slot = Some(next);
            }
        } else if gate.cooldowns.is_empty() && gate.next_slot.is_none_or(|slot| slot <= now) {
            gate.next_slot = None;
            self.throttled.store(false, Ordering::Release);
        }
        if wait.is_zero() {
            Ok(None)
        } else {
            tracing::trace!(?to, ?wait, "pacing: request waits");
            Ok(Some(start))
        }
    }

    /// The current pacing round, to pass back to [`record`](Self::record) with the
    /// response of a request sent now.
    pub(crate) fn round(&self) -> u64 {
        self.round.load(Ordering::Acquire)
    }

    /// Learns from the response of `to` to a request sent in `round`: a slow-down status
    /// raises the client's delay (once per round), pushes the next slot one delay past
    /// now and, with a `Retry-After` (or `RateLimit`), cools `to` down; any other status
    /// counts as a success.
    pub(crate) fn record(
        &self,
        to: &Destination,
        round: u64,
        status: StatusCode,
        headers: &HeaderMap,
    ) {
        if !self.settings.slow_down.contains(status) {
            self.backoff.on_success();
            return;
        }
        let cooldown = if self.settings.max_cooldown.is_zero() {
            None
        } else {
            crate::retry_after::from_headers(headers, SystemTime::now())
                .map(|asked| asked.min(self.settings.max_cooldown))
                .filter(|d| !d.is_zero())
        };
        let now = Instant::now();
        let mut gate = self.lock();
        // Only a request sent after the last raise raises again: the other refusals
        // answer requests sent at the old pace, and counting each would multiply the
        // delay once per request in flight (TCP likewise backs off once per round trip).
        let delay = if self.round.load(Ordering::Acquire) == round {
            self.round.store(round.wrapping_add(1), Ordering::Release);
            self.backoff.on_failure()
        } else {
            self.backoff.current()
        };
        let after = later(now, delay);
        gate.next_slot = Some(gate.next_slot.map_or(after, |slot| slot.max(after)));
        if let Some(cooldown) = cooldown {
            let until = later(now, cooldown);
            // Forget the expired cool-downs now, so the map only holds live ones.
            gate.cooldowns.retain(|_, at| *at > now);
            let at = gate.cooldowns.entry(to.clone()).or_insert(until);
            *at = (*at).max(until);
            gate.cooling_until = gate.cooling_until.max(Some(until));
            tracing::debug!(?to, ?cooldown, %status, "pacing: destination cools down");
        }
        self.throttled.store(true, Ordering::Release);
        tracing::debug!(?delay, %status, "pacing: client slows down");
    }

    /// How long requests to `to` are still held by a cool-down.
    pub(crate) fn cooldown(&self, to: &Destination) -> Option<Duration> {
        if !self.throttled.load(Ordering::Acquire) {
            return None;
        }
        let now = Instant::now();
        let gate = self.lock();
        let at = gate.cooldowns.get(to).filter(|at| **at > now)?;
        Some(*at - now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_set_holds_exactly_what_was_inserted() {
        let mut set = StatusSet::default();
        for code in [400, 429, 463, 464, 503, 599] {
            set.insert(StatusCode::from_u16(code).unwrap());
        }
        for code in 100..=999 {
            let status = StatusCode::from_u16(code).unwrap();
            let expected = [400, 429, 463, 464, 503, 599].contains(&code);
            assert_eq!(set.contains(status), expected, "{code}");
        }
    }

    #[test]
    fn later_saturates() {
        let now = Instant::now();
        assert!(later(now, Duration::MAX) > now + Duration::from_secs(86_400 * 365));
        assert_eq!(
            later(now, Duration::from_secs(1)),
            now + Duration::from_secs(1)
        );
    }

    #[test]
    fn destination_falls_back_to_the_host_header() {
        let absolute = Request::get("http://a.example:8080/x").body(()).unwrap();
        assert_eq!(destination(&absolute).unwrap().as_str(), "a.example:8080");
        let relative = Request::get("/x")
            .header("host", "b.example")
            .body(())
            .unwrap();
        assert_eq!(destination(&relative).unwrap().as_str(), "b.example");
        let bare = Request::get("/x").body(()).unwrap();
        assert_eq!(destination(&bare), None);
    }
}
