//! The pacing controller of one destination: what its answers say goes in, when its
//! next request may leave comes out. Pure: no lock, no clock read, no I/O.

use super::room::Room;
use super::served::Served;
use super::window::Window;
use crate::retry_after::QuotaLeft;
use crate::time::instant_after;
use std::time::Duration;
use tokio::time::Instant;

/// CUBIC's multiplicative decrease (RFC 9438 §4.6; the AWS SDKs' adaptive retry mode):
/// a refusal sets the pace to 70 % of the pace refused.
pub(crate) const BETA: f64 = 0.7;
/// CUBIC's growth constant (RFC 9438 §5; the AWS SDKs' `SCALE_CONSTANT`), taken relative
/// to the pace refused: back to it in 0.9 s, then ×4 within 2 s more (matrix row 4).
pub(crate) const CUBIC_C: f64 = 0.4;
/// The slowest pace, in requests per second (the AWS SDKs' minimum fill rate).
pub(crate) const MIN_RATE: f64 = 0.5;
/// After the first refusal the pace doubles this often until the next (TCP slow start
/// and BBR's start-up double per round; a round here holds a few paced sends).
pub(crate) const STARTUP_DOUBLING: Duration = Duration::from_millis(100);
/// A destination that refused nothing for this long is not paced any more.
pub(crate) const REOPEN_AFTER: Duration = Duration::from_secs(10);

/// What an answer says of the destination's capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// A success: the destination served it.
    Served,
    /// An explicit rate signal, with the delay it asked for.
    Refused(Option<Duration>),
    /// Neither (a bare 5xx, another error): says nothing of a rate.
    Other,
}

/// What the destination does after an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reaction {
    /// Nothing changed for the requests waiting.
    Nothing,
    /// The pace went up: the first in line may go sooner.
    Faster,
    /// The pace went down or the destination closed: every waiter checks its wait.
    Slower,
    /// Refused with nothing served and no delay asked: close for a probing delay.
    Probe,
}

/// A request sent: in which round (between two cuts) and its number among the sends.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sent {
    pub(crate) round: u64,
    pub(crate) number: u64,
}

/// The pace while paced: a curve of time since the last cut.
#[derive(Debug, Clone, Copy)]
struct Curve {
    since: Instant,
    /// The pace at `since`.
    base: f64,
    /// The pace refused (CUBIC's `W_max`).
    ceiling: f64,
    /// Doubling (start-up) rather than CUBIC.
    startup: bool,
}

impl Curve {
    fn rate(&self, now: Instant) -> f64 {
        let t = now.saturating_duration_since(self.since).as_secs_f64();
        if self.startup {
            return self.base * (t / STARTUP_DOUBLING.as_secs_f64()).exp2();
        }
        let gap = (self.ceiling - self.base) / (CUBIC_C * self.ceiling);
        let k = gap.max(0.0).cbrt();
        (self.ceiling * (1.0 + CUBIC_C * (t - k).powi(3))).max(self.base)
    }

    /// About how long `n` sends take from `now` on: along the doubling of a start-up, at
    /// the pace of `now` otherwise (CUBIC's curve is flat there, or rising: an upper
    /// bound).
    fn time_to_send(&self, n: f64, rate: f64) -> f64 {
        if self.startup {
            let doubling = STARTUP_DOUBLING.as_secs_f64();
            doubling * (1.0 + n * std::f64::consts::LN_2 / (rate * doubling)).log2()
        } else {
            n / rate
        }
    }
}

/// The controller of one destination.
#[derive(Debug)]
pub(crate) struct Controller {
    /// `None`: not paced.
    curve: Option<Curve>,
    /// The slow start of a destination that never refused.
    window: Window,
    served: Served,
    round: u64,
    sends: u64,
    last_send: Option<Instant>,
    last_refusal: Option<Instant>,
    closed_until: Option<Instant>,
    room: Option<Room>,
    /// The delay a refusal asked for, once nothing is served: taken by the next probe.
    asked: Option<Duration>,
    /// Closed for a delay asked since the last cut.
    closed_in_round: bool,
    config: Config,
}

/// What a controller is told of its destination.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Config {
    /// The pace the user said it allows: paced from the first request, never passed.
    pub(crate) known: Option<f64>,
    /// The longest cool-down.
    pub(crate) max_cooldown: Duration,
    /// The pace of the first probes (one per initial probing delay): where a pace starts
    /// when nothing better is measured.
    pub(crate) probe_rate: f64,
}

