//! The pacing controller of one destination: what its answers say goes in, when its
//! next request may leave comes out. Pure: no lock, no clock read, no I/O.
//!
//! | constant | value | from |
//! |---|---|---|
//! | [`BETA`] | 0.7 | CUBIC's decrease (RFC 9438 §4.6), the AWS SDKs' adaptive mode |
//! | [`CUBIC_C`] | 0.4 | CUBIC's growth (RFC 9438 §5), relative to the pace refused: matrix row 4 |
//! | [`MIN_RATE`] | 0.5 r/s | the AWS SDKs' minimum fill rate |
//! | [`STARTUP_DOUBLING`] | 100 ms | TCP's slow start and BBR's start-up double per round: the slow start's window at most doubles per period; an unanswered send leaves its count after it (matrix row 6) |
//! | [`REOPEN_AFTER`] | 10 s | matrix row 4: the pace grows past any limit by then |
//! | [`SERVED_WINDOW`] | 1 s | the window of most published limits (matrix row 1) |
//! | [`OPEN_WINDOW`] | 64 | where the slow start ends: past the 20 in flight of every matrix row |
//! | [`FIRST_PROBE`], [`MAX_PROBE`] | 100 ms, 2 s | TCP's retransmission timer, doubled per probe (RFC 6298 §5.5), never under the pace's spacing; at most twice [`SERVED_WINDOW`]: a probe outlasts a window that each refusal restarts, and finds a recovery within 2 s |
//! | [`COARSE`] | 1 s | the resolution of a reset given as a Unix time in whole seconds; probed by bisection |
//! | [`TIMER_GRAIN`] | 1 ms | tokio's timer resolution: a paced send may wake this late |

use crate::retry_after::QuotaLeft;
use crate::time::instant_after;
use std::collections::VecDeque;
use std::time::Duration;
use tokio::time::Instant;

/// A refusal sets the pace to 70 % of the pace refused.
pub(crate) const BETA: f64 = 0.7;
/// How fast the pace grows back, then past the pace refused.
pub(crate) const CUBIC_C: f64 = 0.4;
/// The slowest pace, in requests per second.
pub(crate) const MIN_RATE: f64 = 0.5;
/// The start-up doubles the pace this often; a send unanswered this long leaves the window's count.
pub(crate) const STARTUP_DOUBLING: Duration = Duration::from_millis(100);
/// A destination that refused nothing for this long is not paced any more.
pub(crate) const REOPEN_AFTER: Duration = Duration::from_secs(10);
/// The default first probing delay of a destination that serves nothing.
pub(crate) const FIRST_PROBE: Duration = Duration::from_millis(100);
/// The default longest probing delay.
pub(crate) const MAX_PROBE: Duration = Duration::from_secs(2);
/// The slow start ends once the window reaches this many requests in flight.
pub(crate) const OPEN_WINDOW: u32 = 64;
/// How late a timer may wake a paced send: tokio's timers have millisecond resolution.
pub(crate) const TIMER_GRAIN: Duration = Duration::from_millis(1);

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

/// A request sent: its round (between two cuts), its number among the sends, when, and
/// the reported room it left in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sent {
    pub(crate) round: u64,
    pub(crate) number: u64,
    pub(crate) at: Instant,
    pub(crate) seen: Option<Seen>,
}

/// A reported window's room as a send left: the server counts that send after every report
/// heard by then, so in the same window its report shows no more room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seen {
    /// The window: the number of the send whose report began it.
    pub(crate) window: u64,
    pub(crate) remaining: u64,
}

/// What a controller is told of its destination.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Config {
    /// The pace the user said it allows.
    pub(crate) known: Option<f64>,
    pub(crate) max_cooldown: Duration,
    pub(crate) first_probe: Duration,
    pub(crate) max_probe: Duration,
    /// A fleet's process, on its own only while Redis is away.
    pub(crate) fleet: bool,
}

/// The pace while paced: a curve of the time since the last cut.
#[derive(Debug, Clone, Copy)]
struct Curve {
    since: Instant,
    /// The pace at `since`.
    base: f64,
    /// The pace refused (CUBIC's `W_max`).
    ceiling: f64,
    /// Doubling (the start-up) rather than CUBIC: what was served since it began, over
    /// the last doubling period. The burst a limiter let through before is not a rate.
    startup: Option<Served>,
}

impl Curve {
    fn new(since: Instant, base: f64, ceiling: f64, startup: bool) -> Self {
        Self {
            since,
            base,
            ceiling,
            startup: startup.then(|| Served::over(STARTUP_DOUBLING, since)),
        }
    }

    fn rate(&self, now: Instant) -> f64 {
        let t = now.saturating_duration_since(self.since).as_secs_f64();
        if self.startup.is_some() {
            return self.base * (t / STARTUP_DOUBLING.as_secs_f64()).exp2();
        }
        let gap = (self.ceiling - self.base).max(0.0);
        let k = (gap / (CUBIC_C * self.ceiling)).cbrt();
        (self.ceiling * (1.0 + CUBIC_C * (t - k).powi(3))).max(self.base)
    }
}

