//! Backoff strategies: how long to wait before the next retry, and when to stop.
//!
//! Two shapes, one per use:
//!
//! - [`BackOff`] is a stateful iterator of delays (`None` = stop), reset for each new
//!   operation. Every strategy of this crate implements it, so any of them plugs into
//!   [`retry`](crate::retry()), the [`Ticker`](crate::retry::Ticker) and the tower layer.
//! - [`Schedule`] is a pure function from a retry number to a delay: data only, shareable
//!   across threads, with the attempt count held by the caller (the "simple backoff"
//!   design). [`Scheduled`] turns any schedule into a `BackOff` by counting retries.
//!
//! | strategy | behaviour | defaults |
//! |---|---|---|
//! | `ExponentialBackOff` | interval × U[1 − r, 1 + r], ×multiplier per retry, capped, stops after max elapsed time (cenkalti/backoff v4) | 500 ms, r = 0.5, ×1.5, 60 s, 15 min |
//! | `ConstantBackOff`, `ZeroBackOff`, `StopBackOff` | the same delay / no delay / never retry | — |
//! | `Table` | a table of delays, the last repeated, each jittered in [0.5d, 1.5d] (stateless) | 0, 10, 10, 100, 100, 500, 500, 3000, 3000, 5000 ms |
//! | `Linear`, `Fibonacci` | +interval per retry / base × fib(n), capped | — |
//! | `aws::Fixed`, `aws::Exponential`, `ExponentialJitter`, `FullJitter`, `EqualJitter`, `DecorrelatedJitter` | the AWS family: no, full, equal and decorrelated jitter | base 1 s, cap 20 s, step 2 |
//! | `ResponsiveBackOff` | up on failures, down after N successes; shared by many tasks | 500 ms, 15 min, r = 0.3, up 1.5, down 0.9 after 10 |

pub(crate) mod jitter;

use jitter::Jitter;

use rand::RngCore;
use std::time::Duration;

/// A backoff policy: the delay before each retry, or `None` to stop retrying.
///
/// Implementations are reset to their initial state with [`reset`](BackOff::reset) before
/// a new operation. The trait is object safe: `Box<dyn BackOff + Send>` is a `BackOff`.
///
/// ```
/// use std::time::Duration;
/// use tower_backoff::BackOff;
///
/// /// Waits 1 s, 2 s, 3 s, then gives up.
/// struct Steps(u64);
///
/// impl BackOff for Steps {
///     fn next_backoff(&mut self) -> Option<Duration> {
///         self.0 += 1;
///         (self.0 <= 3).then(|| Duration::from_secs(self.0))
///     }
///     fn reset(&mut self) {
///         self.0 = 0;
///     }
/// }
///
/// let mut b: Box<dyn BackOff + Send> = Box::new(Steps(0));
/// assert_eq!(b.next_backoff(), Some(Duration::from_secs(1)));
/// assert_eq!(b.next_backoff(), Some(Duration::from_secs(2)));
/// assert_eq!(b.next_backoff(), Some(Duration::from_secs(3)));
/// assert_eq!(b.next_backoff(), None);
/// b.reset();
/// assert_eq!(b.next_backoff(), Some(Duration::from_secs(1)));
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a backoff strategy",
    label = "expected a `BackOff`",
    note = "pass a strategy from `tower_backoff::backoff`: `ExponentialBackOff::default()`, `ConstantBackOff::new(delay).unwrap()`, `ZeroBackOff`, …",
    note = "a fixed delay is `ConstantBackOff::new(delay).unwrap()`; a type of yours needs `impl BackOff` (`next_backoff` and `reset`)"
)]
pub trait BackOff {
    /// The delay to wait before the next retry, or `None` if no retry should be made.
    fn next_backoff(&mut self) -> Option<Duration>;

    /// Returns to the initial state, as before the first call to `next_backoff`.
    ///
    /// Every strategy of this crate honours it; a strategy whose state is shared with
    /// other users documents what a reset does to that shared part.
    fn reset(&mut self);

    /// The time left before this backoff stops on time, or `None` if it has no time limit.
    ///
    /// A delay asked for by the server (`Retry-After`) replaces the backoff's own delay
    /// but must not outlast the backoff's time limit: [`retry`](crate::retry()) gives up at
    /// once rather than sleep past it. [`MaxElapsed`] and an [`ExponentialBackOff`] with a
    /// max elapsed time report their limit minus the time elapsed; the other wrappers
    /// forward their inner policy's; the default is `None`.
    fn remaining(&self) -> Option<Duration> {
        None
    }
}

/// Whether a delay the server asked for ends past `backoff`'s time limit: the retry that
/// would follow it is not made (the one rule of [`retry`](crate::retry()) and the layer).
pub(crate) fn outlasts<B: BackOff + ?Sized>(backoff: &B, asked: Duration) -> bool {
    backoff.remaining().is_some_and(|left| asked > left)
}

