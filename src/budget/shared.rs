//! A retry budget shared by every clone of a retry layer: retries may add only a fraction
//! of the recent traffic, plus a small floor.
//!
//! See [`RetryBudget`] for the semantics, the defaults and why a budget beats a maximum
//! number of retries alone.
//!
//! # Implementation
//!
//! The window of `ttl` is cut into [`SLOTS`] slots of `ttl / SLOTS`. Deposits and
//! withdrawals each have one `AtomicU64` per slot packing `epoch << 32 | count`, where
//! `epoch` is the number of whole slot widths elapsed since the budget was created (the
//! slot index is `epoch % SLOTS`). A writer that finds its slot tagged with an older epoch
//! recycles it with one compare-and-swap (the old counts are older than the window, so
//! dropping them *is* the expiry); a writer whose clock lags behind a newer tag joins the
//! newer slot rather than clobbering it. There is no lock and no allocation anywhere: a
//! deposit is a clock read, one load and one `fetch_add` in the common case (a saturating
//! CAS loop only when the slot must be recycled or its count nears `u32::MAX`).
//!
//! Every clock reading also raises `recent`, the latest epoch seen. The retry layer files
//! the deposit of a request answered at once under that epoch, without a clock reading of
//! its own (a clock reading costs more than the rest of the deposit). Its true time is
//! never before that epoch, so a stale `recent` can only file it in a window that is
//! already passing: the error is fewer retries, never more.
//!
//! Counts saturate at `u32::MAX` per slot, window sums (ten such counts) fit a `u64` and
//! the balance is computed in `i128`, so no amount of traffic can wrap a counter or panic.
//!
//! ## Memory ordering
//!
//! The counters protect no other memory, so no acquire/release pairing is needed for data
//! publication. Deposits are `Relaxed`: a withdrawal that misses a concurrent deposit only
//! sees a smaller allowance, which errs on the safe side. Withdrawals use `SeqCst` for both
//! the increment and the loads that follow it: each withdrawal first *records* itself,
//! then sums the window, and takes the retry only if the balance including itself is still
//! non-negative (otherwise it takes its record back). With a single total order over these
//! operations, of any two racing withdrawals the later one's loads come after the earlier
//! one's increment and so count it (the store-buffer pattern). Hence concurrent callers
//! cannot jointly overdraw the budget (barring a thread descheduled for most of a `ttl`
//! between reading the clock and recording, whose record then lands in an expired slot);
//! a race can only make a caller see a *pending* record
//! that is about to be taken back, and refuse a retry it could have had. That transient
//! under-allowance is the only race margin, and a budget is approximate by nature anyway.
//!
//! The epoch is a `u32`: with the minimum slot width of 100 ms it wraps after 13 years,
//! and all epoch comparisons use wrapping arithmetic, so only a slot left untouched for
//! half that time could be misjudged (once, by at most its own count).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::error::ConfigError;
use crate::error::check;

/// Number of slots the window is divided into: the window slides in steps of `ttl / 10`.
const SLOTS: usize = 10;

/// The budget counts in millionths of a retry, so the ratio is exact to 1e-6 and all the
/// arithmetic is integer (no float rounding decides whether a retry is allowed).
const MICROS: u64 = 1_000_000;

/// Below this count a slot is incremented with `fetch_add`; above it, with a saturating
/// compare-and-swap.
const FAST_PATH_LIMIT: u32 = 1 << 31;

