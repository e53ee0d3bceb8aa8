//! The send rate of a destination, learned from its refusals and successes.

use super::meter::Meter;
use crate::backoff::ResponsiveBackOff;
use crate::time::{from_secs_f64, instant_after};
use std::time::Duration;
use tokio::time::Instant;

// The controller's constants shape the control loop rather than the policy, so they are
// not settings; each is justified where it is used.

/// After a refusal with a measured delivery rate: pace just under it.
const DECREASE: f64 = 0.97;
/// After a refusal with no measured delivery rate yet: cut the pace to 60 %.
const BLIND_DECREASE: f64 = 0.6;
/// A rate limiter that reports no quota (a `429` with at most a `Retry-After`), over its
/// count (two refusals in a row, nothing served between them) after a ceiling is known:
/// the pace goes to 70 % of itself, once per window, and grows back by equal steps
/// ([`SLOW_STEP`]). Such a limiter may count its refusals too (HAProxy's stick tables
/// do), and then stays over its limit for as long as its clients send at it: a cut just
/// under the pace ([`DECREASE`]) left every client of a fleet refused until all cooled
/// down at once, and the fast growth after that overshot again. Equal steps against cuts
/// in proportion (AIMD) also even out the shares of clients that measured unequal ones.
/// A token bucket a little over its rate serves between its refusals, and keeps the gentle
/// cut: a client alone cut to 70 % would take long to grow back by equal steps.
const LIMIT_DECREASE: f64 = 0.7;
/// A limiter's window when its `Retry-After` does not say: the meters' (a second).
const LIMIT_WINDOW: Duration = super::meter::WINDOW;
/// A cool-down drains a limiter's counted refusals for at most this share of what it
/// asked more (see [`Rate::drain`]). The refusals per success the meters give overstate
/// what the window still counts when the refusals are fresh and the successes older, as in
/// every refusal wave: without a cap, a fleet stays silent long after the window fell
/// under its count. A much smaller cap sends a client alone back into a window still
/// counting its first burst's refusals. The value was chosen on the simulation's
/// limiter models and checked on real limiters (see `docs/BENCHMARKS.md`).
const MAX_DRAIN: f64 = 0.3;
/// Far below the known ceiling: each success adds this much to the rate (req/s), so the
/// rate grows e-fold every 1/8 s while it is used: about ×2 per 90 ms.
const FAST_GAIN: f64 = 8.0;
/// [`FAST_GAIN`] for a destination that reports its room without a reset (a token
/// bucket, as tower_governor's): its refusals are its rate, which does not come back all
/// at once as a server's capacity after an outage does, and clients sharing it that all
/// grow back fast overshoot it together. Also the step above the probing pace a
/// destination leaves probing at: none at all, and each "no room" it then reports would
/// cut a pace already at the probing one until it probes again.
const BUCKET_GAIN: f64 = 2.0;
/// Below this rate (req/s) the destination is as good as down: probe it.
const MIN_RATE: f64 = 1.0;
/// Near the known ceiling: the rate grows by this much (req/s) per second, whatever the
/// rate — a slow probe for more capacity. Equal steps for every client, against cuts in
/// proportion to each client's rate, are what bring clients sharing one limit to equal
/// shares (AIMD); steps in proportion to the rate would keep whatever shares they
/// started with.
const SLOW_STEP: f64 = 1.0;
/// "Near the ceiling" means above this fraction of it.
const NEAR_CEILING: f64 = 0.95;
/// After a cool-down that measured a window's allowance, the pace holds just under it
/// for this many windows before it probes past it.
const HELD_WINDOWS: u32 = 4;
/// Without a fresh refusal for this long the episode is over: the ceiling is forgotten
/// and, once no request waits, pacing stops.
const QUIET: Duration = Duration::from_secs(10);
/// A late wake-up (timers fire on whole milliseconds) may be caught up by sending up to
/// this much early afterwards; otherwise rounding to 1 ms would cut a 2.06 ms spacing to
/// 3 ms, a third of the rate.
const TOLERANCE: Duration = Duration::from_millis(5);

/// How a destination is sent to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Mode {
    /// Slow start: limited by the [`Window`](super::window::Window), no pace.
    Start,
    /// Unlimited: nothing waits.
    Open,
    /// At most `rate` requests per second, evenly spaced.
    Paced { rate: f64 },
    /// The destination refuses everything: one request per `interval`, the
    /// [`ResponsiveBackOff`]'s delay.
    Probe { interval: Duration },
}

/// A refusal episode: from the first fresh refusal after a quiet period.
#[derive(Debug)]
struct Episode {
    /// Successes since the previous measured refusal: while refused, the rate the server
    /// actually serves.
    delivered: Meter,
    /// The delivery rate measured at the last refusal: the capacity, as far as known.
    ceiling: Option<f64>,
    /// The ceiling is a window's allowance: what the destination served over the length of
    /// the cool-down it asked for (see [`Rate::cool_down`]). The pace holds under it until
    /// then, [`HELD_WINDOWS`] windows after the cool-down.
    held: Option<Instant>,
    /// When the episode began: its first fresh refusal after a quiet spell.
    started: Instant,
    /// Successes from about a second before the episode started (the meter's count then)
    /// on: a window's allowance, counted without the meter's decay, when the window
    /// began with the episode or shortly before.
    served: f64,
    /// When a limiter that reports no quota last cut the pace ([`LIMIT_DECREASE`]): the
    /// pace then grows back by equal steps.
    limit_cut: Option<Instant>,
}

