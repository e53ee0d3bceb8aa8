//! The pacing state of one destination: its rate, slow-start window, queue and
//! cool-down, behind its own lock.

use super::cooldown::Cooldown;
use super::key::Key;
use super::queue::{Queue, Watch};
use super::quota::Quota;
use super::rate::{Mode, Rate};
use super::settings::Settings;
use super::window::Window;
use crate::backoff::ResponsiveBackOff;
use crate::error::pacing::PacingError;
use crate::metrics::DestinationGauges;
use crate::retry_after::{QuotaLeft, ServerSaid};
use crate::time::{ClockFn, instant_after, never};
use http::{HeaderMap, StatusCode};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::Waker;
use std::time::Duration;
use tokio::time::Instant;

/// How long a request held by [`State::one_at_a_time`] waits for the request in flight
/// before it looks again: as long as a report without a reset speaks, plus the
/// destination's round trip. (Just as long, a bucket answering in a second had the held
/// request look again as the answer came, and go beside it when it looked first.)
const ONE_AT_A_TIME: Duration = Duration::from_secs(1);

/// One destination's pacing.
#[derive(Debug)]
pub(crate) struct Destination {
    key: Key,
    settings: Settings,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    rate: Rate,
    window: Window,
    queue: Queue,
    cooldown: Cooldown,
    quota: Quota,
    /// The last request or response: an idle destination is forgotten after a while.
    last_active: Instant,
    /// Under the lock, so a destination being forgotten reports nothing after.
    gauges: DestinationGauges,
}

impl State {
    /// Whether the destination refused lately (or said its quota is spent): its pace,
    /// cool-down or quota reset then limit waits.
    fn is_throttled(&mut self, now: Instant) -> bool {
        self.rate.is_throttled() || self.closed_until(now).is_some()
    }

    /// Whether requests go one at a time, each once the last has answered: a destination
    /// that refused lately reports no room, and no word of when (a spent quota with a
    /// reset is held instead), so the requests already on their way are not joined by
    /// more to be refused. (One that never refused is not slowed.)
    fn one_at_a_time(&self, now: Instant) -> bool {
        self.rate.is_throttled() && self.quota.is_full(now)
    }

    /// Until when the destination is closed: a cool-down, or a spent quota.
    fn closed_until(&mut self, now: Instant) -> Option<Instant> {
        let cooldown = self.cooldown.until(now);
        let quota = self.quota.spent_until(now);
        cooldown.max(quota)
    }

    /// Reports the queue and the rate to the `metrics` facade (feature `metrics`).
    fn report(&mut self) {
        let (queue, rate) = (self.queue.len(), self.rate.rate());
        self.gauges.set(queue, rate);
    }

    /// Until when no request may go: the destination is closed, the room it reported is
    /// spread over the time to its reset, or after a reset the count is awaited.
    fn held_until(&mut self, now: Instant) -> Option<Instant> {
        let closed = self.closed_until(now);
        closed.max(self.quota.ready_at(self.rate.round_trip(), now))
    }
}

/// How long a request may wait for its turn.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// When it arrived.
    since: Instant,
    /// `max_wait` after it arrived, or its deadline if sooner: a destination that
    /// refused lately does not make it wait longer.
    end: Instant,
    /// Its [`PacingDeadline`](super::PacingDeadline): it never starts later.
    deadline: Option<Instant>,
}

impl Limits {
    pub(crate) fn new(now: Instant, max_wait: Duration, deadline: Option<Instant>) -> Self {
        let end = instant_after(now, max_wait);
        Self {
            since: now,
            end: deadline.map_or(end, |deadline| deadline.min(end)),
            deadline,
        }
    }

    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The latest it may leave: `max_wait` after it arrived, or its deadline if sooner.
    pub(crate) fn end(&self) -> Instant {
        self.end
    }

    /// The error of a request still not sent at `now`, past its [`end`](Self::end).
    pub(crate) fn expired(&self, now: Instant) -> PacingError {
        match self.deadline {
            Some(deadline) if now >= deadline => PacingError::DeadlinePassed,
            _ => self.too_long(Duration::ZERO, now),
        }
    }