/// A retry budget shared by every clone: retries are allowed only while they stay under a
/// fraction of the recent requests, plus a small floor per second.
///
/// Call [`deposit`](RetryBudget::deposit) once per logical request and
/// [`withdraw`](RetryBudget::withdraw) before each retry; a retry is made only if
/// `withdraw` returns `true`. Over the sliding window `ttl`:
///
/// ```text
/// retries allowed = min_per_sec × ttl  +  retry_ratio × deposits  −  (withdrawals − refunds)
/// ```
///
/// A retry that succeeds is [`refund`](RetryBudget::refund)ed: only retries that fail
/// spend the budget. Scattered failures then never run it dry, while an outage, whose
/// retries all fail, drains it as before.
///
/// Events leave the window between `ttl × 9/10` and `ttl` after they happen (the window
/// slides in ten steps). Cloning is cheap and every clone shares the same state, so one
/// budget placed in a layer covers every service the layer builds and every request they
/// send. It also implements tower's [`Budget`](tower::retry::budget::Budget) trait.
///
/// # Why a budget and not only max retries
///
/// A per-request limit such as "at most 3 retries" bounds the latency of one request, but
/// not the load on the server. When a server is healthy, retries are rare and harmless.
/// When it is failing outright, *every* request fails, and every request becomes 4
/// attempts: the clients multiply the load on the server that is struggling by 4, right
/// when it can least take it. Through a chain of services that each retry 3 times, the
/// factors multiply (4 × 4 = 16 at the second hop). This is a retry storm: a brief overload
/// turns into an outage that sustains itself.
///
/// A budget caps the *extra* load instead: retries can add at most `retry_ratio` of the
/// healthy traffic (10 % by default) plus the small floor, however many requests fail. Scattered failures are
/// still retried almost always, because they cost little of the budget; during an outage
/// the budget runs dry within seconds and the clients send barely more than their normal
/// load, giving the server room to recover. Keep a per-request limit too: the budget
/// protects the server, the limit bounds how long one caller waits. The floor
/// (`min_per_sec`) exists so that a quiet client, whose handful of requests would earn it
/// almost no budget, can still retry its occasional failure.
///
/// # Defaults
///
/// [`RetryBudget::default()`]:
/// [`DEFAULT_TTL`](RetryBudget::DEFAULT_TTL) 1 s,
/// [`DEFAULT_MIN_PER_SEC`](RetryBudget::DEFAULT_MIN_PER_SEC) 10,
/// [`DEFAULT_RETRY_RATIO`](RetryBudget::DEFAULT_RETRY_RATIO) 0.1.
///
/// The design follows Finagle's budget (gRPC's retry throttling works on the same
/// principle), but not its defaults of 10 s and 20 %: a window holds the allowance earned
/// before an outage, and spends it in the outage's first seconds. A short window at 10 %
/// keeps an outage's load near the normal one (see `docs/BENCHMARKS.md`). Pass Finagle's
/// values to [`RetryBudget::new`] to have them.
///
/// # How the retry layer uses it
///
/// The retry layer shares one budget between every request of the layer. It deposits once
/// per logical request, when the request starts (retries never fund further retries),
/// and withdraws before each retry, giving up on the request when the withdrawal is
/// refused — except for a retry a rate limiter scheduled (a 429 with a `Retry-After`,
/// even `0`): that server is up and said when it takes the request again, so the retry
/// is not the extra load on a failing server that the budget guards against.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use tower_backoff::budget::RetryBudget;
///
/// // No floor, and one retry for every two requests.
/// let budget = RetryBudget::new(Duration::from_secs(10), 0, 0.5)?;
/// let for_another_service = budget.clone(); // same shared state
///
/// assert!(!budget.withdraw()); // nothing deposited yet: no retry
/// for _ in 0..4 {
///     for_another_service.deposit(); // four requests sent
/// }
/// assert_eq!(budget.available(), 2);
/// assert!(budget.withdraw());
/// assert!(for_another_service.withdraw());
/// assert!(!budget.withdraw()); // the budget is spent
///
/// // Invalid configurations are errors, not panics.
/// let err = RetryBudget::new(Duration::from_secs(10), 10, -1.0).unwrap_err();
/// assert_eq!(err.field(), "retry_ratio");
/// # Ok::<(), tower_backoff::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct RetryBudget {
    inner: Arc<Inner>,
}

struct Inner {
    /// Origin of the epochs.
    start: Instant,
    /// The latest epoch a caller read off the clock: where
    /// [`deposit_recent`](RetryBudget::deposit_recent) counts, without a clock of its own.
    recent: AtomicU64,
    /// Width of one slot, in nanoseconds (at least 100 ms).
    slot_nanos: u64,
    /// Floor: `min_per_sec × ttl`, in millionths of a retry.
    reserve: u64,
    /// What one deposit earns, in millionths of a retry.
    ratio: u64,
    deposits: [Slot; SLOTS],
    withdrawals: [Slot; SLOTS],
    /// Retries given back because they succeeded.
    refunds: [Slot; SLOTS],
    ttl: Duration,
    min_per_sec: u32,
    retry_ratio: f64,
}

impl RetryBudget {
    /// How long a request or a retry counts in the budget: 1 s. Long enough to smooth out
    /// a burst of failures over ten slots, short enough that an outage cannot spend the
    /// allowance of the healthy seconds before it.
    pub const DEFAULT_TTL: Duration = Duration::from_secs(1);

