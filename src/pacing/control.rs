//! The pacing controller of one destination: what its answers say goes in, when its
//! next request may leave comes out. Pure: no lock, no clock read, no I/O.
//!
//! Its constants, with [`SERVED_WINDOW`], [`OPEN_WINDOW`] and [`STALL`]:
//!
//! | constant | value | from |
//! |---|---|---|
//! | [`BETA`] | 0.7 | CUBIC's decrease (RFC 9438 §4.6), the AWS SDKs' adaptive mode |
//! | [`CUBIC_C`] | 0.4 | CUBIC's growth (RFC 9438 §5), relative to the pace refused: matrix row 4 |
//! | [`MIN_RATE`] | 0.5 r/s | the AWS SDKs' minimum fill rate |
//! | [`STARTUP_DOUBLING`] | 100 ms | TCP slow start and BBR's start-up double per round |
//! | [`REOPEN_AFTER`] | 10 s | matrix row 4: the pace grows past any limit by then |
//! | [`SERVED_WINDOW`] | 1 s | the window of most published limits (matrix row 1) |
//! | [`OPEN_WINDOW`] | 64 | the slow start's end (TCP's initial `ssthresh` is of that order) |
//! | [`STALL`] | 1 s | a slow server holds a burst back about a second (matrix row 6) |
//! | [`FIRST_PROBE`], [`MAX_PROBE`] | 100 ms, 5 s | TCP's retransmission timer, doubled per probe (RFC 6298 §5.5) |
//!
//! [`SERVED_WINDOW`]: super::served::SERVED_WINDOW
//! [`OPEN_WINDOW`]: super::window::OPEN_WINDOW
//! [`STALL`]: super::window::STALL

use super::room::Room;
use super::served::Served;
use super::window::Window;
use crate::retry_after::QuotaLeft;
use crate::time::instant_after;
use std::time::Duration;
use tokio::time::Instant;

/// A refusal sets the pace to 70 % of the pace refused.
pub(crate) const BETA: f64 = 0.7;
/// How fast the pace grows back, then past the pace refused.
pub(crate) const CUBIC_C: f64 = 0.4;
/// The slowest pace, in requests per second.
pub(crate) const MIN_RATE: f64 = 0.5;
/// From the first refusal to the next, the pace doubles this often.
pub(crate) const STARTUP_DOUBLING: Duration = Duration::from_millis(100);
/// A destination that refused nothing for this long is not paced any more.
pub(crate) const REOPEN_AFTER: Duration = Duration::from_secs(10);
/// The default first probing delay of a destination that serves nothing.
pub(crate) const FIRST_PROBE: Duration = Duration::from_millis(100);
/// The default longest probing delay.
pub(crate) const MAX_PROBE: Duration = Duration::from_secs(5);

/// What an answer says of the destination's capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    Served,
    /// An explicit rate signal, with the delay it asked for.
    Refused(Option<Duration>),
    /// A bare 5xx, another error: nothing of a rate.
    Other,
}

/// What the waiting requests do: `Faster`, the first may go sooner; `Slower`, each checks its wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reaction {
    Nothing,
    Faster,
    Slower,
}

/// A request sent: its round (between two cuts) and its number among the sends.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sent {
    pub(crate) round: u64,
    pub(crate) number: u64,
}

/// What a controller is told of its destination.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Config {
    /// The pace the user said it allows.
    pub(crate) known: Option<f64>,
    pub(crate) max_cooldown: Duration,
    pub(crate) first_probe: Duration,
    pub(crate) max_probe: Duration,
}

/// The pace while paced: a curve of the time since the last cut.
#[derive(Debug, Clone, Copy)]
struct Curve {
    since: Instant,
    /// The pace at `since`.
    base: f64,
    /// The pace refused (CUBIC's `W_max`).
    ceiling: f64,
    /// Doubling (the start-up) rather than CUBIC.
    startup: bool,
}

impl Curve {
    fn new(since: Instant, base: f64, ceiling: f64, startup: bool) -> Self {
        Self {
            since,
            base,
            ceiling,
            startup,
        }
    }

    fn rate(&self, now: Instant) -> f64 {
        let t = now.saturating_duration_since(self.since).as_secs_f64();
        if self.startup {
            return self.base * (t / STARTUP_DOUBLING.as_secs_f64()).exp2();
        }
        let k = ((self.ceiling - self.base) / (CUBIC_C * self.ceiling))
            .max(0.0)
            .cbrt();
        (self.ceiling * (1.0 + CUBIC_C * (t - k).powi(3))).max(self.base)
    }