#[derive(Debug)]
pub(crate) struct Controller {
    /// `None`: not paced.
    curve: Option<Curve>,
    /// The slow start's window, one more per success; its limit on requests in flight is
    /// [`window_at`](Self::window_at)'s. `None`: paced or open.
    window: Option<u32>,
    /// The slow start's first window, doubled per [`STARTUP_DOUBLING`]: its cap.
    initial_window: u32,
    /// The sends in flight, oldest first: (number, when).
    flying: VecDeque<(u64, Instant)>,
    /// Sends in flight from before this left the slow start's count.
    mark: Option<Instant>,
    served: Served,
    round: u64,
    sends: u64,
    last_send: Option<Instant>,
    /// The paced slot [`ready_at`](Self::ready_at) last gave, and the spacing it came from.
    due: Option<(Instant, Duration)>,
    last_refusal: Option<Instant>,
    closed_until: Option<Instant>,
    room: Option<Room>,
    /// The last room that passed: its reset, and the room it last reported. A report of a
    /// send before that reset with no more room tells of the window that ended.
    last_reset: Option<(Instant, u64)>,
    /// This client's share of the quota's use, measured in its room's window (1: alone).
    share: f64,
    /// The share it was told (a fleet's process, alone), which outlasts rooms and wins over
    /// the measure: measured, it would find whoever sends first in a window taking all.
    told_share: Option<f64>,
    /// The probing delay; zero when not probing.
    pub(crate) probe: Duration,
    /// Nothing served for a window past the first: what the next success does.
    silenced: Option<Silence>,
    /// Served since it began or started over.
    served_any: bool,
    /// When the pace was last cut: a window's count has passed a window after.
    last_cut: Option<Instant>,
    /// The shortest and longest a window opened by a request may last, as learned.
    length: (Duration, Duration),
    /// The last reset passed, for the next report.
    restart: Option<Restart>,
    /// Resets are not read: a count did not start over at one (a sliding window).
    sliding: bool,
    /// A count was seen to start over at its reset: the next windows are taken at their word.
    started_over: bool,
    /// The longest round trip answered since the last reset.
    slowest: Duration,
    config: Config,
}

/// What the first success after a silence does.
#[derive(Debug, Clone, Copy)]
enum Silence {
    /// Resumes the pace served before, as BBR restores its window after a loss recovery.
    Resume(Curve),
    /// Starts over as a new destination: it never served (TCP after a timeout, RFC 5681 §3.1).
    Restart,
}

/// A reset that passed, as the first report of a send made since will be read against it.
#[derive(Debug, Clone, Copy)]
struct Restart {
    /// The sends by the reset, and by the one before it.
    sends: (u64, u64),
    /// The sends then in flight: the new count may hold them.
    flying: u64,
    /// The room of the window that ended, when full, and its length.
    full: u64,
    span: Duration,
    /// The longest round trip answered in that window.
    slowest: Duration,
    /// Not yet read against a report; never, where others share the quota.
    unread: bool,
}

impl Controller {
    pub(crate) fn new(initial_window: u32, config: Config, now: Instant) -> Self {
        let mut controller = Self {
            curve: None,
            window: None,
            initial_window,
            flying: VecDeque::new(),
            mark: None,
            served: Served::new(now),
            round: 0,
            sends: 0,
            last_send: None,
            due: None,
            last_refusal: None,
            closed_until: None,
            room: None,
            last_reset: None,
            share: 1.0,
            told_share: None,
            probe: Duration::ZERO,
            silenced: None,
            served_any: false,
            last_cut: None,
            length: (Duration::ZERO, Duration::MAX),
            restart: None,
            sliding: false,
            started_over: false,
            slowest: Duration::ZERO,
            config,
        };
        controller.begin(now);
        controller
    }

    /// A new destination's pace: the known rate, else a slow start from the initial window.
    fn begin(&mut self, now: Instant) {
        let known = self.config.known;
        self.curve = known.map(|rate| Curve::new(now, rate, rate, false));
        let initial = self.initial_window;
        self.window = (known.is_none() && initial > 0).then_some(initial);
        (self.served, self.mark) = (Served::new(now), now.checked_sub(STARTUP_DOUBLING));
    }

    /// From now on paced at `known`, as if the user had told it (a fleet's share, alone),
    /// the last send at `last_send` at the latest.
    pub(crate) fn retell(&mut self, known: f64, last_send: Instant, now: Instant) {
        self.config.known = Some(known);
        self.curve = Some(Curve::new(now, known, known, false));
        (self.last_send, self.due) = (self.last_send.max(Some(last_send)), None);
        self.window = None;
    }

    /// From now on this client's share of a reported quota's use is `share` (a fleet's
    /// process, alone).
    pub(crate) fn retell_share(&mut self, share: f64) {
        self.told_share = Some(share.clamp(0.0, 1.0));
    }

    /// This client's share of a reported quota's use.
    fn share(&self) -> f64 {
        self.told_share.unwrap_or(self.share)
    }