    /// Retries allowed per second regardless of traffic: 10. Lets a quiet client retry its
    /// occasional failure, while 10 extra requests per second and per client is a load no
    /// server notices.
    pub const DEFAULT_MIN_PER_SEC: u32 = 10;

    /// Retries allowed per request: 0.1. With the floor, retries add at most about 15 % to
    /// the load of a failing server at a few hundred requests per second, within the
    /// usual capacity headroom, yet a scattered failure rate up to 1 in 10 (and any
    /// failure rate of a client sending under 100 requests per second) is retried in full.
    pub const DEFAULT_RETRY_RATIO: f64 = 0.1;

    /// The shortest window accepted: 1 s (as Finagle). The floor is a rate per second.
    pub const MIN_TTL: Duration = Duration::from_secs(1);

    /// The longest window accepted: 60 s (as Finagle). A longer memory would let traffic
    /// from long ago fund the retries of an outage happening now.
    pub const MAX_TTL: Duration = Duration::from_secs(60);

    /// The largest ratio accepted: 1000 retries per request (as Finagle).
    pub const MAX_RETRY_RATIO: f64 = 1000.0;

    /// A budget allowing, over any window of `ttl`, `min_per_sec × ttl` retries plus
    /// `retry_ratio` retries per deposit (per request).
    ///
    /// `retry_ratio` is honoured to a precision of one millionth.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the field if `ttl` is outside
    /// [`MIN_TTL`](Self::MIN_TTL)`..=`[`MAX_TTL`](Self::MAX_TTL), or `retry_ratio` is NaN,
    /// infinite, negative, above [`MAX_RETRY_RATIO`](Self::MAX_RETRY_RATIO), or positive
    /// but below one millionth.
    pub fn new(ttl: Duration, min_per_sec: u32, retry_ratio: f64) -> Result<Self, ConfigError> {
        if !(Self::MIN_TTL..=Self::MAX_TTL).contains(&ttl) {
            return Err(ConfigError::new("ttl", ttl, "must be between 1 s and 60 s"));
        }
        let retry_ratio = check::float_in(
            "retry_ratio",
            retry_ratio,
            0.0,
            Self::MAX_RETRY_RATIO,
            "must be a number between 0 and 1000",
        )?;
        // Within 0..=1e9 after the check above, so the cast is exact.
        let ratio = (retry_ratio * MICROS as f64).round() as u64;
        if ratio == 0 && retry_ratio > 0.0 {
            return Err(ConfigError::new(
                "retry_ratio",
                retry_ratio,
                "must be 0 or at least 0.000001",
            ));
        }
        // ttl <= 60 s: both products fit easily (ttl in µs × u32 < 2^58).
        let reserve = u64::from(min_per_sec) * ttl.as_micros() as u64;
        let slot_nanos = (ttl.as_nanos() / SLOTS as u128) as u64;
        Ok(Self {
            inner: Arc::new(Inner {
                start: Instant::now(),
                recent: AtomicU64::new(0),
                slot_nanos,
                reserve,
                ratio,
                deposits: Default::default(),
                withdrawals: Default::default(),
                refunds: Default::default(),
                ttl,
                min_per_sec,
                retry_ratio,
            }),
        })
    }

    /// Records one request: it earns `retry_ratio` retries for the next `ttl`.
    ///
    /// Call it once per logical request, not per attempt. It takes no lock and never
    /// allocates: a clock read and, in the common case, one atomic `fetch_add`.
    pub fn deposit(&self) {
        self.deposit_at(Instant::now());
    }

    /// [`deposit`](Self::deposit) with a clock reading the caller already has.
    pub(crate) fn deposit_at(&self, now: Instant) {
        let epoch = self.inner.epoch(now);
        self.inner.deposits[slot_index(epoch)].add(tag(epoch), 1, Ordering::Relaxed);
    }

    /// Records one request at the latest epoch any caller has read off the clock, reading
    /// none itself: for the retry layer's requests that succeed at once, whose only use
    /// for the clock would be this deposit.
    ///
    /// The clock is read by every request that has to wait for its response, every
    /// retry and every withdrawal, so on a client that talks to a network the epoch is the
    /// current one. When it is stale (a client whose every request is answered at once and
    /// never fails), the deposit lands in an older slot and expires early: the budget
    /// errs on the side of fewer retries, never of more, since the true time is never
    /// before the recorded epoch.
    #[inline]
    pub(crate) fn deposit_recent(&self) {
        let epoch = self.inner.recent.load(Ordering::Relaxed);
        self.inner.deposits[slot_index(epoch)].add(tag(epoch), 1, Ordering::Relaxed);
    }

