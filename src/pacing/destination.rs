//! The pacing state of one destination: its controller and queue, behind its own lock.

use super::control::{Answer, Config, Controller, Reaction, Sent};
use super::destinations::{Key, lock};
use super::layer::Settings;
use super::queue::{Queue, RECHECK, Watch};
use crate::error::pacing::PacingError;
use crate::grpc;
use crate::metrics::DestinationGauges;
use crate::retry_after::ServerSaid;
use crate::time::{ClockFn, instant_after, never};
use http::{HeaderMap, StatusCode};
use std::sync::{Arc, Mutex};
use std::task::Waker;
use std::time::Duration;
use tokio::time::Instant;

/// How a fleet's process paces a destination while Redis is away: at its share of the
/// fleet's sends, of the fleet's pace (if paced) and of a reported quota.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Alone {
    pub(crate) share: f64,
    pub(crate) pace: Option<f64>,
    /// The last slot the fleet gave it: processes going alone at once keep their places
    /// in the fleet's schedule, not all send at once.
    pub(crate) last_send: Instant,
}

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
        self.gauges.set(self.queue.len(), self.control.rate(now));
    }

    /// Request `sent` is no longer in flight.
    fn release(&mut self, sent: Sent, now: Instant) {
        self.control.release(sent);
        self.last_active = now;
        if self.control.starting() {
            self.queue.wake(now, false);
        }
    }
}

/// How long a request may wait for its turn.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    since: Instant,
    /// The latest it may leave: `max_wait` after it arrived, or its deadline if sooner.
    pub(crate) end: Instant,
    /// Its [`PacingDeadline`](super::PacingDeadline): it never starts later.
    pub(crate) deadline: Option<Instant>,
}

impl Limits {
    pub(crate) fn new(now: Instant, max_wait: Duration, deadline: Option<Instant>) -> Self {
        let end = instant_after(now, max_wait);
        let end = deadline.map_or(end, |deadline| deadline.min(end));
        Self {
            since: now,
            end,
            deadline,
        }
    }

    /// The error of a request still not sent at `now`, past its `end`.
    pub(crate) fn expired(&self, now: Instant) -> PacingError {
        match self.deadline {
            Some(deadline) if now >= deadline => PacingError::DeadlinePassed,
            _ => self.too_long(Duration::ZERO, now),
        }
    }

    /// The latest a waiting request looks at its turn again: the end of its wait, and
    /// past that (its destination refused nothing, so it waits on) its deadline.
    pub(crate) fn wake_by(&self, now: Instant) -> Instant {
        match self.deadline {
            _ if now < self.end => self.end,
            deadline => deadline.unwrap_or_else(|| never(now)),
        }
    }