    /// The pace, in requests per second, while paced.
    pub(crate) fn rate(&mut self, now: Instant) -> Option<f64> {
        let reopen_at = self.last_refusal.map(|at| instant_after(at, REOPEN_AFTER));
        if reopen_at.is_some_and(|at| at <= now) && self.config.known.is_none() {
            self.curve = None;
        }
        let curve = self.curve.as_mut()?;
        let mut rate = curve.rate(now);
        if let Some(delivered) = &mut curve.startup {
            // BBR's start-up paces at most at twice what is delivered lately.
            let delivered = delivered.rate(STARTUP_DOUBLING, now);
            rate = rate.min(2.0 * delivered.max(curve.base));
        }
        // A known rate spreads the sends already: alone, a reported room only closes when
        // spent. Others sharing the quota may leave less, and the rest is spread.
        let alone_at_known = self.config.known.is_some() && self.share() >= 1.0;
        let room = self.room.filter(|_| !alone_at_known);
        let room = room.and_then(|room| {
            let (share, flying) = (self.share(), self.flying_in(&room, now));
            room.pace(share, self.sends, flying, self.window_ends(&room).1, now)
        });
        // The floor is the learned pace's; a known rate or a reported room may be slower.
        let caps = [self.config.known, room].into_iter().flatten();
        Some(caps.fold(rate.max(MIN_RATE), f64::min))
    }

    /// Until when nothing may leave: a cool-down, or the reported room spent.
    pub(crate) fn closed_until(&mut self, now: Instant) -> Option<Instant> {
        self.expire_room(now);
        let held = self.held_until(now).max(self.checking_until(now));
        self.cooldown(now).max(held)
    }

    /// Until when the first send into a window guessed at a reset goes alone, until a count
    /// is seen to start over at one: a sliding window reporting its length as a reset would
    /// count the guess's burst into a window still full. The others wait for its answer two
    /// of the last window's longest round trips at most (and a doubling period).
    fn checking_until(&self, now: Instant) -> Option<Instant> {
        let guessed = self.room.is_some_and(|room| room.guessed) && !self.started_over;
        let restart = self.restart.filter(|restart| restart.unread && guessed)?;
        let wait = restart.slowest.saturating_mul(2).min(STARTUP_DOUBLING);
        let mut since = self
            .flying
            .iter()
            .filter(|(number, _)| *number > restart.sends.0);
        let until = since.next().map(|&(_, at)| instant_after(at, wait))?;
        (now < until).then_some(until)
    }

    /// Until when a spent room holds the sends: its reset. Where that is known only to the
    /// second, a probe goes halfway through what is left of that second (a bisection),
    /// unless one is in flight or less than a probing delay is left.
    fn held_until(&self, now: Instant) -> Option<Instant> {
        let reset = self.spent_until(now)?;
        let room = self.room?;
        // A fleet's process alone shares the room with processes it cannot see: their
        // probes would be many. It waits for the reset.
        let probing = room.probe.is_none() && !self.config.fleet;
        let (from, until) = self.window_ends(&room);
        let Some(from) = from.filter(|_| probing) else {
            return Some(reset);
        };
        let left = until.saturating_duration_since(from);
        let at = match left >= self.config.first_probe {
            true => from + left / 2,
            false => until,
        };
        (now < at).then_some(at)
    }

    /// When `room`'s window ends: at the earliest (`None`: its reset is exact) and at the
    /// latest. Opened by a request, a window ends its length after it, as learned so far.
    fn window_ends(&self, room: &Room) -> (Option<Instant>, Instant) {
        let Some(from) = room.probe_from else {
            return (None, room.reset_at);
        };
        let (shortest, longest) = self.length;
        let Some(at) = room.opened else {
            return (Some(from), room.reset_at);
        };
        let until = at
            .checked_add(longest)
            .map_or(room.reset_at, |end| end.min(room.reset_at));
        (Some(from.max(instant_after(at, shortest))), until)
    }

    /// What the answer to `sent` tells of a reset known only to the second. A probe
    /// answered in the spent window: the reset came after it left, and a window opened by
    /// a request lasts longer than that. Sent when the `last` window had ended (it opened
    /// a new one known only to the second): that one lasted at most since its opener. Bounds
    /// that cross are forgotten.
    fn learn_reset(&mut self, last: Option<Room>, sent: Sent, answer: Answer) {
        let (mut shortest, mut longest) = self.length;
        if let Some(opened) = last.and_then(|last| last.opened) {
            longest = longest.min(sent.at.saturating_duration_since(opened));
        }
        if let Some(room) = self.probed(sent) {
            // The reset came after the probe left.
            (room.probe_from, room.probe) = (room.probe_from.max(Some(sent.at)), None);
            let opened = room.opened.filter(|_| matches!(answer, Answer::Refused(_)));
            if let Some(opened) = opened {
                shortest = shortest.max(sent.at.saturating_duration_since(opened));
            }
        }
        self.length = match shortest < longest {
            true => (shortest, longest),
            false => (Duration::ZERO, Duration::MAX),
        };
    }