    /// Asks for one retry: `true` (and the retry is counted) if the budget allows it,
    /// `false` if the retry must not be made.
    pub fn withdraw(&self) -> bool {
        let epoch = self.inner.epoch(Instant::now());
        let slot = &self.inner.withdrawals[slot_index(epoch)];
        // Record first, then check the balance including ourselves (see the module notes).
        let Some(recorded) = slot.add(tag(epoch), 1, Ordering::SeqCst) else {
            return false; // this slot's count is saturated: refuse rather than not count
        };
        if self.inner.balance(tag(epoch)) >= 0 {
            true
        } else {
            slot.take_back(recorded);
            false
        }
    }

    /// Gives back one retry that succeeded: a retry that works is evidence of a passing
    /// failure, not of overload, so it costs nothing (as the AWS SDKs' retry quota refunds
    /// a successful retry). Retries that fail stay spent: an outage still drains the budget.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tower_backoff::budget::RetryBudget;
    ///
    /// let budget = RetryBudget::new(Duration::from_secs(10), 0, 0.5)?;
    /// budget.deposit();
    /// budget.deposit();
    /// assert!(budget.withdraw());
    /// assert!(!budget.withdraw());
    /// budget.refund(); // the retry succeeded
    /// assert!(budget.withdraw());
    /// # Ok::<(), tower_backoff::ConfigError>(())
    /// ```
    pub fn refund(&self) {
        let epoch = self.inner.epoch(Instant::now());
        self.inner.refunds[slot_index(epoch)].add(tag(epoch), 1, Ordering::SeqCst);
    }

    /// How many retries [`withdraw`](RetryBudget::withdraw) would allow right now, were
    /// there no other callers. Useful for metrics and tests.
    pub fn available(&self) -> u64 {
        let epoch = self.inner.epoch(Instant::now());
        let balance = self.inner.balance(tag(epoch)).max(0) / i128::from(MICROS);
        u64::try_from(balance).unwrap_or(u64::MAX)
    }

    /// The window over which requests and retries are counted.
    pub fn ttl(&self) -> Duration {
        self.inner.ttl
    }

    /// The retries allowed per second regardless of traffic.
    pub fn min_per_sec(&self) -> u32 {
        self.inner.min_per_sec
    }

    /// The retries allowed per deposited request.
    pub fn retry_ratio(&self) -> f64 {
        self.inner.retry_ratio
    }

    #[cfg(test)]
    fn deposit_n(&self, n: u32) {
        let epoch = self.inner.epoch(Instant::now());
        self.inner.deposits[slot_index(epoch)].add(tag(epoch), n, Ordering::Relaxed);
    }
}

impl Default for RetryBudget {
    /// [`DEFAULT_TTL`](Self::DEFAULT_TTL), [`DEFAULT_MIN_PER_SEC`](Self::DEFAULT_MIN_PER_SEC),
    /// [`DEFAULT_RETRY_RATIO`](Self::DEFAULT_RETRY_RATIO).
    fn default() -> Self {
        Self::new(
            Self::DEFAULT_TTL,
            Self::DEFAULT_MIN_PER_SEC,
            Self::DEFAULT_RETRY_RATIO,
        )
        .expect("the default configuration is valid")
    }
}

impl fmt::Debug for RetryBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryBudget")
            .field("ttl", &self.inner.ttl)
            .field("min_per_sec", &self.inner.min_per_sec)
            .field("retry_ratio", &self.inner.retry_ratio)
            .field("available", &self.available())
            .finish()
    }
}

impl tower::retry::budget::Budget for RetryBudget {
    fn deposit(&self) {
        RetryBudget::deposit(self);
    }

    fn withdraw(&self) -> bool {
        RetryBudget::withdraw(self)
    }
}

impl Inner {
    /// Whole slot widths elapsed since the budget was created.
    fn epoch(&self, now: Instant) -> u64 {
        let elapsed = now.saturating_duration_since(self.start).as_nanos();
        // Saturating after 584 years, by which time the epoch has long been wrapping anyway.
        let epoch = u64::try_from(elapsed).unwrap_or(u64::MAX) / self.slot_nanos;
        // Written once per slot width, not once per caller: the line stays shared.
        if self.recent.load(Ordering::Relaxed) < epoch {
            self.recent.fetch_max(epoch, Ordering::Relaxed);
        }
        epoch
    }