    /// The latest a waiting request should look at its turn again: the end of its wait,
    /// and past that (its destination refused nothing, so it waits on) its deadline.
    pub(crate) fn wake_by(&self, now: Instant) -> Instant {
        if now < self.end {
            self.end
        } else {
            self.deadline.unwrap_or_else(|| never(now))
        }
    }

    /// The error of a request that would wait `more` from `now` on.
    fn too_long(&self, more: Duration, now: Instant) -> PacingError {
        PacingError::WaitTooLong {
            wait: now
                .saturating_duration_since(self.since)
                .saturating_add(more),
            max_wait: self.end.saturating_duration_since(self.since),
        }
    }
}

/// What a new request does.
#[derive(Debug)]
pub(crate) enum Admit {
    Go(Grant),
    /// Wait in the queue; poll with [`Ticket::turn`].
    Queue(Ticket),
    Fail(PacingError),
}

/// What a waiting request does now.
#[derive(Debug)]
pub(crate) enum Turn {
    Go(Grant),
    /// Look again then (or when woken).
    At(Instant),
    /// Look again when woken.
    Wait,
    Fail(PacingError),
}

/// A request sent: its response teaches the pace; it counts as in flight until dropped.
#[derive(Debug)]
pub(crate) struct Grant {
    destination: Arc<Destination>,
    round: u64,
    /// Its number among the destination's sends.
    number: u64,
    /// Released by [`finish`](Self::finish) already.
    finished: bool,
}

impl Grant {
    /// Learns from the response to this request, sent at `sent`, and releases it (one
    /// lock for both, where dropping the grant would take a second). Returns what the
    /// response said, read with `clock` (the retry layer's, or the system's), for the
    /// layers above.
    pub(crate) fn finish(
        mut self,
        sent: Instant,
        status: StatusCode,
        headers: &HeaderMap,
        clock: Option<&ClockFn>,
    ) -> ServerSaid {
        let sent = Sent {
            round: self.round,
            number: self.number,
            at: sent,
        };
        self.finished = true;
        let slow_down = self.destination.settings.slow_down.contains(status);
        let said = ServerSaid::read(status, headers, slow_down, clock);
        let reported = Reported::of(status, &said, slow_down);
        self.destination.finish(sent, reported, Instant::now());
        said
    }
}

/// What a response reported of its destination, read before the destination's lock
/// (other requests to the destination wait for it).
struct Reported {
    status: StatusCode,
    /// The status is one the settings slow down on.
    refused: bool,
    /// The quota left, from `RateLimit` or `X-RateLimit-*` headers.
    quota: Option<QuotaLeft>,
    /// The `Retry-After` of a refusal.
    asked: Option<Duration>,
}

impl Reported {
    /// Only an explicit rate signal is a refusal: a 429, or another slow-down status that
    /// says when to come back. A 503 without `Retry-After` is a failing server, not a rate
    /// limit: guarding it against retries is the retry budget's job, not pacing's.
    /// `slow_down`: the status is one the settings slow down on.
    fn of(status: StatusCode, said: &ServerSaid, slow_down: bool) -> Self {
        let asked = if slow_down {
            said.retry_after().flatten()
        } else {
            None
        };
        Self {
            status,
            refused: slow_down && (status == StatusCode::TOO_MANY_REQUESTS || asked.is_some()),
            quota: said.quota(),
            asked,
        }
    }
}

/// When and in which round a request was sent.
#[derive(Debug, Clone, Copy)]
struct Sent {
    round: u64,
    number: u64,
    at: Instant,
}

impl Drop for Grant {
    fn drop(&mut self) {
        if !self.finished {
            self.destination.release(Instant::now());
        }
    }
}

/// A place in a destination's queue; dropping it leaves the queue.
#[derive(Debug)]
pub(crate) struct Ticket {
    destination: Arc<Destination>,
    id: u64,
}

impl Ticket {
    /// Whether the request may go now; otherwise `waker` is woken when that may change.
    pub(crate) fn turn(&self, limits: &Limits, waker: &Waker) -> Turn {
        self.destination
            .turn(self.id, limits, waker, Instant::now())
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.destination.leave(self.id, Instant::now());
    }
}