    /// About how long `n` sends take from a pace of `rate` on (an upper bound for CUBIC).
    fn time_to_send(&self, n: f64, rate: f64) -> f64 {
        if !self.startup {
            return n / rate;
        }
        let doubling = STARTUP_DOUBLING.as_secs_f64();
        doubling * (1.0 + n * std::f64::consts::LN_2 / (rate * doubling)).log2()
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
    /// The probing delay; zero when not probing.
    pub(crate) probe: Duration,
    /// Closed for a delay asked since the last cut.
    closed_in_round: bool,
    config: Config,
}

impl Controller {
    pub(crate) fn new(initial_window: u32, config: Config, now: Instant) -> Self {
        Self {
            curve: config.known.map(|rate| Curve::new(now, rate, rate, false)),
            window: Window::new(config.known.map_or(initial_window, |_| 0), now),
            served: Served::new(now),
            round: 0,
            sends: 0,
            last_send: None,
            last_refusal: None,
            closed_until: None,
            room: None,
            probe: Duration::ZERO,
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
        let curve = self.curve?;
        let mut rate = curve.rate(now);
        if curve.startup {
            // BBR's start-up paces at most at twice what is delivered.
            let delivered = self.served.rate(STARTUP_DOUBLING, now);
            rate = rate.min(2.0 * delivered.max(curve.base));
        }
        let room = self.room.and_then(|room| room.pace(self.sends, now));
        let caps = [self.config.known, room].into_iter().flatten();
        Some(caps.fold(rate, f64::min).max(MIN_RATE))
    }

    /// Until when nothing may leave: a cool-down, or the reported room spent.
    pub(crate) fn closed_until(&mut self, now: Instant) -> Option<Instant> {
        self.room = self.room.filter(|room| now < room.reset_at);
        let spent = self.room.and_then(|room| room.spent_until(self.sends, now));
        self.cooldown(now).max(spent)
    }

    /// The end of the live cool-down (a spent room is not one).
    pub(crate) fn cooldown(&mut self, now: Instant) -> Option<Instant> {
        self.closed_until = self.closed_until.filter(|until| *until > now);
        self.closed_until
    }

    /// Whether it refused lately (or is closed): only then may a wait fail.
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
        let behind = match self.config.known {
            Some(_) => queued as f64 / rate,
            None => curve.time_to_send(queued as f64, rate),
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

    pub(crate) fn in_flight(&self) -> u32 {
        self.window.in_flight
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
            .filter(|room| self.room.is_none_or(|old| room.number >= old.number));
        if learned.is_some() {
            self.room = learned;
        }
        match answer {
            Answer::Served => {
                self.served.add(sent.round == self.round, now);
                self.probe = Duration::ZERO;
                // A success that leaves no room does not widen the slow start.
                if self.curve.is_none() && quota.is_none_or(|left| left.remaining > 0) {
                    self.window.grow();
                }
                Reaction::Faster
            }
            Answer::Refused(asked) => {
                self.last_refusal = Some(now);
                self.window.limit = None;
                self.refused(sent, asked.filter(|delay| !delay.is_zero()), now)
            }
            Answer::Other => Reaction::Nothing,
        }
    }

    /// A refusal cuts the pace once per round (the sends since the last cut), as TCP does.
    fn refused(&mut self, sent: Sent, asked: Option<Duration>, now: Instant) -> Reaction {
        if self
            .room
            .is_some_and(|room| room.spent_until(self.sends, now).is_some())
        {
            // The spent room explains it: no news of the pace.
            if let Some(asked) = asked {
                self.close_for(asked, now);
            }
            return Reaction::Slower;
        }
        if sent.round != self.round {
            return Reaction::Nothing;
        }
        self.round += 1;
        let served = self.served.take_since() > 0;
        if served || self.curve.is_none() {
            self.closed_in_round = false;
            self.curve = Some(self.cut(now));
        }
        if served {
            return Reaction::Slower;
        }
        // Nothing served since the last cut, nor for a window: a spent quota or a server
        // down, closed for the delay it asked, once. Else a limiter counting refusals.
        let silent = self.served.in_window(now) == 0.0;
        let asked = asked.filter(|_| silent && !self.closed_in_round);
        self.closed_in_round |= asked.is_some();
        self.probe(asked, now);
        Reaction::Slower
    }

    /// The pace after a refusal.
    fn cut(&mut self, now: Instant) -> Curve {
        let cubic = |b: f64, c: f64| Curve::new(now, b.max(MIN_RATE), c.max(MIN_RATE), false);
        match (self.curve, self.rate(now)) {
            // Out of the start-up: CUBIC's cut of the pace refused.
            (Some(curve), Some(rate)) if curve.startup => cubic(BETA * rate, rate),
            // Paced: CUBIC's cut of what the destination served (its delivery rate, as
            // BBR paces at), never up.
            (Some(_), Some(rate)) => {
                let served = self.served.rate(STARTUP_DOUBLING, now).min(rate);
                cubic(BETA * served, served)
            }
            // The first refusal: a start-up from what the last window served.
            _ => {
                let first = 1.0 / self.config.first_probe.as_secs_f64();
                let served = self.served.in_window(now).max(first).max(MIN_RATE);
                Curve::new(now, served, served, true)
            }
        }
    }

    /// Closes the destination for the delay `asked`, else a doubled probing delay (at least
    /// the known spacing). With nothing served for a window, the pace restarts at one per delay.
    fn probe(&mut self, asked: Option<Duration>, now: Instant) {
        let doubled = self.probe.saturating_mul(2).max(self.config.first_probe);
        self.probe = doubled.min(self.config.max_probe);
        if self.served.in_window(now) == 0.0 {
            let base = 1.0 / self.probe.as_secs_f64();
            self.curve = Some(Curve::new(now, base, base, true));
        }
        let spacing = self.config.known.map_or(Duration::ZERO, interval);
        self.close_for(asked.unwrap_or(self.probe).max(spacing), now);
    }

    /// Closes the destination for `delay` (at most the max cool-down); the pace resumes after.
    fn close_for(&mut self, delay: Duration, now: Instant) {
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