    /// Allowance minus withdrawals over the window ending at epoch `now`, in millionths of
    /// a retry (negative when overdrawn).
    fn balance(&self, now: u32) -> i128 {
        let deposits = window_sum(&self.deposits, now);
        // A refund whose withdrawal has left the window gives nothing back.
        let spent =
            window_sum(&self.withdrawals, now).saturating_sub(window_sum(&self.refunds, now));
        i128::from(self.reserve) + i128::from(deposits) * i128::from(self.ratio)
            - i128::from(spent) * i128::from(MICROS)
    }
}

fn slot_index(epoch: u64) -> usize {
    (epoch % SLOTS as u64) as usize
}

/// The epoch as stored in a slot: its low 32 bits, compared with wrapping arithmetic.
fn tag(epoch: u64) -> u32 {
    epoch as u32
}

/// How many epochs `tag` is older than `now` (negative if newer).
fn age(now: u32, tag: u32) -> i64 {
    i64::from(now.wrapping_sub(tag) as i32)
}

/// Sum of the counts of the slots within the window ending at `now`. Slots tagged newer
/// than `now` (written by a caller whose clock read was later) count too.
fn window_sum(slots: &[Slot; SLOTS], now: u32) -> u64 {
    let window = SLOTS as i64;
    slots
        .iter()
        .map(|slot| slot.load(Ordering::SeqCst))
        .filter(|&(tag, _)| (-window..window).contains(&age(now, tag)))
        .map(|(_, count)| u64::from(count))
        .sum() // at most 10 × u32::MAX: cannot overflow
}

/// One slot: `epoch << 32 | count` in one word, so that recycling a slot for a new epoch
/// and counting into it are a single compare-and-swap.
#[derive(Default)]
struct Slot(AtomicU64);

impl Slot {
    fn load(&self, order: Ordering) -> (u32, u32) {
        unpack(self.0.load(order))
    }

    /// Adds `n` to the count for epoch `tag`, recycling the slot if it holds an older
    /// epoch, or joining it if it holds a newer one. Returns the word written, or `None`
    /// if the count was already saturated (nothing recorded).
    #[inline]
    fn add(&self, tag: u32, n: u32, order: Ordering) -> Option<u64> {
        let current = self.0.load(Ordering::Relaxed);
        let (held, count) = unpack(current);
        if n == 1 && held == tag && count < FAST_PATH_LIMIT {
            // Fast path: our epoch and far from saturation, so one `fetch_add` that cannot
            // fail. The count cannot carry into the tag: that would take 2^31 callers
            // between the load above and their increment. If the slot was recycled for a
            // newer epoch meanwhile, the count joins the newer epoch, as below.
            return Some(self.0.fetch_add(1, order).wrapping_add(1));
        }
        self.add_slow(current, tag, n, order)
    }

    /// [`add`](Self::add) when the slot must be recycled or is near saturation.
    #[inline(never)]
    fn add_slow(&self, mut current: u64, tag: u32, n: u32, order: Ordering) -> Option<u64> {
        loop {
            let (held, count) = unpack(current);
            let next = if age(tag, held) > 0 {
                pack(tag, n) // older than the window: its counts have expired
            } else if count == u32::MAX {
                return None;
            } else {
                pack(held, count.saturating_add(n))
            };
            match self
                .0
                .compare_exchange_weak(current, next, order, Ordering::Relaxed)
            {
                Ok(_) => return Some(next),
                Err(actual) => current = actual,
            }
        }
    }

    /// Takes back one count recorded by [`add`](Slot::add) (which wrote `recorded`),
    /// unless the slot has since been recycled, which already dropped it.
    fn take_back(&self, recorded: u64) {
        let (tag, _) = unpack(recorded);
        let mut current = self.0.load(Ordering::SeqCst);
        loop {
            let (held, count) = unpack(current);
            if held != tag || count == 0 {
                return;
            }
            match self.0.compare_exchange_weak(
                current,
                pack(held, count - 1),
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => return,
                Err(actual) => current = actual,
            }
        }
    }
}

fn pack(tag: u32, count: u32) -> u64 {
    (u64::from(tag) << 32) | u64::from(count)
}

