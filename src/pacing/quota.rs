//! What a destination says of its quota before it refuses: `RateLimit` and its kin.
//!
//! A rate limiter that reports the requests it still grants (`r=0`, `X-RateLimit-Remaining:
//! 0`) has said that the next one will be refused. Sending it anyway costs a 429 and, with
//! limiters that count refusals, more waiting. So a destination whose quota is spent holds
//! its requests until the quota resets, and one that reports no room left is not pushed
//! faster.
//!
//! A quota is often shared by many clients. Each spends the room it hears of evenly until
//! the reset (over a second at most, see [`SPREAD`]) rather than at once, and counts what
//! the others are seen to take meanwhile (the room shrinking faster than its own sends).
//! Without the spread, the first client back after a reset takes the whole window, and
//! the others get nothing.
//!
//! A sliding window has no reset, yet may report its length as one (`t=1`). Its room
//! comes back before that "reset", and its count does not start over at it; its clients
//! count (a share of) their own sends leaving the window as room (see
//! [`Counting::Refills`]), where spreading the room alone settled a client alone at half
//! the limit.

use crate::retry_after::QuotaLeft;
use crate::time::instant_after;
use std::collections::VecDeque;
use std::time::Duration;
use tokio::time::Instant;

/// The room a destination reports is spent evenly over at most this long (or until its
/// reset, if sooner). A reset is reported in whole seconds, so the clients that share a
/// quota come back within about a second of each other: spread over that second, each of
/// them has a share, where the first one back would otherwise take the whole window in a
/// few milliseconds (and, hearing of the next reset first, the next window too). Over a
/// second, a long window's large quota (thousands an hour) is hardly slowed.
const SPREAD: Duration = Duration::from_secs(1);

/// One destination's quota, as its latest response reported it, less what was sent since.
#[derive(Debug, Default)]
pub(crate) struct Quota {
    /// Requests sent to the destination so far; a send's number is its place in that count.
    sent: u64,
    /// What the latest report allows.
    known: Option<Known>,
    /// The last send: the next is spread from it.
    last_send: Option<Instant>,
    /// What the destination's count was seen to do about its reported reset.
    counting: Counting,
    /// This client's sends over the last [`SPREAD`], once the destination reported a
    /// quota: those a sliding window lets go of while the next are spread.
    recent: Recent,
    /// A count whose reset passed: the first report of a send made since tells whether
    /// it started over.
    passed: Option<Passed>,
    /// The most room any report said was left: about the limit.
    peak: u64,
}

/// The kind of count a destination keeps, as far as its reports told.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Counting {
    /// Not told yet.
    #[default]
    Unknown,
    /// The count started over at its reset: a fixed window's.
    Restarts,
    /// The room came back before the reset, or the count did not start over at it: a
    /// sliding window (or a bucket), whose reported reset is only its length. Its room is
    /// not all there is until then: the sends it counted leave it meanwhile. Once seen,
    /// it stays so, whatever a later reset seems to show.
    Refills,
}

/// A count whose reported reset passed, as [`Quota::spent_until`] found it.
#[derive(Debug, Clone, Copy)]
struct Passed {
    /// What its latest report said was left.
    reported: u64,
    /// The number of the first send made since.
    from: u64,
    /// When that send went, once it has.
    probe: Option<Instant>,
}

/// The instants of the latest sends, at most [`Recent::CAP`] of them (more would only
/// be counted where the spacing is not enforced anyway, see [`MIN_SPACING`]).
#[derive(Debug, Default)]
struct Recent(VecDeque<Instant>);

impl Recent {
    const CAP: usize = 512;

    fn push(&mut self, at: Instant) {
        if self.0.len() == Self::CAP {
            self.0.pop_front();
        }
        self.0.push_back(at);
    }

    /// How many were sent after `from`, forgetting those before it.
    fn since(&mut self, from: Instant) -> usize {
        while self.0.front().is_some_and(|&at| at <= from) {
            self.0.pop_front();
        }
        self.0.len()
    }
}

#[derive(Debug)]
struct Known {
    /// Sends the destination still grants (negative: more were sent than it granted): what
    /// the latest report said was left, less the sends made after the one it reported
    /// on, and at most [`ceiling`](Self::ceiling).
    credit: i64,
    /// The least any report of this count said was left, less the sends made since it
    /// came: the room is no larger.
    ceiling: i64,
    /// When the count resets, if the destination said.
    reset: Option<Instant>,
    /// The number of the send whose response reported it: an older report is stale.
    basis: u64,
    /// The remaining count it reported.
    reported: u64,
    /// When it was reported.
    at: Instant,
    /// An earlier report of the same count (before its reset): what the others sharing
    /// the quota take is measured from it.
    base: Base,
    /// What the others sharing the quota take, in requests per second, once measured.
    others: Option<f64>,
    /// Of a window that [`refills`](Quota::refills): this client's sends that leave its
    /// count while the room is spread, which the room may be spent on again.
    returning: i64,
}

/// A report the others' use is measured from.
#[derive(Debug, Clone, Copy)]
struct Base {
    at: Instant,
    credit: i64,
    /// This client's sends counted by then.
    sent: u64,
}

/// What a report keeps of its count: see [`Quota::carry_over`].
#[derive(Debug, Clone, Copy)]
struct Carried {
    /// The room is no larger (see [`Known::ceiling`]).
    ceiling: i64,
    /// When the count resets.
    reset: Option<Instant>,
    /// The report the others' pace is measured from.
    base: Base,
    /// The others' pace, in sends a second.
    others: Option<f64>,
}