    /// Reads the first report since the last reset. A window that starts over counts only
    /// the sends since (and those in flight then): at most all made by the time it is read,
    /// as sends leaving together are counted in any order. One that counts more, yet no
    /// more than this client sent since the reset before, still counts its sends from
    /// before the reset: a sliding window reporting its length as a reset. Its reports are
    /// not read from then on; the pace is learned from refusals. (More than that is others'
    /// use, or a smaller quota.)
    fn starts_over(&mut self, sent: Sent, left: QuotaLeft, now: Instant) {
        let unread = self.restart.as_mut().filter(|restart| restart.unread);
        let Some(restart) = unread.filter(|restart| sent.number > restart.sends.0) else {
            return;
        };
        restart.unread = false;
        let restart = *restart;
        let counted = restart.full.saturating_sub(left.remaining);
        let since = |sends: u64| self.sends.saturating_sub(sends) + restart.flying;
        if since(restart.sends.0) < counted && counted <= since(restart.sends.1) {
            (self.sliding, self.room, self.window) = (true, None, None);
            // Its rate is its quota over its length: paced from there, as after a refusal.
            let rate = (restart.full as f64 / restart.span.as_secs_f64()).max(MIN_RATE);
            if rate.is_finite() {
                self.curve = Some(Curve::new(now, rate, rate, false));
                self.last_refusal = Some(now);
            }
        } else {
            self.started_over = true;
        }
    }

    /// The spent room `sent` probes, if it does.
    fn probed(&mut self, sent: Sent) -> Option<&mut Room> {
        let room = self.room.as_mut();
        room.filter(|room| room.probe == Some(sent.number))
    }

    /// Forgets the reported room once its reset passed.
    fn expire_room(&mut self, now: Instant) {
        if let Some(room) = self.room.filter(|room| now >= room.reset_at) {
            // Passed at the reset, not now: those sent since are in flight.
            let before = self.restart.map_or(0, |restart| restart.sends.0);
            let after = self.flying.iter().filter(|(_, at)| *at >= room.reset_at);
            let after = after.count() as u64;
            self.restart = Some(Restart {
                sends: (self.sends.saturating_sub(after), before),
                flying: (self.flying.len() as u64).saturating_sub(after),
                full: room.full,
                span: room.span,
                slowest: std::mem::take(&mut self.slowest),
                unread: self.share() >= 1.0,
            });
            let next = room.next(self.sends).filter(|next| now < next.reset_at);
            (self.room, self.share, self.last_reset) =
                (next, 1.0, Some((room.reset_at, room.remaining)));
        }
    }

    /// The reset, if the sends spent the reported room before it.
    fn spent_until(&self, now: Instant) -> Option<Instant> {
        let room = self.room?;
        room.spent_until(self.share(), self.sends, self.flying_in(&room, now), now)
    }

    /// The sends in flight that may count in `room`'s window: those sent within its length.
    /// An older one unanswered (a fleet's process gone) is not waited for.
    fn flying_in(&self, room: &Room, now: Instant) -> u32 {
        let since = now.checked_sub(room.span);
        let young = self
            .flying
            .iter()
            .filter(|&&(_, at)| since.is_none_or(|since| at > since));
        u32::try_from(young.count()).unwrap_or(u32::MAX)
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
        let closed = self.closed_until(now);
        let rate = self.rate(now);
        if let (Some(rate), Some(last_send)) = (rate, self.last_send) {
            // The pace goes on after a hold.
            let spacing = interval(rate);
            let slot = instant_after(last_send, spacing);
            self.due = Some((slot, spacing));
            let next = slot.max(closed.unwrap_or(now));
            return (next > now).then_some(next);
        }
        if closed.is_some() || rate.is_some() {
            return closed;
        }
        // A send unanswered for a doubling period leaves the count and widens the
        // window as an answer would: with no answer at all, it doubles every period.
        let window = self.window?;
        let before = self.counted().count();
        self.mark = self.mark.max(now.checked_sub(STARTUP_DOUBLING));
        let young = self.counted().count();
        let stalled = u32::try_from(before - young).unwrap_or(u32::MAX);
        self.window = Some(window.saturating_add(stalled));
        let (limit, doubles_at) = self.window_at(now)?;
        let &(_, oldest) = self.counted().next().filter(|_| young >= limit as usize)?;
        Some(instant_after(oldest, STARTUP_DOUBLING).min(doubles_at))
    }

    /// [`ready_at`](Self::ready_at) for a request woken by another's send rather than by a
    /// timer: a paced slot less than a timer tick ahead is due now, and the send counts at
    /// it (GCRA's burst tolerance of one tick). Paces faster than the timer hold.
    pub(crate) fn send_at(&mut self, now: Instant) -> Option<Instant> {
        let at = self.ready_at(now)?;
        let slot = self.due.is_some_and(|(slot, _)| slot == at);
        (!slot || at > instant_after(now, TIMER_GRAIN)).then_some(at)
    }

    /// How long a request arriving behind `queued` others may expect to wait.
    pub(crate) fn expected_wait(&mut self, queued: usize, now: Instant) -> Duration {
        let first = self.ready_at(now).unwrap_or(now) - now;
        let (Some(curve), Some(rate)) = (self.curve, self.rate(now)) else {
            return first;
        };
        // The time `queued` sends take from `rate` on: an upper bound for CUBIC.
        let behind = if curve.startup.is_some() && self.config.known.is_none() {
            let doubling = STARTUP_DOUBLING.as_secs_f64();
            doubling * (1.0 + queued as f64 * std::f64::consts::LN_2 / (rate * doubling)).log2()
        } else {
            queued as f64 / rate
        };
        first.saturating_add(Duration::try_from_secs_f64(behind).unwrap_or(Duration::MAX))
    }

