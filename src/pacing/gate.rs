//! The state every clone of a pacing layer shares: the client's learned send rate, its
//! queue of waiting requests, and the cool-downs of its destinations.
//!
//! See the [module docs](super) for the rules; this file is the controller.

use super::PacingError;
use crate::backoff::ResponsiveBackOff;
use http::uri::Authority;
use http::{HeaderMap, Request, StatusCode};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::Waker;
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
    pub(crate) initial_window: u32,
    pub(crate) slow_down: StatusSet,
}

// The controller's constants. They shape the control loop rather than the policy, so they
// are not settings; each is justified where it is used.

/// Time constant of the rate meters: about the last second counts.
const TAU: f64 = 1.0;
/// A meter needs this much history (in seconds) before its rate means anything.
const MIN_SPAN: f64 = 0.1;
/// After a refusal with a measured delivery rate: pace just under it.
const DECREASE: f64 = 0.97;
/// After a refusal with no measured delivery rate yet: halve the pace.
const BLIND_DECREASE: f64 = 0.6;
/// Far below the known ceiling: each success adds this much to the rate (req/s), so the
/// rate grows e-fold every 1/8 s while it is used: about ×2 per 90 ms.
const FAST_GAIN: f64 = 8.0;
/// Below this rate (req/s) the client stops pacing and probes.
const MIN_RATE: f64 = 1.0;
/// Near the known ceiling: each success adds this fraction of a request per second, so
/// the rate grows by about 1 % per second — a slow probe for more capacity.
const SLOW_GAIN: f64 = 0.01;
/// "Near the ceiling" means above this fraction of it.
const NEAR_CEILING: f64 = 0.95;
/// Without a fresh refusal for this long the episode is over: the ceiling is forgotten
/// and, once no request waits, pacing stops.
const QUIET: Duration = Duration::from_secs(10);
/// A late wake-up (timers fire on whole milliseconds) may be caught up by sending up to
/// this much early afterwards; otherwise rounding to 1 ms would cut a 2.06 ms spacing to
/// 3 ms, a third of the rate.
const TOLERANCE: Duration = Duration::from_millis(5);
use super::PacingLayer;
const OPEN_WINDOW: u32 = PacingLayer::OPEN_WINDOW;
/// Weight of one response in a destination's refusal share.
const SHARE_WEIGHT: f64 = 1.0 / 8.0;
/// A destination's `Retry-After` becomes a cool-down once more than this share of its
/// recent (fresh) responses are refusals.
const COOL_SHARE: f64 = 0.5;
/// Destinations remembered before the idle ones are forgotten.
const MAX_DESTINATIONS: usize = 1024;

/// Events per second, weighted exponentially over about the last [`TAU`] seconds.
///
/// `count / span` where both decay by `e^(-dt/TAU)`: unbiased from the first instant on
/// (a meter 50 ms old that saw 5 events says 100/s).
#[derive(Debug, Clone, Copy)]
struct Meter {
    count: f64,
    span: f64,
    at: Instant,
}

impl Meter {
    fn new(at: Instant) -> Self {
        Self {
            count: 0.0,
            span: 0.0,
            at,
        }
    }

    fn advance(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        if dt > 0.0 {
            let keep = (-dt / TAU).exp();
            self.count *= keep;
            self.span = self.span * keep + TAU * (1.0 - keep);
            self.at = now;
        }
    }

    fn add(&mut self, now: Instant) {
        self.advance(now);
        self.count += 1.0;
    }

    /// The rate, once the meter has [`MIN_SPAN`] of history.
    fn rate(&mut self, now: Instant) -> Option<f64> {
        self.advance(now);
        (self.span >= MIN_SPAN).then(|| self.count / self.span)
    }

    /// The rate, however short the history (`None` only without any).
    fn rough_rate(&mut self, now: Instant) -> Option<f64> {
        self.advance(now);
        (self.span > 0.0).then(|| self.count / self.span)
    }
}