impl<B: BackOff + ?Sized> BackOff for &mut B {
    fn next_backoff(&mut self) -> Option<Duration> {
        (**self).next_backoff()
    }

    fn reset(&mut self) {
        (**self).reset();
    }

    fn remaining(&self) -> Option<Duration> {
        (**self).remaining()
    }
}

impl<B: BackOff + ?Sized> BackOff for Box<B> {
    fn next_backoff(&mut self) -> Option<Duration> {
        (**self).next_backoff()
    }

    fn reset(&mut self) {
        (**self).reset();
    }

    fn remaining(&self) -> Option<Duration> {
        (**self).remaining()
    }
}

/// A stateless backoff: the delay of the `retry`-th retry, as a pure function.
///
/// `retry` counts from 1: the first retry (after the first failure) is `1`. A schedule
/// holds no state, so one value can be shared by any number of tasks, each keeping its
/// own counter. Randomized schedules draw from the generator they are given.
///
/// ```
/// use std::time::Duration;
/// use tower_backoff::BackOff;
/// use tower_backoff::backoff::{Schedule, Scheduled};
///
/// /// 100 ms per retry so far.
/// struct PerRetry;
///
/// impl Schedule for PerRetry {
///     fn delay(&self, retry: u32, _rng: &mut dyn rand::RngCore) -> Duration {
///         Duration::from_millis(100).saturating_mul(retry)
///     }
/// }
///
/// let mut b = Scheduled::new(PerRetry);
/// assert_eq!(b.next_backoff(), Some(Duration::from_millis(100)));
/// assert_eq!(b.next_backoff(), Some(Duration::from_millis(200)));
/// ```
pub trait Schedule {
    /// The delay before retry number `retry` (1 for the first retry).
    fn delay(&self, retry: u32, rng: &mut dyn RngCore) -> Duration;

    /// Drives this schedule as a [`BackOff`] (see [`Scheduled`]).
    fn into_backoff(self) -> Scheduled<Self>
    where
        Self: Sized,
    {
        Scheduled::new(self)
    }
}

impl<S: Schedule + ?Sized> Schedule for &S {
    fn delay(&self, retry: u32, rng: &mut dyn RngCore) -> Duration {
        (**self).delay(retry, rng)
    }
}

impl<S: Schedule + ?Sized> Schedule for std::sync::Arc<S> {
    fn delay(&self, retry: u32, rng: &mut dyn RngCore) -> Duration {
        (**self).delay(retry, rng)
    }
}

/// A [`Schedule`] driven as a [`BackOff`]: counts the retries and never stops by itself
/// (wrap it in [`MaxRetries`] or [`MaxElapsed`]).
///
/// Clones draw from different random streams, so a policy cloned per request does not
/// make every request wait the same "random" delay.
#[derive(Debug, Clone)]
pub struct Scheduled<S> {
    schedule: S,
    retry: u32,
    jitter: Jitter,
}

impl<S: Schedule> Scheduled<S> {
    /// Drives `schedule`, with randomness seeded from the operating system.
    pub fn new(schedule: S) -> Self {
        Self {
            schedule,
            retry: 0,
            jitter: Jitter::from_entropy(),
        }
    }

    /// Uses a generator seeded with `seed`, for reproducible sequences (tests, simulations).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.jitter = Jitter::seeded(seed);
        self
    }

    /// The schedule being driven.
    pub fn schedule(&self) -> &S {
        &self.schedule
    }

    /// How many delays were handed out since the last reset.
    pub fn retries(&self) -> u32 {
        self.retry
    }
}

impl<S: Schedule> BackOff for Scheduled<S> {
    fn next_backoff(&mut self) -> Option<Duration> {
        self.retry = self.retry.saturating_add(1);
        Some(self.schedule.delay(self.retry, self.jitter.rng()))
    }

    fn reset(&mut self) {
        self.retry = 0;
    }
}

impl<S: Schedule> From<S> for Scheduled<S> {
    fn from(schedule: S) -> Self {
        Self::new(schedule)
    }
}

mod constant;
mod exponential;
mod limit;

pub use constant::{ConstantBackOff, StopBackOff, ZeroBackOff};
pub use exponential::{ExponentialBackOff, ExponentialBackOffBuilder};
pub use limit::{BackOffExt, MaxDelay, MaxElapsed, MaxRetries};

pub mod aws;
mod linear;
mod responsive;
mod sample;
mod table;

pub use aws::{DecorrelatedJitter, EqualJitter, ExponentialJitter, FullJitter};
pub use linear::{Fibonacci, Linear};
pub use responsive::{ResponsiveBackOff, ResponsiveBackOffBuilder, ResponsiveMetrics};
pub use table::Table;