    pub(crate) fn send(&mut self, now: Instant) -> Sent {
        // A send that leaves a spent room known only to the second probes it.
        let coarse = self.room.is_some_and(|room| room.probe_from.is_some());
        let probing = coarse && self.spent_until(now).is_some();
        self.last_send = Some(self.beat(now));
        self.sends = self.sends.saturating_add(1);
        if let Some(room) = self.room.as_mut().filter(|_| probing) {
            room.probe = Some(self.sends);
        }
        self.flying.push_back((self.sends, now));
        Sent {
            round: self.round,
            number: self.sends,
            at: now,
            seen: self.room.and_then(|room| room.seen()),
        }
    }

    /// When a send at `now` counts as sent: before its slot ([`send_at`](Self::send_at)),
    /// or less than one spacing after it, at the slot (GCRA's theoretical arrival time), so
    /// a send late by a wake-up slows no later one; up to a timer tick later, a tick before
    /// `now`, as timers wake a tick late. Later still, the beat restarts.
    fn beat(&mut self, now: Instant) -> Instant {
        match self.due.take() {
            Some((due, _)) if due > now => due.min(instant_after(now, TIMER_GRAIN)),
            Some((due, spacing)) if now < instant_after(due, spacing) => due,
            Some((due, spacing)) if now < instant_after(due, spacing + TIMER_GRAIN) => {
                now.checked_sub(TIMER_GRAIN).map_or(now, |at| at.max(due))
            }
            _ => now,
        }
    }

    /// Request `sent` is no longer in flight.
    pub(crate) fn release(&mut self, sent: Sent) {
        if let Some(room) = self.probed(sent) {
            room.probe = None;
        }
        if let Some(at) = self
            .flying
            .iter()
            .position(|&(number, _)| number == sent.number)
        {
            self.flying.remove(at);
        }
    }

    /// The sends in flight the slow start counts: those after its mark.
    fn counted(&self) -> impl Iterator<Item = &(u64, Instant)> {
        let mark = self.mark;
        self.flying
            .iter()
            .filter(move |&&(_, at)| mark.is_none_or(|mark| at > mark))
    }

    pub(crate) fn in_flight(&self) -> u32 {
        u32::try_from(self.flying.len()).unwrap_or(u32::MAX)
    }

    /// Whether requests wait for the slow-start window (they never fail for it).
    pub(crate) fn starting(&self) -> bool {
        self.curve.is_none() && self.window.is_some()
    }

    /// The slow start's limit at `now`, and when its cap doubles next; `None`: open.
    /// The window grows by one per success, so it doubles per round trip, as TCP's does.
    /// On a fast link that outruns any limiter's window: unless a reported room bounds the
    /// sends, the limit is also at most the initial window doubled per [`STARTUP_DOUBLING`]
    /// of the destination's life, as BBR's start-up doubles per round. It opens from
    /// [`OPEN_WINDOW`] on.
    fn window_at(&mut self, now: Instant) -> Option<(u32, Instant)> {
        let age = now.saturating_duration_since(self.served.born);
        let doublings = age.as_nanos() / STARTUP_DOUBLING.as_nanos();
        let doublings = u32::try_from(doublings).unwrap_or(u32::MAX);
        let cap = 2u32
            .saturating_pow(doublings)
            .saturating_mul(self.initial_window);
        let limit = self
            .window?
            .min(if self.room.is_some() { u32::MAX } else { cap });
        if limit >= OPEN_WINDOW {
            self.window = None;
            return None;
        }
        let next = STARTUP_DOUBLING.saturating_mul(doublings.saturating_add(1));
        Some((limit, instant_after(self.served.born, next)))
    }

    /// Learns from the answer to `sent` and the quota it reported.
    pub(crate) fn answered(
        &mut self,
        sent: Sent,
        answer: Answer,
        quota: Option<QuotaLeft>,
        now: Instant,
    ) -> Reaction {
        self.expire_room(now);
        self.slowest = self.slowest.max(now.saturating_duration_since(sent.at));
        let ended = |left: &QuotaLeft| {
            let last = self.last_reset;
            last.is_some_and(|(reset, room)| sent.at < reset && left.remaining <= room)
        };
        let quota = quota.filter(|left| !ended(left));
        if let Some(left) = quota.filter(|left| left.reset.is_some()) {
            self.starts_over(sent, left, now);
        }
        let quota = quota.filter(|_| !self.sliding);
        let max = self.config.max_cooldown;
        let before = self.room;
        let learned = quota
            .and_then(|left| Room::reported(self.room, (sent.number, sent.seen), left, max, now));
        self.room = learned.or(self.room);
        // This send's report began the window's record: it opened the window, if any did.
        let began = self.room.as_mut();
        let began = began.filter(|room| !room.guessed && room.first.0 == sent.number);
        let flying = &self.flying;
        let last = began.map(|room| {
            let older = flying.iter().filter(|&&(number, _)| number < sent.number);
            (room.opened, room.uncounted) = (Some(sent.at), older.count() as u64);
            before.filter(|_| room.probe_from.is_some())
        });
        // Measured on a newer report that sets the count only: an older or overtaken one's
        // lower count is not others' use.
        let own = |room: &Room| quota.is_some_and(|left| left.remaining == room.remaining);
        let newer = learned.filter(|room| room.number == sent.number && own(room));
        if let Some(share) = newer.and_then(|room| room.share(self.sends)) {
            self.share = share;
        }
        self.learn_reset(last.flatten(), sent, answer);
        match answer {
            Answer::Served => {
                if let Some(silence) = self.silenced.take() {
                    self.start_over(silence, now);
                }
                self.served_any = true;
                self.served.add(sent.round == self.round, now);
                if let Some(delivered) = self.curve.as_mut().and_then(|c| c.startup.as_mut()) {
                    delivered.add(false, now);
                }
                self.probe = Duration::ZERO;
                // A success that leaves no room does not widen the slow start.
                if self.curve.is_none() && quota.is_none_or(|left| left.remaining > 0) {
                    self.window = self.window.map(|limit| limit.saturating_add(1));
                }
                Reaction::Faster
            }
            Answer::Refused(asked) => {
                self.last_refusal = Some(now);
                self.window = None;
                self.refused(sent, asked.filter(|delay| !delay.is_zero()), now)
            }
            Answer::Other => Reaction::Nothing,
        }
    }