/// How the client sends.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    /// Slow start: at most `window` requests in flight; each success adds one.
    Start { window: u32 },
    /// Unlimited: nothing waits, requests take no lock on the way in.
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
    /// Successes since the previous measured refusal (refusals in quick succession,
    /// under [`MIN_SPAN`] apart, share one start): while the client is refused, the rate
    /// the server actually serves.
    delivered: Meter,
    /// The delivery rate measured at the last refusal: the capacity, as far as known.
    ceiling: Option<f64>,
}

#[derive(Debug)]
struct Waiter {
    id: u64,
    waker: Option<Waker>,
}

#[derive(Debug, Default)]
struct Dest {
    /// Share of recent fresh responses that were refusals.
    refusals: f64,
    cooling_until: Option<Instant>,
}

/// What the lock protects.
#[derive(Debug)]
struct Gate {
    mode: Mode,
    /// The theoretical instant of the last send (GCRA): the next may go one spacing later.
    last_send: Option<Instant>,
    queue: VecDeque<Waiter>,
    next_id: u64,
    in_flight: u32,
    srtt: Option<Duration>,
    responses: Meter,
    /// Successes, over about the last second.
    served: Meter,
    episode: Option<Episode>,
    last_refusal: Option<Instant>,
    dests: HashMap<Destination, Dest>,
}

/// Shared by a layer, its clones, and every service and response future they make.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) backoff: ResponsiveBackOff,
    pub(crate) settings: Settings,
    /// Fast path: `false` means the client is open (no pace, no queue, no live
    /// cool-down), so `admit` touches no lock. Written under the gate's lock.
    throttled: AtomicBool,
    /// Counts the decreases of the pace; a request remembers the round it was sent in,
    /// and only a refusal of a request sent in the current round is fresh.
    round: AtomicU64,
    gate: Mutex<Gate>,
}

/// The answer of [`Shared::admit`].
#[derive(Debug)]
pub(crate) enum Admit {
    /// Send now; `Some` when the request counts against the slow-start window.
    Go(Option<InFlight>),
    /// The destination cools down until then: come back to `admit` at that instant.
    Cool(Instant),
    /// Wait in the queue; poll with [`Shared::turn`].
    Queue(Ticket),
    Fail(PacingError),
}

/// The answer of [`Shared::turn`].
#[derive(Debug)]
pub(crate) enum Turn {
    Go(Option<InFlight>),
    /// First in line: the slot opens then (re-asked earlier if the pace changes).
    At(Instant),
    /// Not first in line, or the window is full: woken when that changes.
    Wait,
}

/// A place in the queue; leaving it (drop) wakes the next in line.
#[derive(Debug)]
pub(crate) struct Ticket {
    shared: Arc<Shared>,
    id: u64,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.shared.leave(self.id);
    }
}

/// A request counted against the slow-start window until it ends (drop).
#[derive(Debug)]
pub(crate) struct InFlight {
    shared: Arc<Shared>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut gate = self.shared.lock();
        gate.in_flight = gate.in_flight.saturating_sub(1);
        if matches!(gate.mode, Mode::Start { .. }) {
            wake_head(&mut gate);
        }
    }
}

/// `at + d`, saturating at about 30 years from `at` (as tokio does for far deadlines).
pub(crate) fn later(at: Instant, d: Duration) -> Instant {
    const FAR: Duration = Duration::from_secs(86_400 * 365 * 30);
    at.checked_add(d)
        .or_else(|| at.checked_add(FAR))
        .unwrap_or(at)
}

/// `secs` as a duration, saturating (negative or NaN: zero; too large: `Duration::MAX`).
fn secs_f64(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs).unwrap_or(if secs > 0.0 {
        Duration::MAX
    } else {
        Duration::ZERO
    })
}

fn wake_head(gate: &mut Gate) {
    if let Some(waker) = gate.queue.front_mut().and_then(|w| w.waker.take()) {
        waker.wake();
    }
}

impl Gate {
    /// The spacing between sends, if the client is paced.
    fn spacing(&self) -> Option<Duration> {
        match self.mode {
            Mode::Paced { rate } => Some(secs_f64(1.0 / rate)),
            Mode::Probe { interval } => Some(interval),
            Mode::Start { .. } | Mode::Open => None,
        }
    }