impl Episode {
    fn new(served: &mut Meter, now: Instant) -> Self {
        Self {
            delivered: Meter::new(now),
            ceiling: None,
            held: None,
            started: now,
            served: served.count(now),
            limit_cut: None,
        }
    }
}

/// A cool-down, until the destination serves a request after it.
#[derive(Debug, Clone, Copy)]
struct Cooled {
    until: Instant,
    /// The length the destination asked for: its allowance is what it served over as long.
    pause: Duration,
}

/// The rate controller of one destination.
#[derive(Debug)]
pub(crate) struct Rate {
    mode: Mode,
    /// The theoretical instant of the last send (GCRA): the next may go one spacing later.
    last_send: Option<Instant>,
    srtt: Option<Duration>,
    responses: Meter,
    /// Successes, over about the last second.
    served: Meter,
    /// Refusals, over about the last second: every one, also those of requests sent at a
    /// pace already cut for them.
    refusals: Meter,
    episode: Option<Episode>,
    last_refusal: Option<Instant>,
    /// Counts the decreases of the pace: only the refusal of a request sent in the
    /// current round is fresh (TCP, likewise, backs off once per round trip).
    round: u64,
    /// The probing delay, this destination's own.
    backoff: ResponsiveBackOff,
    /// The last cool-down, until the destination serves a request after it.
    cooled: Option<Cooled>,
    /// The destination reports its room without a reset: a token bucket.
    bucket: bool,
    /// Refusals since the last success, fresh or not: two or more, and the destination
    /// refuses everything.
    streak: u32,
    /// The last fresh refusal was a rate limiter's that reports no quota
    /// ([`refused_by_limit`](Self::refused_by_limit)).
    opaque_limiter: bool,
    /// The rate the user said the destination allows (req/s): the pace starts at it, and
    /// never goes past it.
    known: Option<f64>,
}

impl Rate {
    /// A destination's controller; `known`: the rate the user said it allows (req/s).
    pub(crate) fn new(
        backoff: ResponsiveBackOff,
        slow_start: bool,
        known: Option<f64>,
        now: Instant,
    ) -> Self {
        let mode = match known {
            Some(rate) => Mode::Paced { rate },
            None if slow_start => Mode::Start,
            None => Mode::Open,
        };
        Self {
            mode,
            last_send: None,
            srtt: None,
            responses: Meter::new(now),
            served: Meter::new(now),
            refusals: Meter::new(now),
            episode: None,
            last_refusal: None,
            round: 0,
            backoff,
            cooled: None,
            bucket: false,
            streak: 0,
            opaque_limiter: false,
            known,
        }
    }

    /// `rate`, at most the known rate.
    fn capped(&self, rate: f64) -> f64 {
        self.known.map_or(rate, |known| rate.min(known))
    }

    /// Paces at `rate`, at most the known rate: every pace the controller sets goes
    /// through here, so none passes the rate the user gave.
    fn set_pace(&mut self, rate: f64) {
        self.mode = Mode::Paced {
            rate: self.capped(rate),
        };
    }

    pub(crate) fn mode(&self) -> Mode {
        self.mode
    }

    /// The slow start is over without a refusal.
    pub(crate) fn open(&mut self) {
        if self.mode == Mode::Start {
            self.mode = Mode::Open;
        }
    }

    pub(crate) fn round(&self) -> u64 {
        self.round
    }

    pub(crate) fn backoff(&self) -> &ResponsiveBackOff {
        &self.backoff
    }

    /// The destination reported its room without saying when it resets: it is a token
    /// bucket, and grows back from refusals by [`BUCKET_GAIN`].
    pub(crate) fn reports_room(&mut self) {
        self.bucket = true;
    }

    /// What each success adds to the rate far below the known ceiling.
    fn fast_gain(&self) -> f64 {
        if self.bucket { BUCKET_GAIN } else { FAST_GAIN }
    }

    /// Whether the destination refused lately: its pace then limits waits.
    pub(crate) fn is_throttled(&self) -> bool {
        matches!(self.mode, Mode::Paced { .. } | Mode::Probe { .. })
    }

    /// The spacing between sends, while paced.
    pub(crate) fn spacing(&self) -> Option<Duration> {
        match self.mode {
            Mode::Paced { rate } => Some(from_secs_f64(1.0 / rate)),
            // Never faster than the known rate, probing too.
            Mode::Probe { interval } => Some(
                self.known
                    .map_or(interval, |known| interval.max(from_secs_f64(1.0 / known))),
            ),
            Mode::Start | Mode::Open => None,
        }
    }

    /// The send rate, in requests per second, while paced.
    pub(crate) fn rate(&self) -> Option<f64> {
        match self.mode {
            Mode::Paced { rate } => Some(rate),
            Mode::Probe { .. } => self
                .spacing()
                .map(|spacing| 1.0 / spacing.as_secs_f64().max(1e-9)),
            Mode::Start | Mode::Open => None,
        }
    }