    /// A refusal cuts the pace once per round (the sends since the last cut), as TCP does.
    fn refused(&mut self, sent: Sent, asked: Option<Duration>, now: Instant) -> Reaction {
        if let Some(reset) = self.spent_until(now) {
            // The spent room explains it: no news of the pace. A delay asked that ends
            // within a second of a reset known only to the second is that end rounded too:
            // it bounds the reset, and the probes go on.
            if let Some(asked) = asked {
                let until = instant_after(now, asked);
                match self.room.as_mut().filter(|room| room.probe_from.is_some()) {
                    Some(room) if until <= instant_after(reset, COARSE) => {
                        room.reset_at = room.reset_at.min(until);
                    }
                    _ => self.close_for(asked, now),
                }
            }
            return Reaction::Slower;
        }
        if sent.round != self.round {
            return Reaction::Nothing;
        }
        self.round += 1;
        let served = self.served.take_since() > 0;
        if served || self.curve.is_none() {
            self.curve = Some(self.cut(now));
            self.last_cut = Some(now);
        }
        if served {
            return Reaction::Slower;
        }
        // Nothing served since the last cut, nor for a window: a spent quota or a server
        // down, closed for the delay it asked. Else a limiter counting refusals, closed
        // for a doubled probing delay (at least the known spacing).
        let silent = self.silent(sent, now);
        // Asked no delay, a probe comes by a window after the cut: a window's count has
        // passed by then.
        let passed = self.last_cut.map(|at| instant_after(at, SERVED_WINDOW));
        let by = passed.filter(|&at| asked.is_none() && !silent && at > now);
        let asked = asked.filter(|_| silent);
        let doubled = self.probe.saturating_mul(2).max(self.config.first_probe);
        self.probe = doubled.min(self.config.max_probe);
        if silent {
            // Nothing served for a window: one probe per delay until a success. Past its
            // first window, refusals of everything tell nothing of the pace served after.
            let past_first = now.saturating_duration_since(self.served.born) >= SERVED_WINDOW;
            if past_first && self.silenced.is_none() {
                let before = self.curve.filter(|_| self.served_any);
                self.silenced = Some(before.map_or(Silence::Restart, Silence::Resume));
            }
            let base = 1.0 / self.probe.as_secs_f64();
            self.curve = Some(Curve::new(now, base, base, true));
        }
        let probe = by.map_or(self.probe, |by| self.probe.min(by - now));
        // A probe keeps the pace's spacing: sooner, it would send faster than the pace.
        // After a silence, the pace is the probes' own: only a known rate spaces them.
        let pace = if silent {
            self.config.known
        } else {
            self.rate(now)
        };
        let spacing = pace.map_or(Duration::ZERO, interval);
        self.close_for(asked.unwrap_or(probe).max(spacing), now);
        Reaction::Slower
    }

    /// Whether nothing was served for a window. A client alone at a destination younger
    /// than that, its rate unknown, knows it only once nothing else sent is pending: its
    /// first burst's refusal may come before its successes.
    fn silent(&mut self, sent: Sent, now: Instant) -> bool {
        let alone = self.config.known.is_none() && !self.config.fleet;
        let young = now.saturating_duration_since(self.served.born) < SERVED_WINDOW && alone;
        let others = || self.flying.iter().any(|&(number, _)| number != sent.number);
        self.served.in_window(now) == 0.0 && !(young && others())
    }

    /// The first success after a silence: see [`Silence`]. The probes' pace tells nothing.
    fn start_over(&mut self, silence: Silence, now: Instant) {
        (self.last_send, self.due) = (None, None);
        match silence {
            Silence::Resume(curve) => {
                let startup = curve.startup.is_some();
                self.curve = Some(Curve::new(now, curve.base, curve.ceiling, startup));
            }
            Silence::Restart => {
                self.begin(now);
                self.last_refusal = None;
            }
        }
    }

