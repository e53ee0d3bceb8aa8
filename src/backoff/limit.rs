//! Wrappers that bound any [`BackOff`]: by retries, by total time, by the size of a delay.
//!
//! These bound a backoff driven by [`retry`](crate::retry()) or a
//! [`Ticker`](crate::retry::Ticker). The tower layer counts attempts and elapsed time per
//! request itself, with [`limits::Limits`](crate::limits::Limits); see the
//! [`limits`](crate::limits) module for which to use when.

use super::BackOff;
use crate::time::ends_within;
use std::time::Duration;
use tokio::time::Instant;

/// Stops after `max` retries since the last reset; `0` never retries.
///
/// Counts calls to `next_backoff`, whether or not the inner policy had already stopped;
/// [`reset`](BackOff::reset) restarts the count and resets the inner policy.
///
/// ```
/// use std::time::Duration;
/// use tower_backoff::{BackOff, ConstantBackOff};
/// use tower_backoff::backoff::MaxRetries;
///
/// let mut backoff = MaxRetries::new(ConstantBackOff::new(Duration::from_secs(1)).unwrap(), 2);
/// assert_eq!(backoff.next_backoff(), Some(Duration::from_secs(1)));
/// assert_eq!(backoff.next_backoff(), Some(Duration::from_secs(1)));
/// assert_eq!(backoff.next_backoff(), None);
/// backoff.reset();
/// assert_eq!(backoff.next_backoff(), Some(Duration::from_secs(1)));
/// ```
#[derive(Debug, Clone)]
pub struct MaxRetries<B> {
    inner: B,
    max: u32,
    retries: u32,
}

impl<B> MaxRetries<B> {
    /// Allows at most `max` retries of `inner`.
    pub const fn new(inner: B, max: u32) -> Self {
        Self {
            inner,
            max,
            retries: 0,
        }
    }

    /// The number of retries allowed.
    pub const fn max_retries(&self) -> u32 {
        self.max
    }

    /// The number of delays handed out since the last reset.
    pub const fn retries(&self) -> u32 {
        self.retries
    }

    /// The wrapped policy.
    pub const fn get_ref(&self) -> &B {
        &self.inner
    }

    /// The wrapped policy, mutably.
    pub fn get_mut(&mut self) -> &mut B {
        &mut self.inner
    }

    /// Unwraps the inner policy.
    pub fn into_inner(self) -> B {
        self.inner
    }
}

impl<B: BackOff> BackOff for MaxRetries<B> {
    fn next_backoff(&mut self) -> Option<Duration> {
        if self.retries >= self.max {
            return None;
        }
        self.retries += 1;
        self.inner.next_backoff()
    }

    fn reset(&mut self) {
        self.retries = 0;
        self.inner.reset();
    }

    fn remaining(&self) -> Option<Duration> {
        self.inner.remaining()
    }
}

/// Stops once the time since creation or the last reset, plus the next delay, would
/// exceed `max_elapsed`: the operation never waits past its deadline only to be abandoned.
///
/// The time counts from [`new`](Self::new) and again from each [`reset`](BackOff::reset)
/// (which [`retry`](crate::retry()) and the [`Ticker`](crate::retry::Ticker) call before
/// the first attempt), so it includes the time spent in attempts, not only in waits. A wait
/// ending exactly at `max_elapsed` is allowed; the sum saturates, so `Duration::MAX` never
/// stops. A zero `max_elapsed` allows only zero delays made at once.
///
/// Time comes from [`tokio::time::Instant`], so paused test clocks apply.
///
/// ```
/// use std::time::Duration;
/// use tower_backoff::{BackOff, ConstantBackOff};
/// use tower_backoff::backoff::MaxElapsed;
///
/// let mut backoff = MaxElapsed::new(
///     ConstantBackOff::new(Duration::from_secs(5)).unwrap(),
///     Duration::from_secs(3),
/// );
/// // Waiting 5 s would already overrun the 3 s limit.
/// assert_eq!(backoff.next_backoff(), None);
/// assert!(backoff.remaining().unwrap() <= Duration::from_secs(3));
/// ```
#[derive(Debug, Clone)]
pub struct MaxElapsed<B> {
    inner: B,
    max_elapsed: Duration,
    start: Instant,
}

impl<B> MaxElapsed<B> {
    /// Bounds the total time spent retrying with `inner` to `max_elapsed`, counted from now.
    pub fn new(inner: B, max_elapsed: Duration) -> Self {
        Self {
            inner,
            max_elapsed,
            start: Instant::now(),
        }
    }

    /// The time limit.
    pub const fn max_elapsed(&self) -> Duration {
        self.max_elapsed
    }

    /// The time since creation or the last reset.
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// The wrapped policy.
    pub const fn get_ref(&self) -> &B {
        &self.inner
    }

    /// The wrapped policy, mutably.
    pub fn get_mut(&mut self) -> &mut B {
        &mut self.inner
    }