impl Controller {
    /// A new destination's controller.
    pub(crate) fn new(initial_window: u32, config: Config, now: Instant) -> Self {
        let curve = config.known.map(|rate| Curve {
            since: now,
            base: rate,
            ceiling: rate,
            startup: false,
        });
        let window = if config.known.is_some() {
            0
        } else {
            initial_window
        };
        Self {
            curve,
            window: Window::new(window, now),
            served: Served::new(now),
            round: 0,
            sends: 0,
            last_send: None,
            last_refusal: None,
            closed_until: None,
            room: None,
            asked: None,
            closed_in_round: false,
            config,
        }
    }

    /// The pace, in requests per second, while paced.
    pub(crate) fn rate(&mut self, now: Instant) -> Option<f64> {
        let quiet = self
            .last_refusal
            .is_some_and(|at| instant_after(at, REOPEN_AFTER) <= now);
        if quiet && self.config.known.is_none() {
            self.curve = None;
        }
        let rate = self.curve?.rate(now);
        let room = self.room.and_then(|room| room.pace(self.sends, now));
        let caps = [self.config.known, room].into_iter().flatten();
        Some(caps.fold(rate, f64::min).max(MIN_RATE))
    }

    /// Until when nothing may leave: a cool-down, or the reported room spent.
    pub(crate) fn closed_until(&mut self, now: Instant) -> Option<Instant> {
        self.closed_until = self.closed_until.filter(|until| *until > now);
        self.room = self.room.filter(|room| !room.expired(now));
        let spent = self.room.and_then(|room| room.spent_until(self.sends, now));
        self.closed_until.max(spent)
    }

    /// The end of the live cool-down (a spent room is not one).
    pub(crate) fn cooldown(&mut self, now: Instant) -> Option<Instant> {
        self.closed_until = self.closed_until.filter(|until| *until > now);
        self.closed_until
    }

    /// Whether the destination refused lately (or is closed): only then may a wait fail.
    pub(crate) fn is_throttled(&mut self, now: Instant) -> bool {
        self.rate(now).is_some() || self.closed_until(now).is_some()
    }

    /// `None` when a request may leave now, else when one may.
    pub(crate) fn ready_at(&mut self, now: Instant) -> Option<Instant> {
        if let Some(until) = self.closed_until(now) {
            return Some(until);
        }
        let Some(rate) = self.rate(now) else {
            return self.window.ready_at(now);
        };
        let next = instant_after(self.last_send?, interval(rate));
        (next > now).then_some(next)
    }

    /// How long a request arriving behind `queued` others may expect to wait.
    pub(crate) fn expected_wait(&mut self, queued: usize, now: Instant) -> Duration {
        let first = self
            .ready_at(now)
            .map_or(Duration::ZERO, |at| at.saturating_duration_since(now));
        let (Some(curve), Some(rate)) = (self.curve, self.rate(now)) else {
            return first;
        };
        let queued = queued as f64;
        let behind = match self.config.known {
            Some(_) => queued / rate,
            None => curve.time_to_send(queued, rate),
        };
        first.saturating_add(Duration::try_from_secs_f64(behind).unwrap_or(Duration::MAX))
    }

    /// A request leaves now.
    pub(crate) fn send(&mut self, now: Instant) -> Sent {
        self.window.acquire();
        self.sends = self.sends.saturating_add(1);
        self.last_send = Some(now);
        Sent {
            round: self.round,
            number: self.sends,
        }
    }

    /// A request is no longer in flight.
    pub(crate) fn release(&mut self, now: Instant) {
        self.window.release(now);
    }

    /// Requests in flight.
    pub(crate) fn in_flight(&self) -> u32 {
        self.window.in_flight()
    }

    /// Whether requests wait for the slow-start window (they never fail for it).
    pub(crate) fn starting(&self) -> bool {
        self.curve.is_none() && self.window.limit().is_some()
    }

    /// Learns from the answer to `sent` and the quota it reported.
    pub(crate) fn answered(
        &mut self,
        sent: Sent,
        answer: Answer,
        quota: Option<QuotaLeft>,
        now: Instant,
    ) -> Reaction {
        let max = self.config.max_cooldown;
        let learned = quota
            .and_then(|left| Room::reported(self.room, sent.number, left, max, now))
            .filter(|room| room.newer_than(&self.room));
        if learned.is_some() {
            self.room = learned;
        }
        match answer {
            // A success that leaves no room (and says not until when) is not sent more at
            // once.
            Answer::Served if quota.is_some_and(|left| left.remaining == 0) => {
                self.served.add(sent.round == self.round, now);
                Reaction::Nothing
            }
            Answer::Served => self.served(sent, now),
            Answer::Refused(asked) => self.refused(sent, asked, now),
            Answer::Other => Reaction::Nothing,
        }
    }

