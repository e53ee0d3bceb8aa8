//! The pacing state of one destination: its controller, queue and probing delay,
//! behind its own lock.

use super::control::{Answer, Config, Controller, Reaction, Sent};
use super::key::Key;
use super::queue::{Queue, Watch};
use super::settings::Settings;
use crate::error::pacing::PacingError;
use crate::metrics::DestinationGauges;
use crate::retry_after::ServerSaid;
use crate::time::{ClockFn, instant_after, never};
use http::{HeaderMap, StatusCode};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::Waker;
use std::time::Duration;
use tokio::time::Instant;

/// One destination's pacing.
#[derive(Debug)]
pub(crate) struct Destination {
    key: Key,
    settings: Settings,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    control: Controller,
    queue: Queue,
    /// The last request or response: an idle destination is forgotten after a while.
    last_active: Instant,
    /// Under the lock, so a destination being forgotten reports nothing after.
    gauges: DestinationGauges,
}

impl State {
    /// Reports the queue and the rate to the `metrics` facade (feature `metrics`).
    fn report(&mut self, now: Instant) {
        let (queue, rate) = (self.queue.len(), self.control.rate(now));
        self.gauges.set(queue, rate);
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
    sent: Sent,
    /// Released by [`finish`](Self::finish) already.
    finished: bool,
}

impl Grant {
    /// Learns from the response to this request and releases it (one lock for both,
    /// where dropping the grant would take a second). Returns what the response said,
    /// read with `clock` (the retry layer's, or the system's), for the layers above.
    pub(crate) fn finish(
        mut self,
        status: StatusCode,
        headers: &HeaderMap,
        clock: Option<&ClockFn>,
    ) -> ServerSaid {
        self.finished = true;
        let slow_down = self.destination.settings.slow_down.contains(status);
        let said = ServerSaid::read(status, headers, slow_down, clock);
        let answer = answer(status, &said, slow_down);
        self.destination
            .finish(self.sent, answer, &said, Instant::now());
        said
    }
}

/// Only an explicit rate signal is a refusal: a 429, or another slow-down status that
/// says when to come back. A 503 without `Retry-After` is a failing server, not a rate
/// limit: guarding it against retries is the retry budget's job, not pacing's.
/// `slow_down`: the status is one the settings slow down on.
fn answer(status: StatusCode, said: &ServerSaid, slow_down: bool) -> Answer {
    let asked = said.retry_after().flatten().filter(|_| slow_down);
    if slow_down && (status == StatusCode::TOO_MANY_REQUESTS || asked.is_some()) {
        Answer::Refused(asked)
    } else if status.is_server_error() || slow_down {
        Answer::Other
    } else {
        Answer::Served
    }
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
        known: Option<f64>,
        gauges: DestinationGauges,
        now: Instant,
    ) -> Self {
        let config = Config {
            known,
            max_cooldown: settings.max_cooldown,
            first_probe: settings.first_probe,
            max_probe: settings.max_probe,
        };
        let control = Controller::new(settings.initial_window, config, now);
        Self {
            key,
            settings,
            state: Mutex::new(State {
                control,
                queue: Queue::default(),
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
        let queued = s.queue.len();
        let wait = s.control.expected_wait(queued, now);
        if wait > max_wait && s.control.is_throttled(now) {
            tracing::debug!(to = %self.key, ?wait, ?max_wait, "pacing: request would wait too long");
            return Admit::Fail(limits.too_long(wait, now));
        }
        if s.queue.is_empty() && s.control.ready_at(now).is_none() {
            return Admit::Go(self.grant(&mut s, now));
        }
        if s.queue.len() >= self.settings.max_queue {
            tracing::debug!(to = %self.key, "pacing: queue full");
            return Admit::Fail(PacingError::QueueFull {
                max_queue: self.settings.max_queue,
            });
        }
        let id = s.queue.push(now);
        tracing::trace!(to = %self.key, "pacing: request waits");
        s.report(now);
        Admit::Queue(Ticket {
            destination: Arc::clone(self),
            id,
        })
    }

    fn grant(self: &Arc<Self>, s: &mut State, now: Instant) -> Grant {
        Grant {
            destination: Arc::clone(self),
            sent: s.control.send(now),
            finished: false,
        }
    }

    fn turn(self: &Arc<Self>, id: u64, limits: &Limits, waker: &Waker, now: Instant) -> Turn {
        let mut s = self.lock();
        if !s.queue.polled(id, waker) {
            return Turn::Wait;
        }
        s.last_active = now;
        if limits.deadline.is_some_and(|deadline| now >= deadline) {
            return self.fail(&mut s, id, PacingError::DeadlinePassed, now);
        }
        // A cool-down (or spent room) that started while the request waited applies to it.
        if let Some(until) = s.control.closed_until(now)
            && until > limits.end
        {
            return self.fail(&mut s, id, limits.too_long(until - now, now), now);
        }
        // Past the end of its wait only a destination that refused lately fails it.
        let out_of_time = |s: &mut State| now >= limits.end && s.control.is_throttled(now);
        loop {
            let Some(front) = s.queue.front() else {
                return Turn::Wait;
            };
            if front == id {
                break;
            }
            if out_of_time(&mut s) {
                let queued = s.queue.len();
                let more = s.control.expected_wait(queued, now);
                return self.fail(&mut s, id, limits.too_long(more, now), now);
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
        match s.control.ready_at(now) {
            None => {
                let grant = self.grant(&mut s, now);
                s.queue.pop_front();
                s.queue.wake_head(now);
                s.report(now);
                Turn::Go(grant)
            }
            Some(at) if out_of_time(&mut s) => {
                let more = at.saturating_duration_since(now);
                self.fail(&mut s, id, limits.too_long(more, now), now)
            }
            Some(at) => {
                s.queue.expect(id, at);
                // The one behind watches that this one takes its turn then.
                s.queue.wake_behind_front(now);
                Turn::At(at)
            }
        }
    }

    /// A waiting request fails and leaves the queue.
    fn fail(&self, s: &mut State, id: u64, error: PacingError, now: Instant) -> Turn {
        if s.queue.remove(id) {
            s.queue.wake_head(now);
        }
        s.report(now);
        tracing::debug!(to = %self.key, %error, "pacing: waiting request fails");
        Turn::Fail(error)
    }

    fn leave(&self, id: u64, now: Instant) {
        let mut s = self.lock();
        if s.queue.remove(id) {
            s.queue.wake_head(now);
        }
        s.report(now);
    }

    fn release(&self, now: Instant) {
        Self::release_in(&mut self.lock(), now);
    }

    /// A request is no longer in flight.
    fn release_in(s: &mut State, now: Instant) {
        s.control.release(now);
        s.last_active = now;
        if s.control.starting() {
            s.queue.wake_head(now);
        }
    }

    /// Learns from the response to a request `sent`, which is then no longer in flight:
    /// both under one lock.
    fn finish(&self, sent: Sent, answer: Answer, said: &ServerSaid, now: Instant) {
        let mut s = self.lock();
        let reaction = s.control.answered(sent, answer, said.quota(), now);
        match reaction {
            Reaction::Nothing => {}
            Reaction::Faster => s.queue.wake_head(now),
            Reaction::Slower => {
                s.queue.wake_all();
                tracing::debug!(to = %self.key, ?answer, rate = ?s.control.rate(now), "pacing: destination slows down");
            }
        }
        Self::release_in(&mut s, now);
        s.report(now);
    }

    /// The spacing between sends, zero unless paced.
    pub(crate) fn delay(&self) -> Duration {
        let now = Instant::now();
        let rate = self.lock().control.rate(now);
        rate.map_or(Duration::ZERO, super::control::interval)
    }

    /// The send rate, in requests per second, while paced.
    pub(crate) fn rate(&self) -> Option<f64> {
        self.lock().control.rate(Instant::now())
    }

    /// How long new requests are still held by a cool-down.
    pub(crate) fn cooldown(&self, now: Instant) -> Option<Duration> {
        let until = self.lock().control.cooldown(now);
        until.map(|until| until - now)
    }

    /// The probing delay: zero unless probing.
    pub(crate) fn probe_delay(&self) -> Duration {
        self.lock().control.probe_delay()
    }

    /// Whether nothing of this destination is pending and it has been quiet for `idle`.
    /// If so its table forgets it: its gauges are retired under the same lock, so a
    /// request still holding it reports nothing after.
    pub(crate) fn forget_if_idle(&self, idle: Duration, now: Instant) -> bool {
        let mut s = self.lock();
        let idle = s.control.in_flight() == 0
            && s.queue.is_empty()
            && s.control.closed_until(now).is_none()
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
            first_probe: PacingLayer::DEFAULT_FIRST_PROBE,
            max_probe: PacingLayer::DEFAULT_MAX_PROBE,
        };
        let key = Key::from_authority(&"api.example".parse().unwrap());
        let gauges = PacingSeries::new(1).gauges(&key, false);
        Arc::new(Destination::new(key, settings, None, gauges, now))
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
        assert_eq!(destination.lock().control.in_flight(), 2);
        first.finish(StatusCode::OK, &HeaderMap::new(), None);
        assert_eq!(destination.lock().control.in_flight(), 1);
        // A request whose response never came (a transport error) leaves on drop.
        drop(second);
        assert_eq!(destination.lock().control.in_flight(), 0);
    }
}