    /// When the next paced send may go (`None`: not paced).
    pub(crate) fn next_slot(&self, now: Instant) -> Option<Instant> {
        let spacing = self.spacing()?;
        Some(
            self.last_send
                .map_or(now, |last| instant_after(last, spacing)),
        )
    }

    /// Takes the slot opening at `next` (at or before `now`).
    pub(crate) fn take_slot(&mut self, next: Instant, now: Instant) {
        let floor = now.checked_sub(TOLERANCE).unwrap_or(now);
        self.last_send = Some(next.max(floor));
    }

    /// How long a request arriving now behind `queued` others is expected to wait: until
    /// the next slot, plus the queue drained at the rate, or at the ceiling it is growing
    /// back to. With no ceiling known (probing, or ramping up after an outage) only the
    /// next slot is certain: the rate may grow manyfold before this request's turn, up to
    /// the known rate if there is one.
    pub(crate) fn expected_wait(&self, queued: usize, now: Instant) -> Duration {
        let Some(next) = self.next_slot(now) else {
            return Duration::ZERO;
        };
        let ceiling = self.episode.as_ref().and_then(|e| e.ceiling);
        let drain = match (self.mode, ceiling) {
            (Mode::Paced { rate }, Some(ceiling)) => Some(self.capped(rate.max(ceiling))),
            _ => self.known,
        };
        let queued = drain.map_or(Duration::ZERO, |rate| from_secs_f64(queued as f64 / rate));
        next.saturating_duration_since(now).saturating_add(queued)
    }

    /// The destination's smoothed round trip; zero before its first answer.
    pub(crate) fn round_trip(&self) -> Duration {
        self.srtt.unwrap_or_default()
    }

    /// Any response, to a request sent at `sent`.
    pub(crate) fn responded(&mut self, sent: Instant, now: Instant) {
        let rtt = now.saturating_duration_since(sent);
        self.srtt = Some(self.srtt.map_or(rtt, |s| (s * 7 + rtt) / 8));
        self.responses.add(now);
    }

    /// A success; `idle` when no request waits (pacing may then stop); `grow` unless the
    /// destination reported no room for more.
    pub(crate) fn succeeded(&mut self, idle: bool, grow: bool, now: Instant) {
        if !self.backoff.current().is_zero() {
            self.backoff.on_success();
        }
        self.served.add(now);
        self.streak = 0;
        match self.cooled {
            // A request sent before the cool-down, served during it: part of the allowance
            // the cool-down measured (a limiter answers its refusals first, so the
            // cool-down often starts before the last of a burst's successes come back).
            Some(cooled) if now < cooled.until => {
                self.measure_allowance(cooled.until, cooled.pause, now);
            }
            _ => self.cooled = None,
        }
        if let Some(episode) = &mut self.episode {
            episode.delivered.add(now);
            episode.served += 1.0;
        }
        match self.mode {
            Mode::Start | Mode::Open => {}
            Mode::Probe { interval } => self.back_from_probe(interval, now),
            Mode::Paced { rate } => self.grow_paced(rate, idle, grow, now),
        }
    }

    /// A success while probing a destination that refused everything: it is back.
    fn back_from_probe(&mut self, interval: Duration, now: Instant) {
        // The destination is back, with a fresh episode (what was measured while
        // it refused everything is no capacity).
        let probing = 1.0 / interval.as_secs_f64().max(1e-3);
        let mut episode = Episode::new(&mut self.served, now);
        let pace = if self.opaque_limiter {
            // A limiter's window moved on; no server came back from an outage.
            // Every client of a fleet probing it comes back at about the same
            // time, and growing at the fast gain they overshoot at once, and
            // keep shares far larger than the others'.
            // From the probing pace in equal steps instead, as after a cut
            // (`LIMIT_DECREASE`). As after a cut, two refusals in a row
            // within the window do not cut again; a cool-down takes a limiter
            // that still refuses everything.
            episode.ceiling = Some(probing);
            episode.limit_cut = Some(now);
            probing
        } else {
            // A step above the probing pace, growing back fast.
            probing + self.fast_gain()
        };
        self.set_pace(pace);
        self.episode = Some(episode);
    }

    /// A success at the pace `rate`: the pace grows (or, quiet and idle, stops).
    fn grow_paced(&mut self, rate: f64, idle: bool, grow: bool, now: Instant) {
        let quiet = self
            .last_refusal
            .is_none_or(|at| now.saturating_duration_since(at) >= QUIET);
        if quiet {
            self.episode = None;
            if idle {
                // Back to the known rate (its spacing kept), or not paced at all.
                if let Some(rate) = self.known {
                    self.set_pace(rate);
                    return;
                }
                self.mode = Mode::Open;
                self.last_send = None;
                return;
            }
        }
        let ceiling = self.episode.as_ref().and_then(|e| e.ceiling);
        let held = self.episode.as_ref().and_then(|e| e.held);
        let limited = self.episode.as_ref().is_some_and(|e| e.limit_cut.is_some());
        let gain = match ceiling {
            // A window's allowance, measured over a whole window, is the limit
            // itself for a client alone: past it each refusal earns its request
            // the `Retry-After` it carries (against HAProxy, about one every two
            // seconds, and the run's last requests a second late). The pace holds
            // just under it for `HELD_WINDOWS` windows, then probes as below:
            // clients sharing the limit each measured only their share.
            Some(c) if held.is_some_and(|until| now < until) && rate >= c * DECREASE => 0.0,
            // Cut by a limiter over its count: equal steps, far from the ceiling
            // too (see `LIMIT_DECREASE`).
            Some(_) if limited => SLOW_STEP / rate.max(MIN_RATE),
            Some(c) if rate >= c * NEAR_CEILING => {
                // Near the ceiling: probe, with steps that grow the longer no
                // refusal comes (as TCP CUBIC), so a ceiling measured too low
                // during a transient is soon left behind. A success comes every
                // 1/rate seconds: its share of the second's step is step/rate.
                let calm = self
                    .last_refusal
                    .max(held)
                    .map_or(0.0, |at| now.saturating_duration_since(at).as_secs_f64());
                (SLOW_STEP * (1.0 + calm * calm) / rate.max(MIN_RATE)).min(self.fast_gain())
            }
            _ => self.fast_gain(),
        };
        // A destination that reports no room left is not pushed faster.
        let gain = if grow { gain } else { 0.0 };
        self.set_pace(rate + gain);
    }