    fn served(&mut self, sent: Sent, now: Instant) -> Reaction {
        self.served.add(sent.round == self.round, now);
        if self.curve.is_none() {
            self.window.grow();
        }
        Reaction::Faster
    }

    /// A refusal: the first of a round (requests sent since the last cut) cuts the pace
    /// once, as TCP cuts once per round trip. One after nothing was served since calls
    /// for a probe.
    fn refused(&mut self, sent: Sent, asked: Option<Duration>, now: Instant) -> Reaction {
        self.last_refusal = Some(now);
        self.window.close();
        let room_spent = self
            .room
            .is_some_and(|room| room.spent_until(self.sends, now).is_some());
        if room_spent {
            // The spent room explains it: no news of the pace.
            if let Some(asked) = asked.filter(|delay| !delay.is_zero()) {
                self.close_for(asked, now);
            }
            return Reaction::Slower;
        }
        if sent.round != self.round {
            // The pace already went down for it.
            return Reaction::Nothing;
        }
        self.round += 1;
        let asked = asked.filter(|delay| !delay.is_zero());
        let served_since = self.served.take_since();
        if served_since > 0 || self.curve.is_none() {
            self.closed_in_round = false;
            self.curve = Some(self.cut(now));
        }
        if served_since > 0 {
            return Reaction::Slower;
        }
        // Nothing served since the last cut. Nothing for a whole window either: a spent
        // quota or a server down, closed for the delay it asked, once (TCP's timeout
        // waits a second too). Else a limiter still counting what it refused: probed.
        let silent = self.served.in_window(now) == 0.0;
        self.asked = asked.filter(|_| silent && !self.closed_in_round);
        Reaction::Probe
    }

    /// The pace after a refusal.
    fn cut(&mut self, now: Instant) -> Curve {
        let cubic = |base: f64, ceiling: f64| Curve {
            since: now,
            base: base.max(MIN_RATE),
            ceiling: ceiling.max(MIN_RATE),
            startup: false,
        };
        let allowance = self.served.in_window(now).max(self.config.probe_rate);
        match (self.curve, self.rate(now)) {
            // Out of the start-up: CUBIC's cut of the pace refused.
            (Some(curve), Some(rate)) if curve.startup => cubic(BETA * rate, rate),
            // Paced: CUBIC's cut of what the destination served (its delivery rate, which
            // BBR paces at), never up.
            (Some(_), Some(rate)) => {
                let served = self.served.rate(STARTUP_DOUBLING, now).min(rate);
                cubic(BETA * served, served)
            }
            // The first refusal: a start-up from what was served in the last window.
            _ => Curve {
                since: now,
                base: allowance,
                ceiling: allowance,
                startup: true,
            },
        }
    }

    /// Probes a destination that served nothing since the last cut: it closes for the
    /// delay its refusal asked, once, else for `delay` (the probing backoff's), and never
    /// for less than the known pace's spacing. One that served nothing in the last window
    /// starts again from one request per `delay`.
    pub(crate) fn probe(&mut self, delay: Duration, now: Instant) {
        if self.served.in_window(now) == 0.0 {
            self.curve = Some(Curve {
                since: now,
                base: 1.0 / delay.as_secs_f64().max(f64::MIN_POSITIVE),
                ceiling: MIN_RATE,
                startup: true,
            });
        }
        let wait = match self.asked.take() {
            Some(asked) => {
                self.closed_in_round = true;
                asked
            }
            None => delay,
        };
        let spacing = self.config.known.map_or(Duration::ZERO, interval);
        self.close_for(wait.max(spacing), now);
    }

    /// Closes the destination for `delay` (at most the max cool-down). When it opens, the
    /// first request leaves at once and the pace resumes from where it was.
    pub(crate) fn close_for(&mut self, delay: Duration, now: Instant) {
        let until = instant_after(now, delay.min(self.config.max_cooldown));
        if self.closed_until.is_some_and(|current| current >= until) {
            return;
        }
        self.closed_until = Some(until);
        self.last_send = None;
        if let Some(curve) = &mut self.curve {
            curve.since = curve.since.max(until);
        }
    }
}

/// The spacing of sends at `rate` requests per second.
pub(crate) fn interval(rate: f64) -> Duration {
    Duration::try_from_secs_f64(1.0 / rate).unwrap_or(Duration::MAX)
}

#[cfg(test)]
mod tests;