impl Destination {
    /// A destination's pacing; `known`: the rate the user said it allows (req/s), paced
    /// from the first request, without a slow start. It reports to `gauges`.
    pub(crate) fn new(
        key: Key,
        settings: Settings,
        backoff: ResponsiveBackOff,
        known: Option<f64>,
        gauges: DestinationGauges,
        now: Instant,
    ) -> Self {
        let initial_window = if known.is_some() {
            0
        } else {
            settings.initial_window
        };
        let window = Window::new(initial_window, now);
        let rate = Rate::new(backoff, window.limit().is_some(), known, now);
        Self {
            key,
            settings,
            state: Mutex::new(State {
                rate,
                window,
                queue: Queue::default(),
                cooldown: Cooldown::default(),
                quota: Quota::default(),
                last_active: now,
                gauges,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update leaves the state consistent: recover from poisoning, don't panic.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Decides what a new request does.
    pub(crate) fn admit(self: &Arc<Self>, limits: &Limits, now: Instant) -> Admit {
        let mut s = self.lock();
        s.last_active = now;
        let max_wait = limits.end.saturating_duration_since(now);
        let mut wait = s.rate.expected_wait(s.queue.len(), now);
        let held = s.held_until(now);
        if let Some(until) = held {
            wait = wait.max(until - now);
        }
        if wait > max_wait {
            tracing::debug!(to = %self.key, ?wait, ?max_wait, "pacing: request would wait too long");
            return Admit::Fail(limits.too_long(wait, now));
        }
        if s.queue.is_empty()
            && held.is_none()
            && let Ok(grant) = self.try_go_unheld(&mut s, now)
        {
            return Admit::Go(grant);
        }
        if s.queue.len() >= self.settings.max_queue {
            tracing::debug!(to = %self.key, "pacing: queue full");
            return Admit::Fail(PacingError::QueueFull {
                max_queue: self.settings.max_queue,
            });
        }
        let id = s.queue.push(now);
        tracing::trace!(to = %self.key, "pacing: request waits");
        s.report();
        Admit::Queue(Ticket {
            destination: Arc::clone(self),
            id,
        })
    }

    /// Sends now if the destination lets a request go, else says when it may.
    fn try_go(self: &Arc<Self>, s: &mut State, now: Instant) -> Result<Grant, Instant> {
        match s.held_until(now) {
            Some(until) => Err(until),
            None => self.try_go_unheld(s, now),
        }
    }

    /// [`try_go`](Self::try_go) for a destination known not to be held now.
    fn try_go_unheld(self: &Arc<Self>, s: &mut State, now: Instant) -> Result<Grant, Instant> {
        if s.one_at_a_time(now) && s.window.in_flight() > 0 {
            // Woken when the request in flight answers (`release`); looks again when the
            // report that holds it has stopped speaking, in case none answers.
            let wait = ONE_AT_A_TIME.saturating_add(s.rate.round_trip());
            return Err(instant_after(now, wait));
        }
        match s.rate.mode() {
            Mode::Open => {}
            Mode::Start => {
                if let Some(at) = s.window.ready_at(now) {
                    return Err(at);
                }
                if s.window.limit().is_none() {
                    s.rate.open();
                }
            }
            Mode::Paced { .. } | Mode::Probe { .. } => {
                let next = s.rate.next_slot(now).unwrap_or(now);
                if next > now {
                    return Err(next);
                }
                s.rate.take_slot(next, now);
            }
        }
        s.window.acquire();
        Ok(Grant {
            destination: Arc::clone(self),
            round: s.rate.round(),
            number: s.quota.sent(now),
            finished: false,
        })
    }

    fn turn(self: &Arc<Self>, id: u64, limits: &Limits, waker: &Waker, now: Instant) -> Turn {
        let mut s = self.lock();
        if !s.queue.polled(id, waker) {
            return Turn::Wait;
        }
        s.last_active = now;
        let fail = |s: &mut State, error: PacingError| {
            if s.queue.remove(id) {
                s.queue.wake_head(now);
            }
            s.report();
            tracing::debug!(to = %self.key, %error, "pacing: waiting request fails");
            Turn::Fail(error)
        };
        if limits.deadline.is_some_and(|deadline| now >= deadline) {
            return fail(&mut s, PacingError::DeadlinePassed);
        }
        // A cool-down (or spent quota) that started while the request waited applies to it.
        if let Some(until) = s.closed_until(now)
            && until > limits.end
        {
            return fail(&mut s, limits.too_long(until - now, now));
        }
        // (Its deadline, checked above, has not come: past the end of its wait only a
        // destination that refused lately fails it.)
        let out_of_time = |s: &mut State| now >= limits.end && s.is_throttled(now);
        loop {
            let Some(front) = s.queue.front() else {
                return Turn::Wait;
            };
            if front == id {
                break;
            }
            if out_of_time(&mut s) {
                let more = s.rate.expected_wait(s.queue.len(), now);
                return fail(&mut s, limits.too_long(more, now));
            }
            match s.queue.watch(id, now) {
                Watch::SkipFront => {
                    // The first in line did not take its turn (its future is not polled).
                    tracing::debug!(to = %self.key, "pacing: a stalled request is passed over");
                    s.queue.skip_front();
                    s.queue.wake_head(now);
                }
                Watch::At(at) => {
                    s.queue.expect(id, at);
                    return Turn::At(at);
                }
                Watch::Wait => return Turn::Wait,
            }
        }
        match self.try_go(&mut s, now) {
            Ok(grant) => {
                s.queue.pop_front();
                s.queue.wake_head(now);
                s.report();
                Turn::Go(grant)
            }
            Err(at) if out_of_time(&mut s) => {
                let more = at.saturating_duration_since(now);
                fail(&mut s, limits.too_long(more, now))
            }
            Err(at) => {
                s.queue.expect(id, at);
                // The one behind watches that this one takes its turn then.
                s.queue.wake_behind_front(now);
                Turn::At(at)
            }
        }
    }

    fn leave(&self, id: u64, now: Instant) {
        let mut s = self.lock();
        if s.queue.remove(id) {
            s.queue.wake_head(now);
        }
        s.report();
    }

    fn release(&self, now: Instant) {
        Self::release_in(&mut self.lock(), now);
    }

    /// A request is no longer in flight.
    fn release_in(s: &mut State, now: Instant) {
        s.window.release(now);
        s.last_active = now;
        if s.rate.mode() == Mode::Start || s.one_at_a_time(now) {
            s.queue.wake_head(now);
        }
    }

    /// Learns from the response to a request `sent`, which is then no longer in flight:
    /// both under one lock.
    fn finish(&self, sent: Sent, reported: Reported, now: Instant) {
        let mut s = self.lock();
        self.learn(&mut s, sent, reported, now);
        Self::release_in(&mut s, now);
    }

    /// [`finish`](Self::finish)'s lesson, from what the response reported.
    fn learn(&self, s: &mut State, sent: Sent, reported: Reported, now: Instant) {
        self.learn_quota(s, sent, reported.quota, now);
        let Reported {
            status,
            refused,
            quota,
            asked,
        } = reported;
        // A refusal the destination's own quota explains (spent, and held until it resets)
        // is no news of its capacity: the quota holds the requests until its reset and
        // spreads them after it.
        let explained = refused && s.quota.spent_until(now).is_some();
        // A rate limiter's refusal: past its allowance a limiter refuses everything until
        // its window moves, where an overloaded server (503) sheds a share of the excess.
        let by_limiter = refused && status == StatusCode::TOO_MANY_REQUESTS;
        if refused {
            // Counted for the time a limiter needs to serve what it refused (`cool_down`).
            s.rate.counted_refusal(now);
            if sent.round != s.rate.round() {
                // The refusal of a request sent at the old pace: the pace already went
                // down for it (TCP, likewise, backs off once per round trip). A limiter's
                // counts in the refusal share (a 503's did, and a server's recovery burst
                // then closed the destination), but starts
                // no cool-down: a token bucket refuses a burst as a window limiter does,
                // and a cool-down at the burst would take the burst for the allowance (5
                // tokens at 50 r/s: a 5 r/s pace). One under way is lengthened.
                if by_limiter {
                    s.cooldown.record(true, sent.number);
                }
                if s.cooldown.until(now).is_some() {
                    self.cool_down(s, asked, by_limiter && !explained, now);
                }
                return;
            }
        }
        s.cooldown.record(refused, sent.number);
        if refused {
            self.slow_down(s, &reported, explained, by_limiter, now);
        } else if s.rate.is_throttled()
            && quota.is_some_and(|q| q.remaining == 0 && q.reset.is_none())
            && sent.round == s.rate.round()
        {
            // A destination that refused lately says it has no room left, and not when it
            // will (a token bucket such as tower_governor's): it is at its capacity. Ease
            // off as for a refusal, once per round trip, before the refusal comes. (One
            // that never refused is not slowed.)
            // (The window closed at the refusal that throttled the destination.)
            let idle = s.queue.is_empty();
            s.rate.no_room(idle, now);
            tracing::debug!(to = %self.key, mode = ?s.rate.mode(), "pacing: destination reports no room, slows down");
            s.queue.wake_head(now);
        } else {
            Self::speed_up(s, now);
        }
        s.report();
    }

    /// What the response to send `sent` said of the quota: learnt, and the requests held
    /// for its count woken when it came.
    fn learn_quota(&self, s: &mut State, sent: Sent, quota: Option<QuotaLeft>, now: Instant) {
        s.last_active = now;
        s.rate.responded(sent.at, now);
        if quota.is_some_and(|q| q.reset.is_none()) {
            s.rate.reports_room();
        }
        let awaited = s.quota.awaits_count(s.rate.round_trip(), now).is_some();
        if let Some(left) = quota {
            // In flight: this request (its grant is still held) and the others.
            let others = s.window.in_flight().saturating_sub(1);
            let max_reset = self.settings.max_cooldown;
            s.quota.learn(sent.number, left, others, max_reset, now);
        }
        s.quota.answered(sent.number);
        if awaited && s.quota.awaits_count(s.rate.round_trip(), now).is_none() {
            // The requests held for the count's report go (at its pace) from now.
            s.queue.wake_head(now);
        }
    }

    /// A refusal of a request sent at the current pace: the pace goes down (unless the
    /// quota explains it), the window closes, and a cool-down may start.
    fn slow_down(
        &self,
        s: &mut State,
        reported: &Reported,
        explained: bool,
        by_limiter: bool,
        now: Instant,
    ) {
        let (status, asked) = (reported.status, reported.asked);
        let was_throttled = s.rate.is_throttled();
        let window = match s.rate.mode() {
            Mode::Start => s.window.limit(),
            _ => None,
        };
        if explained {
            tracing::debug!(to = %self.key, %status, "pacing: destination's quota is spent");
        } else {
            if by_limiter && reported.quota.is_none() {
                // A limiter that says nothing of its count may be counting its
                // refusals too.
                s.rate.refused_by_limit(window, asked, now);
            } else {
                s.rate.refused(window, now);
            }
            tracing::debug!(to = %self.key, mode = ?s.rate.mode(), %status, "pacing: destination slows down");
        }
        s.window.close();
        let cooling = self.cool_down(s, asked, by_limiter && !explained, now);
        if cooling.is_some() || !was_throttled {
            // Every waiter checks whether it can wait the new pace or cool-down out.
            s.queue.wake_all();
        } else {
            s.queue.wake_head(now);
        }
    }

    /// A success: the window and the pace grow, if the destination reports room for it.
    fn speed_up(s: &mut State, now: Instant) {
        // A destination that reports no room left (a token bucket: almost none) is not
        // sent more at once, or faster.
        let grow = s.quota.has_room_to_grow(now);
        if s.rate.mode() == Mode::Start && grow {
            s.window.grow();
            if s.window.limit().is_none() {
                s.rate.open();
            }
        }
        let idle = s.queue.is_empty();
        s.rate.succeeded(idle, grow, now);
        // The first in line may go sooner at the new pace (or the window has room).
        s.queue.wake_head(now);
    }

    /// Starts or lengthens a cool-down after a refusal that `asked` for one, if the
    /// destination mostly refuses; returns its end when it starts or moves. A refusal
    /// `to_drain` (a limiter's, that no reported quota explains: nothing says when its
    /// count resets) comes from a limiter that may count its refusals too: it is given
    /// the time to serve them.
    fn cool_down(
        &self,
        s: &mut State,
        asked: Option<Duration>,
        to_drain: bool,
        now: Instant,
    ) -> Option<Instant> {
        let asked = asked?;
        let drain = if to_drain {
            s.rate.drain(asked, now)
        } else {
            Duration::ZERO
        };
        let until = s
            .cooldown
            .start(asked, drain, self.settings.max_cooldown, now)?;
        s.rate.cool_down(until, asked, now);
        tracing::debug!(to = %self.key, cooldown = ?(until - now), "pacing: destination cools down");
        Some(until)
    }

    /// The spacing between sends, zero unless paced.
    pub(crate) fn delay(&self) -> Duration {
        self.lock().rate.spacing().unwrap_or_default()
    }

    /// The send rate, in requests per second, while paced.
    pub(crate) fn rate(&self) -> Option<f64> {
        self.lock().rate.rate()
    }

    /// How long new requests are still held by a cool-down.
    pub(crate) fn cooldown(&self, now: Instant) -> Option<Duration> {
        let mut s = self.lock();
        s.cooldown.until(now).map(|until| until - now)
    }

    /// The probing delay of this destination (a clone sharing its state).
    pub(crate) fn backoff(&self) -> ResponsiveBackOff {
        self.lock().rate.backoff().clone()
    }

    /// Whether nothing of this destination is pending and it has been quiet for `idle`.
    /// If so its table forgets it: its gauges are retired under the same lock, so a
    /// request still holding it reports nothing after.
    pub(crate) fn forget_if_idle(&self, idle: Duration, now: Instant) -> bool {
        let mut s = self.lock();
        let idle = s.window.in_flight() == 0
            && s.queue.is_empty()
            && s.closed_until(now).is_none()
            && instant_after(s.last_active, idle) <= now;
        if idle {
            s.gauges.retire();
        }
        idle
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::PacingSeries;
    use crate::pacing::PacingLayer;

    fn destination(now: Instant) -> Arc<Destination> {
        let settings = Settings {
            max_wait: PacingLayer::DEFAULT_MAX_WAIT,
            max_cooldown: PacingLayer::DEFAULT_MAX_COOLDOWN,
            initial_window: PacingLayer::DEFAULT_INITIAL_WINDOW,
            slow_down: crate::classify::StatusSet::EMPTY,
            max_queue: PacingLayer::DEFAULT_MAX_QUEUE,
            max_destinations: PacingLayer::DEFAULT_MAX_DESTINATIONS,
            idle_timeout: PacingLayer::DEFAULT_IDLE_TIMEOUT,
        };
        let key = Key::from_authority(&"api.example".parse().unwrap());
        let backoff = PacingLayer::default_backoff();
        let gauges = PacingSeries::new(1).gauges(&key, false);
        Arc::new(Destination::new(key, settings, backoff, None, gauges, now))
    }

    fn go(destination: &Arc<Destination>, now: Instant) -> Grant {
        let limits = Limits::new(now, PacingLayer::DEFAULT_MAX_WAIT, None);
        match destination.admit(&limits, now) {
            Admit::Go(grant) => grant,
            _ => panic!("an idle destination in its slow start lets a request go"),
        }
    }

    /// A grant that learnt from its response has released its request in the same lock;
    /// dropping it then must not release it a second time (the window would count one
    /// request fewer in flight than there is).
    #[tokio::test(start_paused = true)]
    async fn a_finished_request_leaves_the_flight_once() {
        let now = Instant::now();
        let destination = destination(now);
        let (first, second) = (go(&destination, now), go(&destination, now));
        assert_eq!(destination.lock().window.in_flight(), 2);
        first.finish(now, StatusCode::OK, &HeaderMap::new(), None);
        assert_eq!(destination.lock().window.in_flight(), 1);
        // A request whose response never came (a transport error) leaves on drop.
        drop(second);
        assert_eq!(destination.lock().window.in_flight(), 0);
    }
}