    /// Unwraps the inner policy.
    pub fn into_inner(self) -> B {
        self.inner
    }
}

impl<B: BackOff> BackOff for MaxElapsed<B> {
    fn next_backoff(&mut self) -> Option<Duration> {
        let elapsed = self.elapsed();
        let next = self.inner.next_backoff()?;
        ends_within(elapsed, next, self.max_elapsed).then_some(next)
    }

    fn reset(&mut self) {
        self.start = Instant::now();
        self.inner.reset();
    }

    /// `max_elapsed` minus the time elapsed, or the inner policy's own remaining time if
    /// shorter.
    fn remaining(&self) -> Option<Duration> {
        let own = self.max_elapsed.saturating_sub(self.elapsed());
        Some(self.inner.remaining().map_or(own, |inner| inner.min(own)))
    }
}

/// Caps every delay of the inner policy at `max` (the policy itself goes on growing).
///
/// ```
/// use std::time::Duration;
/// use tower_backoff::{BackOff, ConstantBackOff};
/// use tower_backoff::backoff::MaxDelay;
///
/// let mut backoff = MaxDelay::new(
///     ConstantBackOff::new(Duration::from_secs(90)).unwrap(),
///     Duration::from_secs(30),
/// );
/// assert_eq!(backoff.next_backoff(), Some(Duration::from_secs(30)));
/// ```
#[derive(Debug, Clone)]
pub struct MaxDelay<B> {
    inner: B,
    max: Duration,
}

impl<B> MaxDelay<B> {
    /// Caps each delay of `inner` at `max`.
    pub const fn new(inner: B, max: Duration) -> Self {
        Self { inner, max }
    }

    /// The largest delay handed out.
    pub const fn max_delay(&self) -> Duration {
        self.max
    }

    /// The wrapped policy.
    pub const fn get_ref(&self) -> &B {
        &self.inner
    }

    /// The wrapped policy, mutably.
    pub fn get_mut(&mut self) -> &mut B {
        &mut self.inner
    }

    /// Unwraps the inner policy.
    pub fn into_inner(self) -> B {
        self.inner
    }
}

impl<B: BackOff> BackOff for MaxDelay<B> {
    fn next_backoff(&mut self) -> Option<Duration> {
        self.inner.next_backoff().map(|d| d.min(self.max))
    }

    fn reset(&mut self) {
        self.inner.reset();
    }

    fn remaining(&self) -> Option<Duration> {
        self.inner.remaining()
    }
}

/// Chainable limits for every [`BackOff`].
///
/// ```
/// use std::time::Duration;
/// use tower_backoff::{BackOff, BackOffExt, ExponentialBackOff};
///
/// let mut backoff = ExponentialBackOff::default()
///     .with_max_delay(Duration::from_secs(1))
///     .with_max_retries(3);
/// for _ in 0..3 {
///     assert!(backoff.next_backoff().unwrap() <= Duration::from_secs(1));
/// }
/// assert_eq!(backoff.next_backoff(), None);
/// ```
pub trait BackOffExt: BackOff {
    /// Stops after `max` retries (see [`MaxRetries`]).
    fn with_max_retries(self, max: u32) -> MaxRetries<Self>
    where
        Self: Sized,
    {
        MaxRetries::new(self, max)
    }

    /// Stops once the time elapsed since the last reset plus the next delay would exceed
    /// `max_elapsed` (see [`MaxElapsed`]).
    fn with_max_elapsed(self, max_elapsed: Duration) -> MaxElapsed<Self>
    where
        Self: Sized,
    {
        MaxElapsed::new(self, max_elapsed)
    }

    /// Caps each delay at `max` (see [`MaxDelay`]).
    fn with_max_delay(self, max: Duration) -> MaxDelay<Self>
    where
        Self: Sized,
    {
        MaxDelay::new(self, max)
    }
}

impl<B: BackOff + ?Sized> BackOffExt for B {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backoff::{ConstantBackOff, StopBackOff, ZeroBackOff};

    /// Hands out 1 s, 2 s, 3 s, ... and counts its resets.
    #[derive(Debug, Default)]
    struct Counting {
        n: u64,
        resets: u32,
    }

    impl BackOff for Counting {
        fn next_backoff(&mut self) -> Option<Duration> {
            self.n += 1;
            Some(Duration::from_secs(self.n))
        }
        fn reset(&mut self) {
            self.n = 0;
            self.resets += 1;
        }
    }

    #[test]
    fn max_retries_zero_stops_at_once() {
        let mut b = ZeroBackOff.with_max_retries(0);
        assert_eq!(b.next_backoff(), None);
        b.reset();
        assert_eq!(b.next_backoff(), None);
    }