fn unpack(word: u64) -> (u32, u32) {
    ((word >> 32) as u32, word as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(ttl_secs: u64, min_per_sec: u32, ratio: f64) -> RetryBudget {
        RetryBudget::new(Duration::from_secs(ttl_secs), min_per_sec, ratio).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn deposits_saturate_instead_of_wrapping() {
        let b = budget(60, u32::MAX, RetryBudget::MAX_RETRY_RATIO);
        for _ in 0..3 {
            b.deposit_n(u32::MAX);
        }
        let (_, count) = b.inner.deposits[0].load(Ordering::SeqCst);
        assert_eq!(count, u32::MAX);
        // reserve (u32::MAX × 60) + u32::MAX × 1000 retries, computed without overflow.
        let expected = u64::from(u32::MAX) * 60 + u64::from(u32::MAX) * 1000;
        assert_eq!(b.available(), expected);
        // Deposits in every slot of the window still sum without overflow.
        for _ in 0..SLOTS {
            tokio::time::advance(Duration::from_secs(6)).await;
            b.deposit_n(u32::MAX);
            b.deposit_n(u32::MAX);
        }
        let _ = b.available();
        assert!(b.withdraw());
    }

    #[tokio::test(start_paused = true)]
    async fn withdrawals_saturate_and_then_refuse() {
        let b = budget(60, u32::MAX, 0.0);
        let slot = &b.inner.withdrawals[0];
        slot.add(0, u32::MAX - 1, Ordering::SeqCst).unwrap();
        assert!(b.withdraw()); // the last countable one
        assert_eq!(slot.load(Ordering::SeqCst), (0, u32::MAX));
        assert!(!b.withdraw()); // cannot be counted: refused, not wrapped
        assert_eq!(slot.load(Ordering::SeqCst), (0, u32::MAX));
    }

    #[test]
    fn stale_slot_is_recycled_newer_slot_is_joined() {
        let slot = Slot::default();
        slot.add(3, 5, Ordering::SeqCst).unwrap();
        slot.add(13, 1, Ordering::SeqCst).unwrap();
        assert_eq!(slot.load(Ordering::SeqCst), (13, 1));
        // A caller whose clock read is older joins the newer epoch, dropping nothing.
        slot.add(3, 1, Ordering::SeqCst).unwrap();
        assert_eq!(slot.load(Ordering::SeqCst), (13, 2));
        // Wrapping epochs: u32::MAX is older than 9.
        let slot = Slot::default();
        slot.add(u32::MAX, 4, Ordering::SeqCst).unwrap();
        slot.add(9, 1, Ordering::SeqCst).unwrap();
        assert_eq!(slot.load(Ordering::SeqCst), (9, 1));
    }

    #[test]
    fn fast_and_saturating_paths_agree() {
        let slot = Slot::default();
        slot.add(7, FAST_PATH_LIMIT - 2, Ordering::SeqCst).unwrap();
        for expected in [FAST_PATH_LIMIT - 1, FAST_PATH_LIMIT, FAST_PATH_LIMIT + 1] {
            let written = slot.add(7, 1, Ordering::SeqCst).unwrap();
            assert_eq!(unpack(written), (7, expected));
            assert_eq!(slot.load(Ordering::SeqCst), (7, expected));
        }
        // A stale epoch in the fast-path range is recycled, not incremented.
        let written = slot.add(17, 1, Ordering::SeqCst).unwrap();
        assert_eq!(unpack(written), (17, 1));
    }

    #[test]
    fn take_back_ignores_a_recycled_slot() {
        let slot = Slot::default();
        let recorded = slot.add(2, 1, Ordering::SeqCst).unwrap();
        slot.add(12, 1, Ordering::SeqCst).unwrap();
        slot.take_back(recorded);
        assert_eq!(slot.load(Ordering::SeqCst), (12, 1));
        let recorded = slot.add(12, 1, Ordering::SeqCst).unwrap();
        slot.take_back(recorded);
        assert_eq!(slot.load(Ordering::SeqCst), (12, 1));
    }

    #[test]
    fn window_counts_ten_epochs_and_wraps() {
        let slots: [Slot; SLOTS] = Default::default();
        for e in 0..SLOTS as u32 {
            slots[e as usize].add(e, 1, Ordering::SeqCst).unwrap();
        }
        assert_eq!(window_sum(&slots, 9), 10);
        assert_eq!(window_sum(&slots, 10), 9);
        assert_eq!(window_sum(&slots, 18), 1);
        assert_eq!(window_sum(&slots, 19), 0);
        // Seen from before it was written, a slot still counts (the writer's clock was ahead).
        assert_eq!(window_sum(&slots, 0), 10);
    }
}