    fn cut(&mut self, now: Instant) -> Curve {
        let cubic = |b: f64, c: f64| Curve::new(now, b.max(MIN_RATE), c.max(MIN_RATE), false);
        match (self.curve, self.rate(now)) {
            // Paced or starting up: CUBIC's cut of what the destination served (its
            // delivery rate, as BBR paces at), never up. A far server's refusal comes a
            // round trip late, and a start-up's pace has grown meanwhile.
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

    /// Closes the destination for `delay` (at most the max cool-down); the pace resumes after.
    fn close_for(&mut self, delay: Duration, now: Instant) {
        let until = instant_after(now, delay.min(self.config.max_cooldown));
        if self.closed_until.is_some_and(|current| current >= until) {
            return;
        }
        self.closed_until = Some(until);
        (self.last_send, self.due) = (None, None);
        if let Some(curve) = &mut self.curve {
            curve.since = curve.since.max(until);
        }
    }
}

/// The span the delivery rate is counted over: the window of most published limits.
pub(crate) const SERVED_WINDOW: Duration = Duration::from_secs(1);
/// How much sooner than a reset given in whole Unix seconds its count may come back.
const COARSE: Duration = Duration::from_secs(1);

/// Successes per second, by a sliding-window counter: the current window's count plus
/// the previous one's, weighted by its share still inside the last window.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Served {
    window: Duration,
    born: Instant,
    start: Instant,
    current: u32,
    previous: u32,
    /// Successes of this round since the last [`take_since`](Self::take_since).
    since: u32,
}

impl Served {
    pub(crate) fn new(now: Instant) -> Self {
        Self::over(SERVED_WINDOW, now)
    }

    /// A count over `window` rather than [`SERVED_WINDOW`].
    pub(crate) fn over(window: Duration, now: Instant) -> Self {
        Self {
            window,
            born: now,
            start: now,
            current: 0,
            previous: 0,
            since: 0,
        }
    }

    fn roll(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.start);
        if elapsed < self.window {
            return;
        }
        let windows = elapsed.as_nanos() / self.window.as_nanos();
        self.previous = if windows == 1 { self.current } else { 0 };
        self.current = 0;
        let whole = self
            .window
            .saturating_mul(u32::try_from(windows).unwrap_or(u32::MAX));
        self.start = self.start.checked_add(whole).unwrap_or(now);
    }

    /// Counts one success; `this_round`: of a request sent since the last cut.
    pub(crate) fn add(&mut self, this_round: bool, now: Instant) {
        self.roll(now);
        self.current = self.current.saturating_add(1);
        self.since = self.since.saturating_add(u32::from(this_round));
    }

    /// The successes of the last window (a window limiter's allowance).
    pub(crate) fn in_window(&mut self, now: Instant) -> f64 {
        self.roll(now);
        let into = now.saturating_duration_since(self.start).as_secs_f64();
        let left = 1.0 - into / self.window.as_secs_f64();
        f64::from(self.previous) * left + f64::from(self.current)
    }

    /// Successes per second over the last window, or a younger destination's life
    /// (at least `min_span`): a burst is not a rate.
    pub(crate) fn rate(&mut self, min_span: Duration, now: Instant) -> f64 {
        let age = now.saturating_duration_since(self.born);
        let span = age.clamp(min_span, self.window.max(min_span));
        self.in_window(now) / span.as_secs_f64()
    }

    /// The successes since the last call, which starts a new count.
    pub(crate) fn take_since(&mut self) -> u32 {
        std::mem::take(&mut self.since)
    }
}

/// The latest quota reported with a reset, counted down by the sends since. Clients sharing
/// it each count their part: their sends over what the quota lost since the window began.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Room {
    /// The send number of the request it answered.
    number: u64,
    remaining: u64,
    reset_at: Instant,
    /// The first report of this window: its send number and remaining count.
    first: (u64, u64),
    /// What this window started with, as its first report tells: the next one's guess.
    full: u64,
    /// The reset of the window's first report: the next window's length, guessed.
    span: Duration,
    /// Guessed at the last reset, not reported yet.
    guessed: bool,
    /// A reset known only to the second may pass up to a second sooner: after this
    /// instant, at the latest a probe's refusal. A spent room lets one probe go at a time,
    /// halfway to the reset.
    probe_from: Option<Instant>,
    /// The send probing the spent room, until answered.
    probe: Option<u64>,
    /// When the request whose report began this window left.
    opened: Option<Instant>,
    /// This client's older sends in flight at the window's first report: the server may
    /// count them after it.
    uncounted: u64,
}