/// What the others take is measured over stretches of at least this long, so that the
/// estimate follows their pace as it changes through a window.
const MEASURE: Duration = Duration::from_millis(50);

/// The share of the others' measured pace assumed to go on until the next report. The
/// whole of it holds a client back too early: the others spread their room too, and stop
/// when they see it spent, so their recent pace (high just after a reset, when every
/// client comes back) overstates what they take next. Counting none of it brings
/// refusals back; a tenth keeps them rare without leaving the quota unused (see
/// `docs/BENCHMARKS.md`).
const OTHERS_WEIGHT: f64 = 0.1;

/// How far back a late send may count from (see [`Quota::sent`]).
const CATCH_UP: Duration = Duration::from_millis(5);

/// A spacing below this (over 500 sends a second) is not enforced: timers fire on whole
/// milliseconds, so enforcing it would cap the destination at a send per tick.
const MIN_SPACING: Duration = Duration::from_millis(2);

/// The share of a count a client's own sends make, at least, for it to be taken as alone
/// on it (see [`Counting::Refills`]). Half would let a client that holds most of a
/// shared sliding window take itself for alone, and keep that larger share.
const ALONE: f64 = 0.9;

/// The share of its own sends leaving a sliding window that a client alone spends again.
/// All of them would hold it exactly at the limit, which a window's estimate crosses now
/// and then: a refusal, and a second's cool-down. A little under keeps a margin.
const RETURNING: f64 = 0.97;

/// The share a client among others spends again. Every client also spreads the whole
/// room reported, so each settles where its pace is the room over (1 − this share): the
/// same pace for all, whatever they sent before (a share proportional to each one's
/// sends kept every client at the share it happened to hold). Smaller, more room is
/// left unused; larger, the room left is too little to absorb the clients' slips. One
/// half balances the two.
const RETURNING_SHARED: f64 = 0.5;

/// The least and the most a wait for the count after a reset lasts (see
/// [`Quota::awaits_count`]).
const COUNT_PATIENCE: (Duration, Duration) = (Duration::from_millis(10), Duration::from_secs(1));

/// A token bucket (room reported without a reset) that reports fewer tokens than this
/// left is at its rate: it refills as fast as it is spent, and a client that sends faster
/// only brings the refusal sooner. Its pace holds there (see [`Quota::has_room_to_grow`]).
/// At one, the pace holds only when the next request is refused already; at three, it
/// holds so often that equal steps no longer even out the shares of a fleet.
const BUCKET_HEADROOM: u64 = 2;

/// A report without a reset speaks for this long: a destination that stops reporting (an
/// endpoint without the headers, an error page from a proxy) is not held to an old word.
const FRESH: Duration = Duration::from_secs(1);

impl Known {
    /// The credit at `now`, less what the others sharing the quota are estimated to have
    /// taken since the report (extrapolated over [`SPREAD`] at most: an estimate, not a
    /// report, and one that no report corrects while nothing is sent).
    fn credit_at(&self, now: Instant) -> i64 {
        let credit = self.credit.saturating_add(self.returning);
        let Some(others) = self.others else {
            return credit;
        };
        let since = now.saturating_duration_since(self.at).min(SPREAD);
        let used = OTHERS_WEIGHT * others * since.as_secs_f64();
        credit.saturating_sub(used as i64)
    }

    /// Whether the report still speaks at `now`: until its reset, or for [`FRESH`] if it
    /// gave none.
    fn speaks(&self, now: Instant) -> bool {
        match self.reset {
            Some(reset) => reset > now,
            None => now.saturating_duration_since(self.at) < FRESH,
        }
    }
}

impl Quota {
    /// Counts a send at `now`, returning its number (for [`learn`](Self::learn)).
    pub(crate) fn sent(&mut self, now: Instant) -> u64 {
        let number = self.sent;
        self.sent = self.sent.saturating_add(1);
        // A send that goes late (timers fire on whole milliseconds, a waiter takes a moment
        // to poll) counts from its slot, up to `CATCH_UP` back, so that the slips do not
        // add up over a window and leave its room unspent at the reset.
        let slot = self.slot(now).filter(|&slot| slot <= now);
        let floor = now.checked_sub(CATCH_UP).unwrap_or(now);
        self.last_send = Some(slot.map_or(now, |slot| slot.max(floor)));
        if let Some(known) = &mut self.known {
            known.credit = known.credit.saturating_sub(1);
            known.ceiling = known.ceiling.saturating_sub(1);
        }
        if let Some(passed) = &mut self.passed
            && passed.from == number
        {
            passed.probe = Some(now);
        }
        if self.known.is_some() || self.passed.is_some() {
            self.recent.push(now);
        }
        number
    }

    /// When the next send may go by the spread (see [`SPREAD`]), however near.
    fn slot(&self, now: Instant) -> Option<Instant> {
        let known = self.known.as_ref()?;
        let reset = known.reset.filter(|&reset| reset > now)?;
        let last = self.last_send?;
        let credit = u32::try_from(known.credit_at(now))
            .ok()
            .filter(|&c| c > 0)?;
        let spacing = reset.saturating_duration_since(last).min(SPREAD) / credit;
        (spacing >= MIN_SPACING).then(|| instant_after(last, spacing))
    }