    /// The error of a request that would wait `more` from `now` on.
    pub(crate) fn too_long(&self, more: Duration, now: Instant) -> PacingError {
        let waited = |until: Instant| until.saturating_duration_since(self.since);
        let (wait, max_wait) = (waited(now).saturating_add(more), waited(self.end));
        PacingError::WaitTooLong { wait, max_wait }
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

/// What a waiting request does now: go with `G`, look again later, or fail.
#[derive(Debug)]
pub(crate) enum Turn<G = Grant> {
    Go(G),
    /// Look again then, or when woken.
    At(Instant),
    Fail(PacingError),
}

/// A request sent, in flight until dropped or [finished](Self::finish) (`None` then).
#[derive(Debug)]
pub(crate) struct Grant(Arc<Destination>, Option<Sent>);

impl Grant {
    /// Learns from the response and releases the request, under one lock. Returns what
    /// the response said, read with `clock` (the retry layer's, or the system's).
    pub(crate) fn finish(
        mut self,
        status: StatusCode,
        headers: &HeaderMap,
        clock: Option<&ClockFn>,
    ) -> ServerSaid {
        let (said, answer) = read_answer(&self.0.settings, status, headers, clock);
        let sent = self.1.take().expect("a grant is finished once");
        let now = Instant::now();
        let mut s = lock(&self.0.state);
        match s.control.answered(sent, answer, said.quota(), now) {
            Reaction::Nothing => {}
            Reaction::Faster => s.queue.wake(now, false),
            Reaction::Slower => {
                s.queue.wake_all();
                let rate = s.control.rate(now);
                tracing::debug!(to = %self.0.key, ?answer, ?rate, "pacing: destination slows down");
            }
        }
        s.release(sent, now);
        s.report(now);
        said
    }
}

impl Drop for Grant {
    fn drop(&mut self) {
        if let Some(sent) = self.1.take() {
            lock(&self.0.state).release(sent, Instant::now());
        }
    }
}

/// What a response says, read with `clock`, and what it says of the destination's capacity.
pub(crate) fn read_answer(
    settings: &Settings,
    status: StatusCode,
    headers: &HeaderMap,
    clock: Option<&ClockFn>,
) -> (ServerSaid, Answer) {
    let slow_down = settings.slow_down.contains(status);
    let said = ServerSaid::read(status, headers, slow_down, clock);
    // Only an explicit rate signal is a refusal: a 429, or another slow-down status that
    // says when to come back. A bare 503 is a failing server, the retry budget's concern.
    let asked = said.retry_after().flatten().filter(|_| slow_down);
    let answer = if slow_down && (status == StatusCode::TOO_MANY_REQUESTS || asked.is_some()) {
        Answer::Refused(asked)
    } else if status.is_server_error() || slow_down {
        Answer::Other
    } else {
        grpc_answer(headers).unwrap_or(Answer::Served)
    };
    (said, answer)
}

/// What a Trailers-Only gRPC response says (HTTP's 200): `RESOURCE_EXHAUSTED` with a
/// pushback is its rate signal, asking that delay; another error serves nothing. Without a
/// pushback, the quota may be a local limit (a message too large). `None`: not gRPC, or OK.
fn grpc_answer(headers: &HeaderMap) -> Option<Answer> {
    let code = grpc::status_from_headers(headers).filter(|&code| code != grpc::Code::Ok)?;
    let pushback = grpc::pushback(headers).filter(|_| code == grpc::Code::ResourceExhausted);
    Some(match pushback {
        Some(grpc::Pushback::RetryAfter(delay)) => Answer::Refused(Some(delay)),
        _ => Answer::Other,
    })
}

/// A place in a destination's queue, by id; dropping it leaves the queue.
#[derive(Debug)]
pub(crate) struct Ticket(Arc<Destination>, u64);

impl Ticket {
    /// Whether the request may go now; otherwise `waker` is woken when that may change.
    pub(crate) fn turn(&self, limits: &Limits, waker: &Waker) -> Turn {
        let (id, now) = (self.1, Instant::now());
        let mut guard = lock(&self.0.state);
        let s = &mut *guard;
        if !s.queue.polled(id, waker) {
            return Turn::At(instant_after(now, RECHECK));
        }
        s.last_active = now;
        if limits.deadline.is_some_and(|deadline| now >= deadline) {
            return self.fail(s, PacingError::DeadlinePassed, now);
        }
        // A cool-down (or spent room) that started while the request waited applies to it.
        if let Some(until) = s.control.closed_until(now)
            && until > limits.end
        {
            return self.fail(s, limits.too_long(until - now, now), now);
        }
        // Past the end of its wait only a destination that refused lately fails it.
        let out_of_time = now >= limits.end && s.control.is_throttled(now);
        loop {
            let watch = s.queue.watch(id, now);
            if watch != Watch::First && out_of_time {
                let more = s.control.expected_wait(s.queue.len(), now);
                return self.fail(s, limits.too_long(more, now), now);
            }
            match watch {
                Watch::First => break,
                Watch::SkipFront => {
                    tracing::debug!(to = %self.0.key, "pacing: a stalled request is passed over");
                    s.queue.pop_front(true);
                    s.queue.wake(now, false);
                }
                Watch::At(at) => {
                    s.queue.expect(id, at);
                    return Turn::At(at);
                }
                Watch::Wait => return Turn::At(instant_after(now, RECHECK)),
            }
        }
        match s.control.send_at(now) {
            None => {
                let grant = Grant(Arc::clone(&self.0), Some(s.control.send(now)));
                s.queue.pop_front(false);
                s.queue.wake(now, false);
                s.report(now);
                Turn::Go(grant)
            }
            Some(at) if out_of_time => self.fail(s, limits.too_long(at - now, now), now),
            Some(at) => {
                s.queue.expect(id, at);
                // The one behind watches that this one takes its turn then.
                s.queue.wake(now, true);
                Turn::At(at)
            }
        }
    }

    /// The request fails and leaves the queue.
    fn fail(&self, s: &mut State, error: PacingError, now: Instant) -> Turn {
        s.queue.remove(self.1, now);
        s.report(now);
        tracing::debug!(to = %self.0.key, %error, "pacing: waiting request fails");
        Turn::Fail(error)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let now = Instant::now();
        let mut s = lock(&self.0.state);
        s.queue.remove(self.1, now);
        s.report(now);
    }
}

impl Destination {
    /// A destination's pacing; `known`: the rate the user said it allows (req/s); `fleet`:
    /// whether its state is a fleet's, in Redis (kept here only while Redis is away).
    pub(crate) fn new(
        key: Key,
        settings: Settings,
        (known, fleet): (Option<f64>, bool),
        gauges: DestinationGauges,
        now: Instant,
    ) -> Self {
        let config = Config {
            known,
            max_cooldown: settings.max_cooldown,
            first_probe: settings.first_probe,
            max_probe: settings.max_probe,
            fleet,
        };
        let state = State {
            control: Controller::new(settings.initial_window, config, now),
            queue: Queue::default(),
            last_active: now,
            gauges,
        };
        Self {
            key,
            settings,
            state: Mutex::new(state),
        }
    }

    /// Decides what a new request does.
    pub(crate) fn admit(self: &Arc<Self>, limits: &Limits, now: Instant) -> Admit {
        let mut guard = lock(&self.state);
        let s = &mut *guard;
        s.last_active = now;
        let max_wait = limits.end.saturating_duration_since(now);
        let wait = s.control.expected_wait(s.queue.len(), now);
        if wait > max_wait && s.control.is_throttled(now) {
            tracing::debug!(to = %self.key, ?wait, ?max_wait, "pacing: request would wait too long");
            return Admit::Fail(limits.too_long(wait, now));
        }
        if s.queue.is_empty() && s.control.send_at(now).is_none() {
            return Admit::Go(Grant(Arc::clone(self), Some(s.control.send(now))));
        }
        let max_queue = self.settings.max_queue;
        if s.queue.len() >= max_queue {
            tracing::debug!(to = %self.key, "pacing: queue full");
            return Admit::Fail(PacingError::QueueFull { max_queue });
        }
        let id = s.queue.push(now);
        tracing::trace!(to = %self.key, "pacing: request waits");
        s.report(now);
        Admit::Queue(Ticket(Arc::clone(self), id))
    }

    /// From now on paced as `alone` says, as if the user had told it first.
    pub(crate) fn retell(&self, alone: Alone, now: Instant) {
        let mut s = lock(&self.state);
        if let Some(pace) = alone.pace {
            s.control.retell(pace, alone.last_send, now);
        }
        s.control.retell_share(alone.share);
        s.queue.wake_all();
    }

    /// Reads the controller now, for the layer's accessors.
    pub(crate) fn control<T>(&self, read: impl FnOnce(&mut Controller, Instant) -> T) -> T {
        read(&mut lock(&self.state).control, Instant::now())
    }

    /// Whether its table may forget it: nothing pending, quiet for `idle`. Its gauges then retire
    /// under this lock, so a request still holding it reports nothing after.
    pub(crate) fn forget_if_idle(&self, idle: Duration, now: Instant) -> bool {
        let mut s = lock(&self.state);
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
        let settings = PacingLayer::new().shared.settings;
        let key = Key::from_authority(&"api.example".parse().unwrap());
        let gauges = PacingSeries::new(1).gauges(&key, false);
        Arc::new(Destination::new(key, settings, (None, false), gauges, now))
    }

    fn go(destination: &Arc<Destination>, now: Instant) -> Grant {
        let limits = Limits::new(now, PacingLayer::DEFAULT_MAX_WAIT, None);
        match destination.admit(&limits, now) {
            Admit::Go(grant) => grant,
            _ => panic!("an idle destination in its slow start lets a request go"),
        }
    }

    #[test]
    fn grpc_answers_refuse_only_with_resource_exhausted_and_a_pushback() {
        let settings = PacingLayer::new().shared.settings;
        let answer = |fields: &[(&'static str, &'static str)]| {
            let mut headers = HeaderMap::new();
            for (name, value) in fields {
                headers.insert(*name, http::HeaderValue::from_static(value));
            }
            read_answer(&settings, StatusCode::OK, &headers, None).1
        };
        let pushback = ("grpc-retry-pushback-ms", "250");
        let delay = Some(Duration::from_millis(250));
        assert_eq!(
            answer(&[("grpc-status", "8"), pushback]),
            Answer::Refused(delay)
        );
        // Without a pushback, or asked not to retry: a quota maybe local, no rate.
        assert_eq!(answer(&[("grpc-status", "8")]), Answer::Other);
        let never = ("grpc-retry-pushback-ms", "-1");
        assert_eq!(answer(&[("grpc-status", "8"), never]), Answer::Other);
        // Another error, even with a pushback: a failing server.
        assert_eq!(answer(&[("grpc-status", "14"), pushback]), Answer::Other);
        // OK, or a status still to come in the trailers.
        assert_eq!(answer(&[("grpc-status", "0")]), Answer::Served);
        assert_eq!(answer(&[]), Answer::Served);
    }

    /// A grant that learnt from its response has released its request in the same lock;
    /// dropping it then must not release it a second time (the window would count one
    /// request fewer in flight than there is).
    #[tokio::test(start_paused = true)]
    async fn a_finished_request_leaves_the_flight_once() {
        let now = Instant::now();
        let destination = destination(now);
        let (first, second) = (go(&destination, now), go(&destination, now));
        assert_eq!(lock(&destination.state).control.in_flight(), 2);
        first.finish(StatusCode::OK, &HeaderMap::new(), None);
        assert_eq!(lock(&destination.state).control.in_flight(), 1);
        // A request whose response never came (a transport error) leaves on drop.
        drop(second);
        assert_eq!(lock(&destination.state).control.in_flight(), 0);
    }
}