impl Room {
    /// The room reported by the response to send `number` (which left in room `seen`),
    /// after `previous`; `None` without a reset (nothing says when room comes back).
    /// Requests overtake each other on the way: an older send's report only lowers a live
    /// room, and only a send that left after a report of its window can tell a new one.
    pub(crate) fn reported(
        previous: Option<Self>,
        (number, seen): (u64, Option<Seen>),
        left: QuotaLeft,
        max_reset: Duration,
        now: Instant,
    ) -> Option<Self> {
        if let Some(mut old) = previous.filter(|old| number < old.number) {
            if now < old.reset_at {
                old.remaining = old.remaining.min(left.remaining);
            }
            return Some(old);
        }
        let span = left.reset?.min(max_reset);
        let reset_at = instant_after(now, span);
        let mut room = Self {
            number,
            remaining: left.remaining,
            reset_at,
            first: (number, left.remaining),
            full: left.remaining,
            span,
            guessed: false,
            probe_from: left
                .coarse
                .then(|| reset_at.checked_sub(COARSE).map_or(now, |at| at.max(now))),
            probe: None,
            opened: None,
            uncounted: 0,
        };
        let window = previous.filter(|old| now < old.reset_at && old.holds(seen, left.remaining));
        if let Some(previous) = window {
            (room.full, room.span) = (previous.full, previous.span);
            if previous.guessed {
                // The window's first report: its count, and the sends since the reset (at
                // most the guess: a report with more room is a new window).
                let before = number.saturating_sub(previous.number.saturating_add(1));
                room.full = left.remaining.saturating_add(before).min(previous.full);
            } else {
                // Resets are rounded up to whole seconds (IETF `RateLimit`, `Retry-After`):
                // each report of the window bounds its end.
                room.reset_at = reset_at.min(previous.reset_at);
                room.first = previous.first;
                room.remaining = left.remaining.min(previous.remaining);
                room.probe_from = room.probe_from.max(previous.probe_from);
                (room.probe, room.opened) = (previous.probe, previous.opened);
                room.uncounted = previous.uncounted;
            }
        }
        Some(room)
    }

    /// Whether a report of `remaining` for a send that left in room `seen` is of this live
    /// window. A guess holds what does not pass it. A send that left after a report of this
    /// window was counted after it: more room is a new window. One that left before may
    /// have been counted first, so more room tells nothing.
    fn holds(&self, seen: Option<Seen>, remaining: u64) -> bool {
        match seen {
            _ if self.guessed => remaining <= self.remaining,
            Some(seen) if seen.window == self.first.0 => remaining <= seen.remaining,
            _ => true,
        }
    }

    /// The room a send leaving now leaves in; none while only guessed.
    fn seen(&self) -> Option<Seen> {
        let (window, _) = self.first;
        (!self.guessed).then_some(Seen {
            window,
            remaining: self.remaining,
        })
    }

    /// The room of the window after this one, guessed at its reset: as full as this one was,
    /// for as long. Else every request waiting for the reset would leave at once. A guess
    /// lapses unreported: no window is guessed from a guess.
    fn next(&self, sends: u64) -> Option<Self> {
        let next = Self {
            number: sends,
            remaining: self.full,
            reset_at: instant_after(self.reset_at, self.span),
            first: (sends, self.full),
            guessed: true,
            probe_from: None,
            probe: None,
            opened: None,
            ..*self
        };
        (!self.guessed).then_some(next)
    }

    /// This client's share of the quota's use since its window's first report, once measured:
    /// its `sends` so far (and those in flight then) over what the quota lost. Some may not
    /// be counted yet, so a client alone reads all of it, whatever order the server counted
    /// its sends in.
    pub(crate) fn share(&self, sends: u64) -> Option<f64> {
        let used = self.first.1.saturating_sub(self.remaining);
        let sent = sends.saturating_sub(self.first.0);
        let counted = sent.saturating_add(self.uncounted);
        (used > 0 && sent > 0).then(|| (counted as f64 / used as f64).min(1.0))
    }

    /// This client's part (at `share`) of the room left after send `sends`. Every request in
    /// flight counts: one sent before the report may reach the server after it. A shared
    /// quota's part of the whole window bounds it too: the others may not have come yet.
    fn left(&self, share: f64, sends: u64, in_flight: u32) -> u64 {
        let part = |count: u64| (count as f64 * share).floor() as u64;
        let since = sends.saturating_sub(self.number);
        let of_left = part(self.remaining).saturating_sub(since.max(u64::from(in_flight)));
        if share >= 1.0 {
            // Alone, the window's own count is the bound (a sliding window's count also ages).
            return of_left;
        }
        let of_window = part(self.first.1).saturating_sub(sends.saturating_sub(self.first.0));
        of_left.min(of_window)
    }

    /// The reset, if the sends up to number `sends` spent the room (`share` of it) before it.
    pub(crate) fn spent_until(
        &self,
        share: f64,
        sends: u64,
        in_flight: u32,
        now: Instant,
    ) -> Option<Instant> {
        let spent = self.left(share, sends, in_flight) == 0;
        (now < self.reset_at && spent).then_some(self.reset_at)
    }

    /// The pace that spreads what is left until `end`, the window's latest as known (the
    /// IETF `RateLimit` draft's advice).
    pub(crate) fn pace(
        &self,
        share: f64,
        sends: u64,
        in_flight: u32,
        end: Instant,
        now: Instant,
    ) -> Option<f64> {
        let left = self.left(share, sends, in_flight);
        let until = end.saturating_duration_since(now).as_secs_f64();
        (left > 0 && until > 0.0).then(|| left as f64 / until)
    }
}

/// The spacing of sends at `rate` requests per second.
pub(crate) fn interval(rate: f64) -> Duration {
    Duration::try_from_secs_f64(1.0 / rate).unwrap_or(Duration::MAX)
}

#[cfg(test)]
mod tests;