    /// When the next send may go: spreading the reported room until the reset (see
    /// [`SPREAD`]), or after a reset, once the count is known (see
    /// [`awaits_count`](Self::awaits_count), which the destination's `round_trip` bounds);
    /// `None`: now.
    pub(crate) fn ready_at(&self, round_trip: Duration, now: Instant) -> Option<Instant> {
        let slot = self.slot(now).filter(|&at| at > now);
        slot.max(self.awaits_count(round_trip, now))
    }

    /// Learns what the response to send `number` reports, capping a reset at `max_reset`.
    ///
    /// The sends made after send `number` spend the reported room too: the count the
    /// response reports may not include them yet. Those made before it are taken as
    /// counted: a burst's reports, each less the requests still in flight, said 20 fewer
    /// than was left (a 50-a-window quota, 20 sent at once, most of them counted but not
    /// yet answered), and a fifth of each window went unspent. The `others` requests in
    /// flight bound how far apart in the count two reports may come.
    pub(crate) fn learn(
        &mut self,
        number: u64,
        left: QuotaLeft,
        others: u32,
        max_reset: Duration,
        now: Instant,
    ) {
        if self
            .known
            .as_ref()
            .is_some_and(|known| number < known.basis)
        {
            return;
        }
        let length = left.reset.map(|reset| reset.min(max_reset));
        // This client's sends over the stretch the report speaks for (a second at most).
        let own = length.map_or(0, |length| {
            let from = now.checked_sub(length.min(SPREAD)).unwrap_or(now);
            u64::try_from(self.recent.since(from)).unwrap_or(u64::MAX)
        });
        self.peak = self.peak.max(left.remaining);
        // Whether this client's own sends make the count (the peak room less the room
        // now), about. Where others share it, the sends that leave a sliding window are
        // theirs as much as this client's.
        let counted = self.peak.saturating_sub(left.remaining);
        let alone = own as f64 >= ALONE * counted as f64;
        self.first_since_reset(number, left.remaining, others, (own, counted, alone));
        let remaining = i64::try_from(left.remaining).unwrap_or(i64::MAX);
        let after = self.sent.saturating_sub(number.saturating_add(1));
        let credit = remaining.saturating_sub(i64::try_from(after).unwrap_or(i64::MAX));
        let fresh = Carried {
            ceiling: remaining,
            reset: length.map(|length| instant_after(now, length)),
            base: Base {
                at: now,
                credit,
                sent: self.sent,
            },
            others: None,
        };
        let carried = self.carry_over(fresh, credit, left.remaining, others, now);
        self.known = Some(Known {
            credit: credit.min(carried.ceiling),
            ceiling: carried.ceiling,
            reset: carried.reset,
            basis: number,
            reported: left.remaining,
            at: now,
            base: carried.base,
            others: carried.others,
            returning: self.returning(own, alone),
        });
    }

    /// Learns from the first report since a reset passed how the destination counts.
    /// `sends`: this client's sends over the stretch the report speaks for, the count
    /// (the peak room less the room now), and whether this client's sends make it.
    ///
    /// A count that is still this client's sends of the last stretch, about all of
    /// them, and most of the window, is a sliding window's, whose `t` is only its length
    /// (against HAProxy sending `RateLimit`, a client that took the reset at its word
    /// sent its queue at once into a full window). A fixed window started over: its
    /// count holds the sends since, fewer (or the others', when they came back first: as
    /// few as this client's of the last second, now and then, but then not most of the
    /// window), and its room came back.
    fn first_since_reset(
        &mut self,
        number: u64,
        reported: u64,
        others: u32,
        (own, counted, alone): (u64, u64, bool),
    ) {
        let Some(passed) = self.passed.filter(|passed| number >= passed.from) else {
            return;
        };
        let slack = u64::from(others).saturating_add(1);
        let ours = alone && counted as f64 >= ALONE * own as f64;
        if ours && counted.saturating_mul(2) >= self.peak {
            self.counting = Counting::Refills;
        } else if reported > passed.reported.saturating_add(slack)
            && self.counting == Counting::Unknown
        {
            self.counting = Counting::Restarts;
        }
        self.passed = None;
    }