    #[test]
    fn max_retries_gives_n_then_stops_and_reset_restarts() {
        let mut b = Counting::default().with_max_retries(3);
        let got: Vec<_> = (0..5).map(|_| b.next_backoff()).collect();
        let s = |n| Some(Duration::from_secs(n));
        assert_eq!(got, [s(1), s(2), s(3), None, None]);
        assert_eq!(b.retries(), 3);
        b.reset();
        assert_eq!(b.get_ref().resets, 1);
        assert_eq!(b.retries(), 0);
        assert_eq!(b.next_backoff(), s(1));
    }

    #[test]
    fn max_retries_passes_inner_stop_through() {
        let mut b = StopBackOff.with_max_retries(3);
        assert_eq!(b.next_backoff(), None);
    }

    #[test]
    fn max_retries_u32_max_does_not_overflow() {
        let mut b = MaxRetries::new(ZeroBackOff, u32::MAX);
        b.retries = u32::MAX - 1;
        assert_eq!(b.next_backoff(), Some(Duration::ZERO));
        assert_eq!(b.next_backoff(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn max_elapsed_stops_when_next_delay_would_overrun() {
        let mut b = ConstantBackOff::new(Duration::from_secs(2))
            .unwrap()
            .with_max_elapsed(Duration::from_secs(5));
        assert_eq!(b.next_backoff(), Some(Duration::from_secs(2)));
        tokio::time::advance(Duration::from_secs(3)).await;
        // 3 s + 2 s == 5 s: still allowed.
        assert_eq!(b.next_backoff(), Some(Duration::from_secs(2)));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(b.next_backoff(), None);
        b.reset();
        assert_eq!(b.elapsed(), Duration::ZERO);
        assert_eq!(b.next_backoff(), Some(Duration::from_secs(2)));
    }

    #[tokio::test(start_paused = true)]
    async fn max_elapsed_resets_inner_and_saturates() {
        let mut b = Counting::default().with_max_elapsed(Duration::MAX);
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(b.next_backoff(), Some(Duration::from_secs(1)));
        b.reset();
        assert_eq!(b.get_ref().resets, 1);
        let mut huge = ConstantBackOff::new(Duration::MAX)
            .unwrap()
            .with_max_elapsed(Duration::MAX);
        tokio::time::advance(Duration::from_secs(1)).await;
        // 1 s + Duration::MAX saturates to MAX, which is not above MAX.
        assert_eq!(huge.next_backoff(), Some(Duration::MAX));
    }

    #[tokio::test(start_paused = true)]
    async fn remaining_counts_down_and_is_forwarded_by_every_wrapper() {
        let secs = Duration::from_secs;
        assert_eq!(Counting::default().remaining(), None);
        assert_eq!(Counting::default().with_max_retries(3).remaining(), None);
        let mut b: Box<dyn BackOff + Send> = Box::new(
            Counting::default()
                .with_max_elapsed(secs(60))
                .with_max_retries(3)
                .with_max_delay(secs(1)),
        );
        assert_eq!(b.remaining(), Some(secs(60)));
        tokio::time::advance(secs(45)).await;
        assert_eq!(b.remaining(), Some(secs(15)));
        let by_ref: &mut dyn BackOff = &mut b;
        assert_eq!(BackOff::remaining(&by_ref), Some(secs(15)));
        tokio::time::advance(secs(100)).await;
        assert_eq!(b.remaining(), Some(Duration::ZERO), "saturates at zero");
        b.reset();
        assert_eq!(b.remaining(), Some(secs(60)));
        // Nested limits: the tighter one wins, whichever is outside.
        let inner_tighter = Counting::default()
            .with_max_elapsed(secs(10))
            .with_max_elapsed(secs(60));
        assert_eq!(inner_tighter.remaining(), Some(secs(10)));
        let outer_tighter = Counting::default()
            .with_max_elapsed(secs(60))
            .with_max_elapsed(secs(10));
        assert_eq!(outer_tighter.remaining(), Some(secs(10)));
    }

    #[test]
    fn max_delay_caps_each_delay_only() {
        let mut b = Counting::default().with_max_delay(Duration::from_secs(2));
        let got: Vec<_> = (0..4).map(|_| b.next_backoff().unwrap()).collect();
        assert_eq!(got, [1, 2, 2, 2].map(Duration::from_secs));
        b.reset();
        assert_eq!(b.get_ref().resets, 1);
        assert_eq!(b.next_backoff(), Some(Duration::from_secs(1)));
        assert_eq!(
            StopBackOff.with_max_delay(Duration::ZERO).next_backoff(),
            None
        );
    }

    #[test]
    fn wrappers_compose_and_box() {
        let mut b: Box<dyn BackOff + Send> = Box::new(
            Counting::default()
                .with_max_delay(Duration::from_secs(2))
                .with_max_retries(3),
        );
        let got: Vec<_> = (0..4).map(|_| b.next_backoff()).collect();
        let s = |n| Some(Duration::from_secs(n));
        assert_eq!(got, [s(1), s(2), s(2), None]);
    }
}