    /// A success whose response says the destination has no room left and not when it
    /// will (a token bucket at its capacity): the pace eases off as for a refusal, before
    /// the refusal comes, and the success is counted without growing the pace.
    pub(crate) fn no_room(&mut self, idle: bool, now: Instant) {
        self.refused(None, now);
        self.succeeded(idle, false, now);
    }

    /// Counts a refusal, fresh or not, for [`drain`](Self::drain).
    pub(crate) fn counted_refusal(&mut self, now: Instant) {
        self.refusals.add(now);
        self.streak = self.streak.saturating_add(1);
    }

    /// How much longer than the `asked` cool-down a limiter that counts its refusals too
    /// needs before the next request is served: `asked` times the refusals per success of
    /// about the last second (the window served its allowance in one `asked`; the
    /// refusals it counted take their share of another), at most [`MAX_DRAIN`] of it. A
    /// sliding window (HAProxy's stick tables, most sliding-window counters) still counts
    /// the burst it refused when the `Retry-After` it gave runs out, and a request sent
    /// then earns another full one: a burst partly refused makes the first request after
    /// its `Retry-After` a refusal too, and costs the second after it. A limiter
    /// that does not count them (a token bucket) loses this share of a cool-down, a small
    /// one when few of its answers were refusals.
    pub(crate) fn drain(&mut self, asked: Duration, now: Instant) -> Duration {
        let served = self.served.count(now);
        let refused = self.refusals.count(now);
        if served < 1.0 {
            // Nothing served lately: an outage, with no allowance to drain at.
            return Duration::ZERO;
        }
        asked.mul_f64((refused / served).min(MAX_DRAIN))
    }

    /// The destination refuses nearly everything and said to come back in `asked`; it is
    /// held until `until` (a cool-down): it served its allowance. What it served over
    /// `asked` is the pace to come back at — a window limiter's allowance per window,
    /// which refusals sent at a pace cut in quick blind steps would underestimate
    /// manyfold. What it delivers is measured from `until` on: time in which it was sent
    /// nothing says nothing of its capacity.
    pub(crate) fn cool_down(&mut self, until: Instant, asked: Duration, now: Instant) {
        if let Some(cooled) = &mut self.cooled {
            // Refused again before serving anything since the last cool-down: that one was
            // too short, and nothing new was learnt of the pace.
            cooled.until = until;
        } else {
            let pause = asked.max(super::meter::MIN_SPAN);
            self.cooled = Some(Cooled { until, pause });
            if let Some(episode) = &mut self.episode {
                // A new window's allowance replaces the last one's.
                episode.held = None;
            }
            self.measure_allowance(until, pause, now);
        }
        if let Some(episode) = &mut self.episode {
            episode.delivered = Meter::new(until);
        }
    }

    /// Paces at what the destination served over `pause` (its allowance per window), if
    /// that is more than the allowance known, and holds that pace for [`HELD_WINDOWS`]
    /// windows after the cool-down ending `until`.
    fn measure_allowance(&mut self, until: Instant, pause: Duration, now: Instant) {
        let Some(episode) = &mut self.episode else {
            return;
        };
        // An episode that began within about two windows counts its successes exactly
        // (a burst refused whole sends nothing more, and its first fresh refusal can come a
        // window later, when the meter has forgotten two thirds of the burst); over
        // longer, the meter's decay is the window's edge.
        let age = now.saturating_duration_since(episode.started);
        let allowance = if age <= pause.saturating_mul(2) {
            Some(episode.served / pause.max(age).as_secs_f64())
        } else {
            self.served.rate_over(now, pause)
        };
        let known = episode.ceiling.filter(|_| episode.held.is_some());
        if let Some(allowance) =
            allowance.filter(|&a| a >= MIN_RATE && known.is_none_or(|known| a > known))
        {
            episode.ceiling = Some(allowance);
            episode.held = Some(instant_after(until, pause.saturating_mul(HELD_WINDOWS)));
            self.set_pace(allowance * DECREASE);
        }
    }