    /// What a new report keeps of the last one of its count: `fresh` is what it says
    /// alone (`credit` the room it leaves, `reported` its remaining count).
    ///
    /// Until the reported reset, the room only shrinks: two requests on two connections
    /// may be counted in one order and answered in the other, and the report of the
    /// later send is then not the newest count (the ceiling keeps the lower one's
    /// word). And the earliest reset holds: each is at or after the true one (a reset
    /// in whole seconds is rounded up, and counts from when the server answered), so
    /// the earliest is the closest. (Clients that shared one limit and each waited for
    /// a late estimate came back late together, and those that came back first took
    /// the whole next window.)
    ///
    /// Within one count, what a report says is left only goes down, but for reports
    /// counted in one order and answered in another: at most the requests in flight
    /// apart. More than that up, and the count has started over — sooner than the reset
    /// believed (a send just after the true reset opened the next window): the old
    /// reset and credit are dropped, or the client would keep spreading a spent
    /// window's last few sends until then.
    fn carry_over(
        &mut self,
        mut fresh: Carried,
        credit: i64,
        reported: u64,
        others: u32,
        now: Instant,
    ) -> Carried {
        let in_flight = u64::from(others).saturating_add(1);
        let Some(known) = &self.known else {
            return fresh;
        };
        let renewed = reported > known.reported.saturating_add(in_flight);
        let Some(until) = known.reset.filter(|until| *until > now && !renewed) else {
            return fresh;
        };
        // More room than the count allows, by more than the requests in flight can
        // explain: the sends it counted are leaving it before the reset. From then on
        // each report speaks for itself, and the sends that leave the window are
        // counted as room (spread over the reset, the room alone halved a client
        // alone on HAProxy's sliding window: sending x a second, it heard 50 − x).
        // (A count reported is never under 0: past it, sends lower the ceiling alone.)
        let floor = known.ceiling.max(0);
        if credit > floor.saturating_add(i64::from(others).saturating_add(1)) {
            self.counting = Counting::Refills;
        }
        if self.counting != Counting::Refills {
            fresh.ceiling = fresh.ceiling.min(known.ceiling);
            fresh.reset = Some(fresh.reset.map_or(until, |reset| reset.min(until)));
        }
        // What the others sharing the quota took since the base report: the room it
        // reported, less this client's sends since, less the room now.
        let span = now.saturating_duration_since(known.base.at);
        let own_since =
            i64::try_from(self.sent.saturating_sub(known.base.sent)).unwrap_or(i64::MAX);
        let used = known
            .base
            .credit
            .saturating_sub(own_since)
            .saturating_sub(credit)
            .max(0);
        if span >= MEASURE {
            fresh.others = Some(used as f64 / span.as_secs_f64());
        } else {
            fresh.base = known.base;
            fresh.others = known.others;
        }
        fresh
    }

    /// The sends that leave a sliding window while the next are spread: those of the
    /// last stretch as long (`own`; the pace so far is taken to go on), a share of them.
    fn returning(&self, own: u64, alone: bool) -> i64 {
        match (self.counting, alone) {
            (Counting::Refills, true) => (own as f64 * RETURNING) as i64,
            (Counting::Refills, false) => (own as f64 * RETURNING_SHARED) as i64,
            (Counting::Unknown | Counting::Restarts, _) => 0,
        }
    }

    /// Until when the destination's quota is spent, if it said when it resets. A report
    /// whose reset has passed is forgotten: the count started over.
    pub(crate) fn spent_until(&mut self, now: Instant) -> Option<Instant> {
        let known = self.known.as_ref()?;
        match known.reset {
            Some(reset) if reset <= now => {
                // (A report whose reset had already come, `t=0`, counted nothing.)
                self.passed = (reset > known.at).then_some(Passed {
                    reported: known.reported,
                    from: self.sent,
                    probe: None,
                });
                self.known = None;
                None
            }
            Some(reset) if known.credit.saturating_add(known.returning) <= 0 => Some(reset),
            // Spent by the others' estimated use: only held when the reset is near, so
            // that an estimate holds a destination for a second at most.
            Some(reset)
                if reset.saturating_duration_since(now) <= SPREAD && known.credit_at(now) <= 0 =>
            {
                Some(reset)
            }
            _ => None,
        }
    }

    /// A send's response came, with or without a report: a count that a reset left
    /// unknown is not awaited past the first answer since.
    pub(crate) fn answered(&mut self, number: u64) {
        if self.passed.is_some_and(|passed| number >= passed.from) {
            self.passed = None;
        }
    }

    /// Until when requests wait for the count: a count's reset passed, one request went
    /// since, and its answer has not come. A fixed window started over, as that answer
    /// says a round trip later; a sliding window did not, and the requests held for the
    /// reset would all be refused (and a window that counts refusals holds each for a
    /// second). Once the kind
    /// of window is known, the queue goes at once again (into a fixed window that started
    /// over, its room is spread from there). The wait lasts two of the destination's
    /// `round_trip`s, between 10 ms and a second: a slow answer (a long poll) holds no one
    /// for long.
    pub(crate) fn awaits_count(&self, round_trip: Duration, now: Instant) -> Option<Instant> {
        if self.counting != Counting::Unknown {
            return None;
        }
        let patience = round_trip
            .saturating_mul(2)
            .clamp(COUNT_PATIENCE.0, COUNT_PATIENCE.1);
        let until = instant_after(self.passed?.probe?, patience);
        (until > now).then_some(until)
    }

    /// Whether the destination reported no room left for more than what is sent: no
    /// reason to send it faster.
    pub(crate) fn is_full(&self, now: Instant) -> bool {
        self.known
            .as_ref()
            .is_some_and(|known| known.speaks(now) && known.credit_at(now) <= 0)
    }