    /// When the next paced send may go.
    fn next_slot(&self, spacing: Duration, now: Instant) -> Instant {
        self.last_send.map_or(now, |last| later(last, spacing))
    }

    /// Takes the slot opening at `next` (at or before `now`).
    fn take_slot(&mut self, next: Instant, now: Instant) {
        let floor = now.checked_sub(TOLERANCE).unwrap_or(now);
        self.last_send = Some(next.max(floor));
    }

    /// The live cool-down of `to`, forgetting an expired one.
    fn cooling(&mut self, to: &Destination, now: Instant) -> Option<Instant> {
        let dest = self.dests.get_mut(to)?;
        match dest.cooling_until {
            Some(until) if until > now => Some(until),
            Some(_) => {
                dest.cooling_until = None;
                None
            }
            None => None,
        }
    }

    /// Whether nothing can make a request wait: the fast path may skip the lock.
    fn is_open(&self, now: Instant) -> bool {
        self.mode == Mode::Open
            && self.queue.is_empty()
            && self
                .dests
                .values()
                .all(|d| d.cooling_until.is_none_or(|until| until <= now))
    }
}

impl Shared {
    pub(crate) fn new(backoff: ResponsiveBackOff, settings: Settings) -> Self {
        let now = Instant::now();
        let mode = if settings.initial_window == 0 {
            Mode::Open
        } else {
            Mode::Start {
                window: settings.initial_window,
            }
        };
        Self {
            backoff,
            settings,
            throttled: AtomicBool::new(mode != Mode::Open),
            round: AtomicU64::new(0),
            gate: Mutex::new(Gate {
                mode,
                last_send: None,
                queue: VecDeque::new(),
                next_id: 0,
                in_flight: 0,
                srtt: None,
                responses: Meter::new(now),
                served: Meter::new(now),
                episode: None,
                last_refusal: None,
                dests: HashMap::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Gate> {
        // Every update leaves the gate consistent: recover from poisoning, don't panic.
        self.gate.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The end of the wait a request arriving now may accept: `max_wait` from now, or
    /// its [`PacingDeadline`] if sooner.
    ///
    /// [`PacingDeadline`]: super::PacingDeadline
    pub(crate) fn wait_end(&self, deadline: Option<Instant>) -> Instant {
        let end = later(Instant::now(), self.settings.max_wait);
        deadline.map_or(end, |deadline| deadline.min(end))
    }

    /// Decides what a new request to `to`, which may wait until `end`, does.
    pub(crate) fn admit(self: &Arc<Self>, to: &Destination, end: Instant) -> Admit {
        if !self.throttled.load(Ordering::Acquire) {
            return Admit::Go(None);
        }
        let now = Instant::now();
        let budget = end.saturating_duration_since(now);
        let mut gate = self.lock();
        if let Some(until) = gate.cooling(to, now) {
            let wait = until - now;
            if wait > budget {
                tracing::debug!(
                    ?to,
                    ?wait,
                    ?budget,
                    "pacing: destination cools down too long"
                );
                return Admit::Fail(PacingError::WouldExceedBudget { wait, budget });
            }
            return Admit::Cool(until);
        }
        let go_now = gate.queue.is_empty();
        match gate.mode {
            Mode::Open => {
                if gate.is_open(now) {
                    self.throttled.store(false, Ordering::Release);
                }
                if go_now {
                    return Admit::Go(None);
                }
            }
            Mode::Start { window } => {
                // No rate is known yet, so no wait can be estimated: nothing fails fast.
                if go_now && gate.in_flight < window {
                    gate.in_flight += 1;
                    return Admit::Go(Some(InFlight {
                        shared: Arc::clone(self),
                    }));
                }
            }
            Mode::Paced { .. } | Mode::Probe { .. } => {
                let spacing = gate.spacing().expect("paced");
                let next = gate.next_slot(spacing, now);
                // The queue drains at the rate, or at the ceiling the rate is growing
                // back to. With no ceiling known (probing, or ramping up after an
                // outage) only the next slot is certain: the rate may grow manyfold
                // before this request's turn.
                let ceiling = gate.episode.as_ref().and_then(|e| e.ceiling);
                let drain = match (gate.mode, ceiling) {
                    (Mode::Paced { rate }, Some(ceiling)) => Some(rate.max(ceiling)),
                    _ => None,
                };
                let queued = drain.map_or(Duration::ZERO, |rate| {
                    secs_f64(gate.queue.len() as f64 / rate)
                });
                let wait = next.saturating_duration_since(now).saturating_add(queued);
                if wait > budget {
                    tracing::debug!(?to, ?wait, ?budget, "pacing: request would wait too long");
                    return Admit::Fail(PacingError::WouldExceedBudget { wait, budget });
                }
                if go_now && next <= now {
                    gate.take_slot(next, now);
                    return Admit::Go(None);
                }
            }
        }
        let id = gate.next_id;
        gate.next_id = gate.next_id.wrapping_add(1);
        gate.queue.push_back(Waiter { id, waker: None });
        tracing::trace!(?to, "pacing: request waits");
        Admit::Queue(Ticket {
            shared: Arc::clone(self),
            id,
        })
    }

    /// Whether the request holding `ticket` may go now; otherwise registers `waker`.
    pub(crate) fn turn(self: &Arc<Self>, ticket: &Ticket, waker: &Waker) -> Turn {
        let now = Instant::now();
        let mut gate = self.lock();
        let first = gate.queue.front().map(|w| w.id);
        if first != Some(ticket.id) {
            if let Some(w) = gate.queue.iter_mut().find(|w| w.id == ticket.id) {
                w.waker = Some(waker.clone());
            }
            return Turn::Wait;
        }
        let go = match gate.mode {
            Mode::Open => Some(None),
            Mode::Start { window } => (gate.in_flight < window).then(|| {
                gate.in_flight += 1;
                Some(InFlight {
                    shared: Arc::clone(self),
                })
            }),
            Mode::Paced { .. } | Mode::Probe { .. } => {
                let spacing = gate.spacing().expect("paced");
                let next = gate.next_slot(spacing, now);
                if next > now {
                    gate.queue.front_mut().expect("first").waker = Some(waker.clone());
                    return Turn::At(next);
                }
                gate.take_slot(next, now);
                Some(None)
            }
        };
        match go {
            Some(in_flight) => {
                gate.queue.pop_front();
                wake_head(&mut gate);
                Turn::Go(in_flight)
            }
            None => {
                gate.queue.front_mut().expect("first").waker = Some(waker.clone());
                Turn::Wait
            }
        }
    }

    /// How long the request holding `ticket` would still wait, at the current pace.
    pub(crate) fn estimate(&self, ticket: &Ticket) -> Duration {
        let now = Instant::now();
        let gate = self.lock();
        let Some(spacing) = gate.spacing() else {
            return Duration::ZERO;
        };
        let ahead = gate
            .queue
            .iter()
            .position(|w| w.id == ticket.id)
            .unwrap_or(0);
        let ahead = u32::try_from(ahead).unwrap_or(u32::MAX);
        gate.next_slot(spacing, now)
            .saturating_duration_since(now)
            .saturating_add(spacing.saturating_mul(ahead))
    }

    fn leave(&self, id: u64) {
        let mut gate = self.lock();
        if let Some(i) = gate.queue.iter().position(|w| w.id == id) {
            gate.queue.remove(i);
            if i == 0 {
                wake_head(&mut gate);
            }
        }
    }

    /// The current pacing round, to pass back to [`record`](Self::record) with the
    /// response of a request sent now.
    pub(crate) fn round(&self) -> u64 {
        self.round.load(Ordering::Acquire)
    }

    /// Learns from the response of `to` to a request sent at `sent` during `round`.
    pub(crate) fn record(
        &self,
        to: &Destination,
        round: u64,
        sent: Instant,
        status: StatusCode,
        headers: &HeaderMap,
    ) {
        let now = Instant::now();
        let refused = self.settings.slow_down.contains(status);
        let fresh = !refused || self.round.load(Ordering::Acquire) == round;
        let mut gate = self.lock();
        let rtt = now.saturating_duration_since(sent);
        gate.srtt = Some(gate.srtt.map_or(rtt, |s| (s * 7 + rtt) / 8));
        gate.responses.add(now);
        if !fresh {
            // The refusal of a request sent at the old pace: the pace already went down
            // for it (TCP, likewise, backs off once per round trip).
            return;
        }
        if gate.dests.len() >= MAX_DESTINATIONS && !gate.dests.contains_key(to) {
            gate.dests
                .retain(|_, d| d.cooling_until.is_some_and(|until| until > now));
        }
        let x = if refused { 1.0 } else { 0.0 };
        match gate.dests.get_mut(to) {
            Some(dest) => dest.refusals += (x - dest.refusals) * SHARE_WEIGHT,
            // A destination's first answer is all it has said so far.
            None => {
                gate.dests.insert(
                    to.clone(),
                    Dest {
                        refusals: x,
                        cooling_until: None,
                    },
                );
            }
        }
        let share = gate.dests.get(to).map_or(x, |d| d.refusals);
        if refused {
            self.refused(&mut gate, now);
            self.cool_down(&mut gate, to, share, status, headers, now);
            self.throttled.store(true, Ordering::Release);
        } else {
            self.succeeded(&mut gate, now);
        }
    }

    fn succeeded(&self, gate: &mut Gate, now: Instant) {
        if !self.backoff.current().is_zero() {
            self.backoff.on_success();
        }
        gate.served.add(now);
        if let Some(episode) = &mut gate.episode {
            episode.delivered.add(now);
        }
        match gate.mode {
            Mode::Open => return,
            Mode::Start { window } => {
                let window = window.saturating_add(1);
                gate.mode = if window >= OPEN_WINDOW {
                    Mode::Open
                } else {
                    Mode::Start { window }
                };
            }
            Mode::Probe { interval } => {
                // The destination is back: start from the probing pace, with a fresh
                // episode (what was measured while it refused everything is no capacity).
                gate.mode = Mode::Paced {
                    rate: 1.0 / interval.as_secs_f64().max(1e-3) + FAST_GAIN,
                };
                gate.episode = Some(Episode {
                    delivered: Meter::new(now),
                    ceiling: None,
                });
            }
            Mode::Paced { rate } => {
                let quiet = gate
                    .last_refusal
                    .is_none_or(|at| now.saturating_duration_since(at) >= QUIET);
                if quiet {
                    gate.episode = None;
                    if gate.queue.is_empty() {
                        gate.mode = Mode::Open;
                        gate.last_send = None;
                        tracing::debug!("pacing: client open again");
                    }
                }
                let ceiling = gate.episode.as_ref().and_then(|e| e.ceiling);
                let gain = match ceiling {
                    Some(c) if rate >= c * NEAR_CEILING => {
                        // Near the ceiling: probe, with steps that grow the longer no
                        // refusal comes (as TCP CUBIC), so a ceiling measured too low
                        // during a transient is soon left behind.
                        let calm = gate
                            .last_refusal
                            .map_or(0.0, |at| now.saturating_duration_since(at).as_secs_f64());
                        (SLOW_GAIN * (1.0 + calm * calm)).min(FAST_GAIN)
                    }
                    _ => FAST_GAIN,
                };
                if let Mode::Paced { rate } = &mut gate.mode {
                    *rate += gain;
                }
            }
        }
        if gate.is_open(now) {
            self.throttled.store(false, Ordering::Release);
        }
        // The head may go sooner at the new pace (or the window has room).
        wake_head(gate);
    }

    fn refused(&self, gate: &mut Gate, now: Instant) {
        self.round.fetch_add(1, Ordering::AcqRel);
        let quiet = gate
            .last_refusal
            .is_none_or(|at| now.saturating_duration_since(at) >= QUIET);
        gate.last_refusal = Some(now);
        // The new pace counts from this refusal: the next request goes one spacing later.
        gate.last_send = Some(gate.last_send.map_or(now, |last| last.max(now)));
        if quiet || gate.episode.is_none() {
            gate.episode = Some(Episode {
                delivered: Meter::new(now),
                ceiling: None,
            });
        }
        let current = match gate.mode {
            Mode::Open => gate.responses.rate(now),
            // The window over the round trip, but no more than what was served: a
            // burst's first round is served from the server's own burst allowance.
            Mode::Start { window } => gate
                .srtt
                .filter(|rtt| !rtt.is_zero())
                .map(|rtt| f64::from(window) / rtt.as_secs_f64())
                .map(|sent| {
                    let served = gate.served.rough_rate(now);
                    served.map_or(sent, |served| sent.min(served))
                }),
            Mode::Paced { rate } => Some(rate),
            Mode::Probe { .. } => None,
        };
        let episode = gate.episode.as_mut().expect("set above");
        // What the server served since the previous refusal: when that is long enough
        // ago to be measured, the pace goes just under it, and by at most half (the
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
        episode.ceiling = match (delivered, current) {
            (Some(delivered), Some(current)) => Some(current.min(delivered)),
            (Some(delivered), None) => Some(delivered),
            // A blind cut measures nothing: the rate grows back fast, and the next
            // refusal, measured, sets the ceiling.
            (None, _) => episode.ceiling,
        };
        gate.mode = match rate {
            Some(rate) if rate >= MIN_RATE => Mode::Paced { rate },
            // Refused with (almost) nothing delivered, or nothing known: the
            // destination is as good as down, probe it.
            _ => Mode::Probe {
                interval: self.backoff.on_failure(),
            },
        };
        tracing::debug!(mode = ?gate.mode, "pacing: client slows down");
        // The first in line re-reads the pace (it may wait on a full slow-start window).
        wake_head(gate);
    }

    fn cool_down(
        &self,
        gate: &mut Gate,
        to: &Destination,
        share: f64,
        status: StatusCode,
        headers: &HeaderMap,
        now: Instant,
    ) {
        if self.settings.max_cooldown.is_zero() || share <= COOL_SHARE {
            return;
        }
        let Some(cooldown) = crate::retry_after::from_headers(headers, SystemTime::now())
            .map(|asked| asked.min(self.settings.max_cooldown))
            .filter(|d| !d.is_zero())
        else {
            return;
        };
        let until = later(now, cooldown);
        let dest = gate.dests.entry(to.clone()).or_default();
        dest.cooling_until = Some(dest.cooling_until.map_or(until, |at| at.max(until)));
        tracing::debug!(?to, ?cooldown, %status, "pacing: destination cools down");
    }

    /// The current spacing between sends: zero while the client is not paced.
    pub(crate) fn current_delay(&self) -> Duration {
        self.lock().spacing().unwrap_or_default()
    }

    /// The current send rate, in requests per second, while the client is paced.
    pub(crate) fn current_rate(&self) -> Option<f64> {
        match self.lock().mode {
            Mode::Paced { rate } => Some(rate),
            Mode::Probe { interval } => Some(1.0 / interval.as_secs_f64().max(1e-9)),
            Mode::Start { .. } | Mode::Open => None,
        }
    }

    /// How long requests to `to` are still held by a cool-down.
    pub(crate) fn cooldown(&self, to: &Destination) -> Option<Duration> {
        let now = Instant::now();
        let mut gate = self.lock();
        gate.cooling(to, now).map(|until| until - now)
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

    #[tokio::test(start_paused = true)]
    async fn a_meter_measures_the_recent_rate() {
        let start = Instant::now();
        let mut meter = Meter::new(start);
        assert_eq!(meter.rate(start), None);
        for i in 1..=50 {
            meter.add(start + Duration::from_millis(10 * i));
        }
        let at = start + Duration::from_millis(500);
        let rate = meter.rate(at).unwrap();
        assert!((95.0..=105.0).contains(&rate), "{rate}");
        // A second of silence: the rate decays, it does not stay at 100.
        let rate = meter.rate(at + Duration::from_secs(1)).unwrap();
        assert!(rate < 40.0, "{rate}");
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