    /// A fresh refusal; `window` is the slow-start window if the destination was in its
    /// slow start.
    pub(crate) fn refused(&mut self, window: Option<u32>, now: Instant) {
        self.opaque_limiter = false;
        if self.count_refusal(now) {
            self.cut(window, now);
        }
    }

    /// A fresh refusal by a rate limiter that reports no quota, which asked to wait
    /// `asked`. The second in a row once the pace knows a ceiling (the limiter is over
    /// its count): a cut to [`LIMIT_DECREASE`], at most once per `asked` (the limiter's
    /// window, as far as known). Otherwise as [`refused`](Self::refused).
    pub(crate) fn refused_by_limit(
        &mut self,
        window: Option<u32>,
        asked: Option<Duration>,
        now: Instant,
    ) {
        self.opaque_limiter = true;
        if !self.count_refusal(now) {
            return;
        }
        // Served since its last refusal, the limiter is a little over its rate (a token
        // bucket serves between its refusals); refusing everything, it is over its count.
        let over_count = self.streak >= 2;
        let (rate, episode) = match (self.mode, self.episode.as_mut()) {
            (Mode::Paced { rate }, Some(episode)) if over_count && episode.ceiling.is_some() => {
                (rate, episode)
            }
            _ => return self.cut(window, now),
        };
        let every = asked.filter(|a| !a.is_zero()).unwrap_or(LIMIT_WINDOW);
        if episode
            .limit_cut
            .is_some_and(|at| now.saturating_duration_since(at) < every)
        {
            // A window's count falls only as the window moves: a second cut within it
            // would answer the same overshoot again.
            return;
        }
        episode.limit_cut = Some(now);
        episode.ceiling = Some(rate);
        episode.held = None;
        self.set_pace((rate * LIMIT_DECREASE).max(MIN_RATE));
    }

    /// Counts a fresh refusal; false after a cool-down, whose first answers refused teach
    /// nothing of the pace.
    fn count_refusal(&mut self, now: Instant) -> bool {
        self.round = self.round.wrapping_add(1);
        let quiet = self
            .last_refusal
            .is_none_or(|at| now.saturating_duration_since(at) >= QUIET);
        self.last_refusal = Some(now);
        // The new pace counts from this refusal: the next request goes one spacing later.
        self.last_send = Some(self.last_send.map_or(now, |last| last.max(now)));
        if quiet || self.episode.is_none() {
            self.episode = Some(Episode::new(&mut self.served, now));
        }
        if self.cooled.is_some() {
            // The first answers after a cool-down, refused: it was too short (a limiter
            // that counts its refusals too is still over its limit). The pace did not
            // cause this; the next cool-down holds the requests.
            return false;
        }
        true
    }