    /// Whether the destination's reported room leaves a reason to send it faster: unless
    /// it [`is_full`](Self::is_full), or is a token bucket that reported fewer than
    /// [`BUCKET_HEADROOM`] tokens left. (The level as reported, which every client sharing
    /// the bucket sees alike, not less this client's sends since: taking those off makes
    /// clients sharing the bucket read it differently, and their shares drift apart.)
    pub(crate) fn has_room_to_grow(&self, now: Instant) -> bool {
        let bucket_at_rate = self.known.as_ref().is_some_and(|known| {
            known.speaks(now) && known.reset.is_none() && known.reported < BUCKET_HEADROOM
        });
        !self.is_full(now) && !bucket_at_rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: Duration = Duration::from_secs(1);

    fn left(remaining: u64, reset: Option<Duration>) -> QuotaLeft {
        QuotaLeft { remaining, reset }
    }

    /// A limit of 50 a second and a client alone on it, answered at once, that sends
    /// whenever its quota lets it (as [`Destination`](super::super::destination) holds
    /// requests: until a spent quota's reset, then at the spread's slot) for `seconds`.
    /// `window` counts a send at `at` given the sends so far, and says the `t` to report.
    /// Returns the quota, every send's instant, and the refusals.
    fn alone_on(
        window: impl Fn(&[Instant], Instant) -> (u64, Duration),
        seconds: u32,
    ) -> (Quota, Vec<Instant>, usize) {
        let start = Instant::now();
        let mut now = start;
        let mut quota = Quota::default();
        let (mut sends, mut refused) = (Vec::new(), 0);
        while now < start + SEC * seconds {
            let held = [quota.spent_until(now), quota.ready_at(Duration::ZERO, now)];
            if let Some(until) = held.into_iter().flatten().max() {
                now = until;
                continue;
            }
            let number = quota.sent(now);
            sends.push(now);
            let (count, reset) = window(&sends, now);
            match 50u64.checked_sub(count) {
                Some(room) => quota.learn(number, left(room, Some(reset)), 0, Duration::MAX, now),
                None => refused += 1,
            }
            quota.answered(number);
            // A millisecond between sends at most 1000 a second: the spread decides.
            now += Duration::from_millis(1);
        }
        (quota, sends, refused)
    }

    /// HAProxy's window, exactly: the sends of the last second, and always `t=1`.
    fn sliding(sends: &[Instant], now: Instant) -> (u64, Duration) {
        let count = sends.iter().filter(|&&at| at + SEC > now).count();
        (count as u64, SEC)
    }

    /// In the last second before `end`.
    fn last_second(sends: &[Instant], end: Instant) -> usize {
        sends
            .iter()
            .filter(|&&at| at + SEC > end && at <= end)
            .count()
    }

    #[tokio::test(start_paused = true)]
    async fn a_spent_quota_holds_until_its_reset_counting_sends_in_flight() {
        let now = Instant::now();
        let mut quota = Quota::default();
        assert_eq!(quota.spent_until(now), None);
        let older = quota.sent(now);
        let first = quota.sent(now);
        for _ in 0..3 {
            quota.sent(now);
        }
        // The first response says 3 left: the other three in flight spend them.
        quota.learn(first, left(3, Some(SEC)), 3, Duration::MAX, now);
        assert!(quota.is_full(now));
        assert_eq!(quota.spent_until(now), Some(now + SEC));
        // A stale report (an older send's, arriving late) changes nothing.
        quota.learn(older, left(40, Some(SEC)), 0, Duration::MAX, now);
        assert_eq!(quota.spent_until(now), Some(now + SEC));
        // At the reset the count starts over.
        assert_eq!(quota.spent_until(now + SEC), None);
        assert!(!quota.is_full(now));
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_reset_nothing_is_held_and_a_reset_is_capped() {
        let now = Instant::now();
        let mut quota = Quota::default();
        let n = quota.sent(now);
        quota.learn(n, left(0, None), 0, Duration::MAX, now);
        assert!(quota.is_full(now));
        assert_eq!(quota.spent_until(now), None);
        let n = quota.sent(now);
        quota.learn(n, left(0, Some(3600 * SEC)), 0, 5 * SEC, now);
        assert_eq!(quota.spent_until(now), Some(now + 5 * SEC));
        // Past the reset, room reported: not full, nothing held.
        let later = now + 5 * SEC;
        let n = quota.sent(now);
        quota.learn(n, left(2, Some(SEC)), 0, Duration::MAX, later);
        assert!(!quota.is_full(now));
        assert_eq!(quota.spent_until(later), None);
    }

    /// A token bucket down to its last token is at its rate: its pace holds. A window with
    /// one left is not (its room comes back at the reset, not as it is spent).
    #[tokio::test(start_paused = true)]
    async fn a_bucket_at_its_last_token_leaves_no_room_to_grow() {
        let now = Instant::now();
        let after = |remaining: u64, reset: Option<Duration>| {
            let mut quota = Quota::default();
            let n = quota.sent(now);
            quota.learn(n, left(remaining, reset), 0, Duration::MAX, now);
            quota
        };
        assert!(Quota::default().has_room_to_grow(now));
        for (remaining, bucket, window) in [(0, false, false), (1, false, true), (2, true, true)] {
            assert_eq!(
                after(remaining, None).has_room_to_grow(now),
                bucket,
                "{remaining}"
            );
            let quota = after(remaining, Some(SEC));
            assert_eq!(quota.has_room_to_grow(now), window, "{remaining}");
        }
        // The level is read as reported: the sends since do not lower it (they do spend
        // the last token, as for any quota).
        let mut quota = after(2, None);
        quota.sent(now);
        assert!(quota.has_room_to_grow(now));
        quota.sent(now);
        assert!(!quota.has_room_to_grow(now));
        // An old report no longer speaks.
        assert!(after(0, None).has_room_to_grow(now + FRESH));
    }

    #[tokio::test(start_paused = true)]
    async fn before_its_reset_a_quota_only_shrinks() {
        // Sends 0 and 1 on two connections; the server counts 1 first (9 left), then 0
        // (8 left), and the answers arrive in send order.
        let now = Instant::now();
        let mut quota = Quota::default();
        let (zero, one) = (quota.sent(now), quota.sent(now));
        quota.learn(zero, left(8, Some(SEC)), 1, Duration::MAX, now);
        // 1 may not be counted yet: 7 for now.
        assert_eq!(quota.known.as_ref().map(|k| k.credit), Some(7));
        // 1's later report (9) does not raise the room above what 0's said (8).
        quota.learn(one, left(9, Some(SEC)), 0, Duration::MAX, now);
        for _ in 0..8 {
            assert_eq!(quota.spent_until(now), None);
            quota.sent(now);
        }
        assert_eq!(quota.spent_until(now), Some(now + SEC));
    }

    /// As traced against express-rate-limit: 20 sent at once into a fresh window of 50,
    /// the server counts them in another order than they were sent and the answers come
    /// in yet another. The reports of the later sends tell what is left: 30, all of it
    /// spent before the reset (counting each report less the requests then in flight
    /// would leave part of every window unspent).
    #[tokio::test(start_paused = true)]
    async fn a_burst_is_counted_by_the_reports_of_its_latest_sends() {
        let now = Instant::now();
        let mut quota = Quota::default();
        let sends: Vec<u64> = (0..20).map(|_| quota.sent(now)).collect();
        // Answered first: send 0, counted fourth (46 left), 19 in flight besides.
        quota.learn(sends[0], left(46, Some(SEC)), 19, Duration::MAX, now);
        // Then send 8, counted ninth (41 left), and send 19, counted last (30 left).
        quota.learn(sends[8], left(41, Some(SEC)), 18, Duration::MAX, now);
        quota.learn(sends[19], left(30, Some(SEC)), 10, Duration::MAX, now);
        for _ in 0..30 {
            assert_eq!(quota.spent_until(now), None);
            quota.sent(now);
        }
        assert_eq!(quota.spent_until(now), Some(now + SEC));
    }

    #[tokio::test(start_paused = true)]
    async fn reported_room_is_spread_until_the_reset_over_a_second_at_most() {
        let now = Instant::now();
        let mut quota = Quota::default();
        let n = quota.sent(now);
        // 10 left until a reset in 500 ms: one send every 50 ms.
        quota.learn(n, left(10, Some(SEC / 2)), 0, Duration::MAX, now);
        let ms = Duration::from_millis;
        assert_eq!(quota.ready_at(Duration::ZERO, now), Some(now + ms(50)));
        assert_eq!(quota.ready_at(Duration::ZERO, now + ms(50)), None);
        quota.sent(now + ms(50));
        assert_eq!(
            quota.ready_at(Duration::ZERO, now + ms(50)),
            Some(now + ms(100))
        );
        // An hour's quota is spread over a second, not the hour: 200 left, one every 5 ms.
        let mut hourly = Quota::default();
        let n = hourly.sent(now);
        hourly.learn(n, left(200, Some(3600 * SEC)), 0, Duration::MAX, now);
        assert_eq!(hourly.ready_at(Duration::ZERO, now), Some(now + ms(5)));
        // A spacing under 2 ms is not enforced (timers tick in milliseconds).
        let mut large = Quota::default();
        let n = large.sent(now);
        large.learn(n, left(1000, Some(3600 * SEC)), 0, Duration::MAX, now);
        assert_eq!(large.ready_at(Duration::ZERO, now), None);
        // No reset reported: nothing to spread over.
        let mut unknown = Quota::default();
        let n = unknown.sent(now);
        unknown.learn(n, left(10, None), 0, Duration::MAX, now);
        assert_eq!(unknown.ready_at(Duration::ZERO, now), None);
    }

    #[tokio::test(start_paused = true)]
    async fn what_the_others_sharing_a_quota_take_is_counted() {
        let ms = Duration::from_millis;
        let now = Instant::now();
        let mut quota = Quota::default();
        let a = quota.sent(now);
        quota.learn(a, left(50, Some(SEC)), 0, Duration::MAX, now);
        // 100 ms and one send of ours later, 9 left: the others took 40 (400 a second).
        let later = now + ms(100);
        let b = quota.sent(later);
        quota.learn(b, left(9, Some(SEC)), 0, Duration::MAX, later);
        // A tenth of that pace is assumed to go on: 40 a second, so the 9 left are
        // gone after 225 ms, and the quota is held until its reset from then on.
        assert_eq!(quota.spent_until(later + ms(200)), None);
        assert_eq!(quota.spent_until(later + ms(250)), Some(now + SEC));
        assert!(quota.is_full(later + ms(250)));
        // An estimate holds a destination only near its reset: the same use seen on an
        // hourly quota (no report corrects an estimate while nothing is sent) holds nothing.
        let mut hourly = Quota::default();
        let a = hourly.sent(now);
        hourly.learn(a, left(50, Some(3600 * SEC)), 0, Duration::MAX, now);
        let b = hourly.sent(later);
        hourly.learn(b, left(9, Some(3600 * SEC)), 0, Duration::MAX, later);
        assert_eq!(hourly.spent_until(later + 100 * SEC), None);
        // Alone on a quota: the room shrinks by our sends only, nothing more is counted.
        let mut alone = Quota::default();
        let a = alone.sent(now);
        alone.learn(a, left(50, Some(SEC)), 0, Duration::MAX, now);
        let b = alone.sent(later);
        alone.learn(b, left(49, Some(SEC)), 0, Duration::MAX, later);
        assert_eq!(alone.spent_until(later + ms(800)), None);
        assert!(!alone.is_full(later + ms(800)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_count_that_started_over_before_the_believed_reset_replaces_it() {
        let ms = Duration::from_millis;
        let now = Instant::now();
        let mut quota = Quota::default();
        let n = quota.sent(now);
        quota.learn(n, left(0, Some(SEC)), 0, Duration::MAX, now);
        assert_eq!(quota.spent_until(now), Some(now + SEC));
        // 990 ms on, a send finds a new window (49 left), ten ms before the believed reset.
        let later = now + ms(990);
        let n = quota.sent(later);
        quota.learn(n, left(49, Some(SEC)), 0, Duration::MAX, later);
        assert_eq!(quota.spent_until(later), None);
        assert!(!quota.is_full(later));
    }

    #[tokio::test(start_paused = true)]
    async fn a_late_send_counts_from_its_slot_so_slips_do_not_add_up() {
        let ms = Duration::from_millis;
        let now = Instant::now();
        let mut quota = Quota::default();
        let n = quota.sent(now);
        quota.learn(n, left(10, Some(SEC / 2)), 0, Duration::MAX, now);
        assert_eq!(quota.ready_at(Duration::ZERO, now), Some(now + ms(50)));
        // Sent 3 ms late: the next slot is 50 ms after the slot, not after the send.
        quota.sent(now + ms(53));
        assert_eq!(
            quota.ready_at(Duration::ZERO, now + ms(53)),
            Some(now + ms(100))
        );
        // Far later (a pause): no more than 5 ms is caught up.
        quota.sent(now + ms(200));
        let next = quota.ready_at(Duration::ZERO, now + ms(200)).unwrap();
        assert!(next >= now + ms(195) + ms(30), "{:?}", next - now);
    }

    #[tokio::test(start_paused = true)]
    async fn a_report_without_a_reset_speaks_for_a_second() {
        let now = Instant::now();
        let mut quota = Quota::default();
        let n = quota.sent(now);
        quota.learn(n, left(0, None), 0, Duration::MAX, now);
        assert!(quota.is_full(now + SEC / 2));
        assert!(!quota.is_full(now + SEC));
    }

    #[tokio::test(start_paused = true)]
    async fn the_earliest_reported_reset_holds() {
        // Two reports of one window, the later one rounded further up.
        let now = Instant::now();
        let mut quota = Quota::default();
        let (a, b) = (quota.sent(now), quota.sent(now));
        quota.learn(a, left(0, Some(SEC)), 1, Duration::MAX, now);
        quota.learn(b, left(0, Some(2 * SEC)), 0, Duration::MAX, now);
        assert_eq!(quota.spent_until(now), Some(now + SEC));
    }

    /// A naive `RateLimit` on a sliding window says `t=1` and `r` = 50 less the sends of
    /// the last second. Spreading `r` over `t` alone, a client sending x a second hears
    /// 50 − x, and settles at 25 a second, half the limit. Its room comes back before the
    /// reset, so the client counts its own sends
    /// leaving the window as room: it settles near the limit and is never refused.
    #[tokio::test(start_paused = true)]
    async fn a_client_alone_on_a_sliding_window_uses_it_without_being_refused() {
        let (quota, sends, refused) = alone_on(sliding, 6);
        assert_eq!(quota.counting, Counting::Refills);
        assert_eq!(refused, 0);
        let end = *sends.last().unwrap();
        for second in 1..4 {
            let used = last_second(&sends, end - SEC * second);
            assert!((45..=50).contains(&used), "{used} in a second");
        }
    }

    /// A fixed window (express-rate-limit's: `t` counts down to its end, rounded up) does
    /// start over at its reset: the client learns so at the first reset, whose requests
    /// went one at a time until the new count came, and uses every window whole.
    #[tokio::test(start_paused = true)]
    async fn a_client_alone_on_a_fixed_window_uses_every_window() {
        let start = Instant::now();
        let fixed = |sends: &[Instant], now: Instant| {
            // Windows of a second from the first send, as express opens them.
            let opened = |at: Instant| (at - start).as_secs();
            let window = opened(now);
            let count = sends.iter().filter(|&&at| opened(at) == window).count();
            let end = start + Duration::from_secs(window + 1);
            let t = Duration::from_secs((end - now).as_secs_f64().ceil() as u64);
            (count as u64, t)
        };
        let (quota, sends, refused) = alone_on(fixed, 5);
        assert_eq!(quota.counting, Counting::Restarts);
        assert_eq!(refused, 0);
        for window in 1..4 {
            let from = start + SEC * window;
            let used = sends
                .iter()
                .filter(|&&at| at >= from && at < from + SEC)
                .count();
            assert!((49..=50).contains(&used), "window {window}: {used}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn after_a_reset_the_first_request_goes_and_the_others_await_its_count_briefly() {
        let ms = Duration::from_millis;
        let rtt = ms(40);
        let now = Instant::now();
        let mut quota = Quota::default();
        for _ in 0..50 {
            let n = quota.sent(now);
            quota.learn(n, left(0, Some(SEC)), 0, Duration::MAX, now);
        }
        assert_eq!(quota.awaits_count(rtt, now), None);
        // The reset passes: one request goes, the next wait for its answer, two round
        // trips at most (a long poll holds no one for long).
        let later = now + SEC;
        assert_eq!(quota.spent_until(later), None);
        assert_eq!(quota.awaits_count(rtt, later), None);
        let n = quota.sent(later);
        assert_eq!(quota.awaits_count(rtt, later), Some(later + ms(80)));
        assert_eq!(quota.awaits_count(rtt, later + ms(80)), None);
        // Its count started over (49 left): a fixed window's; the next reset is not awaited.
        quota.learn(n, left(49, Some(SEC)), 0, Duration::MAX, later + ms(40));
        quota.answered(n);
        assert_eq!(quota.counting, Counting::Restarts);
        assert_eq!(quota.awaits_count(rtt, later + ms(40)), None);
        for _ in 0..49 {
            quota.sent(later);
        }
        let again = later + ms(40) + SEC;
        assert_eq!(quota.spent_until(again), None);
        quota.sent(again);
        assert_eq!(quota.awaits_count(rtt, again), None);
        // An answer without a report ends the wait as well.
        let mut silent = Quota::default();
        let n = silent.sent(now);
        silent.learn(n, left(0, Some(SEC)), 0, Duration::MAX, now);
        assert_eq!(silent.spent_until(later), None);
        let n = silent.sent(later);
        assert!(silent.awaits_count(rtt, later).is_some());
        silent.answered(n);
        assert_eq!(silent.awaits_count(rtt, later), None);
        // A report whose reset had come already (`t=0`) leaves nothing to await.
        let mut zero = Quota::default();
        let n = zero.sent(now);
        zero.learn(n, left(10, Some(Duration::ZERO)), 0, Duration::MAX, now);
        assert_eq!(zero.spent_until(now), None);
        zero.sent(now);
        assert_eq!(zero.awaits_count(rtt, now), None);
    }

    /// Where others take most of a sliding window, a client counts half its own sends
    /// leaving it as room, not all. (How a fleet then shares the window is tested against
    /// the real HAProxy, `lab/tests/rate_limiters.rs`, and in the model, `simulate --check`.)
    #[tokio::test(start_paused = true)]
    async fn a_client_among_others_on_a_sliding_window_counts_half_its_sends_back() {
        let ms = Duration::from_millis;
        let start = Instant::now();
        let mut quota = Quota::default();
        let n = quota.sent(start);
        quota.learn(n, left(49, Some(SEC)), 0, Duration::MAX, start);
        quota.counting = Counting::Refills;
        // Others take 40 a second; this client sends 5 a second and hears 5 left.
        for k in 1..=10u32 {
            let now = start + ms(200) * k;
            let n = quota.sent(now);
            quota.learn(n, left(5, Some(SEC)), 0, Duration::MAX, now);
        }
        let known = quota.known.as_ref().unwrap();
        // Its sends of the last second: 5 (the one at exactly a second ago has left).
        assert_eq!(known.returning, 2);
        assert_eq!(known.credit, 5);
    }

    /// What a destination's reports do to a client, in any order and with any values (a
    /// hostile or broken limiter): nothing panics, and no report holds the client past
    /// what the pacing promises. A spent quota holds until its reset at most `max_reset`
    /// after it was reported; a spread slot is at most a second away; a wait for the count
    /// after a reset, at most a second after the request it waits for.
    mod hostile {
        use super::*;
        use proptest::prelude::*;

        #[derive(Debug, Clone)]
        enum Step {
            Send,
            /// The report of the send `back` sends before the latest.
            Report {
                back: u8,
                remaining: u64,
                reset_ms: Option<u64>,
                others: u8,
            },
            Answer(u8),
            Wait(u64),
        }

        fn step() -> impl Strategy<Value = Step> {
            let remaining = prop_oneof![0..60u64, any::<u64>()];
            let reset_ms = prop::option::of(prop_oneof![0..2_000u64, any::<u64>()]);
            prop_oneof![
                3 => Just(Step::Send),
                3 => (0..8u8, remaining, reset_ms, 0..20u8).prop_map(
                    |(back, remaining, reset_ms, others)| Step::Report { back, remaining, reset_ms, others }
                ),
                1 => (0..8u8).prop_map(Step::Answer),
                2 => (0..3_000u64).prop_map(Step::Wait),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

            #[test]
            fn no_report_holds_a_client_past_its_bounds(
                steps in prop::collection::vec(step(), 1..200),
            ) {
                let max_reset = Duration::from_secs(5);
                let rtt = Duration::from_millis(20);
                let mut now = Instant::now();
                let mut quota = Quota::default();
                for step in steps {
                    match step {
                        Step::Send => {
                            quota.sent(now);
                        }
                        Step::Report { back, remaining, reset_ms, others } => {
                            let number = quota.sent.saturating_sub(1 + u64::from(back));
                            let reset = reset_ms.map(Duration::from_millis);
                            let left = QuotaLeft { remaining, reset };
                            quota.learn(number, left, u32::from(others), max_reset, now);
                        }
                        Step::Answer(back) => quota.answered(quota.sent.saturating_sub(1 + u64::from(back))),
                        Step::Wait(ms) => now += Duration::from_millis(ms),
                    }
                    if let Some(until) = quota.spent_until(now) {
                        prop_assert!(until <= now + max_reset, "held {:?}", until - now);
                    }
                    if let Some(at) = quota.ready_at(Duration::ZERO, now) {
                        prop_assert!(at <= now + SPREAD, "spread to {:?}", at - now);
                    }
                    if let Some(until) = quota.awaits_count(rtt, now) {
                        prop_assert!(until <= now + COUNT_PATIENCE.1, "awaits {:?}", until - now);
                    }
                    prop_assert!(quota.recent.0.len() <= Recent::CAP);
                }
            }
        }
    }
}