    /// The pace after a fresh refusal, from what the destination delivered since the last.
    fn cut(&mut self, window: Option<u32>, now: Instant) {
        let current = match self.mode {
            Mode::Open => self.responses.rate(now),
            // The window over the round trip, but no more than what was served: a
            // burst's first round is served from the server's own burst allowance.
            Mode::Start => window
                .zip(self.srtt.filter(|rtt| !rtt.is_zero()))
                .map(|(window, rtt)| f64::from(window) / rtt.as_secs_f64())
                .map(|sent| {
                    let served = self.served.rough_rate(now);
                    served.map_or(sent, |served| sent.min(served))
                }),
            Mode::Paced { rate } => Some(rate),
            Mode::Probe { .. } => None,
        };
        let Some(episode) = self.episode.as_mut() else {
            return;
        };
        // What the server served since the previous refusal: when that is long enough
        // ago to be measured, the pace goes just under it, and by at most 40 % (the
        // meter also covers time spent ramping up after a refusal, or after an outage).
        let delivered = episode.delivered.rate(now);
        if delivered.is_some() {
            // Refusals in quick succession keep measuring from the same start.
            episode.delivered = Meter::new(now);
        }
        let rate = match (delivered, current) {
            // Refused, and nothing served for a while: probe.
            (Some(delivered), _) if delivered < MIN_RATE => None,
            (Some(delivered), Some(current)) => {
                Some((current.min(delivered) * DECREASE).max(current * BLIND_DECREASE))
            }
            (Some(delivered), None) => Some(delivered * DECREASE),
            (None, Some(current)) => Some(current * BLIND_DECREASE),
            (None, None) => None,
        };
        // Where trouble starts, as far as known: past it the rate grows only slowly.
        if delivered.is_some() {
            episode.held = None;
        }
        episode.ceiling = match (delivered, current) {
            (Some(delivered), Some(current)) => Some(current.min(delivered)),
            (Some(delivered), None) => Some(delivered),
            // A blind cut measures nothing: the rate grows back fast, and the next
            // refusal, measured, sets the ceiling.
            (None, _) => episode.ceiling,
        };
        match rate {
            Some(rate) if rate >= MIN_RATE => self.set_pace(rate),
            // Refused with (almost) nothing delivered, or nothing known: the
            // destination is as good as down, probe it.
            _ => {
                self.mode = Mode::Probe {
                    interval: self.backoff.on_failure(),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// A token bucket (GCRA) of `burst` at `rate` per second, as tower_governor's.
    struct Bucket {
        interval: Duration,
        tau: Duration,
        tat: Instant,
    }

    impl Bucket {
        fn new(rate: u32, burst: u32, now: Instant) -> Self {
            let interval = Duration::from_secs(1) / rate;
            Self {
                interval,
                tau: interval * (burst - 1),
                tat: now,
            }
        }

        fn admit(&mut self, now: Instant) -> bool {
            let tat = self.tat.max(now);
            if now + self.tau < tat {
                return false;
            }
            self.tat = tat + self.interval;
            true
        }
    }

    fn rate(seed: u64, slow_start: bool, now: Instant) -> Rate {
        let backoff = ResponsiveBackOff::builder()
            .with_seed(seed)
            .build()
            .expect("valid");
        Rate::new(backoff, slow_start, None, now)
    }

    /// A slow start whose first `served` requests succeed at once, then one is refused:
    /// the rate, and when.
    fn refused_burst(seed: u64, served: u32) -> (Rate, Instant) {
        let now = Instant::now() + MS;
        let mut rate = rate(seed, true, now);
        for _ in 0..served {
            rate.succeeded(false, true, now);
        }
        rate.refused(Some(served), now);
        (rate, now)
    }

    /// [`refused_burst`], then a cool-down of a second: the rate, when the cool-down
    /// started, and when it ends.
    fn cooled_burst(seed: u64, served: u32) -> (Rate, Instant, Instant) {
        let (mut rate, now) = refused_burst(seed, served);
        let until = now + Duration::from_secs(1);
        rate.cool_down(until, Duration::from_secs(1), now);
        (rate, now, until)
    }

    /// A window limiter (HAProxy's sliding second) serves a slow start's burst of 50 in
    /// 5 ms, refuses the rest, and says to come back in a second: the pace after the
    /// cool-down is what it served over that second (50 r/s), not a rate read over the
    /// burst's 5 ms, nor what was left after cuts at each refusal.
    #[test]
    fn a_cool_down_paces_at_what_was_served_over_its_length() {
        let start = Instant::now();
        let mut rate = rate(1, true, start);
        let mut now = start;
        for i in 1..=50u32 {
            now = start + MS + Duration::from_micros(100 * u64::from(i));
            rate.responded(now - MS, now);
            rate.succeeded(false, true, now);
        }
        // Refusals in quick succession, each of a request sent at the pace cut before.
        for _ in 0..6 {
            now += 10 * MS;
            rate.refused(Some(40), now);
        }
        let cut = rate.rate().unwrap();
        rate.cool_down(now + Duration::from_secs(1), Duration::from_secs(1), now);
        let paced = rate.rate().unwrap();
        assert!(
            (45.0..=50.0).contains(&paced),
            "paced at {paced} after the cool-down (at {cut} before it)"
        );
    }

    /// A sliding window that counts refusals (HAProxy's) served 50 and refused 10: it
    /// needs a fifth of its window more than the second it asked for. One that refused
    /// more than it served gets `MAX_DRAIN` of a window more at most, and a destination
    /// that served nothing (an outage) none.
    #[test]
    fn a_limiter_is_given_the_time_to_serve_the_refusals_it_counts() {
        let start = Instant::now();
        let second = Duration::from_secs(1);
        let mut rate = rate(3, true, start);
        let now = start + 5 * MS;
        assert_eq!(rate.drain(second, now), Duration::ZERO);
        for _ in 0..10 {
            rate.counted_refusal(now);
        }
        assert_eq!(rate.drain(second, now), Duration::ZERO, "nothing served");
        for _ in 0..50 {
            rate.succeeded(false, true, now);
        }
        let drain = rate.drain(second, now);
        assert!(
            (190 * MS..=210 * MS).contains(&drain),
            "{drain:?} for 10 refused of 60"
        );
        for _ in 0..100 {
            rate.counted_refusal(now);
        }
        assert_eq!(rate.drain(second, now), second.mul_f64(MAX_DRAIN));
    }

    /// Successes at the pace for `span`, from `now`: when the last came.
    fn served_at_pace(rate: &mut Rate, span: Duration, mut now: Instant) -> Instant {
        let end = now + span;
        while now < end {
            now += from_secs_f64(1.0 / rate.rate().unwrap());
            rate.succeeded(false, true, now);
        }
        now
    }

    /// A limiter that reports no quota and refuses twice in a row, nothing served between
    /// (over its count: it refuses everything), once a ceiling is known: the pace goes to
    /// 70 % of itself, not again within the window the limiter asked to wait, and grows
    /// back by equal steps, about 1 r/s per second. A refusal after a success (a token
    /// bucket a little over its rate) keeps the cut just under what was delivered.
    #[test]
    fn a_limiter_over_its_count_cuts_the_pace_once_a_window() {
        let second = Duration::from_secs(1);
        let (mut rate, _, until) = cooled_burst(5, 40);
        let mut now = served_at_pace(&mut rate, second, until);
        let refuse = |rate: &mut Rate, now: Instant| {
            rate.counted_refusal(now);
            rate.refused_by_limit(None, Some(second), now);
            rate.rate().unwrap()
        };
        let paced = rate.rate().unwrap();
        let gentle = refuse(&mut rate, now);
        assert!(
            (paced * 0.9..paced).contains(&gentle),
            "{paced} then {gentle}"
        );
        now += 20 * MS;
        let cut = refuse(&mut rate, now);
        assert!(
            (cut - gentle * LIMIT_DECREASE).abs() < 1e-9,
            "{gentle} then {cut}"
        );
        // Within the window: the same overshoot, no second cut.
        now += 500 * MS;
        assert_eq!(refuse(&mut rate, now), cut);
        let grow_from = now;
        now = served_at_pace(&mut rate, second, now);
        let grown = rate.rate().unwrap();
        assert!(
            (cut + 0.8..cut + 1.3).contains(&grown),
            "{cut} grew to {grown} in {:?}",
            now - grow_from
        );
        // Refused twice in a row a window after the last cut: cut again.
        refuse(&mut rate, now);
        now += 20 * MS;
        let again = refuse(&mut rate, now);
        assert!(again < grown * 0.75, "{grown} then {again}");
    }

    /// A probe's success after a limiter that reports no quota refused everything: its
    /// window moved on, and every client of a fleet probing it comes back about then. The
    /// pace starts at the probing pace and grows by equal steps. After another refusal
    /// (a server shedding load, down for a while) it starts a step above and grows fast.
    #[test]
    fn a_probe_passing_a_limiter_grows_back_by_equal_steps() {
        let second = Duration::from_secs(1);
        for by_limit in [true, false] {
            let now = Instant::now() + MS;
            let mut rate = rate(9, true, now);
            rate.counted_refusal(now);
            if by_limit {
                rate.refused_by_limit(Some(4), Some(second), now);
            } else {
                rate.refused(Some(4), now);
            }
            let Mode::Probe { interval } = rate.mode() else {
                panic!("refused with nothing served: {:?}", rate.mode());
            };
            let probing = 1.0 / interval.as_secs_f64();
            let back = now + interval;
            rate.succeeded(false, true, back);
            let first = rate.rate().unwrap();
            served_at_pace(&mut rate, second, back);
            let grown = rate.rate().unwrap();
            if by_limit {
                assert!((first - probing).abs() < 1e-9, "{probing} then {first}");
                assert!(
                    (probing + 0.8..probing + 1.3).contains(&grown),
                    "{first} grew to {grown}"
                );
            } else {
                assert!(
                    (first - probing - FAST_GAIN).abs() < 1e-9,
                    "{probing} then {first}"
                );
                assert!(grown > 3.0 * first, "{first} grew to {grown}");
            }
        }
    }

    /// A limiter answers its refusals before its backend answers what it let through, so
    /// a cool-down often starts with some of the burst's successes still to come: they
    /// count in the allowance it measured, and the pace rises with them.
    #[test]
    fn successes_that_come_during_a_cool_down_count_in_its_allowance() {
        let (mut rate, mut now, until) = cooled_burst(4, 40);
        let early = rate.rate().unwrap();
        assert!((38.0..=39.5).contains(&early), "{early}");
        now += MS;
        for _ in 0..10 {
            rate.succeeded(false, true, now);
        }
        let paced = rate.rate().unwrap();
        assert!((47.5..=49.0).contains(&paced), "{paced}");
        // Once the cool-down is over, a success measures nothing more.
        rate.succeeded(false, true, until + MS);
        assert!(rate.rate().unwrap() <= paced + 0.01);
    }

    /// A burst refused whole sends nothing more until its retries come back, a window
    /// later: the cool-down that starts then still counts the burst's successes, not
    /// what is left of them in the meter a second on (a third: 18 r/s for 50).
    #[test]
    fn a_cool_down_a_window_after_its_burst_counts_the_whole_burst() {
        let second = Duration::from_secs(1);
        let (mut rate, mut now) = refused_burst(6, 50);
        now += second + 10 * MS;
        rate.refused(None, now);
        rate.cool_down(now + second, second, now);
        let paced = rate.rate().unwrap();
        assert!((47.0..=49.0).contains(&paced), "{paced}");
    }

    /// A window's allowance is the limit itself for a client alone: the pace holds just
    /// under it for [`HELD_WINDOWS`] windows after the cool-down (probing past it earns
    /// refusals, and their `Retry-After`), and probes for more after that.
    #[test]
    fn the_pace_holds_under_a_windows_allowance_then_probes() {
        let (mut rate, _, until) = cooled_burst(5, 50);
        let paced = rate.rate().unwrap();
        // A success every spacing, from the cool-down's end to the end of the hold.
        let held = until + Duration::from_secs(1) * HELD_WINDOWS;
        let mut now = until;
        while now < held {
            now += rate.spacing().unwrap();
            rate.succeeded(false, true, now);
            if now < held {
                assert_eq!(rate.rate(), Some(paced), "at {:?}", now - until);
            }
        }
        for _ in 0..100 {
            now += rate.spacing().unwrap();
            rate.succeeded(false, true, now);
        }
        assert!(rate.rate().unwrap() > paced + 1.0, "{:?}", rate.rate());
    }

    /// A limiter that counts its refusals too is still over its limit when the cool-down
    /// it asked for ends: the first request after it is refused again. That says nothing
    /// of the pace, which stays until the destination serves again; then refusals cut it
    /// as before.
    #[test]
    fn a_refusal_right_after_a_cool_down_keeps_the_pace() {
        let start = Instant::now();
        let mut rate = rate(2, false, start);
        let mut now = start;
        for i in 1..=200u32 {
            now = start + 5 * MS * i;
            rate.responded(now, now);
            rate.succeeded(false, true, now);
        }
        rate.refused(None, now);
        let until = now + Duration::from_secs(1);
        rate.cool_down(until, Duration::from_secs(1), now);
        let paced = rate.rate().unwrap();
        // The cool-down ends; its first request is refused, with a new cool-down.
        now = until + MS;
        rate.refused(None, now);
        rate.cool_down(now + Duration::from_secs(1), Duration::from_secs(1), now);
        assert_eq!(rate.rate(), Some(paced));
        // Served again, then refused: the pace is cut.
        now += Duration::from_secs(1);
        for _ in 0..20 {
            now += 20 * MS;
            rate.responded(now, now);
            rate.succeeded(false, true, now);
        }
        let before = rate.rate().unwrap();
        rate.refused(None, now);
        assert!(
            rate.rate().unwrap() < before,
            "{:?} after {before}",
            rate.rate()
        );
    }

    /// Two clients whose paces differ fourfold share one limit of 50 r/s for 60 s: their
    /// paces meet (equal steps up, cuts in proportion to each pace), and the limit stays
    /// used. Over 20 seeds of the probing delays' jitter.
    #[test]
    fn clients_sharing_a_limit_converge_to_equal_shares() {
        for seed in 0..20 {
            converge(seed);
        }
    }

    fn converge(seed: u64) {
        let start = Instant::now();
        let mut bucket = Bucket::new(50, 10, start);
        let mut clients: Vec<Rate> = (0..2).map(|i| rate(seed * 2 + i, false, start)).collect();
        // Unequal starts: 40 and 10 r/s sent (and served) for a second, then one refusal
        // each puts both in the paced mode at 60 % of what they sent.
        let mut now = start;
        for ms in 1..=1000u32 {
            now = start + MS * ms;
            for (client, every) in clients.iter_mut().zip([25, 100]) {
                if ms % every == 0 {
                    client.responded(now, now);
                    client.succeeded(true, true, now);
                }
            }
        }
        for client in &mut clients {
            client.refused(None, now);
        }
        let first = clients
            .iter()
            .map(|c| c.rate().unwrap())
            .collect::<Vec<_>>();
        assert!(first[0] > 3.0 * first[1], "{first:?}");
        let end = now + Duration::from_secs(60);
        let (served, _) = share(
            &mut bucket,
            &mut clients,
            now,
            end,
            end - Duration::from_secs(10),
        );
        let (a, b) = (f64::from(served[0]), f64::from(served[1]));
        let jain = (a + b).powi(2) / (2.0 * (a * a + b * b));
        assert!(
            jain >= 0.95,
            "seed {seed}: served in the last 10 s: {served:?}, Jain {jain:.3}"
        );
        assert!(
            a + b >= 0.9 * 500.0,
            "seed {seed}: served in the last 10 s: {served:?}"
        );
    }

    /// What `clients` sent to `bucket` from `now` to `end`, each at its pace, one try per
    /// millisecond: the successes of each since `counted`, and the share of attempts
    /// refused.
    fn share(
        bucket: &mut Bucket,
        clients: &mut [Rate],
        mut now: Instant,
        end: Instant,
        counted: Instant,
    ) -> (Vec<u32>, f64) {
        let mut served = vec![0u32; clients.len()];
        let (mut attempts, mut refused) = (0u32, 0u32);
        while now < end {
            now += MS;
            for (i, client) in clients.iter_mut().enumerate() {
                let Some(slot) = client.next_slot(now) else {
                    panic!("client {i} is no longer paced");
                };
                if slot > now {
                    continue;
                }
                client.take_slot(slot, now);
                let round = client.round();
                client.responded(now, now);
                attempts += 1;
                if bucket.admit(now) {
                    client.succeeded(false, true, now);
                    if now >= counted {
                        served[i] += 1;
                    }
                } else {
                    refused += 1;
                    if round == client.round() {
                        client.refused(None, now);
                    }
                }
            }
        }
        (served, f64::from(refused) / f64::from(attempts.max(1)))
    }

    /// Eight clients of one token bucket (50 r/s, burst 10) whose first requests were all
    /// refused, probing it again, then paced (at 10 r/s each, 80 together): grown back by
    /// `BUCKET_GAIN` they are refused less than by `FAST_GAIN`, a server's return from an
    /// outage. Over 10 seeds of the probing
    /// delays' jitter.
    #[test]
    fn clients_of_a_token_bucket_grow_back_gently() {
        for seed in 0..10 {
            let refused = |reports_room: bool| {
                let start = Instant::now();
                let mut bucket = Bucket::new(50, 10, start);
                let mut clients: Vec<Rate> = (0..8)
                    .map(|i| {
                        let mut client = rate(seed * 8 + i, false, start);
                        if reports_room {
                            client.reports_room();
                        }
                        client.refused(None, start);
                        client
                    })
                    .collect();
                let end = start + Duration::from_secs(10);
                share(&mut bucket, &mut clients, start, end, start).1
            };
            let (gentle, fast) = (refused(true), refused(false));
            assert!(
                gentle < 0.8 * fast,
                "seed {seed}: {gentle:.3} of the attempts refused, {fast:.3} with FAST_GAIN"
            );
        }
    }
}
